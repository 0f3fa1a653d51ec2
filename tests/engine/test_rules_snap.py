"""The rule document of `snap` (Double Deck Blackjack Snap): one test per rule line, on stacked
shoes.

Hand 0 is the rightmost ("right") hand. Medium stakes (the default) allow 500..50,000 minor units;
blackjack pays 3:2, so bets are even.
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
    even_money,
    event_index,
    insure,
    legal,
    legal_action,
    play,
    stack,
)

from game_math.cards import card_codes
from game_math.errors import BetError
from game_math.games import game_rules
from game_math.round import HandBet, Round, Turn
from game_math.rules import ShufflePolicy

G = "snap"
BET = 1000
SNAP = 500


def test_two_decks_reshuffled_after_every_round() -> None:
    rules = game_rules(G)
    assert (rules.decks, rules.shuffle.policy) == (2, ShufflePolicy.EVERY_ROUND)
    # two decks: the same card can come twice in one deal (a Snap pair needs it)
    rnd = play(G, stack(G, [["7H", "7H"], ["TS", "9D"]], ["9S", "8D"]), [BET, BET],
               ["stand", "stand"], {"snap": SNAP})
    assert rnd.wagers[2].line == "pair_in_any_hand"


def test_one_or_two_hands_each_with_its_own_bet() -> None:
    for bets in ([], [BET] * 3):
        with pytest.raises(BetError) as info:
            deal(G, ["TS"] * 10, bets)
        assert info.value.field == "hands"
    shoe = stack(G, [["TS", "9S"], ["TH", "6H"]], ["TD", "8D"])
    rnd = play(G, shoe, [600, 2000], ["stand", "stand"])  # 19 beats 18, 16 loses
    assert_settled(rnd, [("main", 0, 600, 1200), ("main", 1, 2000, 0)])


def test_deal_rightmost_hand_first_then_left_then_dealer_hole_card_face_down() -> None:
    assert game_rules(G).hands.labels == ("right", "left")
    shoe = stack(G, [["TS", "9S"], ["TH", "6H"]], ["5D", "8D"], ["KC"])
    rnd = play(G, shoe, [BET, BET], finished=False)
    assert cards_dealt(rnd) == [(0, "TS", True), (1, "TH", True), ("dealer", "5D", True),
                                (0, "9S", True), (1, "6H", True), ("dealer", "8D", False)]
    hidden = [e for e in rnd.summary()["events"] if e["kind"] == "card" and not e["face_up"]]
    assert hidden == [{"kind": "card", "hand": "dealer", "face_up": False}]  # identity hidden
    rnd = play(G, shoe, [BET, BET], ["stand", "stand"])  # dealer 13 draws K: 23
    assert rnd.events[event_index(rnd, "reveal")].card == rnd.dealer[1]
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET)])


def test_play_order_right_hand_its_split_hands_then_left_hand_then_dealer() -> None:
    shoe = stack(G, [["8S", "8H"], ["9D", "9C"]], ["7C", "TD"], ["TS", "TH"])
    rnd = deal(G, shoe, [BET, BET])
    turns = []
    for step in ("split", "stand", "stand", "stand"):
        turns.append(rnd.turn.hand)
        rnd.act(as_action(step))
    assert turns == [0, 0, 2, 1] and rnd.phase == "finished"  # hand 2 came from hand 0's split
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET),
                         ("split", 2, BET, 2 * BET)])  # 18, 18, 18 against 17


@pytest.mark.parametrize(("hole", "ins_returned", "hand_returned"), [
    ("KD", 1500, 0),  # dealer blackjack: the insurance pays 2:1, the hand loses
    ("7D", 0, 2 * BET),  # no blackjack: the insurance loses, 19 beats soft 18
])
def test_insurance_per_hand_half_the_bet_pays_2_to_1(
    hole: str, ins_returned: int, hand_returned: int
) -> None:
    shoe = stack(G, [["TS", "9S"]], ["AD", hole])
    rnd = deal(G, shoe, [BET])
    assert rnd.turn == Turn("insurance", 0, "insurance")
    assert legal_action(rnd, "insurance") == (0, 500, False, (0, 500))
    assert "must be 0 or 500" in assert_refused(rnd, insure(300))  # no partial insurance
    assert "must decide insurance" in assert_refused(rnd, "hit")
    rnd = play(G, shoe, [BET], [insure(500)], finished=hole == "KD")
    if hole != "KD":
        rnd.act(as_action("stand"))
    assert_settled(rnd, [("main", 0, BET, hand_returned), ("insurance", 0, 500, ins_returned)])


@pytest.mark.parametrize(("accept", "hole", "returned", "outcome"), [
    (True, "KD", 2 * BET, "even_money"),  # paid 1:1 at once: the dealer's blackjack is moot
    (True, "7D", 2 * BET, "even_money"),
    (False, "KD", BET, "push"),  # declined: blackjack against blackjack pushes
    (False, "7D", 2500, "win"),  # declined and no dealer blackjack: 3:2
])
def test_blackjack_facing_an_ace_is_offered_even_money_instead_of_insurance(
    accept: bool, hole: str, returned: int, outcome: str
) -> None:
    shoe = stack(G, [["AS", "KS"]], ["AD", hole])
    rnd = deal(G, shoe, [BET])
    assert rnd.turn == Turn("insurance", 0, "even_money") and legal(rnd) == ["even_money"]
    assert "must decide even_money" in assert_refused(rnd, insure(500))
    assert "accept" in assert_refused(rnd, "even_money")  # a decision needs yes or no
    rnd = play(G, shoe, [BET], [even_money(accept)])
    assert rnd.wagers[0].outcome == outcome
    assert_settled(rnd, [("main", 0, BET, returned)])


def test_insurance_and_even_money_are_decided_hand_by_hand() -> None:
    shoe = stack(G, [["AS", "KS"], ["TH", "9H"]], ["AD", "6C"])
    rnd = deal(G, shoe, [BET, BET])
    assert rnd.turn == Turn("insurance", 0, "even_money")
    rnd.act(even_money(False))
    assert rnd.turn == Turn("insurance", 1, "insurance")
    rnd.act(insure(500))
    assert rnd.turn == Turn("play", 1, "play")  # the blackjack needs no play
    rnd.act(as_action("stand"))  # 19 against soft 17 (S17)
    assert rnd.position == len(shoe)
    assert_settled(rnd, [("main", 0, BET, 2500), ("main", 1, BET, 2 * BET),
                         ("insurance", 1, 500, 0)])


def test_dealer_blackjack_under_a_ten_every_hand_loses_except_blackjack_which_pushes() -> None:
    rnd = play(G, stack(G, [["TS", "9S"], ["AH", "KH"]], ["KD", "AC"]), [BET, BET])
    assert rnd.events[event_index(rnd, "peek")].blackjack
    assert "finished" in assert_refused(rnd, double())  # peeked before any double or split
    assert_settled(rnd, [("main", 0, BET, 0), ("main", 1, BET, BET)])


@pytest.mark.parametrize(("dealer", "peeks"), [
    (["KD", "7C"], True), (["AD", "6C"], True), (["9D", "8C"], False), (["5D", "TC", "2C"], False),
])
def test_dealer_peeks_only_with_an_ace_or_ten_value_up_card(dealer: list[str], peeks: bool) -> None:
    shoe = stack(G, [["TS", "9S"], ["AH", "KH"]], dealer)
    decisions: list[Step] = [insure(0), even_money(False)] if dealer[0] == "AD" else []
    script = [*decisions, "stand"]
    rnd = play(G, shoe, [BET, BET], script)
    assert [e.blackjack for e in rnd.events if e.kind == "peek"] == ([False] if peeks else [])
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2500)])  # 19 vs 17, bj


def test_double_on_any_two_cards_also_soft() -> None:
    shoe = stack(G, [["TS", "6H"], ["AS", "8S"]], ["9D", "8C"], ["5C", "2C"])
    rnd = play(G, shoe, [BET, BET], [double(), double()])  # hard 16 + 5, soft 19 + 2
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET),
                         ("double", 0, BET, 2 * BET), ("double", 1, BET, 2 * BET)])


def test_double_only_on_the_first_two_cards() -> None:
    rnd = play(G, stack(G, [["5S", "3H"]], ["9D", "8C"], ["2C"]), [BET], ["hit"],
               finished=False)
    assert "double" not in legal(rnd)
    assert "first two cards" in assert_refused(rnd, double())


def test_double_after_split_but_not_on_split_aces() -> None:
    shoe = stack(G, [["8S", "8H"]], ["9D", "8C"], ["3C", "KD", "2D", "9S"])
    rnd = play(G, shoe, [BET], ["split", double(), double()])  # 8+3+K = 21, 8+2+9 = 19
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 2 * BET),
                         ("double", 0, BET, 2 * BET), ("double", 1, BET, 2 * BET)])
    aces = play(G, stack(G, [["AS", "AH"], ["TH", "5H"]], ["9D", "8C"], ["5D", "6D"]),
                [BET, BET], ["split"], finished=False)
    assert aces.turn.hand == 1  # A+5 and A+6 were given no decision at all
    assert [w.kind for w in aces.wagers] == ["main", "main", "split"]


def test_split_once_per_hand_no_resplit() -> None:
    shoe = stack(G, [["8S", "8H"], ["9D", "9C"]], ["TD", "7C"], ["8D", "3S", "9S", "TS"])
    rnd = play(G, shoe, [BET, BET], ["split"], finished=False)
    assert card_codes(rnd.hands[0].cards) == ["8S", "8D"]
    assert "split" not in legal(rnd)  # 8+8 again
    assert "at most 2 hands" in assert_refused(rnd, "split")
    rnd = play(G, shoe, [BET, BET], ["split", "stand", "stand", "split", "stand", "stand"])
    # 16, 11, 18, 19 against 17; hand 2 came from hand 0, hand 3 from hand 1
    assert_settled(rnd, [("main", 0, BET, 0), ("main", 1, BET, 2 * BET),
                         ("split", 2, BET, 0), ("split", 3, BET, 2 * BET)])


def test_dealer_stands_on_soft_17() -> None:
    rnd = play(G, stack(G, [["TS", "8S"]], ["6D", "AC"]), [BET], ["stand"])
    assert rnd.summary()["dealer"] == {"cards": ["6D", "AC"], "total": 17, "soft": True,
                                       "blackjack": False}
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])


def test_dealer_draws_to_16() -> None:
    rnd = play(G, stack(G, [["TS", "8S"]], ["6D", "TC", "3H"]), [BET], ["stand"])
    assert_settled(rnd, [("main", 0, BET, 0)])  # 18 against 19


def test_blackjack_pays_3_to_2_win_1_to_1_equal_totals_push() -> None:
    shoe = stack(G, [["AS", "KS"], ["TH", "7H"]], ["9D", "8D"])
    rnd = play(G, shoe, [502, BET], ["stand"])
    assert_settled(rnd, [("main", 0, 502, 1255), ("main", 1, BET, BET)])
    rnd = play(G, stack(G, [["TS", "9S"]], ["9D", "8D"]), [BET], ["stand"])
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])


@pytest.mark.parametrize(("level", "bet", "ok"), [
    (None, 400, False), (None, 500, True), (None, 50_000, True), (None, 50_002, False),
    ("medium", 500, True), ("low", 100, True), ("low", 10_000, True), ("low", 10_002, False),
    ("high", 2_400, False), ("high", 2_500, True), ("high", 250_000, True),
    ("high", 250_002, False),
])
def test_initial_bet_limits_by_stake_level(level: str | None, bet: int, ok: bool) -> None:
    shoe = stack(G, [["TS", "9S"]], ["9D", "8D"])
    if ok:
        assert_settled(play(G, shoe, [bet], ["stand"], level=level), [("main", 0, bet, 2 * bet)])
    else:
        with pytest.raises(BetError) as info:
            deal(G, shoe, [bet], level=level)
        assert info.value.field == "hands[0].bet" and "outside the limits" in str(info.value)


def test_unknown_stake_level_is_refused() -> None:
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 6, [BET], level="vip")
    assert info.value.field == "level"


def test_split_double_and_insurance_may_exceed_the_maximum() -> None:
    top = 50_000
    shoe = stack(G, [["8S", "8H"]], ["AD", "7C"], ["3C", "TC", "KD"])
    rnd = play(G, shoe, [top], [insure(top // 2), "split", double(top), "stand"])
    # insurance lost; 8+3+T = 21 beats soft 18; 8+K = 18 pushes
    assert_settled(rnd, [("main", 0, top, 2 * top), ("insurance", 0, top // 2, 0),
                         ("split", 1, top, top), ("double", 0, top, 2 * top)])


def test_snap_side_bet_only_when_both_hands_carry_a_bet() -> None:
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 6, [BET], {"snap": SNAP})
    assert info.value.field == "side_bets.snap" and "every hand" in str(info.value)
    with pytest.raises(BetError) as info:
        deal(G, ["TS"] * 8, [HandBet(BET, {"snap": SNAP}), HandBet(BET)])
    assert info.value.field == "hands[0].side_bets.snap"


# (right hand, left hand, dealer's cards in order, the paying line, returned per 500 staked,
#  main returns): Snap judges the 5 cards right-1, right-2, left-1, left-2, dealer-up
SnapCase = tuple[list[str], list[str], list[str], str | None, int, tuple[int, int]]
SNAP_CASES: list[SnapCase] = [
    (["7H", "7H"], ["4C", "4C"], ["9S", "8D"], "matching_pair_both_hands", 500_000, (0, 0)),
    (["7H", "7H"], ["4C", "5C"], ["9S", "8D"], "pair_in_any_hand", 12_500, (0, 0)),
    (["TS", "9D"], ["QD", "QD"], ["9S", "8D"], "pair_in_any_hand", 12_500, (2000, 2000)),
    (["7H", "9S"], ["4C", "5C"], ["7H", "TD"], "matching_pair_anywhere", 2_500, (0, 0)),
    (["TS", "9D"], ["TS", "8C"], ["9S", "8D"], "matching_pair_anywhere", 2_500, (2000, 2000)),
    (["7H", "7D"], ["4C", "5C"], ["9S", "8D"], None, 0, (0, 0)),  # same rank, other suit
    # qualifies for all three lines, or for two: only the highest pays
    (["7H", "7H"], ["4C", "4C"], ["7H", "TD"], "matching_pair_both_hands", 500_000, (0, 0)),
    (["7H", "7H"], ["4C", "5C"], ["4C", "KD", "3D"], "pair_in_any_hand", 12_500, (0, 0)),
]


@pytest.mark.parametrize("case", SNAP_CASES)
def test_snap_pays_only_the_highest_line_1000_25_5_for_1(case: SnapCase) -> None:
    right, left, dealer, line, returned, mains = case
    rnd = play(G, stack(G, [right, left], dealer), [BET, BET], ["stand", "stand"],
               {"snap": SNAP})
    assert rnd.wagers[2].line == line
    assert_settled(rnd, [("main", 0, BET, mains[0]), ("main", 1, BET, mains[1]),
                         ("snap", None, SNAP, returned)])


@pytest.mark.parametrize(("level", "stake", "ok"), [
    (None, 400, False), (None, 500, True), (None, 50_000, True), (None, 50_001, False),
    ("low", 100, True), ("high", 2_400, False),
])
def test_snap_side_bet_within_the_stake_level_limits(level: str | None, stake: int,
                                                      ok: bool) -> None:
    # the seed gives no Snap limits: the engine applies the level's bet limits (engine choice)
    shoe = stack(G, [["TS", "9D"], ["TH", "8C"]], ["9S", "8D"])
    bet = 2_500 if level == "high" else BET
    if ok:
        rnd = play(G, shoe, [bet, bet], ["stand", "stand"], {"snap": stake}, level=level)
        assert_settled(rnd, [("main", 0, bet, 2 * bet), ("main", 1, bet, 2 * bet),
                             ("snap", None, stake, 0)])
    else:
        with pytest.raises(BetError) as info:
            deal(G, shoe, [bet, bet], {"snap": stake}, level=level)
        assert info.value.field == "side_bets.snap"


def test_opening_stake_including_the_snap_bet_must_be_covered_by_the_balance() -> None:
    shoe = stack(G, [["TS", "9D"], ["TH", "8C"]], ["9S", "8D"])
    opening = 2 * BET + SNAP
    with pytest.raises(BetError) as info:
        deal(G, shoe, [BET, BET], {"snap": SNAP}, balance=opening - 1)
    assert info.value.field == "hands" and "balance" in str(info.value)
    rnd = play(G, shoe, [BET, BET], ["stand", "stand"], {"snap": SNAP}, balance=opening)
    assert rnd.available == opening - rnd.total_staked + rnd.total_returned == 4 * BET


def test_snap_is_judged_before_the_hands_are_played() -> None:
    rnd = deal(G, stack(G, [["7H", "7H"], ["4C", "5C"]], ["9S", "8D"]), [BET, BET],
               {"snap": SNAP})
    assert rnd.phase == "play" and rnd.wagers[2].returned == 12_500
    assert event_index(rnd, "settle", wager=2) == len(rnd.events) - 1  # right after the deal


def test_split_and_double_do_not_touch_the_snap_bet() -> None:
    shoe = stack(G, [["8H", "8H"], ["TS", "7D"]], ["5C", "TD", "7S"], ["3C", "9S", "2D", "KC"])
    rnd = play(G, shoe, [BET, BET], ["split", double(), double(), "stand"], {"snap": SNAP})
    # 8+3+9 = 20, 8+2+K = 20, 17; the dealer's 5+T+7 busts
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET),
                         ("snap", None, SNAP, 12_500), ("split", 2, BET, 2 * BET),
                         ("double", 0, BET, 2 * BET), ("double", 2, BET, 2 * BET)])


def test_published_returns_are_carried_by_the_rules() -> None:
    assert game_rules(G).published_return == Fraction(998, 1000)


def test_round_awaiting_input_survives_and_resumes_from_bytes() -> None:
    shoe = stack(G, [["TS", "6H"], ["9H", "9C"]], ["AD", "7C"], ["4C", "TD", "8S"])
    script: list[Step] = [insure(0), insure(500), "hit", "stand", "split", "stand", "stand"]
    whole = play(G, shoe, [BET, BET], script)
    for cut in range(len(script)):
        rnd = play(G, shoe, [BET, BET], script[:cut], finished=False)
        resumed = Round.from_bytes(rnd.to_bytes(), rnd.shoe)
        assert resumed.summary() == rnd.summary()
        for step in script[cut:]:
            resumed.act(as_action(step))
        assert resumed.summary() == whole.summary()
    # 10+6+4 = 20; 9+T = 19; 9+8 = 17; soft 18 stands
    assert_settled(whole, [("main", 0, BET, 2 * BET), ("main", 1, BET, 2 * BET),
                           ("insurance", 1, 500, 0), ("split", 2, BET, 0)])


def test_round_needing_no_input_completes_by_itself() -> None:
    rnd = play(G, stack(G, [["AS", "KS"], ["AH", "QH"]], ["9D", "8D"]), [BET, BET])
    assert_settled(rnd, [("main", 0, BET, 2500), ("main", 1, BET, 2500)])
