"""Full rounds of every game through the service, stacked, checked to the minor unit: the
player's balance after each step, the ledger entries, the signed record and the shoe's reveal."""

from __future__ import annotations

from support.engine_helpers import stack
from support.service_helpers import EUR, OP, Harness, ledger_invariants

from game_math.round import Action, HandBet
from rng_service.crypto.signing import decode_envelope, verify_envelope
from rng_service.service.ports import Mode


def entries(h: Harness, round_id: str) -> list[tuple[str, int, int]]:
    rows = h.sql("SELECT kind, wager_id, amount FROM ledger_entries WHERE round_id = ? "
                 "ORDER BY entry_id", round_id)
    return [(k, w, a) for k, w, a in rows]


def record(h: Harness, round_id: str) -> dict:
    (envelope,), = h.sql("SELECT envelope FROM records WHERE round_id = ?", round_id)
    env = decode_envelope(envelope, require_canonical=True)
    verify_envelope(env, {h.signer.key_id: h.signer.public_key})
    return env["payload"]


def test_snap_round_hides_the_hole_card_until_turned(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("snap", [["TS", "9H"]], ["7D", "TC"]))
    view = h.rounds.start_round(OP, "ann", "snap", mode=Mode.REAL, currency=EUR,
                                hands=[HandBet(1000)], request_id=h.rid())
    assert (view.status, view.version, view.balance_after) == ("awaiting", 1, 9_000)
    assert view.dealer.cards == ("7D",) and view.dealer.hidden_cards == 1
    hole = [e for e in view.events if e.dealer and e.face_up is False]
    assert len(hole) == 1 and hole[0].card is None
    assert [a.action for a in view.legal_actions] == ["hit", "stand", "double"]
    assert view.legal_actions[2].stakes == (1000,)

    done = h.act(view, "stand")
    assert (done.status, done.version, done.balance_after) == ("finished", 2, 11_000)
    assert done.dealer.cards == ("7D", "TC") and done.dealer.hidden_cards == 0
    assert [(w.staked, w.returned, w.outcome) for w in done.wagers] == [(1000, 2000, "win")]
    assert entries(h, view.round_id) == [("stake", 0, 1000), ("return", 0, 2000)]
    assert h.balance("ann") == 11_000
    payload = record(h, view.round_id)
    assert payload["cards"] == ["TS", "7D", "9H", "TC"]
    assert (payload["total_staked"], payload["total_returned"]) == (1000, 2000)
    # a per-round shoe is finished with its round and revealed in the same transaction
    (status,), = h.sql("SELECT status FROM shoes WHERE shoe_id = ?", done.shoe.shoe_id)
    assert status == "revealed"
    assert h.sql("SELECT count(*) FROM reveals WHERE shoe_id = ?", done.shoe.shoe_id) == [(1,)]
    ledger_invariants(h)


def test_double_deck_split_then_double(harness: Harness) -> None:
    h = harness
    h.deposit("bob", 10_000)
    # 8-8 vs 6: split; first hand 8+3 doubles for 1000 and draws T (21); second 8+9 stands;
    # the dealer's 6+T draws T and busts
    h.shoes.stack(stack("double-deck", [["8S", "8H"]], ["6D", "TC", "TH"],
                        ["3C", "TD", "9S"]))
    view = h.rounds.start_round(OP, "bob", "double-deck", mode="REAL", currency=EUR,
                                hands=[HandBet(1000)], request_id=h.rid())
    view = h.act(view, "split")
    assert view.balance_after == 8_000
    double = next(a for a in view.legal_actions if a.action == "double")
    assert (double.min_stake, double.max_stake, double.any_amount) == (1, 1000, True)
    view = h.act(view, Action("double", 1000))
    assert view.balance_after == 7_000
    view = h.act(view, "stand")
    assert view.status == "finished"
    assert [(w.kind, w.staked, w.returned) for w in view.wagers] == [
        ("main", 1000, 2000), ("split", 1000, 2000), ("double", 1000, 2000)]
    assert view.balance_after == h.balance("bob") == 13_000
    assert sorted(entries(h, view.round_id)) == sorted([
        ("stake", 0, 1000), ("stake", 1, 1000), ("stake", 2, 1000),
        ("return", 0, 2000), ("return", 1, 2000), ("return", 2, 2000)])
    ledger_invariants(h)


