"""The rule documents' "Common to all four" (docs/games.md): one test per rule line, run in
every game on a stacked shoe.

Bets are 1,000 minor units (10 currency units), valid in every game; expected returns are in minor
units and include the stake.
"""

from __future__ import annotations

import pytest
from support.engine_helpers import (
    assert_refused,
    assert_settled,
    cards_dealt,
    deal,
    double,
    event_index,
    legal,
    legal_action,
    play,
    stack,
)

from game_math.cards import parse_card
from game_math.errors import BetError
from game_math.round import DEALER, Action, Round
from game_math.rules import GAME_IDS

BET = 1000
#: more than one hand: how many to play (multi-hand plays 1, 3 or 5 hands)
MANY = {"snap": 2, "double-deck": 2, "double-exposure": 2, "multi-hand": 3}
#: a winning blackjack on BET: 3:2, except double-exposure's 1:1
BLACKJACK_RETURN = {"snap": 2500, "double-deck": 2500, "double-exposure": 2000,
                    "multi-hand": 2500}


@pytest.mark.parametrize("game", GAME_IDS)
def test_ace_counts_one_or_eleven_faces_ten_soft_while_ace_counts_eleven(game: str) -> None:
    shoe = stack(game, [["AS", "6H"]], ["JC", "7D"], ["KD", "4S"])
    rnd = play(game, shoe, [BET], finished=False)
    hand = rnd.hands[0]
    assert (hand.total, hand.soft) == (17, True)  # A+6: the ace counts 11
    rnd = play(game, shoe, [BET], ["hit"], finished=False)
    assert (rnd.hands[0].total, rnd.hands[0].soft) == (17, False)  # A+6+K: the ace counts 1
    rnd = play(game, shoe, [BET], ["hit", "hit"])  # +4: 21 stands by itself
    assert rnd.summary()["dealer"]["total"] == 17  # the jack counts 10
    assert_settled(rnd, [("main", 0, BET, 2 * BET)])


@pytest.mark.parametrize("game", GAME_IDS)
def test_blackjack_is_ace_and_ten_value_as_first_two_cards(game: str) -> None:
    # multi-hand's dealer takes no second card: the only wager is a blackjack already paid
    dealer = ["9C"] if game == "multi-hand" else ["9C", "8D"]
    rnd = play(game, stack(game, [["AS", "KH"]], dealer), [BET])
    assert rnd.hands[0].natural and rnd.hands[0].outcome == "blackjack"
    assert_settled(rnd, [("main", 0, BET, BLACKJACK_RETURN[game])])


@pytest.mark.parametrize("game", GAME_IDS)
def test_two_card_21_after_split_is_an_ordinary_21(game: str) -> None:
    shoe = stack(game, [["KS", "QH"]], ["9C", "8D"], ["AS", "AD"])
    rnd = play(game, shoe, [BET], ["split"])  # both hands reach 21 and stand by themselves
    assert [(h.total, h.natural, h.outcome) for h in rnd.hands] == [(21, False, "win")] * 2
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 2 * BET)])


@pytest.mark.parametrize("game", GAME_IDS)
def test_hand_over_21_busts_and_loses_at_once_whatever_the_dealer_does(game: str) -> None:
    hands = [["TS", "6H"], ["TD", "8D"], ["9S", "9D"]][: MANY[game]]
    shoe = stack(game, hands, ["TC", "6C", "KC"], ["8C"])
    rnd = play(game, shoe, [BET] * len(hands), ["hit"] + ["stand"] * (len(hands) - 1))
    bust_settled = event_index(rnd, "settle", wager=0)
    dealer_busts = event_index(rnd, "card", hand=DEALER, card=parse_card("KC"))
    assert bust_settled < dealer_busts  # settled before the dealer drew, and he busted
    expected = [("main", 0, BET, 0)] + [("main", i, BET, 2 * BET) for i in range(1, len(hands))]
    assert_settled(rnd, expected)


@pytest.mark.parametrize("game", GAME_IDS)
def test_dealer_draws_nothing_when_every_hand_has_bust(game: str) -> None:
    hands = [["TS", "6H"], ["TD", "5D"], ["9S", "4D"]][: MANY[game]]
    # the dealer's 6: multi-hand's dealer never takes a second card, the others stay on 6+T
    dealer = ["6C"] if game == "multi-hand" else ["6C", "TC"]
    draws = ["8C", "KC", "QC"][: len(hands)]
    rnd = play(game, stack(game, hands, dealer, draws), [BET] * len(hands), ["hit"] * len(hands))
    assert len(rnd.dealer) == len(dealer)
    assert_settled(rnd, [("main", i, BET, 0) for i in range(len(hands))])


