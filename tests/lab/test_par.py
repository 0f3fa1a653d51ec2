"""`fairshoe par`: the PAR sheet's JSON carries what the analysis computes, its Markdown and PNG
charts are written, and a custom rules file is analysed like a built-in game.

Every expected value here is recomputed by the analysis code (``analyse_main_game``,
``reconcile``, ``side_bet_return``); none is typed in. The analysis is cached per rules object, so
each game is analysed once for the whole file.
"""

from __future__ import annotations

import json
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from support.cli_helpers import run

from game_math.analysis.main_game import PUBLISHED_TOLERANCE, analyse_main_game, reconcile
from game_math.analysis.par import FORMAT, cell_code, float_exact, published_side_bet
from game_math.analysis.sidebets import side_bet_return
from game_math.games import PUBLISHED_SIDE_BET_RETURNS, game_rules
from game_math.rules import GAME_IDS, Rules, rules_from_dict
from rng_service.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@cache
def _par_json_text(game: str) -> str:
    # captured once per game: the same document feeds every test below
    import contextlib  # noqa: PLC0415
    import io  # noqa: PLC0415

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as exited:
        main(["par", game, "--json"])
    assert exited.value.code == 0
    return buf.getvalue()


def par_json(game: str) -> dict[str, Any]:
    doc = json.loads(_par_json_text(game))
    assert isinstance(doc, dict)
    return doc


def frac(value: dict[str, str]) -> Fraction:
    return Fraction(value["fraction"])


# ----- the JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize("game", GAME_IDS)
def test_json_has_the_required_keys(game: str) -> None:
    doc = par_json(game)
    assert {"game", "return", "published", "side_bets"} <= set(doc)
    assert doc["format"] == FORMAT and doc["game"] == game
    assert set(doc["return"]) == {"basic", "composition"}
    for value in [*doc["return"].values(), *doc["side_bets"].values()]:
        assert set(value) == {"fraction", "decimal"}
        num, den = value["fraction"].split("/")
        assert int(num) > 0 and int(den) > 0
    assert "limit_denominator(10**12)" in doc["method"]["numbers"]
    assert doc["rules_digest"] == game_rules(game).digest()


@pytest.mark.parametrize("game", GAME_IDS)
def test_json_main_returns_are_the_analysers(game: str) -> None:
    doc = par_json(game)
    a = analyse_main_game(game_rules(game))
    for key, rtp in (("basic", a.basic_rtp), ("composition", a.composition_rtp)):
        value = doc["return"][key]
        assert float(frac(value)) == pytest.approx(rtp, abs=1e-15)
        assert value["decimal"] == f"{rtp:.12f}"
        assert frac(value).denominator <= 10**12
    assert float(frac(doc["house_edge"]["basic"])) == pytest.approx(a.basic_house_edge, abs=1e-15)


@pytest.mark.parametrize("game", GAME_IDS)
def test_json_side_bet_returns_are_exact(game: str) -> None:
    doc = par_json(game)
    rules = game_rules(game)
    assert set(doc["side_bets"]) == {b.name for b in rules.side_bets}
    for bet in rules.side_bets:
        expected = side_bet_return(bet, rules.decks)
        assert frac(doc["side_bets"][bet.name]) == expected
        table = doc["side_bet_tables"][bet.name]
        assert frac(table["return"]) == expected
        assert sum(frac(r["probability"]) for r in table["rows"]) == 1
        published = PUBLISHED_SIDE_BET_RETURNS[game, bet.name]
        assert frac(table["published"]) == Fraction(published)
        # the published side-bet figures come out of the code to the second decimal
        assert round(100 * expected, 2) == 100 * Fraction(published)


@pytest.mark.parametrize("game", GAME_IDS)
def test_json_published_figure_and_reconciliation(game: str) -> None:
    doc = par_json(game)
    rules = game_rules(game)
    rec = reconcile(rules)
    rdoc = doc["reconciliation"]
    if rules.published_return is None:
        assert doc["published"] is None and rdoc["published"] is None
        assert rdoc["agrees"] is True
        return
    published = rules.published_return
    assert frac(doc["published"]) == published
    assert rdoc["agrees"] == rec.agrees
    assert rdoc["explanation"] == rec.explanation
    as_read = min(abs(float(frac(rdoc["as_read"][k])) - float(published))
                  for k in ("basic", "composition"))
    assert (as_read <= PUBLISHED_TOLERANCE) == rec.agrees
    if not rec.agrees:
        # both shown: the as-read figure and the readings that reproduce the published one
        assert rdoc["matches"] == [r.name for r in rec.matches] and rdoc["matches"]
        by_name = {r["name"]: r for r in rdoc["readings"]}
        for name in rdoc["matches"]:
            near = min(abs(float(frac(by_name[name][k])) - float(published))
                       for k in ("basic", "composition"))
            assert near <= PUBLISHED_TOLERANCE


