"""A live round's answer encoded straight to wire bytes (``round_wire.round_view_wire``, and
``fill_live_round_view``, which parses them into a response) is byte for byte what the
field-by-field build through the protobuf runtime it replaced encodes to (kept here as the
reference), at every transition of rounds of every game (splits, doubles, insurance, even money,
side bets, alerts, void and settled rounds, seamless credits, both modes), played one after
another, interleaved, answered again out of order, read back from their stored JSON, past the
kept tables' bounds, and with the values the service does not write (other time forms, large
and odd numbers) encoded as the runtime encodes them."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from support.engine_helpers import random_play

from rng_service.api import round_messages as rm
from rng_service.api import round_wire
from rng_service.api.calls import mode_enum, set_timestamp
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.service import views
from rng_service.service.ports import utc_stamp

SEEDS = range(240)
CTX = views.RoundContext("r" * 32, "default", "p-1", "", "d" * 64, "1-500", "REAL", "EUR", 3,
                         "2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:06.000000Z")


# ----- the reference: the field-by-field build through the protobuf runtime, as it was ------


def reference_fill(out: rt.RoundView, view: views.RoundView) -> None:
    out.SetInParent()
    out.round_id, out.version, out.game = view.round_id, view.version, view.game
    out.rules_digest, out.level, out.mode = view.rules_digest, view.level, mode_enum(view.mode)
    out.currency, out.status = view.currency, rm._STATUS[view.status]
    dealer = out.dealer
    dealer.SetInParent()
    for code in view.dealer.cards:
        dealer.cards.add(code=code)
    for _ in range(view.dealer.hidden_cards):
        dealer.cards.add(hidden=True)
    dealer.total, dealer.soft = view.dealer.total, view.dealer.soft
    dealer.blackjack = view.dealer.blackjack
    for h in view.hands:
        bet = next((w.staked for w in view.wagers
                    if w.hand == h.hand_id and w.kind in ("main", "split")), 0)
        hand = out.hands.add(hand_id=h.hand_id, seat=h.seat, bet_minor=bet, total=h.total,
                             soft=h.soft, blackjack=h.blackjack, from_split=h.from_split,
                             outcome=rm._OUTCOME[h.outcome])
        for code in h.cards:
            hand.cards.add(code=code)
    for w in view.wagers:
        kind = rm._WAGER.get(w.kind, rt.WAGER_KIND_SIDE_BET)
        out.wagers.add(wager_id=w.wager_id, kind=kind, hand_id=w.hand,
                       side_bet=w.kind if kind == rt.WAGER_KIND_SIDE_BET else "",
                       staked_minor=w.staked, returned_minor=w.returned,
                       outcome=rm._OUTCOME[w.outcome], line=w.line or "")
    for e in view.events:
        _reference_event(out.events, e)
    out.total_staked_minor, out.total_returned_minor = view.total_staked, view.total_returned
    out.balance_after_minor, out.void_reason = view.balance_after, view.void_reason or ""
    shoe = out.shoe
    shoe.SetInParent()
    shoe.shoe_id, shoe.commitment, shoe.decks = (view.shoe.shoe_id, view.shoe.commitment,
                                                 view.shoe.decks)
    shoe.client_seed = bytes.fromhex(view.shoe.client_seed)
    out.cards_used.SetInParent()
    out.cards_used.start, out.cards_used.end = view.shoe.first_card, view.shoe.next_card
    set_timestamp(out.started_at, view.created_at)
    if view.credit is not None:
        out.credit.SetInParent()
        out.credit.transaction_id = view.credit.transaction_id
        out.credit.amount_minor = view.credit.amount
        out.credit.state = rm._CREDIT[view.credit.state]
    if view.status != "awaiting":
        set_timestamp(out.finished_at, view.updated_at)
    elif view.turn_hand is not None and view.decision is not None:
        out.turn.SetInParent()
        out.turn.hand_id, out.turn.decision = view.turn_hand, rm._DECISION[view.decision]
        for la in view.legal_actions:
            out.legal_actions.add(action=rm._ACTION[la.action], hand_id=la.hand,
                                  min_stake_minor=la.min_stake, max_stake_minor=la.max_stake,
                                  any_amount=la.any_amount, stakes_minor=la.stakes,
                                  alert=rm._ALERT[la.alert])


def _reference_event(events: Any, e: views.EventView) -> None:
    event = events.add(kind=rm._EVENT[e.kind], dealer=e.dealer,
                           hand_id=None if e.dealer else e.hand, amount_minor=e.amount,
                           wager_id=e.wager, returned_minor=e.returned)
    if e.kind == "settle":
        event.outcome = rm._OUTCOME[e.outcome]
    if e.kind in ("card", "reveal"):
        if e.card:
            event.card.code = e.card
        else:
            event.card.hidden = True
    if e.action is not None:
        event.action = rm._ACTION[e.action]
    if e.kind == "peek":
        event.dealer_blackjack = e.outcome == "blackjack"
    elif e.kind == "alert":
        event.alert = rm._ALERT[e.note]
    elif e.note:
        event.note = e.note


# ----- rounds ----------------------------------------------------------------------------------


def _rounds(seeds: range) -> list[list[views.RoundView]]:
    """Each seed's round as the views of its transitions; a finished round of every third seed
    on a seamless wallet (its credit), the rest on the ledger."""
    out = []
    for seed in seeds:
        played = []
        for version, rnd in enumerate(random_play(seed), start=1):
            shoe = views.ShoeRefView(f"{seed:032x}", "c" * 64, rnd.rules.decks, "00ff",
                                     rnd.start, rnd.position)
            ctx = dataclasses.replace(CTX, game=rnd.rules.game, round_id=f"{seed:032d}",
                                      version=version, mode="DEMO" if seed % 5 == 0 else "REAL")
            view = views.round_view(ctx, rnd, shoe, balance=10_000 + version)
            if view.status != "awaiting" and seed % 3 == 0:
                view = dataclasses.replace(view, credit=views.CreditView(
                    f"t-{seed}", view.total_returned, "pending" if seed % 2 else "acknowledged"))
            played.append(view)
        out.append(played)
    return out


ROUNDS = _rounds(SEEDS)


def _reference(view: views.RoundView) -> bytes:
    response = round_pb2.ActResponse()
    reference_fill(response.round, view)
    return response.SerializeToString()


def _same(view: views.RoundView) -> None:
    """The encoder's bytes are the reference's message, and so is the response filled from
    them, byte for byte."""
    expected = _reference(view)
    response = round_pb2.ActResponse()
    rm.fill_live_round_view(response.round, view)
    assert response.SerializeToString() == expected, view
    wire = round_wire.round_view_wire(view)
    assert round_pb2.ActResponse(round=rt.RoundView.FromString(wire)).SerializeToString() == (
        expected)
    probe = rt.RoundView()
    reference_fill(probe, view)
    assert wire == probe.SerializeToString(), view


@pytest.fixture(autouse=True)
def _empty_tables() -> Any:
    """Each test starts with nothing kept (the tables are the process's)."""
    for table in round_wire.TABLES:
        table.clear()
    yield


def test_every_case_is_played() -> None:
    """The rounds below reach what the answer renders: every wager kind, every event kind,
    void and settled rounds, credits, several hands, hidden hole cards, both modes."""
    seen: Counter[str] = Counter()
    for played in ROUNDS:
        last = played[-1]
        seen[last.status] += 1
        seen[last.mode] += 1
        seen.update(w.kind if w.kind in ("main", "split", "double", "insurance") else "side"
                    for w in last.wagers)
        seen.update(f"event:{e.kind}" for e in last.events)
        seen["alerted action"] += any(la.alert for v in played for la in v.legal_actions)
        seen["stakes"] += any(la.stakes for v in played for la in v.legal_actions)
        seen["credit"] += last.credit is not None
        seen["hands>1"] += len(last.hands) > 1
        seen["hidden"] += any(v.dealer.hidden_cards for v in played)
        seen["transitions>3"] += len(played) > 3
    for case in ("finished", "void", "REAL", "DEMO", "main", "split", "double", "insurance",
                 "side", "credit", "hands>1", "hidden", "transitions>3", "alerted action",
                 *(f"event:{kind}" for kind in ("card", "reveal", "decision", "split", "peek",
                                                 "settle", "alert", "void"))):
        assert seen[case], (case, seen)


def test_each_round_played_through_is_the_reference_bytes() -> None:
    for played in ROUNDS:
        for view in played:
            _same(view)


def test_interleaved_rounds_are_the_reference_bytes() -> None:
    """Many players at once: each transition goes to a random open round."""
    rng = random.Random(16)
    pending = [list(reversed(played)) for played in ROUNDS]
    while pending:
        i = rng.randrange(len(pending))
        _same(pending[i].pop())
        if not pending[i]:
            pending.pop(i)


def test_answers_out_of_order_and_read_back_are_the_reference_bytes() -> None:
    """A retried request's stored answer (an earlier version, its views read back from JSON:
    equal values, other objects) between live ones: what is kept is found only by what the
    view shows."""
    rng = random.Random(5)
    for played in ROUNDS[:120]:
        order = list(played) + [rng.choice(played) for _ in range(len(played))]
        rng.shuffle(order)
        for view in order:
            _same(view)
            _same(views.from_json(views.RoundView, views.to_json(view)))


def test_past_the_bounds_answers_are_the_reference_bytes(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(round_wire, "MAX_KEPT", 3)
    rng = random.Random(3)
    pending = [list(reversed(played)) for played in ROUNDS[:60]]
    while pending:
        i = rng.randrange(len(pending))
        _same(pending[i].pop())
        assert all(len(table) <= 3 for table in round_wire.TABLES)
        if not pending[i]:
            pending.pop(i)


@pytest.mark.parametrize("when", ["2026-01-02T03:04:05Z", "2026-01-02T05:04:05.5+02:00",
                                  "1969-12-31T23:59:59.999999Z", "1970-01-01T00:00:00Z",
                                  "2026-01-02T03:04:05.123456-00:00", "2500-06-30T12:00:00Z"])
def test_other_time_forms_are_the_reference_bytes(when: str) -> None:
    view = ROUNDS[0][-1]
    _same(dataclasses.replace(view, created_at=when, updated_at=when))


def test_large_and_odd_values_are_the_reference_bytes() -> None:
    """Numbers past two varint bytes (and a negative one, ten bytes), empty strings, a side bet
    with its paytable line, a legal action of several stakes, a credit of each state."""
    played = next(p for p in ROUNDS if p[0].status == "awaiting" and p[0].legal_actions)
    view = played[0]
    la = dataclasses.replace(view.legal_actions[0], min_stake=1, max_stake=2**40,
                             any_amount=True, stakes=(0, 1, 300, 2**33), alert="hit_hard_17_20")
    wager = views.WagerView(7, "perfect_pairs", 0, 2**20, 2**35, "win", "mixed_pair")
    for odd in (
            dataclasses.replace(view, version=2**31, balance_after=0, total_staked=2**50,
                                total_returned=-1, legal_actions=(la, la)),
            dataclasses.replace(view, balance_after=-5, wagers=(*view.wagers, wager),
                                shoe=dataclasses.replace(view.shoe, client_seed="",
                                                         first_card=0, next_card=16_384)),
            dataclasses.replace(view, round_id="", level="", currency="", void_reason="x\u00e9"),
            *(dataclasses.replace(played[-1], credit=views.CreditView("", amount, state))
              for amount in (0, 2**45) for state in ("pending", "acknowledged"))):
        _same(odd)


def test_a_number_past_its_fields_64_bits_is_refused_as_the_runtime_refused_it() -> None:
    """An int64 field's value outside [-2**63, 2**63) raises, as the field-by-field build did,
    rather than being written as another number (2**63 read back as -2**63, 2**64 as 0,
    -2**64 - 5 as 16379): a money field must never show a sum it was not given."""
    played = next(p for p in ROUNDS if p[0].status == "awaiting" and p[0].legal_actions)
    view, last = played[0], played[-1]
    la = view.legal_actions[0]
    for too_far in (2**63, 2**64, -(2**63) - 1, -(2**64) - 5, 2**70):
        for bad in (
                dataclasses.replace(view, version=too_far),
                dataclasses.replace(view, total_staked=too_far),
                dataclasses.replace(view, balance_after=too_far),
                dataclasses.replace(view, legal_actions=(dataclasses.replace(
                    la, stakes=(1, too_far)),)),
                dataclasses.replace(view, wagers=(dataclasses.replace(
                    view.wagers[0], staked=too_far),)),
                dataclasses.replace(last, credit=views.CreditView("t", too_far, "pending"))):
            with pytest.raises(ValueError):
                reference_fill(rt.RoundView(), bad)
            with pytest.raises(ValueError):
                round_wire.round_view_wire(bad)
    for edge in (2**63 - 1, -(2**63)):  # the ends of the range are numbers like any other
        _same(dataclasses.replace(view, total_staked=edge, balance_after=edge, version=edge))


def test_an_unknown_value_is_refused_as_the_runtime_refused_it() -> None:
    """A status, mode or event kind the messages have no value for raises, as the field-by-field
    build did, rather than being encoded as something else."""
    view = ROUNDS[0][0]
    for bad in (dataclasses.replace(view, status="paused"),
                dataclasses.replace(view, mode="TEST"),
                dataclasses.replace(view, events=(dataclasses.replace(view.events[0],
                                                                      kind="shuffle"),))):
        with pytest.raises((KeyError, ValueError)):
            reference_fill(rt.RoundView(), bad)
        with pytest.raises((KeyError, ValueError)):
            round_wire.round_view_wire(bad)


def test_hands_and_dealers_are_kept_by_all_they_show() -> None:
    """A hand or a dealer is encoded once and found again by its values (another round's, or
    the same round's next answer); a hand that differs in any one of them (its bet, from its
    wager, included) or a dealer that does is encoded anew, each the reference's bytes."""
    played = next(p for p in ROUNDS if len(p) > 2 and p[0].hands and p[0].dealer.hidden_cards)
    view = played[0]
    _same(view)
    kept = (len(round_wire._hands), len(round_wire._dealers))
    assert kept == (len(view.hands), 1)
    _same(dataclasses.replace(view, round_id="x" * 32, version=9))  # another round, same hands
    assert (len(round_wire._hands), len(round_wire._dealers)) == kept
    hand, dealer, main = view.hands[0], view.dealer, view.wagers[0]
    assert main.hand == hand.hand_id and main.kind == "main"
    variants = [
        dataclasses.replace(view, wagers=(dataclasses.replace(main, staked=main.staked + 1),
                                          *view.wagers[1:])),
        *(dataclasses.replace(view, hands=(dataclasses.replace(hand, **change),
                                           *view.hands[1:]))
          for change in ({"hand_id": hand.hand_id + 7}, {"seat": hand.seat + 1},
                         {"cards": (*hand.cards, "2C")}, {"total": hand.total + 1},
                         {"soft": not hand.soft}, {"blackjack": not hand.blackjack},
                         {"from_split": not hand.from_split}, {"outcome": "push"})),
        *(dataclasses.replace(view, dealer=dataclasses.replace(dealer, **change))
          for change in ({"cards": (*dealer.cards, "KD")}, {"hidden_cards": 0},
                         {"total": dealer.total + 1}, {"soft": not dealer.soft},
                         {"blackjack": not dealer.blackjack})),
    ]
    for variant in variants:
        _same(variant)
    assert len(round_wire._hands) == kept[0] + 9 and len(round_wire._dealers) == 1 + 5


def test_a_rounds_answers_encode_only_the_events_they_add(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """An open round's events are kept by the round: its next answer encodes only the events it
    adds (or, once the hole card is turned, those from the first shown otherwise), each answer
    the reference's bytes; a round that ended is no longer kept."""
    made: list[views.EventView] = []
    encode = round_wire._kept_event

    def counted(e: views.EventView) -> bytes:
        made.append(e)
        return encode(e)

    monkeypatch.setattr(round_wire, "_kept_event", counted)
    turned = 0
    for played in ROUNDS[:80]:
        before: tuple[views.EventView, ...] = ()
        for view in played:
            round_wire._events.clear()  # nothing found by the event: only the round's own
            round_wire._event_values.clear()
            made.clear()
            round_wire.round_view_wire(view)
            first = list(made)
            _same(view)
            same = next((i for i, (a, b) in enumerate(zip(view.events, before, strict=False))
                         if a is not b),
                        min(len(view.events), len(before)))
            turned += same < len(before)
            # each once (an event object shown twice is found the second time)
            assert first == list({id(e): e for e in view.events[same:]}.values())
            assert (view.round_id in round_wire._rounds) == (view.status == "awaiting")
            before = view.events
    assert turned  # some rounds turned a hole card shown before


@pytest.mark.parametrize("seed", range(4))
def test_stored_times_from_kept_seconds_are_the_runtimes_timestamp(seed: int) -> None:
    """A stored time's field, read whole or from its second's kept field, is the runtime's
    ``Timestamp`` of it: many instants (the epoch's first second, whole seconds, centuries
    apart), each twice and beside another instant of the same second."""
    rng = random.Random(seed)
    instants = [0, 999_000, 1_000_000_000, 10**18 + 123_456_789, 2**62]
    instants += [rng.randrange(0, 16 * 10**18) // 1000 * 1000 for _ in range(500)]
    for ns in instants:
        for text in (utc_stamp(ns), utc_stamp(ns // 10**9 * 10**9 + rng.randrange(10**9))):
            expected = Timestamp()
            set_timestamp(expected, text)
            for _ in range(2):
                assert round_wire._timestamp(text) == expected.SerializeToString(), text
    assert round_wire._seconds


@pytest.mark.parametrize("odd", ["2026-01-02T03:04:05.12345xZ", "2026-01-02T03:04:05.1234567",
                                 "2026-01-02T03:04:05.\u0661\u0662\u0663\u0664\u0665\u0666Z",
                                 "2026-01-02T03:04:05.+12345Z", "2026-01-02T03:04:05.12_345Z"])
def test_a_time_like_a_stored_one_is_read_as_the_runtime_reads_it(odd: str) -> None:
    """A text shaped like a stored time whose second is kept, but not one, is read as the
    runtime reads it (or refused as it refuses it), not from the kept second."""
    round_wire._timestamp("2026-01-02T03:04:05.000001Z")  # its second now kept
    expected = Timestamp()
    try:
        set_timestamp(expected, odd)
    except ValueError:
        with pytest.raises(ValueError):
            round_wire._timestamp(odd)
    else:
        assert round_wire._timestamp(odd) == expected.SerializeToString()
