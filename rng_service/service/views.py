"""What a player may see of a round, a shoe or a wallet: frozen dataclasses the API layer maps.

A :class:`RoundView` is built from a ``game_math.round.Round`` and shows only what has been dealt
face up: the dealer's hole card stays hidden (in ``dealer`` and in ``events``) until it is turned,
and undealt cards are never read. Views are also what an idempotent request stores as its first
answer, so each converts to JSON bytes and back exactly (:func:`to_json`, :func:`from_json`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Final, TypeVar

import orjson

from game_math.cards import CODE_OF
from game_math.round import Event, Hand, LegalAction, Phase, Round, Wager
from rng_service.core.frozen import quick_init

T = TypeVar("T")


@quick_init
@dataclass(frozen=True)
class LegalActionView:
    """An action accepted now and the extra stake it needs: any amount in
    ``[min_stake, max_stake]`` when ``any_amount``, else one of ``stakes`` (empty: no stake)."""

    action: str
    hand: int
    min_stake: int
    max_stake: int
    any_amount: bool
    stakes: tuple[int, ...]
    alert: str | None  # the advisory this action would raise (never blocks it)


@quick_init
@dataclass(frozen=True)
class HandView:
    """One of the player's hands as shown: its cards, total, bet and outcome."""
    hand_id: int
    seat: int
    cards: tuple[str, ...]
    total: int
    soft: bool
    blackjack: bool
    from_split: bool
    outcome: str | None


@quick_init
@dataclass(frozen=True)
class WagerView:
    """One stake and what it returned (``returned`` None while unsettled; stake included)."""

    wager_id: int
    kind: str  # main | split | double | insurance | <side bet name>
    hand: int | None
    staked: int
    returned: int | None
    outcome: str | None
    line: str | None  # the side-bet paytable line that paid


@quick_init
@dataclass(frozen=True)
class DealerView:
    """The dealer's hand as the player sees it: face-up cards only."""
    cards: tuple[str, ...]  # face-up cards only
    hidden_cards: int  # cards dealt face down and not yet turned (the hole card)
    total: int  # of the visible cards
    soft: bool
    blackjack: bool  # shown only once both cards are visible


@quick_init
@dataclass(frozen=True)
class EventView:
    """One event as the player may see it (a hidden card's identity is None)."""

    kind: str
    hand: int | None  # a hand id; None for the dealer (see ``dealer``) or the round
    dealer: bool
    card: str | None
    face_up: bool | None
    action: str | None
    amount: int | None
    wager: int | None
    outcome: str | None
    returned: int | None
    note: str | None


@quick_init
@dataclass(frozen=True)
class ShoeRefView:
    """The round's shoe: public facts, and the positions ``[first_card, next_card)`` it used."""

    shoe_id: str
    commitment: str
    decks: int
    client_seed: str  # hex
    first_card: int
    next_card: int


@quick_init
@dataclass(frozen=True)
class CreditView:
    """A seamless round's credit to the operator's wallet: written when the round ends,
    ``pending`` until the wallet acknowledges it (``acknowledged``)."""

    transaction_id: str
    amount: int
    state: str  # pending | acknowledged


@quick_init
@dataclass(frozen=True)
class RoundView:
    """A round as its player sees it: state, turn, legal actions, hands, wagers, events."""
    round_id: str
    operator: str
    player: str
    game: str
    rules_digest: str
    level: str
    mode: str  # DEMO | REAL
    currency: str
    status: str  # awaiting | finished | void
    version: int  # pass as expected_version to the next act
    phase: str  # insurance | play | finished | void
    turn_hand: int | None  # the hand whose decision is awaited
    decision: str | None  # insurance | even_money | play
    legal_actions: tuple[LegalActionView, ...]
    dealer: DealerView
    hands: tuple[HandView, ...]
    wagers: tuple[WagerView, ...]
    total_staked: int
    total_returned: int
    balance_after: int  # the player's balance in this currency and mode after this answer
    shoe: ShoeRefView
    events: tuple[EventView, ...]
    void_reason: str | None
    created_at: str
    updated_at: str
    #: on a seamless wallet, once the round ended (else None); a default, so answers stored
    #: before it existed still read
    credit: CreditView | None = None


