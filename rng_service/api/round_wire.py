"""A live round's ``RoundView`` (fairshoe.round.v1) written straight to protobuf wire bytes.

Every transition answers with the whole round, events and all. Built through the protobuf
runtime, field by field, that answer cost about as much as a stateless ``EvaluateHand``: each
nested message and keyword is a lookup by name in the C extension (docs/performance.md). Here it
is the wire format itself (tag, length, value; fields in number order, as the runtime writes
them; proto3's defaults left out, ``optional`` fields written whenever set), with what repeats
encoded once: every card's message, the tags, the small numbers. The server still answers with
a message (the caller parses these bytes into it); ``tests/api/test_round_wire.py`` holds the
bytes, over many rounds of every game, to the runtime's own encoding of the field-by-field build.

>>> from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
>>> _varint(300), _varint(-1) == b"\\xff" * 9 + b"\\x01"
(b'\\xac\\x02', True)
>>> rt.Card.FromString(_DEALER_CARD["QH"][2:]).code, rt.Card.FromString(_DEALER_HIDDEN[2:]).hidden
('QH', True)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, Final

from game_math.cards import CODE_OF
from rng_service.api.calls import mode_enum
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.service import views


def _varint_slow(value: int) -> bytes:
    """A base-128 varint, seven bits a byte from the lowest, each byte but the last flagged."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


#: the varints of 0 .. 16383 (two bytes at most): ids, totals, card positions, small stakes;
#: and the 14 low bits of a larger number, both bytes flagged as followed
_SMALL: Final = tuple(_varint_slow(n) for n in range(1 << 14))
_LOW14: Final = tuple(bytes(((n & 0x7F) | 0x80, (n >> 7) | 0x80)) for n in range(1 << 14))


def _varint(value: int) -> bytes:
    """A varint, fourteen bits at a time; a negative number as its 64-bit two's complement (ten
    bytes), as protobuf writes a negative int32 or int64. Past 64 bits it raises, as the
    runtime does: wrapped, it would be read back as another number (2**64 as 0)."""
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"{value} is out of an int64 field's range")
    if value < 0:
        value += 1 << 64
    out = b""
    while value >= 1 << 14:
        out += _LOW14[value & 0x3FFF]
        value >>= 14
    return out + _SMALL[value]


def _v(value: int) -> bytes:
    return _SMALL[value] if 0 <= value < 1 << 14 else _varint(value)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


#: the tag of each length-delimited field number of these messages (1 .. 23)
_LEN_TAGS: Final = tuple(_tag(n, 2) for n in range(24))


def _len(number: int, body: bytes) -> bytes:
    """A length-delimited field: a string's UTF-8, a nested message's bytes."""
    return _LEN_TAGS[number] + _v(len(body)) + body


def _card(tag: bytes, code: str) -> bytes:
    """A ``Card`` field under ``tag`` showing ``code``."""
    body = _len(1, code.encode()) if code else b""
    return tag + _v(len(body)) + body


#: a card field of each message that holds cards, by code: ``DealerView.cards`` (1),
#: ``HandView.cards`` and ``Event.card`` (both 4)
_DEALER_CARD: Final = {code: _card(b"\x0a", code) for code in CODE_OF}
_HAND_CARD: Final = {code: _card(b"\x22", code) for code in CODE_OF}
_EVENT_CARD: Final = _HAND_CARD
#: a card dealt face down (``Card.hidden``), under those tags
_DEALER_HIDDEN: Final = b"\x0a\x02\x10\x01"
_EVENT_HIDDEN: Final = b"\x22\x02\x10\x01"


def _enum_fields(number: int, table: dict[object, int]) -> dict[object, bytes]:
    """Each key's enum field (varint) under ``number``; empty for 0, which proto3 leaves out."""
    tag = _tag(number, 0)
    return {key: tag + _v(value) if value else b"" for key, value in table.items()}


_STATUS: Final = _enum_fields(8, {"awaiting": rt.ROUND_STATUS_AWAITING_PLAYER,
                                  "finished": rt.ROUND_STATUS_FINISHED,
                                  "void": rt.ROUND_STATUS_VOID})
_DECISION: Final = _enum_fields(2, {"insurance": rt.DECISION_INSURANCE,
                                    "even_money": rt.DECISION_EVEN_MONEY,
                                    "play": rt.DECISION_PLAY})
_CREDIT: Final = _enum_fields(3, {"pending": rt.CREDIT_STATE_PENDING,
                                  "acknowledged": rt.CREDIT_STATE_ACKNOWLEDGED})
_ACTIONS: Final[dict[object, int]] = {
    "hit": rt.ACTION_KIND_HIT, "stand": rt.ACTION_KIND_STAND, "double": rt.ACTION_KIND_DOUBLE,
    "split": rt.ACTION_KIND_SPLIT, "insurance": rt.ACTION_KIND_INSURANCE,
    "even_money": rt.ACTION_KIND_EVEN_MONEY}