def test_snap_and_multi_hand_need_another_reading() -> None:
    # their published figures are not the rules as read (the analysis module documents why)
    assert not par_json("snap")["reconciliation"]["agrees"]
    assert not par_json("multi-hand")["reconciliation"]["agrees"]


@pytest.mark.parametrize("game", GAME_IDS)
def test_json_strategy_table_is_the_analysers(game: str) -> None:
    strategy = par_json(game)["strategy"]
    table = analyse_main_game(game_rules(game)).strategy
    assert strategy["columns"] == list(table.columns)
    for section, rows in (("hard", table.hard), ("soft", table.soft), ("pairs", table.pairs)):
        assert set(strategy[section]) == {str(k) for k in rows}
        for key, cells in rows.items():
            got = strategy[section][str(key)]
            assert [c["code"] for c in got] == [cell_code(c) for c in cells]
            assert [c["action"] for c in got] == [str(c.action) for c in cells]
            assert [c["ev"] for c in got] == [{str(k): v for k, v in c.ev.items()} for c in cells]


@pytest.mark.parametrize("game", GAME_IDS)
def test_json_frequencies_are_the_analysers(game: str) -> None:
    f = par_json(game)["frequencies"]
    expected = analyse_main_game(game_rules(game)).frequencies
    assert (f["win"], f["push"], f["lose"], f["bust"]) == (
        expected.win, expected.push, expected.lose, expected.bust)
    assert f["dealer_bust"] == dict(expected.dealer_bust)
    assert f["win"] + f["push"] + f["lose"] == pytest.approx(1.0)


def test_float_exact_renders_the_double() -> None:
    value = analyse_main_game(game_rules("snap")).basic_rtp
    rendered = float_exact(value)
    assert abs(float(Fraction(rendered["fraction"])) - value) < 1e-15
    assert rendered["decimal"] == f"{value:.12f}"


# ----- files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("game", ["snap", "double-exposure"])
def test_out_writes_markdown_json_and_png(game: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["par", game, "--out", str(tmp_path)]) == 0
    listed = capsys.readouterr().out.split()
    names = {f"{game}.md", f"{game}.json", f"{game}-strategy.png", f"{game}-returns.png"}
    assert {Path(p).name for p in listed} == names
    for name in names:
        assert (tmp_path / name).stat().st_size > 0
    for chart in (f"{game}-strategy.png", f"{game}-returns.png"):
        assert (tmp_path / chart).read_bytes()[:8] == PNG_MAGIC
    written = json.loads((tmp_path / f"{game}.json").read_text(encoding="utf-8"))
    assert written["return"] == par_json(game)["return"]
    assert set(written["run_time_seconds"]) >= {"main_game", "total"}
    md = (tmp_path / f"{game}.md").read_text(encoding="utf-8")
    a = analyse_main_game(game_rules(game))
    assert f"{100 * a.basic_rtp:.4f} %" in md
    assert f"{100 * a.composition_rtp:.4f} %" in md
    assert f"({game}-strategy.png)" in md and f"({game}-returns.png)" in md
    rec = reconcile(game_rules(game))
    assert (rec.explanation in md) == (rec.published is not None)


def test_markdown_on_stdout_without_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["par", "double-deck"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# PAR sheet: Double Deck")
    assert "## Basic strategy" in out and "No published figure" in out


# ----- a custom combination ------------------------------------------------------------------


def custom_rules() -> Rules:
    doc = game_rules("snap").to_dict()
    doc["name"] = "Snap, custom"
    doc["dealer"]["hits_soft_17"] = True
    doc["split"]["max_hands"] = 4
    doc["side_bets"]["snap"]["paytable"]["matching_pair_anywhere"] = "4 for 1"
    doc.pop("published_return")
    return rules_from_dict(doc)


def test_rules_file_with_a_custom_combination(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rules = custom_rules()
    path = tmp_path / "custom.toml"
    path.write_text(rules.to_toml(), encoding="utf-8")
    assert run(["par", "--rules", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    a = analyse_main_game(rules)
    assert doc["rules_digest"] == rules.digest()
    assert float(frac(doc["return"]["basic"])) == pytest.approx(a.basic_rtp, abs=1e-15)
    assert a.basic_rtp != analyse_main_game(game_rules("snap")).basic_rtp
    bet = rules.side_bet("snap")
    assert bet is not None
    assert frac(doc["side_bets"]["snap"]) == side_bet_return(bet, rules.decks)
    # the operator's 95.84 % is about its own paytable, not this one
    assert doc["side_bet_tables"]["snap"]["published"] is None
    assert published_side_bet(rules, "snap") is None
    assert doc["published"] is None


def test_rules_file_for_another_game_is_refused(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "custom.toml"
    path.write_text(custom_rules().to_toml(), encoding="utf-8")
    assert run(["par", "multi-hand", "--rules", str(path)]) == 2
    assert "custom.toml" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["par"], ["par", "baccarat"]])
def test_par_needs_a_known_game(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
