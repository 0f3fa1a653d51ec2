"""The automatic basic-strategy player: textbook decisions, fallbacks, and legality everywhere."""

from __future__ import annotations

import random

import pytest
from support.engine_helpers import deal, stack

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.cards import ordered_shoe
from game_math.games import game_rules
from game_math.round import Action, Round
from game_math.rules import GAME_IDS, rules_from_dict
from rng_service.records.schema import random_bets

BET = 1000


def choice(game: str, hands: list[list[str]], dealer: list[str], *, balance: int | None = None,
           bets: list[int] | None = None) -> Action:
    rnd = deal(game, stack(game, hands, dealer), bets or [BET] * len(hands), balance=balance)
    return basic_strategy_action(rnd)


@pytest.mark.parametrize(
    ("game", "hand", "dealer", "expected"),
    [
        ("snap", ["TS", "6H"], ["TD", "7C"], Action("hit")),  # hard 16 v 10
        ("snap", ["TS", "7H"], ["TD", "7C"], Action("stand")),  # hard 17 v 10
        ("snap", ["TS", "2H"], ["4D", "7C"], Action("stand")),  # hard 12 v 4
        ("snap", ["TS", "2H"], ["2D", "7C"], Action("hit")),  # hard 12 v 2
        ("snap", ["5S", "6H"], ["6D", "7C"], Action("double", BET)),  # 11 v 6
        ("double-deck", ["5S", "6H"], ["6D", "7C"], Action("double", BET)),  # 10-11 rule
        ("multi-hand", ["5S", "6H"], ["6D"], Action("double", BET)),  # hard 9-11 rule
        ("snap", ["8S", "8H"], ["TD", "7C"], Action("split")),  # 8-8 v 10
        ("snap", ["AS", "AH"], ["6D", "7C"], Action("split")),  # A-A
        ("snap", ["TS", "TH"], ["6D", "7C"], Action("stand")),  # never split tens
        ("snap", ["5S", "5H"], ["6D", "7C"], Action("double", BET)),  # 5-5 is a 10
        ("snap", ["AS", "7H"], ["9D", "7C"], Action("hit")),  # A-7 v 9
        ("snap", ["AS", "7H"], ["7D", "7C"], Action("stand")),  # A-7 v 7
        ("snap", ["AS", "7H"], ["4D", "7C"], Action("double", BET)),  # A-7 v 4, soft double
        ("multi-hand", ["AS", "7H"], ["4D"], Action("stand")),  # no soft double: stand
        ("double-exposure", ["TS", "6H"], ["TD", "7C"], Action("hit")),  # 16 v dealer 17
        ("double-exposure", ["TS", "6H"], ["TD", "6C"], Action("stand")),  # 16 v dealer 16
        ("double-exposure", ["TS", "8H"], ["TD", "9C"], Action("hit")),  # 18 v 19: ties lose too
    ],
)
def test_textbook_decisions(game: str, hand: list[str], dealer: list[str],
                            expected: Action) -> None:
    assert choice(game, [hand], dealer) == expected


def test_double_falls_back_to_the_cells_second_choice() -> None:
    # 11 v 6 with no money left to double: hit
    assert choice("snap", [["5S", "6H"]], ["6D", "7C"], balance=BET) == Action("hit")
    # soft 18 v 4 with three cards (no double after the first two): stand, not hit
    rnd = deal("snap", ["AS", "4D", "2H", "7C", "5C"], [BET])
    rnd.act(Action("hit"))
    assert [c % 13 for c in rnd.hand(0).cards] == [0, 1, 4]  # A, 2, 5: soft 18
    assert basic_strategy_action(rnd) == Action("stand")
    # 11 from three cards v 6: hit
    rnd = deal("snap", ["2S", "6D", "3H", "7C", "6C"], [BET])
    rnd.act(Action("hit"))
    assert basic_strategy_action(rnd) == Action("hit")


def test_split_not_allowed_plays_the_total() -> None:
    # 8-8 v 10 without the money to split: hard 16 v 10 hits
    assert choice("snap", [["8S", "8H"]], ["TD", "7C"], balance=BET) == Action("hit")


def test_insurance_and_even_money_are_declined() -> None:
    rnd = deal("snap", stack("snap", [["TS", "9H"]], ["AD", "7C"]), [BET])
    assert rnd.turn.decision == "insurance"
    assert basic_strategy_action(rnd) == Action("insurance", amount=0)
    rnd.act(basic_strategy_action(rnd))
    assert not rnd.wagers[1:]  # no insurance wager was placed
    rnd = deal("snap", stack("snap", [["AS", "KH"]], ["AD", "7C"]), [BET])
    assert rnd.turn.decision == "even_money"
    assert basic_strategy_action(rnd) == Action("even_money", accept=False)


def test_resplit_aces_offered_after_split_aces() -> None:
    # double exposure re-splits aces: a split ace that draws an ace is split again
    shoe = stack("double-exposure", [["AS", "AH"]], ["TD", "6C"], ["AD", "5C", "6C", "9C"])
    rnd = deal("double-exposure", shoe, [BET])
    rnd.act(basic_strategy_action(rnd))
    assert {la.action for la in rnd.legal_actions()} == {"stand", "split"}
    assert basic_strategy_action(rnd) == Action("split")


def test_no_decision_awaited_is_an_error() -> None:
    rnd = deal("snap", stack("snap", [["TS", "7H"]], ["TD", "7C"]), [BET])
    rnd.act(Action("stand"))
    with pytest.raises(ValueError, match="no decision"):
        basic_strategy_action(rnd)


def test_table_is_cached_per_rules_digest() -> None:
    rules = game_rules("snap")
    same = rules_from_dict(rules.to_dict())
    assert same is not rules
    assert basic_strategy(same) is basic_strategy(rules)


@pytest.mark.parametrize("game", GAME_IDS)
def test_always_a_legal_action(game: str) -> None:
    rules = game_rules(game)
    rng = random.Random(f"autoplay-{game}")
    decisions = 0
    for _ in range(400):
        shoe = ordered_shoe(rules.decks)
        rng.shuffle(shoe)
        bets = random_bets(rules, rng)
        rnd = Round(rules, shoe, bets.hands, bets.side_bets, level=bets.level)
        while not rnd.finished:
            action = basic_strategy_action(rnd)
            legal = {la.action: la for la in rnd.legal_actions()}
            assert action.kind in legal, (action, legal)
            rnd.act(action)  # raises IllegalAction on a bad amount
            decisions += 1
        assert rnd.phase == "finished"
    assert decisions > 400