_OUTCOMES: Final[dict[object, int]] = {
    None: rt.OUTCOME_UNSPECIFIED, "win": rt.OUTCOME_WIN, "lose": rt.OUTCOME_LOSE,
    "push": rt.OUTCOME_PUSH, "blackjack": rt.OUTCOME_BLACKJACK, "bust": rt.OUTCOME_BUST,
    "even_money": rt.OUTCOME_EVEN_MONEY, "void": rt.OUTCOME_VOID}
_ALERTS: Final[dict[object, int]] = {None: rt.ALERT_UNSPECIFIED,
                                     "hit_hard_17_20": rt.ALERT_HIT_HARD_17_20,
                                     "stand_hard_under_12": rt.ALERT_STAND_HARD_UNDER_12}
_WAGER_KINDS: Final[dict[object, int]] = {
    "main": rt.WAGER_KIND_MAIN, "split": rt.WAGER_KIND_SPLIT, "double": rt.WAGER_KIND_DOUBLE,
    "insurance": rt.WAGER_KIND_INSURANCE}
_LEGAL_ACTION: Final = _enum_fields(1, _ACTIONS)
_LEGAL_ALERT: Final = _enum_fields(7, _ALERTS)
_HAND_OUTCOME: Final = _enum_fields(9, _OUTCOMES)
_WAGER_KIND: Final = _enum_fields(2, _WAGER_KINDS)
_SIDE_BET_KIND: Final = _enum_fields(2, {None: rt.WAGER_KIND_SIDE_BET})[None]
_WAGER_OUTCOME: Final = _enum_fields(7, _OUTCOMES)
_EVENT_KIND: Final = _enum_fields(1, {
    "card": rt.EVENT_KIND_CARD, "reveal": rt.EVENT_KIND_REVEAL,
    "decision": rt.EVENT_KIND_DECISION, "split": rt.EVENT_KIND_SPLIT,
    "peek": rt.EVENT_KIND_PEEK, "settle": rt.EVENT_KIND_SETTLE, "alert": rt.EVENT_KIND_ALERT,
    "void": rt.EVENT_KIND_VOID})
_EVENT_ACTION: Final = _enum_fields(5, _ACTIONS)
_EVENT_OUTCOME: Final = _enum_fields(8, _OUTCOMES)
_EVENT_ALERT: Final = _enum_fields(11, _ALERTS)

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY: Final = _EPOCH.toordinal()
_MODE: Final = {mode: b"\x30" + _v(mode_enum(mode)) for mode in ("DEMO", "REAL")}

#: Each part's encoding kept by its value: an answer repeats most of the previous one (its
#: round's cards and events, the shoe, the game, the legal actions), so most parts are found
#: here rather than encoded. A key holds every field its encoding reads (a view's fields, read
#: in one C call by ``attrgetter``); each table is emptied once it holds MAX_KEPT values, so
#: none grows without bound (each thread reads and writes them under the GIL: at worst two
#: threads encode the same value).
MAX_KEPT: Final = 4096
_EVENT_KEY: Final = attrgetter("kind", "hand", "dealer", "card", "action", "amount", "wager",
                               "outcome", "returned", "note")
_HAND_KEY: Final = attrgetter("hand_id", "seat", "cards", "total", "soft", "blackjack",
                              "from_split", "outcome")
_DEALER_KEY: Final = attrgetter("cards", "hidden_cards", "total", "soft", "blackjack")
_WAGER_KEY: Final = attrgetter("wager_id", "kind", "hand", "staked", "returned", "outcome",
                               "line")
_LEGAL_KEY: Final = attrgetter("action", "hand", "min_stake", "max_stake", "any_amount",
                               "stakes", "alert")
_SHOE_KEY: Final = attrgetter("shoe_id", "commitment", "decks", "client_seed")
_GAME_KEY: Final = attrgetter("game", "rules_digest", "level", "mode", "currency")

_events: dict[int, tuple[views.EventView, bytes]] = {}
_wagers: dict[tuple[Any, ...], bytes] = {}
_legal: dict[tuple[Any, ...], bytes] = {}
_shoes: dict[tuple[Any, ...], bytes] = {}
_games: dict[tuple[Any, ...], bytes] = {}
_times: dict[str, bytes] = {}
TABLES: Final = (_events, _wagers, _legal, _shoes, _games, _times)


def _kept(table: dict[Any, bytes], key: Any, encode: Callable[..., bytes]) -> bytes:
    """``key``'s encoding, encoded (from the key's values) and kept when not found."""
    if len(table) >= MAX_KEPT:
        table.clear()
    out = table[key] = encode(key) if isinstance(key, str) else encode(*key)
    return out


