"""`fairshoe play`'s pure parts without a server: what the screen shows for a round view, what a
typed line means, and the shoe verification (tests/clients/test_play_cli.py drives the whole
client against a real server)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support.play_views import card, info, snap_view, text_of

from game_math.cards import card_codes
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.cli import play_render as render
from rng_service.cli.play_session import InputError, parse_action, parse_amount, parse_bets
from rng_service.cli.play_verify import dealt_cards, verify_shoe
from rng_service.records.schema import REVEAL_SCHEMA
from rng_service.rng.shoe import seed_commitment, shoe_cards

SEED = bytes(range(48))


# ----- rendering -------------------------------------------------------------------------------


def test_money_is_two_decimals_with_thousands() -> None:
    assert [render.money(m) for m in (0, 5, 1050, 123_456_789, -250)] == [
        "0.00", "0.05", "10.50", "1,234,567.89", "-2.50"]


def test_money_has_the_currencys_decimals() -> None:
    assert [render.money(m, 0) for m in (0, 5, 1050, -250)] == ["0", "5", "1,050", "-250"]
    assert render.money(1050, 3) == "1.050"


def test_a_round_on_screen() -> None:
    shown = text_of(render.round_screen(snap_view(), info("snap"), "EUR"))
    assert "Double Deck Blackjack Snap · level medium · DEMO · round r1" in shown
    assert f"Shoe s1 (2 decks), commitment {'c' * 64}" in shown
    assert "Dealer  7♦ ??" in shown
    assert "▶  Right   10♠ 9♥  19     10.00" in shown
    assert "BALANCE 990.00 EUR   BET 10.00   WIN 0.00" in shown
    assert "wager" not in shown  # the wagers table comes once the round is over


def test_buttons_name_the_stakes_and_alerts() -> None:
    view = snap_view()
    assert text_of(render.buttons_text(render.buttons(view))).strip() == (
        "[HIT] (alert: hitting a hard 17 to 20) [STAND] [DOUBLE] 10.00")
    insurance = snap_view(
        turn=rt.Turn(hand_id=0, decision=rt.DECISION_INSURANCE),
        legal_actions=[rt.LegalAction(action=rt.ACTION_KIND_INSURANCE, max_stake_minor=500,
                                      stakes_minor=[0, 500])])
    assert [b.label for b in render.buttons(insurance)] == ["YES", "NO"]
    assert render.buttons(insurance)[0].note == "insure 5.00"
    assert render.decision_prompt(insurance, info("snap")) == "Insurance for Right?"
    two = snap_view(turn=rt.Turn(hand_id=0, decision=rt.DECISION_EVEN_MONEY))
    two.hands.append(rt.HandView(hand_id=1, seat=1, bet_minor=1000))
    assert [b.label for b in render.buttons(two)] == ["YES", "NO", "YES TO ALL", "NO TO ALL"]
    done = snap_view(status=rt.ROUND_STATUS_FINISHED)
    assert render.buttons(done) == []


def test_split_hands_are_named_by_spot_and_order() -> None:
    view = snap_view()
    del view.hands[:]
    view.hands.extend([rt.HandView(hand_id=0, seat=0), rt.HandView(hand_id=1, seat=1),
                       rt.HandView(hand_id=2, seat=0, from_split=True)])
    assert render.hand_names(view, info("snap")) == {
        0: "Right (split 1)", 1: "Left", 2: "Right (split 2)"}
    assert render.hand_names(view, info("double-deck"))[1] == "Hand 2"


def test_table_info_from_the_rules() -> None:
    multi = info("multi-hand")
    assert multi.default_level == "1-500" and multi.hand_counts == (1, 3, 5)
    assert multi.level("").min_bet == 100 and multi.side_bets == {
        "perfect_pairs": "hand", "twenty_one_plus_three": "hand"}
    assert info("double-exposure").cut_card_shoe and not multi.cut_card_shoe
    assert info("snap").side_bets == {"snap": "round"}


# ----- what the player types -------------------------------------------------------------------


def test_amounts_are_currency_units() -> None:
    assert [parse_amount(t) for t in ("10", "2.5", "2.50", "0.01")] == [1000, 250, 250, 1]
    for bad in ("", "1.001", "-1", "ten", "1e3"):
        with pytest.raises(InputError):
            parse_amount(bad)


def test_amounts_take_the_currencys_decimals() -> None:
    assert [parse_amount(t, 0) for t in ("10", "2500")] == [10, 2500]
    with pytest.raises(InputError, match=r"'2.50' is not an amount \(e.g. 10\)"):
        parse_amount("2.50", 0)
    assert [parse_amount(t, 3) for t in ("1", "1.5", "0.001")] == [1000, 1500, 1]
    with pytest.raises(InputError, match=r"e\.g\. 10 or 2\.500"):
        parse_amount("0.0001", 3)
    hands, _ = parse_bets("500 1000", replace(info("snap"), places=0))
    assert [h.bet_minor for h in hands] == [500, 1000]
    with pytest.raises(InputError, match=r"'5\.50' is not an amount"):
        parse_bets("5.50", replace(info("snap"), places=0))


def test_bets_with_side_bets() -> None:
    hands, side = parse_bets("10,pp=1,21+3=2 10 5", info("multi-hand"))
    assert [h.bet_minor for h in hands] == [1000, 1000, 500]
    assert [(s.name, s.stake_minor) for s in hands[0].side_bets] == [
        ("perfect_pairs", 100), ("twenty_one_plus_three", 200)]
    assert side == []
    hands, side = parse_bets("10 10 snap=5", info("snap"))
    assert [(s.name, s.stake_minor) for s in side] == [("snap", 500)]
    with pytest.raises(InputError, match="no side bet 'lucky'"):
        parse_bets("10,lucky=1", info("multi-hand"))
    with pytest.raises(InputError, match="no bet on any hand"):
        parse_bets("snap=5", info("snap"))


def test_lines_become_actions() -> None:
    view = snap_view()
    assert parse_action("hit", view).action.WhichOneof("kind") == "hit"
    assert parse_action("S", view).action.WhichOneof("kind") == "stand"
    assert not parse_action("double", view).action.double.HasField("amount_minor")
    assert parse_action("double 2.50", view).action.double.amount_minor == 250
    with pytest.raises(InputError, match="not a button now: press HIT, STAND, DOUBLE"):
        parse_action("yes", view)
    insurance = snap_view(turn=rt.Turn(hand_id=0, decision=rt.DECISION_INSURANCE))
    taken = parse_action("yes", insurance)
    assert not taken.action.insurance.HasField("amount_minor") and not taken.to_all
    assert parse_action("yes 2", insurance).action.insurance.amount_minor == 200
    assert parse_action("no to all", insurance).to_all
    assert parse_action("no", insurance).action.insurance.amount_minor == 0
    even = snap_view(turn=rt.Turn(hand_id=0, decision=rt.DECISION_EVEN_MONEY))
    assert parse_action("even money", even).action.even_money.accept
    assert parse_action("yes to all", even).to_all
    assert not parse_action("n", even).action.even_money.accept


# ----- verification ----------------------------------------------------------------------------


def dealt_view(codes: list[str], *, start: int = 0, commitment: str | None = None) -> Any:
    """A snap round that dealt ``codes`` from ``start``: the 4th card as a hole card, turned at
    the end."""
    events = [rt.Event(kind=rt.EVENT_KIND_CARD, card=card(c, hidden=(i == 3)))
              for i, c in enumerate(codes)]
    events.append(rt.Event(kind=rt.EVENT_KIND_REVEAL, dealer=True, card=card(codes[3])))
    return rt.RoundView(
        round_id="r1", cards_used=rt.CardRange(start=start, end=start + len(codes)),
        events=events, shoe=rt.ShoeRef(shoe_id="s1", decks=2,
                                       commitment=commitment or seed_commitment(SEED)))


def reveal(**changes: Any) -> dict[str, Any]:
    payload = {"schema": REVEAL_SCHEMA, "shoe_id": "s1", "commitment": seed_commitment(SEED),
               "seed": SEED.hex(), "client_seed": "", "decks": 2}
    payload.update(changes)
    return payload


SHOE = card_codes(shoe_cards(SEED, b"", 2))


def test_dealt_cards_put_the_hole_card_in_its_place() -> None:
    assert dealt_cards(dealt_view(SHOE[:5])) == SHOE[:5]


def test_a_shoe_dealt_from_its_seed_is_verified() -> None:
    check = verify_shoe(reveal(), [dealt_view(SHOE[:5]), dealt_view(SHOE[5:9], start=5)])
    assert check.ok, check.message
    assert check.line().startswith(f"VERIFIED shoe s1: the revealed seed matches commitment "
                                   f"{seed_commitment(SEED)[:16]}…; 9 cards of 2 round(s)")


@pytest.mark.parametrize("payload, views, says", [
    (reveal(seed=bytes(48).hex()), None, "does not hash to the commitment"),
    (reveal(commitment="0" * 64), None, "the reveal names commitment 0000"),
    (reveal(client_seed="ab"), None, "client seed is not the one the round showed"),
    (reveal(decks=6), None, "the reveal says 6 decks"),
    (reveal(shoe_id="s2"), None, "the reveal is of shoe 's2'"),
    (reveal(seed="zz"), None, "the revealed seed is unusable"),
    (reveal(), [dealt_view([*SHOE[:2], SHOE[3], SHOE[2], SHOE[4]])],
     f"round r1 dealt {SHOE[3]} at shoe position 2; the shoe recomputed from the revealed "
     f"seed has {SHOE[2]} there"),
])
def test_any_difference_is_a_mismatch(payload: dict[str, Any], views: list[Any] | None,
                                      says: str) -> None:
    check = verify_shoe(payload, views or [dealt_view(SHOE[:5])])
    assert not check.ok
    assert check.line().startswith("MISMATCH shoe s1: ") and says in check.message
