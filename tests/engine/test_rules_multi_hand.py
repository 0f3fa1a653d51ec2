"""The rule document of `multi-hand`: one test per rule line, on stacked shoes.

No hole card: ``stack`` puts the dealer's second card after the players' draws. Default table
1-500: bets 100..50,000 minor units, side bets 100..5,000, in whole chips (smallest 100).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from support.engine_helpers import (
    Step,
    as_action,
    assert_refused,
    assert_settled,
    cards_dealt,
    deal,
    double,
    event_index,
    insure,
    legal,
    legal_action,
    play,
    stack,
)

from game_math.cards import parse_card
from game_math.errors import BetError
from game_math.games import game_rules
from game_math.round import DEALER, HandBet, Turn
from game_math.rules import ShufflePolicy

G = "multi-hand"
BET = 1000
SIDE = 100
PP, TP3 = "perfect_pairs", "twenty_one_plus_three"


def test_six_decks_reshuffled_after_every_round() -> None:
    rules = game_rules(G)
    assert (rules.decks, rules.shuffle.policy) == (6, ShufflePolicy.EVERY_ROUND)


@pytest.mark.parametrize("count", [0, 2, 4, 6])
def test_other_numbers_of_hands_are_refused(count: int) -> None:
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 14, [BET] * count)
    assert info.value.field == "hands" and "1, 3, 5" in str(info.value)


@pytest.mark.parametrize("count", [1, 3, 5])
def test_player_plays_1_3_or_5_hands(count: int) -> None:
    hands = [["TS", "9S"]] * count
    rnd = play(G, stack(G, hands, ["9D", "8C"]), [BET] * count, ["stand"] * count)
    assert_settled(rnd, [("main", i, BET, 2 * BET) for i in range(count)])


def test_dealer_takes_his_second_card_only_after_the_player_has_finished() -> None:
    shoe = stack(G, [["TS", "6S"]], ["9D", "8C"], ["3H"])
    rnd = play(G, shoe, [BET], ["hit"], finished=False)
    assert len(rnd.dealer) == 1
    rnd.act(as_action("stand"))
    assert cards_dealt(rnd)[-1] == ("dealer", "8C", True)
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])  # 19 beats 17


def test_dealer_blackjack_beats_every_hand_split_and_doubled_ones_included() -> None:
    hands = [["8S", "8H"], ["TS", "TH"], ["AH", "KH"]]
    draws = ["3C", "KD", "2D", "9C", "AS", "9D"]
    shoe = stack(G, hands, ["KC", "AD"], draws)
    script: list[Step] = ["split", double(), double(), "split", "stand"]
    rnd = play(G, shoe, [BET] * 3, script)
    # hand 0: 8+3+K = 21 doubled; hand 3: 8+2+9 = 19 doubled; hand 1: T+A = 21 after a split;
    # hand 4: T+9; hand 2: blackjack, which pushes
    assert [(h.id, h.total) for h in rnd.hands] == [(0, 21), (3, 19), (1, 21), (4, 19), (2, 21)]
    assert_settled(rnd, [("main", 0, BET, 0), ("main", 1, BET, 0), ("main", 2, BET, BET),
                         ("split", 3, BET, 0), ("double", 0, BET, 0), ("double", 3, BET, 0),
                         ("split", 4, BET, 0)])


def test_blackjack_pays_3_to_2_once_the_dealer_cannot_have_blackjack() -> None:
    rnd = play(G, stack(G, [["AS", "KS"]], ["TD", "7C"]), [BET])  # no decision needed
    assert event_index(rnd, "card", hand=DEALER, card=parse_card("7C")) < event_index(
        rnd, "settle", wager=0)
    assert_settled(rnd, [("main", 0, BET, 2500)])


def test_blackjack_against_dealer_blackjack_pushes() -> None:
    rnd = play(G, stack(G, [["AS", "KS"]], ["TD", "AC"]), [BET])
    assert_settled(rnd, [("main", 0, BET, BET)])


@pytest.mark.parametrize(("hand", "draws", "script", "dealer"), [
    (["TS", "7S"], [], ["stand"], ["TD", "7C"]),  # 17 = 17
    (["TS", "5S"], ["6C"], ["hit"], ["TD", "5C", "6D"]),  # 21 = 21 (three cards each)
])
def test_equal_totals_push(hand: list[str], draws: list[str], script: list[str],
                           dealer: list[str]) -> None:
    rnd = play(G, stack(G, [hand], dealer, draws), [BET], script)
    assert_settled(rnd, [("main", 0, BET, BET)])


def test_dealer_stands_on_soft_17() -> None:
    rnd = play(G, stack(G, [["TS", "8S"]], ["6D", "AC"]), [BET], ["stand"])
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])


@pytest.mark.parametrize(("cards", "allowed"), [
    (["4S", "5H"], True), (["6S", "4H"], True), (["2S", "9H"], True), (["3S", "5H"], False),
    (["7S", "5H"], False), (["AS", "8H"], False),
])
def test_double_on_hard_9_to_11_only(cards: list[str], allowed: bool) -> None:
    rnd = play(G, stack(G, [cards], ["TD", "7C"]), [BET], finished=False)
    assert ("double" in legal(rnd)) is allowed
    if allowed:
        assert legal_action(rnd, "double")[:3] == (BET, BET, False)
        assert "must be 1000" in assert_refused(rnd, double(500))  # no double for less
    else:
        assert_refused(rnd, double())


def test_double_on_a_split_hand_that_is_hard_9_to_11() -> None:
    shoe = stack(G, [["5S", "5H"]], ["TD", "7C"], ["4C", "TC", "7D"])
    rnd = play(G, shoe, [BET], ["split", double()], finished=False)
    assert rnd.turn.hand == 1 and "double" not in legal(rnd)  # 5+7 = 12
    rnd.act(as_action("stand"))  # no alert: 12 is not under 12
    assert not rnd.alerts
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 0),
                         ("double", 0, BET, 2 * BET)])  # 5+4+T = 19; 12 against 17


def test_split_any_equal_value_pair_resplit_up_to_four_hands() -> None:
    shoe = stack(G, [["KS", "QH"]], ["TD", "7C"], ["JD", "TC", "KD", "9H", "9D", "QC"])
    rnd = play(G, shoe, [BET], ["split", "split", "split"], finished=False)
    assert len(rnd.hands) == 4 and "at most 4 hands" in assert_refused(rnd, "split")  # K+K
    # engine reading of "each hand may be re-split once (up to 4 hands)": the cap is four hands
    # from one bet, whichever hand is re-split; here hand 0 is split three times
    rnd = play(G, shoe, [BET], ["split", "split", "split"] + ["stand"] * 4)
    # play order 0, 3, 2, 1: K+K, T+9, J+9, Q+Q (a pair, but four hands already)
    assert [(h.id, h.total) for h in rnd.hands] == [(0, 20), (3, 19), (2, 19), (1, 20)]
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 2 * BET),
                         ("split", 2, BET, 2 * BET), ("split", 3, BET, 2 * BET)])


def test_split_aces_one_card_each() -> None:
    rnd = play(G, stack(G, [["AS", "AH"]], ["TD", "7C"], ["AD", "9C"]), [BET], ["split"])
    assert [len(h.cards) for h in rnd.hands] == [2, 2]  # no resplit of aces, no hit
    assert_settled(rnd, [("main", 0, BET, 0), ("split", 1, BET, 2 * BET)])


@pytest.mark.parametrize(("second", "ins_returned", "main"), [
    ("KD", 1500, 0), ("7D", 0, 2 * BET),
])
def test_insurance_half_the_bet_settled_when_the_second_card_comes_pays_2_to_1(
    second: str, ins_returned: int, main: int
) -> None:
    shoe = stack(G, [["TS", "9S"]], ["AD", second])
    rnd = deal(G, shoe, [BET])
    assert rnd.turn == Turn("insurance", 0, "insurance")
    assert legal_action(rnd, "insurance") == (0, 500, False, (0, 500))
    assert "must be 0 or 500" in assert_refused(rnd, insure(200))
    rnd.act(insure())  # no amount: the full half bet
    assert rnd.wagers[1].returned is None and len(rnd.dealer) == 1  # open during play
    rnd.act(as_action("stand"))
    assert rnd.phase == "finished" and rnd.position == len(shoe)
    assert_settled(rnd, [("main", 0, BET, main), ("insurance", 0, 500, ins_returned)])


def test_dealer_takes_his_second_card_to_settle_insurance_even_when_every_hand_bust() -> None:
    # engine choice: an open insurance wager is live enough to need the dealer's second card
    shoe = stack(G, [["TS", "6S"]], ["AD", "KD"], ["9H"])
    rnd = play(G, shoe, [BET], [insure(500), "hit"])
    assert len(rnd.dealer) == 2
    assert_settled(rnd, [("main", 0, BET, 0), ("insurance", 0, 500, 1500)])
    unins = play(G, stack(G, [["TS", "6S"]], ["AD"], ["9H"]), [BET], [insure(0), "hit"])
    assert len(unins.dealer) == 1
    assert_settled(unins, [("main", 0, BET, 0)])


def test_insurance_is_not_offered_to_a_blackjack_hand() -> None:
    hands = [["AS", "KS"], ["TH", "9H"], ["7C", "TD"]]
    shoe = stack(G, hands, ["AD", "7S"])
    rnd = deal(G, shoe, [BET] * 3)
    assert rnd.turn == Turn("insurance", 1, "insurance")
    rnd.act(insure(0))
    assert rnd.turn == Turn("insurance", 2, "insurance")
    rnd.act(insure(500))
    for _ in range(2):
        rnd.act(as_action("stand"))
    # dealer A+7 = soft 18: blackjack 3:2, 19 wins, 17 loses with its insurance
    assert rnd.phase == "finished" and rnd.position == len(shoe)
    assert_settled(rnd, [("main", 0, BET, 2500), ("main", 1, BET, 2 * BET), ("main", 2, BET, 0),
                         ("insurance", 2, 500, 0)])


def test_side_bet_needs_its_hands_main_bet() -> None:
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 6, [HandBet(0, {PP: SIDE})])
    assert info.value.field == "hands[0].bet"


@pytest.mark.parametrize(("side_bets", "field", "why"), [
    ({PP: 150}, "hands[0].side_bets.perfect_pairs", "chips"),
    ({TP3: 5_100}, "hands[0].side_bets.twenty_one_plus_three", "limits"),
    ({"snap": SIDE}, "hands[0].side_bets.snap", "offers no side bet"),
])
def test_side_bet_limits_and_names(side_bets: dict[str, int], field: str, why: str) -> None:
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 6, [HandBet(BET, side_bets)])
    assert info.value.field == field and why in str(info.value)


def test_side_bets_settle_after_the_first_deal_before_insurance() -> None:
    shoe = stack(G, [["AH", "AH"]], ["AH", "7D"])
    rnd = deal(G, shoe, [HandBet(BET, {PP: SIDE, TP3: SIDE})])
    assert rnd.turn == Turn("insurance", 0, "insurance")
    assert [w.returned for w in rnd.wagers[1:]] == [2600, 10_100]  # perfect pair; suited trips
    assert not [e for e in rnd.events if e.kind == "decision"]
    rnd.act(insure(500))
    rnd.act(as_action("stand"))  # soft 12 against soft 18
    assert_settled(rnd, [("main", 0, BET, 0), (PP, 0, SIDE, 2600), (TP3, 0, SIDE, 10_100),
                         ("insurance", 0, 500, 0)])


@pytest.mark.parametrize("action", ["double", "split"])
def test_side_bet_winnings_cannot_fund_a_double_or_split_in_the_same_round(action: str) -> None:
    shoe = stack(G, [["5S", "5S"]], ["9D", "8C"])
    balance = BET + SIDE  # exactly the opening stake
    rnd = deal(G, shoe, [HandBet(BET, {PP: SIDE})], balance=balance)
    assert rnd.wagers[1].returned == 2600  # a perfect pair won 25:1
    assert rnd.available == 0 and action not in legal(rnd)
    assert "not enough balance" in assert_refused(rnd, action)
    rnd.act(as_action("stand"))  # 10 against 17
    assert rnd.available == balance - (BET + SIDE) + 2600  # credited at round end
    assert_settled(rnd, [("main", 0, BET, 0), (PP, 0, SIDE, 2600)])
    funded = deal(G, shoe, [HandBet(BET, {PP: SIDE})], balance=balance + BET)
    assert action in legal(funded)  # the same round with the money on the balance


@pytest.mark.parametrize(("cards", "line", "returned"), [
    (["7H", "7S"], "mixed_pair", 700),
    (["7H", "7D"], "coloured_pair", 1300),
    (["7S", "7C"], "coloured_pair", 1300),
    (["7H", "7H"], "perfect_pair", 2600),
    (["7H", "8H"], None, 0),
    (["KH", "QH"], None, 0),  # same value is not a pair: same face
])
def test_perfect_pairs_mixed_6_coloured_12_perfect_25_to_1(
    cards: list[str], line: str | None, returned: int
) -> None:
    rnd = play(G, stack(G, [cards], ["9D", "8C"]), [HandBet(BET, {PP: SIDE})], ["stand"])
    main = 2 * BET if cards[0] == "KH" else 0  # 20 beats 17; 14 and 15 lose
    assert rnd.wagers[1].line == line
    assert_settled(rnd, [("main", 0, BET, main), (PP, 0, SIDE, returned)])


# (hand, dealer's cards, script, paying line, side-bet return, main return)
Tp3Case = tuple[list[str], list[str], list[Step], str | None, int, int]
TP3_CASES: list[Tp3Case] = [
    (["7H", "7H"], ["7H", "TD"], ["stand"], "suited_trips", 10_100, 0),  # not + 25:1 + 5:1
    (["5H", "6H"], ["7H", "TD"], ["stand"], "straight_flush", 4_100, 0),
    (["QH", "KH"], ["AH", "6C"], [insure(0), "stand"], "straight_flush", 4_100, 2 * BET),
    (["7H", "7D"], ["7S", "TD"], ["stand"], "three_of_a_kind", 2_600, 0),
    (["AS", "2H"], ["3D", "TD", "9C"], ["stand"], "straight", 1_100, 2 * BET),  # A-2-3
    (["QS", "KH"], ["AD", "6C"], [insure(0), "stand"], "straight", 1_100, 2 * BET),  # Q-K-A
    (["AS", "2H"], ["KD", "7C"], ["stand"], None, 0, 0),  # K-A-2 is no straight
    (["2H", "9H"], ["KH", "7C"], ["stand"], "flush", 600, 0),
    (["2H", "9S"], ["KD", "7C"], ["stand"], None, 0, 0),
]


@pytest.mark.parametrize("case", TP3_CASES)
def test_21_plus_3_highest_only_a23_and_qka_straights(case: Tp3Case) -> None:
    hand, dealer, script, line, returned, main = case
    rnd = play(G, stack(G, [hand], dealer), [HandBet(BET, {TP3: SIDE})], script)
    assert rnd.wagers[1].line == line
    assert_settled(rnd, [("main", 0, BET, main), (TP3, 0, SIDE, returned)])


def test_side_bets_per_hand_each_on_its_own_cards() -> None:
    hands = [["7H", "7H"], ["5D", "6D"], ["TS", "9C"]]
    bets = [HandBet(BET, {PP: SIDE}), HandBet(BET, {PP: 200, TP3: 300}), HandBet(BET, {TP3: SIDE})]
    shoe = stack(G, hands, ["7D", "TC"], ["9S"])
    rnd = play(G, shoe, bets, ["stand", "hit", "stand", "stand"])
    # perfect pair 25:1; no pair; 5-6-7 of diamonds 40:1; T-9-7 nothing. Mains: 14, 20, 19 v 17
    assert_settled(rnd, [("main", 0, BET, 0), ("main", 1, BET, 2 * BET), ("main", 2, BET, 2 * BET),
                         (PP, 0, SIDE, 2600), (PP, 1, 200, 0), (TP3, 1, 300, 12_300),
                         (TP3, 2, SIDE, 0)])


@pytest.mark.parametrize(("level", "bet", "side", "field"), [
    ("1-500", 100, 100, None), ("1-500", 50_000, 5_000, None), ("1-500", 150, 100, "hands[0].bet"),
    ("1-500", 50_100, 100, "hands[0].bet"), ("1-500", 100, 5_100, "side"),
    ("5-1500", 500, 500, None), ("5-1500", 400, 500, "hands[0].bet"),
    ("5-1500", 150_000, 10_000, None), ("5-1500", 500, 400, "side"),
    ("10-3000", 1_000, 1_000, None), ("10-3000", 900, 1_000, "hands[0].bet"),
    ("10-3000", 300_000, 10_000, None), ("10-3000", 1_100, 1_000, None),
    ("10-3000", 1_000, 10_100, "side"), ("10-3000", 1_050, 1_000, "hands[0].bet"),
])
def test_table_limits_main_and_side_bets_in_whole_chips(
    level: str, bet: int, side: int, field: str | None
) -> None:
    hand_bet = HandBet(bet, {PP: side})
    shoe = stack(G, [["TS", "9S"]], ["9D", "8C"])
    if field is None:
        rnd = play(G, shoe, [hand_bet], ["stand"], level=level)
        assert_settled(rnd, [("main", 0, bet, 2 * bet), (PP, 0, side, 0)])
    else:
        with pytest.raises(BetError) as info:
            deal(G, shoe, [hand_bet], level=level)
        expected = "hands[0].side_bets.perfect_pairs" if field == "side" else field
        assert info.value.field == expected


def test_alert_on_hitting_a_hard_17_to_20_informs_and_never_blocks() -> None:
    shoe = stack(G, [["TS", "7S"]], ["9D", "8C"], ["2H"])
    rnd = deal(G, shoe, [BET])
    hit = next(la for la in rnd.legal_actions() if la.action == "hit")
    assert hit.alert == "hit_hard_17_20"
    rnd.act(as_action("hit"))  # dealt all the same: 19
    assert [(e.action, e.alert) for e in rnd.alerts] == [("hit", "hit_hard_17_20")]
    rnd.act(as_action("stand"))
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])


def test_alert_on_standing_on_a_hard_total_under_12() -> None:
    rnd = play(G, stack(G, [["5S", "6S"]], ["6D", "TC", "8H"]), [BET], ["stand"])
    assert [(e.action, e.alert) for e in rnd.alerts] == [("stand", "stand_hard_under_12")]
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])  # 11 stood; the dealer busted


@pytest.mark.parametrize(("hand", "action", "draw"), [
    (["AS", "6S"], "hit", "2H"),  # soft 17: no alert
    (["TS", "6S"], "hit", "2H"),  # hard 16
    (["AS", "AD"], "stand", None),  # soft 12
    (["TS", "2S"], "stand", None),  # hard 12
])
def test_no_alert_outside_those_totals(hand: list[str], action: str, draw: str | None) -> None:
    shoe = stack(G, [hand], ["9D", "8C"], [draw] if draw else [])
    rnd = deal(G, shoe, [BET])
    assert next(la for la in rnd.legal_actions() if la.action == action).alert is None
    rnd.act(as_action(action))
    assert not rnd.alerts


def test_other_games_raise_no_alerts() -> None:
    for game in ("snap", "double-deck", "double-exposure"):
        rnd = play(game, stack(game, [["TS", "7S"]], ["9D", "8C"], ["2H"]), [BET],
                   ["hit", "stand"])
        assert not rnd.alerts


def test_game_fault_voids_side_bet_wins_too() -> None:
    shoe = stack(G, [["7H", "7H"]], ["9D"])  # the dealer's second card is missing
    rnd = deal(G, shoe, [HandBet(BET, {PP: SIDE})], spare=False)
    assert rnd.wagers[1].returned == 2600
    rnd.act(as_action("stand"))
    assert rnd.phase == "void"
    assert_settled(rnd, [("main", 0, BET, BET), (PP, 0, SIDE, SIDE)])


def test_published_return_is_carried_by_the_rules() -> None:
    assert game_rules(G).published_return == Fraction(9948, 10000)