def _kept_event(e: views.EventView) -> bytes:
    """An event's encoding, kept by the event itself. The service makes each event's view once
    and shows that same object in every later view of its round, so an event is found by its
    ``id``; the table holds the event with its bytes, so no other object can take that id while
    it is kept (and an event view is frozen)."""
    if len(_events) >= MAX_KEPT:
        _events.clear()
    out = _event(*_EVENT_KEY(e))
    _events[id(e)] = (e, out)
    return out


# ----- the round -------------------------------------------------------------------------------


def round_view_wire(view: views.RoundView) -> bytes:
    """``view`` as a ``RoundView`` message's wire bytes (what the field-by-field build of
    :func:`rng_service.api.round_messages.fill_live_round_view` encodes to)."""
    wagers, shoe, awaiting = view.wagers, view.shoe, view.status == "awaiting"
    key = _GAME_KEY(view)
    out = [_len(1, view.round_id.encode()) if view.round_id else b"",
           b"\x10" + _v(view.version) if view.version else b"",
           _games.get(key) or _kept(_games, key, _game), _STATUS[view.status]]
    put = out.append
    if awaiting and view.turn_hand is not None and view.decision is not None:
        turn = (b"\x08" + _v(view.turn_hand) if view.turn_hand else b"") + _DECISION[
            view.decision]
        put(b"\x4a" + _v(len(turn)) + turn)
        for la in view.legal_actions:
            key = _LEGAL_KEY(la)
            put(_legal.get(key) or _kept(_legal, key, _legal_action))
    put(_dealer(*_DEALER_KEY(view.dealer)))
    for h in view.hands:
        bet = 0  # the hand's bet is its main (or, for a split hand, split) wager
        for w in wagers:
            if w.hand == h.hand_id and w.kind in {"main", "split"}:
                bet = w.staked
                break
        put(_hand(bet, *_HAND_KEY(h)))
    for w in wagers:
        key = _WAGER_KEY(w)
        put(_wagers.get(key) or _kept(_wagers, key, _wager))
    if view.total_staked:
        put(b"\x70" + _v(view.total_staked))
    if view.total_returned:
        put(b"\x78" + _v(view.total_returned))
    put(b"\x80\x01" + _v(view.balance_after))
    key = _SHOE_KEY(shoe)
    put(_shoes.get(key) or _kept(_shoes, key, _shoe))
    used = ((b"\x08" + _v(shoe.first_card) if shoe.first_card else b"")
            + (b"\x10" + _v(shoe.next_card) if shoe.next_card else b""))
    put(b"\x92\x01" + _v(len(used)) + used)
    for e in view.events:
        kept = _events.get(id(e))
        put(kept[1] if kept is not None and kept[0] is e else _kept_event(e))
    if view.void_reason:
        put(_len(20, view.void_reason.encode()))
    put(_times.get(view.created_at) or _kept(_times, view.created_at, _started_at))
    if not awaiting:
        put(_len(22, _timestamp(view.updated_at)))
    if view.credit is not None:
        put(_len(23, _credit(view.credit)))
    return b"".join(out)


# ----- its parts, each a whole field of the round (tag, length, message) ----------------------


def _game(game: str, rules_digest: str, level: str, mode: str, currency: str) -> bytes:
    """Fields 3 to 7: the game, its rules' digest, the level, the mode and the currency."""
    return ((_len(3, game.encode()) if game else b"")
            + (_len(4, rules_digest.encode()) if rules_digest else b"")
            + (_len(5, level.encode()) if level else b"")
            + (_MODE.get(mode) or (b"\x30" + _v(mode_enum(mode)) if mode_enum(mode) else b""))
            + (_len(7, currency.encode()) if currency else b""))


def _legal_action(  # noqa: PLR0917 (a key's values, in its order)
        action: str, hand: int, min_stake: int, max_stake: int, any_amount: bool,
        stakes: tuple[int, ...], alert: str | None) -> bytes:
    out = [_LEGAL_ACTION[action], b"\x10" + _v(hand) if hand else b"",
           b"\x18" + _v(min_stake) if min_stake else b"",
           b"\x20" + _v(max_stake) if max_stake else b"", b"\x28\x01" if any_amount else b""]
    if stakes:  # proto3 packs a repeated number: one length, then the varints
        packed = b"".join(_v(s) for s in stakes)
        out.append(b"\x32" + _v(len(packed)) + packed)
    out.append(_LEGAL_ALERT[alert])
    return _len(10, b"".join(out))


def _dealer(cards: tuple[str, ...], hidden_cards: int, total: int, soft: bool,
            blackjack: bool) -> bytes:
    out = [_DEALER_CARD.get(code) or _card(b"\x0a", code) for code in cards]
    out += [_DEALER_HIDDEN] * hidden_cards  # a dealt hole card shows as dealt, face down
    out += [b"\x10" + _v(total) if total else b"", b"\x18\x01" if soft else b"",
            b"\x20\x01" if blackjack else b""]
    return _len(11, b"".join(out))