@quick_init
@dataclass(frozen=True)
class RoundPage:
    """A page of rounds and the token of the next page."""
    rounds: tuple[RoundView, ...]
    next_page_token: str  # empty on the last page


@quick_init
@dataclass(frozen=True)
class ShoeView:
    """A player's current shoe for a game: its commitment is fixed before the client seed."""

    shoe_id: str
    game: str
    decks: int
    commitment: str
    client_seed: str  # hex
    status: str  # committed | in_play | finished | revealed
    cards_dealt: int
    cut_position: int | None  # first card at or after the cut card; None: one round per shoe
    client_seed_locked: bool
    committed_at: str = ""  # when the commitment was fixed (the shoe was created)


@quick_init
@dataclass(frozen=True)
class TransactionView:
    """A ledger entry as the player sees it: ``amount`` is signed (+ credit, - debit).
    ``transaction_id`` is the entry's public id (never the shared internal counter)."""

    transaction_id: str
    kind: str  # deposit | withdrawal | stake | return | demo_credit
    amount: int
    balance_after: int
    round_id: str | None
    wager_id: int | None
    request_id: str | None
    created_at: str
    reference: str | None = None  # the operator's own reference (deposits and withdrawals)


@quick_init
@dataclass(frozen=True)
class TransactionPage:
    """A page of ledger entries and the token of the next page."""
    transactions: tuple[TransactionView, ...]
    next_page_token: str


@quick_init
@dataclass(frozen=True)
class BalanceView:
    """A player's balance and the part of it staked in open rounds."""
    operator: str
    player: str
    currency: str
    mode: str
    balance: int
    in_play: int = 0  # staked in open rounds (already debited), less what they returned


# --- building a RoundView ----------------------------------------------------------------------


@quick_init
@dataclass(frozen=True)
class RoundContext:
    """The stored facts a view shows beside the round itself."""

    round_id: str
    operator: str
    player: str
    game: str
    rules_digest: str
    level: str
    mode: str
    currency: str
    version: int
    created_at: str
    updated_at: str


#: the phases a round's status names as they are (any other is ``awaiting``)
_ENDED: Final = (Phase.FINISHED, Phase.VOID)


def round_status(rnd: Round) -> str:
    """``awaiting``, or the round's phase once it is finished or void."""
    return rnd.phase if rnd.phase in _ENDED else "awaiting"


def round_view(ctx: RoundContext, rnd: Round, shoe: ShoeRefView, balance: int,
               credit: CreditView | None = None) -> RoundView:
    """The player's view of ``rnd``: what ``Round.summary()`` shows (its dealer and events
    already hide an unturned hole card), read from the same public pieces without the rest of
    the summary (``public_dealer``, ``public_events``), and ``legal_actions()``; ``credit``:
    a seamless round's credit, once it ended.

    Every transition builds one (its answer, stored and returned), so the parts are read from
    the engine's hands and wagers directly (the fields their ``to_dict`` writes, without the
    dicts) and each sequence is made in one ``map`` or list, without a generator resumed per
    item (tests/service/test_views.py holds it to a view built from ``to_dict``)."""
    turn = rnd.turn
    dealer = rnd.public_dealer()
    phase = rnd.phase
    shown = dealer["cards"]
    # positional, in field order: 26 keyword arguments cost the call about 19,000 instructions
    # more, counted (tests/service/test_views.py holds the view to one made by name)
    return RoundView(
        ctx.round_id, ctx.operator, ctx.player, ctx.game, ctx.rules_digest, ctx.level, ctx.mode,
        ctx.currency, phase if phase in _ENDED else "awaiting", ctx.version, turn.phase,
        turn.hand, turn.decision, tuple(map(_legal_view, rnd.legal_actions())),
        DealerView(tuple(shown), len(rnd.dealer) - len(shown), dealer["total"], dealer["soft"],
                   dealer["blackjack"]),
        tuple(map(_hand_view, rnd.hands)), tuple(map(_wager_view, rnd.wagers)),
        rnd.total_staked, rnd.total_returned, balance, shoe,
        tuple(map(_event_view, rnd.public_events())), rnd.void_reason, ctx.created_at,
        ctx.updated_at, credit)