def test_multi_hand_side_bets_are_credited_at_round_end(harness: Harness) -> None:
    h = harness
    h.deposit("cat", 10_000)
    # three hands: 8S 8S (a perfect pair, side bet 100 pays 25:1) stands on 16, TH 9H stands on
    # 19, 5C 6D doubles and draws TC; the dealer (no hole card) draws TD after the players: 17
    h.shoes.stack(stack("multi-hand", [["8S", "8S"], ["TH", "9H"], ["5C", "6D"]],
                        ["7D", "TD"], ["TC"]))
    hands = [HandBet(1000, {"perfect_pairs": 100}), HandBet(1000), HandBet(1000)]
    view = h.rounds.start_round(OP, "cat", "multi-hand", level="1-500", mode=Mode.REAL,
                                currency=EUR, hands=hands, request_id=h.rid())
    # the side bet is settled (2600) but held back until the round ends, in the ledger too
    assert view.wagers[3].returned == 2600
    assert view.balance_after == 10_000 - 3100
    assert ("return", 3, 2600) not in entries(h, view.round_id)
    view = h.act(view, "stand")
    view = h.act(view, "stand")
    assert view.turn_hand == 2
    view = h.act(view, Action("double", 1000))
    assert view.status == "finished" and view.dealer.cards == ("7D", "TD")
    assert [(w.kind, w.staked, w.returned) for w in view.wagers] == [
        ("main", 1000, 0), ("main", 1000, 2000), ("main", 1000, 2000),
        ("perfect_pairs", 100, 2600), ("double", 1000, 2000)]
    assert view.balance_after == h.balance("cat") == 10_000 - 4100 + 8600
    assert record(h, view.round_id)["total_returned"] == 8600
    ledger_invariants(h)


def test_double_exposure_shoe_spans_rounds_and_is_revealed_when_finished(
        harness: Harness) -> None:
    h = harness
    h.deposit("dan", 1_000_000)
    h.shoes.stack(stack("double-exposure", [["TS", "9H"]], ["7D", "TC"]))
    first = h.rounds.start_round(OP, "dan", "double-exposure", mode=Mode.REAL, currency=EUR,
                                 hands=[HandBet(1000)], request_id=h.rid())
    assert first.dealer.cards == ("7D", "TC")  # both exposed
    first = h.act(first, "stand")
    assert first.balance_after == 1_001_000
    shoe_id, cut = first.shoe.shoe_id, 156
    next_card, rounds = first.shoe.next_card, [first]
    while True:  # the rest of the shoe: a stand-on-12 player until a new shoe is used
        view = h.rounds.start_round(OP, "dan", "double-exposure", mode=Mode.REAL, currency=EUR,
                                    hands=[HandBet(100)], request_id=h.rid())
        if view.shoe.shoe_id != shoe_id:
            break
        assert view.shoe.first_card == next_card < cut  # no gap, no overlap, before the cut
        while view.status == "awaiting":
            total = view.hands[[x.hand_id for x in view.hands].index(view.turn_hand)].total
            view = h.act(view, "hit" if total < 12 else "stand")
        next_card = view.shoe.next_card
        rounds.append(view)
    assert next_card >= cut and len(rounds) > 10
    assert view.shoe.first_card == 0
    (status,), = h.sql("SELECT status FROM shoes WHERE shoe_id = ?", shoe_id)
    assert status == "revealed"
    (envelope,), = h.sql("SELECT envelope FROM reveals WHERE shoe_id = ?", shoe_id)
    reveal = decode_envelope(envelope)["payload"]
    assert reveal["commitment"] == first.shoe.commitment
    ledger_invariants(h)