@pytest.mark.parametrize("game", GAME_IDS)
def test_split_needs_equal_values_and_new_hand_carries_an_equal_bet(game: str) -> None:
    unequal = play(game, stack(game, [["KS", "9H"]], ["9C", "8D"]), [BET], finished=False)
    assert "split" not in legal(unequal)
    assert "equal value" in assert_refused(unequal, "split")

    shoe = stack(game, [["KS", "QH"]], ["9C", "8D"], ["5D", "9H"])
    rnd = play(game, shoe, [BET], finished=False)
    assert legal_action(rnd, "split")[:2] == (BET, BET)
    rnd = play(game, shoe, [BET], ["split", "stand", "stand"])  # K+5 = 15, Q+9 = 19 vs 17
    assert_settled(rnd, [("main", 0, BET, 0), ("split", 1, BET, 2 * BET)])


@pytest.mark.parametrize("game", GAME_IDS)
def test_split_aces_get_exactly_one_card_each(game: str) -> None:
    shoe = stack(game, [["AS", "AH"]], ["TC", "7D"], ["9D", "5C"])
    rnd = play(game, shoe, [BET], ["split"])  # no decision on either ace: the round is over
    assert [len(h.cards) for h in rnd.hands] == [2, 2]
    players = [(who, code) for who, code, _ in cards_dealt(rnd) if who != "dealer"]
    assert players[-2:] == [(0, "9D"), (1, "5C")]  # each ace its card, in turn
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, 0)])  # 20 and 16 vs 17


@pytest.mark.parametrize(("game", "draw", "returned"), [
    (game, draw, returned) for game in GAME_IDS for draw, returned in (("2C", 0), ("9C", 2 * BET))
])
def test_double_stakes_the_original_takes_exactly_one_card_then_stands(
    game: str, draw: str, returned: int
) -> None:
    shoe = stack(game, [["6S", "5H"]], ["TC", "7D"], [draw])
    rnd = play(game, shoe, [BET], finished=False)
    low, high, _, _ = legal_action(rnd, "double")
    assert high == BET and low == (1 if game == "double-deck" else BET)  # less: double-deck only
    rnd = play(game, shoe, [BET], [double()])  # 13 or 20: one card, then the dealer's 17
    assert len(rnd.hands[0].cards) == 3
    assert_settled(rnd, [("main", 0, BET, returned), ("double", 0, BET, returned)])


@pytest.mark.parametrize("game", ["snap", "double-deck"])
def test_stake_whose_payout_is_not_whole_is_refused(game: str) -> None:
    with pytest.raises(BetError) as info:  # 1001 at 3:2 would pay 1501.5
        deal(game, stack(game, [["AS", "KH"]], ["9C", "8D"]), [BET + 1])
    assert info.value.field == "hands[0].bet" and "multiple of 2" in str(info.value)
    rnd = play(game, stack(game, [["AS", "KH"]], ["9C", "8D"]), [BET + 2])
    assert_settled(rnd, [("main", 0, BET + 2, 2505)])


def test_even_payout_games_take_any_whole_stake() -> None:
    rnd = play("double-exposure", stack("double-exposure", [["AS", "KH"]], ["9C", "8D"]), [101])
    assert_settled(rnd, [("main", 0, 101, 202)])


@pytest.mark.parametrize("game", GAME_IDS)
def test_dealing_order(game: str) -> None:
    hands = [["TS", "3S"], ["TH", "5H"], ["TD", "7D"]][: MANY[game]]
    shoe = stack(game, hands, ["9C", "8D"])
    firsts = [(i, h[0], True) for i, h in enumerate(hands)]
    seconds = [(i, h[1], True) for i, h in enumerate(hands)]
    up = [("dealer", "9C", True)]
    second = {"snap": [("dealer", "8D", False)], "double-deck": [("dealer", "8D", False)],
              "double-exposure": [("dealer", "8D", True)], "multi-hand": []}[game]
    dealt = play(game, shoe, [BET] * len(hands), finished=False)
    assert cards_dealt(dealt) == firsts + up + seconds + second

    rnd = play(game, shoe, [BET] * len(hands), ["stand"] * len(hands))
    later = [("dealer", "8D", True)] if game == "multi-hand" else []  # once the player is done
    assert cards_dealt(rnd) == firsts + up + seconds + second + later
    # 13 and 15 lose to 17; multi-hand's third hand, 17, pushes
    expected = [("main", 0, BET, 0), ("main", 1, BET, 0), ("main", 2, BET, BET)]
    assert_settled(rnd, expected[: len(hands)])