def _legal_view(la: LegalAction) -> LegalActionView:
    return LegalActionView(la.action, la.hand, la.min_stake, la.max_stake, la.any_amount,
                           tuple(la.amounts), la.alert)


def _hand_view(hand: Hand) -> HandView:
    """What ``Hand.to_dict`` writes, as a view."""
    outcome = hand.outcome
    return HandView(hand.id, hand.seat, tuple([CODE_OF[c] for c in hand.cards]), hand.total,
                    hand.soft, hand.natural, hand.from_split,
                    None if outcome is None else str(outcome))


def _wager_view(wager: Wager) -> WagerView:
    """What ``Wager.to_dict`` writes, as a view (a missing ``hand`` or ``line`` is None)."""
    outcome = wager.outcome
    return WagerView(wager.id, wager.kind, wager.hand, wager.staked, wager.returned,
                     None if outcome is None else str(outcome), wager.line)


@lru_cache(maxsize=4096)
def _event_view(event: Event) -> EventView:
    """The view of a (public) event. Events are immutable values, and every view of a round
    shows all its events so far, each transition the same ones again: their views are kept by
    value (a hidden hole card is another value than the turned one)."""
    return _event(event.to_dict())


def _event(data: Mapping[str, Any]) -> EventView:
    hand = data.get("hand")
    get = data.get  # positional, in field order (kind, hand, dealer, card, face_up, action,
    # amount, wager, outcome, returned, note): keyword arguments cost a class's call more
    view = EventView(data["kind"], hand if isinstance(hand, int) else None, hand == "dealer",
                     get("card"), get("face_up"), get("action"), get("amount"), get("wager"),
                     get("outcome"), get("returned"), get("note"))
    # its JSON, written once beside it (not a field: orjson leaves out an attribute whose name
    # starts with "_", and eq, repr and hash see fields only): every later answer showing this
    # event splices these bytes (:func:`to_json`) instead of encoding its eleven fields again
    view.__dict__[_JSON] = orjson.Fragment(orjson.dumps(view))
    return view


# --- JSON round trip (stored idempotent answers) -------------------------------------------------


def to_json(view: object) -> bytes:
    """A view as compact JSON bytes (tuples become lists; :func:`from_json` restores them).

    orjson writes a dataclass's fields as an object in field order, which is all
    :func:`from_json` needs (it reads by name): about 15 times faster than ``json`` with a
    ``default`` hook, on every transition's stored answer. Non-ASCII text is written as UTF-8,
    not ``\\u`` escapes (the same JSON value).
    """
    if type(view) is RoundView:  # every transition's answer: its events' bytes are kept
        return _round_json(view)
    if not dataclasses.is_dataclass(view) or isinstance(view, type):
        raise TypeError(f"not a view: {type(view).__name__}")
    return orjson.dumps(view)


#: the attribute of an :class:`EventView` made by :func:`_event_view` that holds its JSON
_JSON: Final = "_json"


def _round_json(view: RoundView) -> bytes:
    """``orjson.dumps(view)``, byte for byte, with each event's JSON spliced in from the bytes
    its :class:`EventView` keeps (an event read from a stored answer keeps none: encoded).

    The view's fields as a dict in field order (its ``__dict__``, which orjson writes for a
    dataclass as it is) are the same JSON object; only ``events`` is replaced, in place, so its
    position is kept (tests/service/test_views.py holds the two encodings equal)."""
    doc = view.__dict__.copy()
    doc["events"] = [event.__dict__.get(_JSON, event) for event in view.events]
    return orjson.dumps(doc)


def from_json(cls: type[T], data: bytes) -> T:
    """The view of type ``cls`` that :func:`to_json` wrote."""
    return typing.cast(T, _decode(cls, orjson.loads(data)))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(tp: Any, value: Any) -> Any:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = _hints(tp)
        # a field added since the answer was stored takes its default
        return tp(**{f.name: _decode(hints[f.name], value[f.name])
                     for f in dataclasses.fields(tp) if f.name in value})
    origin = typing.get_origin(tp)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return tuple(_decode(item, v) for v in value)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(inner, value)
    return value
