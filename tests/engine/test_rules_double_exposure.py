"""The rule document of `double-exposure`: one test per rule line, on stacked shoes.

Boxes bet 100..20,000 minor units; blackjack pays 1:1, so any whole stake pays whole.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from support.engine_helpers import (
    as_action,
    assert_refused,
    assert_settled,
    cards_dealt,
    deal,
    double,
    legal,
    play,
    stack,
)

from game_math.cards import parse_cards
from game_math.errors import BetError
from game_math.games import DOUBLE_EXPOSURE, game_rules
from game_math.round import HandBet, Round, Turn
from game_math.rules import ShufflePolicy, rules_from_dict

G = "double-exposure"
BET = 1000


def test_six_decks_dealt_round_after_round_until_the_cut_card_in_the_middle() -> None:
    rules = game_rules(G)
    assert rules.decks == 6
    assert (rules.shuffle.policy, rules.shuffle.cut_card) == (ShufflePolicy.CUT_CARD,
                                                              Fraction(1, 2))
    # one shoe, two rounds: the second starts where the first stopped
    first = stack(G, [["TS", "9S"]], ["TD", "7C"])
    second = stack(G, [["AS", "KS"]], ["9D", "8C"])
    shoe = parse_cards(first + second)
    one = Round(rules, shoe, [HandBet(BET)])
    one.act(as_action("stand"))
    assert one.cards_used == range(0, len(first))
    two = Round(rules, shoe, [HandBet(BET)], start=one.position)
    assert two.cards_used == range(len(first), len(shoe))
    assert [code for _, code, _ in cards_dealt(two)] == second
    assert (one.total_returned, two.total_returned) == (2 * BET, 2 * BET)


@pytest.mark.parametrize(("bets", "field"), [
    ([], "hands"), ([BET] * 6, "hands"), ([99], "hands[0].bet"), ([BET, 20_001], "hands[1].bet"),
])
def test_one_to_five_boxes_each_bet_1_to_200(bets: list[int], field: str) -> None:
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 12, bets)
    assert info.value.field == field


def test_five_boxes_at_the_limits() -> None:
    bets = [100, 20_000, 101, 5_555, 999]
    hands = [["TS", "9S"]] * 5
    rnd = play(G, stack(G, hands, ["TD", "7C"]), bets, ["stand"] * 5)
    assert_settled(rnd, [("main", i, bet, 2 * bet) for i, bet in enumerate(bets)])


def test_both_dealer_cards_face_up_and_no_insurance() -> None:
    shoe = stack(G, [["TS", "9S"]], ["AD", "7C"])
    rnd = deal(G, shoe, [BET])
    assert cards_dealt(rnd)[-1] == ("dealer", "7C", True)
    assert rnd.summary()["dealer"]["cards"] == ["AD", "7C"]  # seen before play
    assert rnd.turn == Turn("play", 0, "play") and "insurance" not in legal(rnd)
    assert "not offered" in assert_refused(rnd, "insurance")
    assert "unknown action" in assert_refused(rnd, "surrender")
    rnd.act(as_action("stand"))
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])  # 19 beats soft 18


def test_dealer_blackjack_ends_the_round_player_blackjacks_paid_1_to_1_rest_lose() -> None:
    hands = [["AS", "KS"], ["TH", "9H"], ["5C", "6C"]]
    rnd = play(G, stack(G, hands, ["AD", "KD"]), [BET, 2000, 300])
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, 2000, 0), ("main", 2, 300, 0)])


def test_player_blackjack_paid_1_to_1_at_once_then_play_box_by_box_from_the_first() -> None:
    shoe = stack(G, [["TH", "9H"], ["AS", "KS"], ["TD", "8D"]], ["9D", "8C"])
    rnd = deal(G, shoe, [BET, BET, BET])
    assert rnd.wagers[1].returned == 2 * BET and rnd.turn.hand == 0
    rnd.act(as_action("stand"))
    assert rnd.turn.hand == 2  # the blackjack box is skipped
    rnd.act(as_action("stand"))
    assert rnd.phase == "finished" and rnd.position == len(shoe)
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET),
                         ("main", 2, BET, 2 * BET)])


TieCase = tuple[list[str], list[str], list[str], list[Any], list[tuple[str, int, int, int]]]
TIES: list[TieCase] = [
    (["TH", "7H"], ["9D", "8C"], [], ["stand"], [("main", 0, BET, 0)]),  # 17 = 17
    (["TH", "5H"], ["9D", "2C", "TC"], ["6C"], ["hit"], [("main", 0, BET, 0)]),  # 21 = 21
    (["6S", "5H"], ["TD", "KC"], ["9C"], [double()],  # doubled 20 = 20: both wagers lose
     [("main", 0, BET, 0), ("double", 0, BET, 0)]),
]


@pytest.mark.parametrize("case", TIES)
def test_ties_lose(case: TieCase) -> None:
    hand, dealer, draws, script, wagers = case
    rnd = play(G, stack(G, [hand], dealer, draws), [BET], script)
    assert rnd.hands[0].outcome == "lose"
    assert rnd.hands[0].total == rnd.summary()["dealer"]["total"]
    assert_settled(rnd, wagers)


@pytest.mark.parametrize(("cards", "allowed"), [
    (["4S", "5H"], True), (["6S", "4H"], True), (["2S", "9H"], True), (["3S", "5H"], False),
    (["7S", "5H"], False), (["AS", "8H"], False),
])
def test_double_on_two_cards_hard_9_10_or_11_only(cards: list[str], allowed: bool) -> None:
    rnd = play(G, stack(G, [cards], ["TD", "7C"]), [BET], finished=False)
    assert ("double" in legal(rnd)) is allowed
    if not allowed:
        assert_refused(rnd, double())


def test_never_double_on_a_soft_hand_even_where_the_total_would_allow() -> None:
    # every two-card soft hand is 12 or more, so widen the total rule to see the soft knob bite
    doc = {**DOUBLE_EXPOSURE, "double": {**DOUBLE_EXPOSURE["double"], "on": "any"}}
    rules = rules_from_dict(doc)
    soft = play(rules, stack(rules, [["AS", "6H"]], ["TD", "7C"]), [BET], finished=False)
    assert "double" not in legal(soft)
    assert "soft" in assert_refused(soft, double())
    hard = play(rules, stack(rules, [["TS", "6H"]], ["TD", "7C"], ["4C"]), [BET], [double()])
    assert_settled(hard, [("main", 0, BET, 2 * BET), ("double", 0, BET, 2 * BET)])


def test_double_after_split() -> None:
    shoe = stack(G, [["5S", "5H"]], ["9D", "8C"], ["4C", "TC", "6D", "9C"])
    rnd = play(G, shoe, [BET], ["split", double(), double()])  # 5+4+T = 19, 5+6+9 = 20
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 2 * BET),
                         ("double", 0, BET, 2 * BET), ("double", 1, BET, 2 * BET)])


def test_resplit_aces_to_four_hands_one_card_each() -> None:
    draws = ["AD", "AC", "AS", "KD", "9S", "5C"]
    shoe = stack(G, [["AS", "AH"]], ["9D", "8C"], draws)
    rnd = play(G, shoe, [BET], ["split"], finished=False)
    assert rnd.turn.hand == 0 and legal(rnd) == ["stand", "split"]  # A+A: resplit or keep
    assert "one card" in assert_refused(rnd, "hit")
    assert_refused(rnd, double())
    rnd = play(G, shoe, [BET], ["split", "split", "split"])
    # A+A (4 hands: no more splits), A+K = 21 (not blackjack), A+9 = 20, A+5 = 16 against 17
    assert [(h.id, h.total, h.natural) for h in rnd.hands] == [
        (0, 12, False), (3, 21, False), (2, 20, False), (1, 16, False)]
    assert_settled(rnd, [("main", 0, BET, 0), ("split", 1, BET, 0), ("split", 2, BET, 2 * BET),
                         ("split", 3, BET, 2 * BET)])


def test_split_aces_may_keep_a_pair_of_aces() -> None:
    shoe = stack(G, [["AS", "AH"]], ["9D", "8C"], ["AD", "TC"])
    rnd = play(G, shoe, [BET], ["split", "stand"])  # A+A = soft 12 loses; A+T = 21 wins
    assert_settled(rnd, [("main", 0, BET, 0), ("split", 1, BET, 2 * BET)])


def test_second_card_after_split_comes_by_itself_and_21_moves_play_on() -> None:
    shoe = stack(G, [["KS", "KH"], ["TD", "8D"]], ["9D", "8C"], ["AS", "9H"])
    rnd = play(G, shoe, [BET, BET], ["split"], finished=False)
    assert rnd.turn.hand == 2 and rnd.hands[0].total == 21  # K+A stood, K+9 is up
    rnd = play(G, shoe, [BET, BET], ["split", "stand", "stand"])
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET),
                         ("split", 2, BET, 2 * BET)])


def test_resplit_to_four_hands_per_box() -> None:
    shoe = stack(G, [["8S", "8H"]], ["9D", "8C"], ["8D", "8C", "8S", "TS", "TH", "KD"])
    rnd = play(G, shoe, [BET], ["split", "split", "split"], finished=False)
    assert "split" not in legal(rnd) and "at most 4 hands" in assert_refused(rnd, "split")
    rnd = play(G, shoe, [BET], ["split", "split", "split"] + ["stand"] * 4)
    assert_settled(rnd, [("main", 0, BET, 0), ("split", 1, BET, 2 * BET),
                         ("split", 2, BET, 2 * BET), ("split", 3, BET, 2 * BET)])


def test_dealer_hits_soft_17() -> None:
    rnd = play(G, stack(G, [["TS", "9S"]], ["6D", "AC", "4S"]), [BET], ["stand"])
    assert_settled(rnd, [("main", 0, BET, 0)])  # soft 17 drew to 21


@pytest.mark.parametrize(("hands", "draws", "script", "returns"), [
    ([["TS", "6H"], ["TH", "5H"]], ["TC", "KC"], ["hit", "hit"], [0, 0]),  # all bust
    ([["AS", "KS"], ["AH", "QH"]], [], [], [2 * BET, 2 * BET]),  # only paid blackjacks
    ([["AS", "KS"], ["TH", "5H"]], ["KC"], ["hit"], [2 * BET, 0]),  # a blackjack and a bust
])
def test_dealer_draws_nothing_when_no_live_wager_remains(
    hands: list[list[str]], draws: list[str], script: list[str], returns: list[int]
) -> None:
    rnd = play(G, stack(G, hands, ["6D", "AC"], draws), [BET] * len(hands), script)
    assert len(rnd.dealer) == 2  # soft 17 would have drawn under H17
    assert_settled(rnd, [("main", i, BET, r) for i, r in enumerate(returns)])


def test_payoffs_win_1_to_1_blackjack_1_to_1() -> None:
    rnd = play(G, stack(G, [["AS", "KS"], ["TH", "9H"]], ["9D", "8C"]), [BET, 600], ["stand"])
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, 600, 1200)])