@pytest.mark.parametrize("game", GAME_IDS)
def test_split_first_hand_gets_its_second_card_at_once_the_next_when_play_reaches_it(
    game: str,
) -> None:
    shoe = stack(game, [["8S", "8H"]], ["TC", "7D"], ["3C", "KD", "9S"])
    rnd = play(game, shoe, [BET], ["split"], finished=False)
    assert [len(h.cards) for h in rnd.hands] == [2, 1]  # 8+3 in play, the other 8 waits
    assert (rnd.turn.hand, rnd.events[-2].kind) == (0, "split")
    rnd = play(game, shoe, [BET], ["split", "hit"], finished=False)  # 8+3+K = 21 stands
    assert rnd.turn.hand == 1 and [len(h.cards) for h in rnd.hands] == [3, 2]
    rnd = play(game, shoe, [BET], ["split", "hit", "stand"])
    players = [(who, code) for who, code, _ in cards_dealt(rnd) if who != "dealer"]
    assert players[-3:] == [
        (0, "3C"), (0, "KD"), (1, "9S")]
    tie = 0 if game == "double-exposure" else BET  # 17 against 17: ties lose there
    assert_settled(rnd, [("main", 0, BET, 2 * BET), ("split", 1, BET, tie)])


@pytest.mark.parametrize("game", GAME_IDS)
def test_game_fault_short_shoe_at_the_deal_voids_every_stake(game: str) -> None:
    rnd = deal(game, ["TS", "9C", "7H"], [BET] * MANY[game], spare=False)
    assert rnd.phase == "void" and rnd.void_reason
    assert rnd.legal_actions() == [] and rnd.events[-1].kind == "void"
    assert_settled(rnd, [("main", i, BET, BET) for i in range(MANY[game])])
    assert "void" in assert_refused(rnd, "stand")


@pytest.mark.parametrize("game", GAME_IDS)
def test_game_fault_mid_round_voids_every_stake_including_settled_ones(game: str) -> None:
    # hand 0 hits into an empty shoe after hand 1's blackjack was already paid
    hands = [["TS", "6H"], ["AS", "KS"], ["9S", "9D"]][: MANY[game]]
    dealer = ["9C"] if game == "multi-hand" else ["9C", "8D"]
    rnd = deal(game, stack(game, hands, dealer), [BET] * len(hands), spare=False)
    assert rnd.wagers[1].returned == BLACKJACK_RETURN[game]
    rnd.act(Action("hit"))
    assert rnd.phase == "void" and "ran out" in (rnd.void_reason or "")
    assert_settled(rnd, [("main", i, BET, BET) for i in range(len(hands))])
    assert [w.outcome for w in rnd.wagers] == ["void"] * len(hands)


@pytest.mark.parametrize("game", GAME_IDS)
def test_operator_void_returns_every_stake_and_ends_the_round(game: str) -> None:
    rnd = play(game, stack(game, [["TS", "6H"]], ["9C", "8D"]), [BET], finished=False)
    rnd.void("table malfunction")
    assert (rnd.phase, rnd.void_reason, rnd.legal_actions()) == ("void", "table malfunction", [])
    assert_settled(rnd, [("main", 0, BET, BET)])
    assert "void" in assert_refused(rnd, "hit")
    restored = Round.from_bytes(rnd.to_bytes())
    assert restored.summary() == rnd.summary() and restored.phase == "void"


def test_restoring_something_else_than_a_round_is_refused() -> None:
    with pytest.raises(ValueError, match=r"not a fairshoe\.round-state/v1"):
        Round.from_bytes(b'{"format": "other"}')


@pytest.mark.parametrize("game", GAME_IDS)
def test_finished_round_and_unknown_actions_are_refused_unchanged(game: str) -> None:
    rnd = play(game, stack(game, [["TS", "6H"]], ["9C", "8D"]), [BET], finished=False)
    assert "unknown action" in assert_refused(rnd, "surrender")
    assert "even_money" in assert_refused(rnd, "even_money")
    done = play(game, stack(game, [["TS", "6H"]], ["9C", "8D"]), [BET], ["stand"])
    for kind in ("hit", "stand", "split", "double", "insurance"):
        assert "finished" in assert_refused(done, kind)