def _hand(  # noqa: PLR0917 (a key's values, in its order)
        bet: int, hand_id: int, seat: int, cards: tuple[str, ...], total: int, soft: bool,
        blackjack: bool, from_split: bool, outcome: str | None) -> bytes:
    out = [b"\x08" + _v(hand_id) if hand_id else b"", b"\x10" + _v(seat) if seat else b"",
           b"\x18" + _v(bet) if bet else b""]
    out += [_HAND_CARD.get(code) or _card(b"\x22", code) for code in cards]
    out += [b"\x28" + _v(total) if total else b"", b"\x30\x01" if soft else b"",
            b"\x38\x01" if blackjack else b"", b"\x40\x01" if from_split else b"",
            _HAND_OUTCOME[outcome]]
    return _len(12, b"".join(out))


def _wager(  # noqa: PLR0917 (a key's values, in its order)
        wager_id: int, kind: str, hand: int | None, staked: int, returned: int | None,
        outcome: str | None, line: str | None) -> bytes:
    known = _WAGER_KIND.get(kind)  # any other kind is a side bet's name
    out = [b"\x08" + _v(wager_id) if wager_id else b"",
           known if known is not None else _SIDE_BET_KIND,
           _len(3, kind.encode()) if known is None and kind else b"",
           b"\x20" + _v(hand) if hand is not None else b"",
           b"\x28" + _v(staked) if staked else b"",
           b"\x30" + _v(returned) if returned is not None else b"",
           _WAGER_OUTCOME[outcome], _len(8, line.encode()) if line else b""]
    return _len(13, b"".join(out))


def _event(  # noqa: PLR0917 (a key's values, in its order)
        kind: str, hand: int | None, dealer: bool, card: str | None, action: str | None,
        amount: int | None, wager: int | None, outcome: str | None, returned: int | None,
        note: str | None) -> bytes:
    """As :func:`rng_service.api.round_messages._add_events` sets an event's fields."""
    out = [_EVENT_KIND[kind]]
    put = out.append
    if dealer:
        put(b"\x18\x01")
    elif hand is not None:
        put(b"\x10" + _v(hand))
    if kind in {"card", "reveal"}:
        put((_EVENT_CARD.get(card) or _card(b"\x22", card)) if card else _EVENT_HIDDEN)
    if action is not None:
        put(_EVENT_ACTION[action])
    if amount is not None:
        put(b"\x30" + _v(amount))
    if wager is not None:
        put(b"\x38" + _v(wager))
    if kind == "settle":
        put(_EVENT_OUTCOME[outcome])
    if returned is not None:
        put(b"\x48" + _v(returned))
    if kind == "peek":
        if outcome == "blackjack":
            put(b"\x50\x01")
    elif kind == "alert":
        put(_EVENT_ALERT[note])
    elif note:
        put(_len(12, note.encode()))
    return _len(19, b"".join(out))


def _shoe(shoe_id: str, commitment: str, decks: int, client_seed: str) -> bytes:
    seed = bytes.fromhex(client_seed)
    return _len(17, (_len(1, shoe_id.encode()) if shoe_id else b"")
                + (_len(2, commitment.encode()) if commitment else b"")
                + (b"\x18" + _v(decks) if decks else b"")
                + (_len(4, seed) if seed else b""))


def _credit(c: views.CreditView) -> bytes:
    return ((_len(1, c.transaction_id.encode()) if c.transaction_id else b"")
            + (b"\x10" + _v(c.amount) if c.amount else b"") + _CREDIT[c.state])


def _started_at(text: str) -> bytes:
    return _len(21, _timestamp(text))


def _timestamp(text: str) -> bytes:
    """A ``google.protobuf.Timestamp``'s bytes for a stored time, as
    :func:`rng_service.api.calls.set_timestamp` reads one: RFC 3339 in UTC
    (``2026-01-02T03:04:05.123456Z``, as ``ports.utc_now`` writes it) directly, any other form
    through the runtime's ``FromJsonString``."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.utcoffset() != timedelta(0):
        from google.protobuf.timestamp_pb2 import Timestamp  # noqa: PLC0415 (rare)

        stamp = Timestamp()
        stamp.FromJsonString(text)
        return stamp.SerializeToString()
    # the seconds since the epoch, as ``when - _EPOCH`` gives them, without the timedelta
    seconds = ((when.toordinal() - _EPOCH_DAY) * 86_400 + when.hour * 3600 + when.minute * 60
               + when.second)
    nanos = when.microsecond * 1000
    return ((b"\x08" + _v(seconds) if seconds else b"")
            + (b"\x10" + _v(nanos) if nanos else b""))
