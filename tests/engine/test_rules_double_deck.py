"""The rule document of `double-deck` (land-based rules): one test per rule line, on stacked shoes.

Table limits 500..100,000 minor units; blackjack pays 3:2, so bets are even.
"""

from __future__ import annotations

import pytest
from support.engine_helpers import (
    as_action,
    assert_refused,
    assert_settled,
    deal,
    double,
    event_index,
    insure,
    legal,
    legal_action,
    play,
    stack,
)

from game_math.errors import BetError
from game_math.games import game_rules
from game_math.round import Turn
from game_math.rules import ShufflePolicy

G = "double-deck"
BET = 1000


def test_two_decks_reshuffled_after_every_round() -> None:
    rules = game_rules(G)
    assert (rules.decks, rules.shuffle.policy) == (2, ShufflePolicy.EVERY_ROUND)


def test_blackjack_paid_3_to_2_at_once_when_up_card_is_neither_ace_nor_ten() -> None:
    shoe = stack(G, [["AS", "KS"], ["TH", "6H"]], ["9D", "7C", "5S"])
    rnd = deal(G, shoe, [BET, BET])
    assert rnd.turn == Turn("play", 1, "play") and rnd.wagers[0].returned == 2500
    assert not [e for e in rnd.events if e.kind == "peek"]
    rnd.act(as_action("stand"))  # 16 against 9+7+5 = 21
    assert rnd.position == len(shoe)
    assert_settled(rnd, [("main", 0, BET, 2500), ("main", 1, BET, 0)])


def test_blackjack_facing_a_ten_is_paid_after_the_peek() -> None:
    rnd = play(G, stack(G, [["AS", "KS"], ["TH", "9H"]], ["TD", "7C"]), [BET, BET], ["stand"])
    assert event_index(rnd, "peek", blackjack=False) < event_index(rnd, "settle", wager=0)
    assert_settled(rnd, [("main", 0, BET, 2500), ("main", 1, BET, 2 * BET)])


def test_blackjack_facing_an_ace_is_paid_after_insurance_and_the_peek() -> None:
    shoe = stack(G, [["AS", "KS"], ["TH", "9H"]], ["AD", "7C"])
    rnd = deal(G, shoe, [BET, BET])
    # no even money here: the blackjack hand is offered ordinary insurance (engine choice)
    assert rnd.turn == Turn("insurance", 0, "insurance") and rnd.wagers[0].returned is None
    rnd = play(G, shoe, [BET, BET], [insure(0), insure(0), "stand"])
    assert event_index(rnd, "peek", blackjack=False) < event_index(rnd, "settle", wager=0)
    assert_settled(rnd, [("main", 0, BET, 2500), ("main", 1, BET, 2 * BET)])  # 19 vs soft 18


def test_blackjack_against_blackjack_pushes() -> None:
    rnd = play(G, stack(G, [["AS", "KS"], ["TH", "9H"]], ["TD", "AC"]), [BET, BET])
    assert rnd.events[event_index(rnd, "peek")].blackjack
    assert_settled(rnd, [("main", 0, BET, BET), ("main", 1, BET, 0)])


def test_dealer_hits_soft_17() -> None:
    rnd = play(G, stack(G, [["TS", "9S"]], ["6D", "AC", "4S"]), [BET], ["stand"])
    assert_settled(rnd, [("main", 0, BET, 0)])  # soft 17 drew to 21


def test_dealer_stands_on_hard_17_and_more() -> None:
    rnd = play(G, stack(G, [["TS", "8S"]], ["6D", "AC", "TS"]), [BET], ["stand"])
    assert rnd.summary()["dealer"]["total"] == 17  # A counts 1 now: hard 17 stands
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])


def test_equal_totals_push_and_wins_pay_1_to_1() -> None:
    rnd = play(G, stack(G, [["TS", "7S"], ["TH", "9H"]], ["TD", "7C"]), [BET, BET],
               ["stand", "stand"])
    assert_settled(rnd, [("main", 0, BET, BET), ("main", 1, BET, 2 * BET)])


@pytest.mark.parametrize(("cards", "allowed"), [
    (["5S", "4H"], False), (["6S", "4H"], True), (["6S", "5H"], True), (["7S", "5H"], False),
    (["AS", "9H"], False), (["3S", "3H"], False),
])
def test_double_only_on_a_two_card_10_or_11(cards: list[str], allowed: bool) -> None:
    rnd = play(G, stack(G, [cards], ["TD", "7C"]), [BET], finished=False)
    assert ("double" in legal(rnd)) is allowed
    if not allowed:
        assert "10-11" in assert_refused(rnd, double())


def test_double_never_on_blackjack_or_a_two_card_21_after_split() -> None:
    # K+A after a split is 21 and stands: no decision is offered on it
    shoe = stack(G, [["KS", "KH"]], ["TD", "7C"], ["AS", "9H"])
    rnd = play(G, shoe, [BET], ["split"], finished=False)
    assert rnd.turn.hand == 1 and "double" not in legal(rnd)  # K+9 = 19: not 10-11 either
    rnd.act(as_action("stand"))
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 2 * BET)])


