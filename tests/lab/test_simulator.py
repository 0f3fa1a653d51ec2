"""The simulator: the analyser's strategy played exactly, reproducible seeded runs, shoes dealt to
their cut card, the interval's arithmetic, and the cross-check against the analysis (reduced size).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
from fractions import Fraction
from math import sqrt
from pathlib import Path
from typing import Any

import pytest
from support.cli_helpers import run

from game_math.analysis.main_game import analyse_main_game
from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from game_math.round import HandBet, Round
from game_math.rules import GAME_IDS, Rules, rules_from_dict
from rng_service.core.pools import WorkerDied
from rng_service.lab import simulator
from rng_service.lab.simulator import (
    Z95,
    Chunk,
    Player,
    Tally,
    derived_seed,
    estimate,
    play_chunk,
    simulate,
    table_bet,
)
from rng_service.rng import selftest
from rng_service.rng.sampling import DrbgRandom
from rng_service.rng.selftest import SelfTestFailed
from rng_service.rng.shoe import Shoe, shoe_cards

MASTER = bytes(range(48))

#: CI size of the cross-check: about +-1.1 % at 95 % (the full check, +-0.1 %, is in docs/par)
CI_ROUNDS = 40_000


def player(game: str | Rules) -> Player:
    rules = game if isinstance(game, Rules) else game_rules(game)
    return Player(rules, basic_strategy(rules))


# ----- the player ----------------------------------------------------------------------------


@pytest.mark.parametrize("game", GAME_IDS)
def test_player_makes_exactly_the_autoplay_decisions(game: str) -> None:
    p = player(game)
    rules = p.rules
    for k in range(600):
        cards = shoe_cards(derived_seed(MASTER, 7, k), b"", rules.decks)
        fast = p.play_round(cards, 0)
        slow = Round(rules, cards, p.hands)
        while not slow.finished:
            slow.act(basic_strategy_action(slow))
        assert fast.actions == slow.actions
        assert fast.events == slow.events


def test_player_splits_doubles_and_resplits_in_the_sample() -> None:
    # the comparison above is only as good as the situations it meets
    p = player("double-deck")
    seen: set[str] = set()
    for k in range(600):
        rnd = p.play_round(shoe_cards(derived_seed(MASTER, 7, k), b"", 2), 0)
        seen.update(a.kind for a in rnd.actions)
        if sum(a.kind == "split" for a in rnd.actions) > 1:
            seen.add("resplit")
    assert {"hit", "stand", "double", "split", "resplit", "insurance"} <= seen


@pytest.mark.parametrize("prefix", [24, 5])
def test_one_round_shoe_is_the_certified_shoe(prefix: int) -> None:
    # a prefix of 5 cards runs out in every round: each is replayed on the whole lazy shoe
    rules = game_rules("double-deck")
    p = Player(rules, basic_strategy(rules), prefix=prefix)
    whole = player("double-deck")
    for k in range(200):
        seed = derived_seed(MASTER, 2, k)
        tally = Tally()
        p.play_shoes([seed], tally)
        rnd = whole.play_round(shoe_cards(seed, b"", rules.decks), 0)
        assert (tally.shoes, tally.rounds, tally.void) == (1, 1, 0)
        assert tally.net == rnd.total_returned - rnd.total_staked


@pytest.mark.parametrize("game", GAME_IDS)
def test_table_bet_is_accepted_and_keeps_payouts_whole(game: str) -> None:
    rules = game_rules(game)
    bet = table_bet(rules)
    assert bet % rules.bet_multiple == 0
    assert bet >= rules.level().min_bet
    Round(rules, shoe_cards(MASTER, b"", rules.decks), [HandBet(bet)])  # validates


def test_table_bet_rounds_an_odd_minimum_up_to_whole_payouts() -> None:
    doc = game_rules("snap").to_dict()
    doc["levels"] = {"odd": {"min_bet": 101, "max_bet": 1000}}
    doc["default_level"] = "odd"
    assert table_bet(rules_from_dict(doc)) == 102  # 3:2 blackjack, half-bet insurance


# ----- shoes ---------------------------------------------------------------------------------


def test_per_round_shoes_deal_one_round_each() -> None:
    tally = play_chunk(player("snap"), Chunk(0, 300, MASTER))
    assert tally.rounds == tally.shoes == 300


def test_cut_card_shoe_is_dealt_as_the_service_deals_it() -> None:
    p = player("double-exposure")
    rules = p.rules
    for k in range(3):
        seed = derived_seed(MASTER, 1, k)
        tally = Tally()
        p.play_shoes([seed], tally)
        # the same shoe through rng_service.rng.shoe.Shoe's own round accounting
        shoe = Shoe(shoe_id="t", seed=seed, decks=rules.decks, cut=rules.shuffle.cut_card)
        net = rounds = 0
        while shoe.start_round():
            rnd = p.play_round(shoe.cards, shoe.position)
            shoe.take(rnd.position - shoe.position)
            shoe.end_round()
            net += rnd.total_returned - rnd.total_staked
            rounds += 1
        assert (tally.shoes, tally.rounds, tally.net) == (1, rounds, net)
        assert rounds > 15  # half of six decks: many rounds, not one


# ----- statistics ----------------------------------------------------------------------------


def tally_of(shoes: list[list[int]]) -> Tally:
    t = Tally()
    for results in shoes:
        t.add_shoe(sum(results), len(results))
        t.round_sq += sum(r * r for r in results)
    return t


def test_one_round_shoes_give_the_textbook_interval() -> None:
    results = [-100, 100, 150, -200, 0, 100, -100, -100, 200, 100, -100, 0]
    est = estimate("g", tally_of([[r] for r in results]), 100, per_round_shoes=True)
    mean = statistics.fmean(results) / 100
    assert est.rtp == pytest.approx(1 + mean)
    assert est.half_width == pytest.approx(Z95 * statistics.stdev(results) / 100
                                           / sqrt(len(results)))
    assert est.sd_round == pytest.approx(statistics.pstdev(results) / 100)


def test_cut_card_interval_is_the_ratio_estimator_over_shoes() -> None:
    shoes = [[100, -100, 200], [-100], [100, 100], [-200, -100, 0, 100], [150, -100]]
    est = estimate("g", tally_of(shoes), 100, per_round_shoes=False)
    x = [Fraction(sum(s)) for s in shoes]
    n = [len(s) for s in shoes]
    m = sum(x) / sum(n)
    s = len(shoes)
    var = sum((xi - m * ni) ** 2 for xi, ni in zip(x, n, strict=True)) / (s - 1) / s \
        / (Fraction(sum(n), s) ** 2)
    assert est.rtp == pytest.approx(float(1 + m / 100))
    assert est.half_width == pytest.approx(Z95 * sqrt(float(var)) / 100)
    assert (est.rounds, est.shoes) == (sum(n), s)


def test_estimate_needs_two_shoes() -> None:
    with pytest.raises(ValueError, match="two shoes"):
        estimate("g", tally_of([[100, -100]]), 100, per_round_shoes=False)


# ----- runs ----------------------------------------------------------------------------------


def test_seeded_run_is_reproducible_and_independent_of_workers() -> None:
    rules = game_rules("multi-hand")
    one = simulate(rules, 9_000, workers=1, master_seed=MASTER, chunk_rounds=2_000)
    two = simulate(rules, 9_000, workers=2, master_seed=MASTER, chunk_rounds=2_000)
    assert one.estimate == two.estimate
    assert one.estimate.rounds == 9_000 and one.seeded
    other = simulate(rules, 9_000, workers=1, master_seed=bytes(48), chunk_rounds=2_000)
    assert other.estimate.rtp != one.estimate.rtp


def test_unseeded_runs_draw_fresh_shoes() -> None:
    rules = game_rules("snap")
    a = simulate(rules, 3_000, workers=1)
    b = simulate(rules, 3_000, workers=1)
    assert not a.seeded
    assert a.estimate.rtp != b.estimate.rtp


def test_no_simulation_on_a_failed_rng_self_test(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(selftest, "_status", selftest._Status.NOT_RUN)
    monkeypatch.setattr(DrbgRandom, "shuffle", lambda self, items: None)
    with pytest.raises(SelfTestFailed):
        simulate(game_rules("snap"), 100, workers=1)
    assert run(["simulate", "snap", "--rounds", "100", "--no-progress"]) == 2
    assert "self-test" in capsys.readouterr().err


def test_master_seed_must_be_long_enough() -> None:
    with pytest.raises(ValueError, match="48 bytes"):
        simulate(game_rules("snap"), 100, master_seed=b"short")


@pytest.mark.parametrize("game", GAME_IDS)
def test_analysed_return_lies_in_the_simulated_interval(game: str) -> None:
    """Reduced CI size (+-1 %); docs/par/README.md records the full +-0.1 % runs."""
    rules = game_rules(game)
    sim = simulate(rules, CI_ROUNDS, workers=2, master_seed=MASTER)
    est = sim.estimate
    assert est.void == 0
    assert est.half_width < 0.013
    assert est.contains(analyse_main_game(rules).basic_rtp)


# ----- the command ---------------------------------------------------------------------------


def test_simulate_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "double-deck", "--rounds", "3000", "--workers", "1", "--json",
            "--seed-hex", MASTER.hex(), "--no-progress"]
    assert run(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    expected = simulate(game_rules("double-deck"), 3000, workers=1, master_seed=MASTER).estimate
    assert doc["game"] == "double-deck" and doc["seeded"] is True
    assert doc["return"] == expected.rtp
    assert doc["interval"] == [expected.low, expected.high]
    assert doc["analysis"]["basic"] == analyse_main_game(game_rules("double-deck")).basic_rtp
    assert doc["analysis"]["inside_interval"] == expected.contains(doc["analysis"]["basic"])


def test_simulate_command_text_and_custom_rules(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    doc = game_rules("double-deck").to_dict()
    doc["dealer"]["hits_soft_17"] = False
    path = tmp_path / "s17.toml"
    path.write_text(rules_from_dict(doc).to_toml(), encoding="utf-8")
    argv = ["simulate", "--rules", str(path), "--rounds", "2000", "--workers", "1",
            "--seed-hex", MASTER.hex(), "--no-progress"]
    assert run(argv) == 0
    out = capsys.readouterr().out
    basic = analyse_main_game(rules_from_dict(doc)).basic_rtp
    assert f"basic strategy {100 * basic:.4f} %" in out
    assert "rounds:    2,000 in 2,000 shoes" in out


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["snap", "--rounds", "1"], "--rounds"),
        (["snap", "--rounds", "10", "--workers", "0"], "--workers"),
        (["snap", "--rounds", "10", "--seed-hex", "zz"], "--seed-hex"),
        (["snap", "--rounds", "10", "--seed-hex", "ab" * 16], "--seed-hex"),
        (["nosuchgame", "--rounds", "10"], "nosuchgame"),
    ],
)
def test_simulate_command_names_the_bad_argument(argv: list[str], named: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["simulate", *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1


def _killed_worker_chunk(chunk: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer would end it


def test_a_worker_killed_mid_run_fails_the_simulation_rather_than_hanging_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool would replace the worker but lose its chunk; the run says it is incomplete."""
    monkeypatch.setattr(simulator, "_worker_chunk", _killed_worker_chunk)  # forked: inherited
    with pytest.raises(WorkerDied, match="the simulation is incomplete"):
        simulate(game_rules("snap"), 4_000, workers=2, master_seed=MASTER, chunk_rounds=1_000)
