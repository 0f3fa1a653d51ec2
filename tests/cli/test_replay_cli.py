"""`fairshoe replay` and `fairshoe rules show` from the command line."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from game_math.games import game_rules
from rng_service.cli.main import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


MULTI = {
    "game": "multi-hand",
    "hands": [{"bet": 1000, "side_bets": {"perfect_pairs": 100, "twenty_one_plus_three": 100}}],
    # hand 8S 8D against the dealer's 6H (no hole card): split; 8S+TC stands on 18; 8D+3D doubles
    # to 9S = 20; the dealer's KD and 5C make 21
    "shoe": ["8S", "6H", "8D", "TC", "3D", "9S", "KD", "5C"],
    "actions": ["split", "stand", {"action": "double", "amount": 1000}],
}


def test_replay_prints_the_settled_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "round.json"
    path.write_text(json.dumps(MULTI))
    code, out, _ = run(["replay", str(path)], capsys)
    result = json.loads(out)
    assert code == 0 and result["status"] == "finished"
    assert result["dealer"]["cards"] == ["6H", "KD", "5C"] and result["dealer"]["total"] == 21
    wagers = {(w["kind"], w.get("hand")): (w["staked"], w["returned"]) for w in result["wagers"]}
    # 8S/8D: black and red eights, a mixed pair 6:1; 8S 8D 6H is no 21+3 hand
    assert wagers == {("main", 0): (1000, 0), ("perfect_pairs", 0): (100, 700),
                      ("twenty_one_plus_three", 0): (100, 0), ("split", 1): (1000, 0),
                      ("double", 1): (1000, 0)}
    assert (result["total_staked"], result["total_returned"]) == (3200, 700)
    cards = [e for e in result["events"] if e["kind"] == "card"]
    assert [(e["hand"], e["card"]) for e in cards[:3]] == [(0, "8S"), ("dealer", "6H"), (0, "8D")]


def test_replay_reads_stdin_and_reports_what_it_awaits(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script: dict[str, Any] = {"game": "double-deck", "hands": [{"bet": 1000}],
                              "shoe": ["5S", "AD", "6H", "9C", "TS"], "actions": []}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(script)))
    code, out, _ = run(["replay", "-"], capsys)
    result = json.loads(out)
    assert code == 0 and result["status"] == "awaiting"
    # double-deck: partial insurance, any amount up to half the bet
    assert result["awaiting"]["legal_actions"] == [
        {"action": "insurance", "hand": 0, "min_stake": 0, "max_stake": 500}]
    assert result["dealer"]["cards"] == ["AD"]  # the hole card stays hidden


@pytest.mark.parametrize(("edit", "message"), [
    ({"actions": ["double"]}, "actions[0]: cannot double hand 0: double needs a total of 9-11"),
    ({"actions": ["fold"]}, "actions[0]: unknown action 'fold'"),
    ({"shoe": ["8S", "6H", "XX"]}, "shoe[2]: bad card code 'XX'"),
    ({"shoe": ["8S", "6H", "8D"]}, "shoe: round void: the shoe ran out of cards"),
    ({"hands": [{"bet": 1001}]}, "hands[0].bet: 1001 is not made of chips"),
    ({"game": "poker"}, "game: no game 'poker'"),
    ({"colour": "red"}, "colour: unknown key"),
])
def test_a_bad_script_exits_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: dict[str, Any], message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**MULTI, **edit}))
    code, out, err = run(["replay", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"fairshoe replay: {message}"), err


def test_rules_show_and_a_custom_rules_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, toml, _ = run(["rules", "show", "snap"], capsys)
    assert code == 0 and toml == game_rules("snap").to_toml()
    custom = tmp_path / "snap-s17-resplit.toml"
    custom.write_text(toml.replace("max_hands = 2", "max_hands = 4"))
    code, shown, _ = run(["rules", "show", "--rules", str(custom)], capsys)
    assert code == 0 and "max_hands = 4" in shown
    script = {"game": "snap", "rules": str(custom), "hands": [{"bet": 1000}],
              "shoe": ["8S", "6H", "8D", "TC", "8C", "TD", "TS", "TH"],
              "actions": ["split", "split"]}
    path = tmp_path / "resplit.json"
    path.write_text(json.dumps(script))
    code, out, _ = run(["replay", str(path)], capsys)
    assert code == 0 and len(json.loads(out)["hands"]) == 3  # resplit: not in built-in snap
    custom.write_text(toml.replace("max_hands = 2", 'max_hands = "four"'))
    code, _, err = run(["rules", "show", "--rules", str(custom)], capsys)
    assert code == 2 and "split.max_hands: must be int" in err