@pytest.mark.parametrize(("amount", "returned"), [(1, 2), (400, 800), (BET, 2 * BET)])
def test_double_for_less_any_amount_up_to_the_bet(amount: int, returned: int) -> None:
    shoe = stack(G, [["6S", "4H"]], ["TD", "7C"], ["9C"])
    rnd = deal(G, shoe, [BET])
    assert legal_action(rnd, "double")[:3] == (1, BET, True)
    for bad in (0, -5, BET + 1):
        assert "between 1 and 1000" in assert_refused(rnd, double(bad))
    rnd.act(double(amount))  # 10 + 9 = 19 beats 17
    assert rnd.phase == "finished" and rnd.position == len(shoe)
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("double", 0, amount, returned)])


def test_double_after_split_keeps_the_10_or_11_rule() -> None:
    shoe = stack(G, [["5S", "5H"]], ["TD", "7C"], ["6C", "9D", "4D"])
    rnd = play(G, shoe, [BET], ["split", double(500)], finished=False)  # 5+6: 11
    assert rnd.turn.hand == 1 and "double" not in legal(rnd)  # 5+4 = 9
    rnd.act(as_action("stand"))
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 0),
                         ("double", 0, 500, 1000)])  # 5+6+9 = 20 vs 17; 9 loses


def test_resplit_up_to_four_hands() -> None:
    draws = ["8D", "8C", "8D", "TS", "TH", "KD"]
    shoe = stack(G, [["8S", "8H"]], ["TD", "7C"], draws)
    rnd = play(G, shoe, [BET], ["split", "split", "split"], finished=False)
    assert len(rnd.hands) == 4 and "split" not in legal(rnd)  # 8+8 once more
    assert "at most 4 hands" in assert_refused(rnd, "split")
    rnd = play(G, shoe, [BET], ["split", "split", "split", "stand", "stand", "stand", "stand"])
    assert [h.id for h in rnd.hands] == [0, 3, 2, 1]  # play order: each new hand next
    assert_settled(rnd, [("main", 0, BET, 0), ("split", 1, BET, 2 * BET),
                         ("split", 2, BET, 2 * BET), ("split", 3, BET, 2 * BET)])


def test_split_aces_one_card_each_and_no_resplit_of_aces() -> None:
    rnd = play(G, stack(G, [["AS", "AH"]], ["TD", "7C"], ["AD", "9C"]), [BET], ["split"])
    assert [len(h.cards) for h in rnd.hands] == [2, 2]  # A+A got no decision
    assert_settled(rnd, [("main", 0, BET, 0), ("split", 1, BET, 2 * BET)])  # 12, 20 vs 17


@pytest.mark.parametrize(("amount", "hole", "returned"), [
    (300, "KD", 900), (500, "KD", 1500), (1, "KD", 3), (300, "7D", 0),
])
def test_insurance_any_amount_up_to_half_the_bet_pays_2_to_1(
    amount: int, hole: str, returned: int
) -> None:
    shoe = stack(G, [["TS", "9S"]], ["AD", hole])
    rnd = deal(G, shoe, [BET])
    assert legal_action(rnd, "insurance")[:3] == (0, 500, True)
    for bad in (501, -1):
        assert "between 0 and 500" in assert_refused(rnd, insure(bad))
    rnd.act(insure(amount))
    if hole == "7D":
        rnd.act(as_action("stand"))  # 19 beats soft 18
    main = 0 if hole == "KD" else 2 * BET
    assert rnd.phase == "finished" and rnd.position == len(shoe)
    assert_settled(rnd, [("main", 0, BET, main), ("insurance", 0, amount, returned)])


def test_insured_blackjack_against_dealer_blackjack() -> None:
    rnd = play(G, stack(G, [["AS", "KS"]], ["AD", "KD"]), [BET], [insure(500)])
    assert_settled(rnd, [("main", 0, BET, BET), ("insurance", 0, 500, 1500)])


@pytest.mark.parametrize(("bets", "field"), [
    ([BET] * 3, "hands"), ([], "hands"), ([998, BET], "hands[0].bet"), ([BET, 600], "hands[1].bet"),
    ([400], "hands[0].bet"), ([100_002], "hands[0].bet"), ([501], "hands[0].bet"),
])
def test_one_or_two_hands_two_hands_need_twice_the_minimum(bets: list[int], field: str) -> None:
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 10, bets)
    assert info.value.field == field


def test_two_hands_at_twice_the_minimum_and_one_hand_at_the_limits() -> None:
    shoe = stack(G, [["TS", "9S"], ["TH", "8H"]], ["TD", "7C"])
    rnd = play(G, shoe, [BET, BET], ["stand", "stand"])
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET)])
    for bet in (500, 100_000):
        rnd = play(G, stack(G, [["TS", "9S"]], ["TD", "7C"]), [bet], ["stand"])
        assert_settled(rnd, [("main", 0, bet, 2 * bet)])


def test_split_double_and_insurance_may_exceed_the_table_maximum() -> None:
    top = 100_000
    shoe = stack(G, [["5S", "5H"]], ["AD", "7C"], ["6C", "TC", "KD", "3D"])
    rnd = play(G, shoe, [top], [insure(top // 2), "split", double(), "hit", "stand"])
    # insurance lost; 5+6+T = 21; 5+K+3 = 18 pushes soft 18
    assert_settled(rnd, [("main", 0, top, 2 * top), ("insurance", 0, top // 2, 0),
                         ("split", 1, top, top), ("double", 0, top, 2 * top)])
