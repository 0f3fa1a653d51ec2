"""A live round's ``RoundView`` (fairshoe.round.v1) written straight to protobuf wire bytes.

Every transition answers with the whole round, events and all. Built through the protobuf
runtime, field by field, that answer cost about as much as a stateless ``EvaluateHand``: each
nested message and keyword is a lookup by name in the C extension (docs/performance.md). Here it
is the wire format itself (tag, length, value; fields in number order, as the runtime writes
them; proto3's defaults left out, ``optional`` fields written whenever set), with what repeats
encoded once: every card's message, the tags, the small numbers, each part by its values, and
by the round what all its answers repeat (its id, game and start, its events so far), so a
transition encodes only the events it adds. StartRound and Act hand these
bytes to gRPC as their answer (:func:`answer_wire`); GetRound and ListRounds parse them into a
message. ``tests/api/test_round_wire.py`` holds the bytes, over many rounds of every game, to the
runtime's own encoding of the field-by-field build.

>>> from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
>>> _varint(300), _varint(-1) == b"\\xff" * 9 + b"\\x01"
(b'\\xac\\x02', True)
>>> rt.Card.FromString(_DEALER_CARD["QH"][2:]).code, rt.Card.FromString(_DEALER_HIDDEN[2:]).hidden
('QH', True)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from operator import attrgetter, is_
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
    """:func:`_varint`, the numbers of up to six bytes without its loop: a bet, a balance, a
    time's seconds and nanoseconds."""
    if 0 <= value < 1 << 14:
        return _SMALL[value]
    if 0 <= value < 1 << 28:
        return _LOW14[value & 0x3FFF] + _SMALL[value >> 14]
    if 0 <= value < 1 << 42:
        return _LOW14[value & 0x3FFF] + _LOW14[value >> 14 & 0x3FFF] + _SMALL[value >> 28]
    return _varint(value)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


#: the tag of each length-delimited field number of these messages (1 .. 23)
_LEN_TAGS: Final = tuple(_tag(n, 2) for n in range(24))


def _len(number: int, body: bytes) -> bytes:
    """A length-delimited field: a string's UTF-8, a nested message's bytes."""
    size = len(body)
    return _LEN_TAGS[number] + (_SMALL[size] if size < 1 << 14 else _varint(size)) + body


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
#: the version's field (2) for versions below 16384 (0, proto3's default, left out)
_VERSION: Final = (b"", *(b"\x10" + _SMALL[n] for n in range(1, 1 << 14)))
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
_event_values: dict[tuple[Any, ...], bytes] = {}
#: a hand or a dealer by what it shows: most transitions change one hand and leave the others
#: and the dealer as they were; a hand's cards, total and bet repeat across rounds too
_hands: dict[tuple[Any, ...], bytes] = {}
#: a hand's fields before its cards and after them, each by its values (``_hand``)
_hand_heads: dict[tuple[Any, ...], bytes] = {}
_hand_tails: dict[tuple[Any, ...], bytes] = {}
#: a dealer's fields after the cards shown, by their values (``_dealer``)
_dealer_tails: dict[tuple[Any, ...], bytes] = {}
_dealers: dict[tuple[Any, ...], bytes] = {}
_wagers: dict[tuple[Any, ...], bytes] = {}
_legal: dict[tuple[Any, ...], bytes] = {}
_shoes: dict[tuple[Any, ...], bytes] = {}
_games: dict[tuple[Any, ...], bytes] = {}
#: the turn with the legal actions, the round's totals and the shoe's positions used, each by
#: its values
_turns: dict[tuple[Any, ...], bytes] = {}
_totals: dict[tuple[Any, ...], bytes] = {}
_used: dict[tuple[Any, ...], bytes] = {}
#: a time's whole-second field by the text of its whole second (``2026-01-02T03:04:05``):
#: rounds started or finished within one second share it
_seconds: dict[str, bytes] = {}
#: what every answer of a round repeats, by the round's id: the values its parts were encoded
#: from (``_HEAD_KEY``'s, then the events shown so far, in order) and those parts (the id, the
#: game's fields and the start; each event's field). Found by the id, then checked against the
#: answer's own values (a tuple compare, item by item, an event by identity first: the service
#: shows the same event objects again), so a round's later answer encodes only the events it
#: adds, or those from the first it shows otherwise (the hole card, once turned). A round that
#: ended is dropped: nothing more is added to it.
_rounds: dict[str, tuple[tuple[str, ...], bytes, bytes, bytes, tuple[views.EventView, ...],
                         tuple[bytes, ...]]] = {}
TABLES: Final = (_events, _event_values, _hands, _hand_heads, _hand_tails, _dealers,
                 _dealer_tails, _wagers, _legal, _shoes, _games, _turns, _totals, _used, _seconds,
                 _rounds)
_HEAD_KEY: Final = attrgetter("round_id", "game", "rules_digest", "level", "mode", "currency",
                              "created_at")


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
    key = _EVENT_KEY(e)  # a new event is most often one seen before in another round: a card
    out = _event_values.get(key) or _kept(_event_values, key, _event)
    _events[id(e)] = (e, out)
    return out


# ----- the round -------------------------------------------------------------------------------


def round_view_wire(view: views.RoundView, answer: bool = False) -> bytes:
    """``view`` as a ``RoundView`` message's wire bytes (what the field-by-field build of
    :func:`rng_service.api.round_messages.fill_live_round_view` encodes to); with ``answer``,
    :func:`answer_wire`'s (StartRound and Act call this so: one Python call less a
    transition)."""
    wagers, shoe, status, events = view.wagers, view.shoe, view.status, view.events
    key: tuple[Any, ...]
    head = _HEAD_KEY(view)
    kept = _rounds.get(head[0])
    if kept is None or kept[0] != head:
        kept = _round_head(head)
    parts = _shown(kept[4], kept[5], events)
    version = view.version
    out = [kept[1], (_VERSION[version] if 0 <= version < 1 << 14 else b"\x10" + _v(version)),
           kept[2], _STATUS[status]]
    put = out.append
    if status == "awaiting":
        if len(_rounds) >= MAX_KEPT:
            _rounds.clear()
        _rounds[head[0]] = (head, kept[1], kept[2], kept[3], events, parts)
        key = (view.turn_hand, view.decision, *map(_LEGAL_KEY, view.legal_actions))
        put(_turns.get(key) or _kept(_turns, key, _turn))
    elif head[0] in _rounds:  # over: no answer adds to it
        _rounds.pop(head[0], None)
    key = _DEALER_KEY(view.dealer)
    put(_dealers.get(key) or _kept(_dealers, key, _dealer))
    for h in view.hands:
        bet = 0  # the hand's bet is its main (or, for a split hand, split) wager
        for w in wagers:
            if w.hand == h.hand_id and w.kind in {"main", "split"}:
                bet = w.staked
                break
        key = (bet, *_HAND_KEY(h))
        put(_hands.get(key) or _kept(_hands, key, _hand))
    for w in wagers:
        key = _WAGER_KEY(w)
        put(_wagers.get(key) or _kept(_wagers, key, _wager))
    key = (view.total_staked, view.total_returned, view.balance_after)
    put(_totals.get(key) or _kept(_totals, key, _total))
    key = _SHOE_KEY(shoe)
    put(_shoes.get(key) or _kept(_shoes, key, _shoe))
    key = (shoe.first_card, shoe.next_card)
    put(_used.get(key) or _kept(_used, key, _cards_used))
    out += parts
    if view.void_reason:
        put(_len(20, view.void_reason.encode()))
    put(kept[3])
    if status != "awaiting":
        put(_len(22, _timestamp(view.updated_at)))
    if view.credit is not None:
        put(_len(23, _credit(view.credit)))
    body = b"".join(out)
    if not answer:
        return body
    size = len(body)  # _len's, inline
    return b"\x0a" + (_SMALL[size] if size < 1 << 14 else _varint(size)) + body


def _shown(known: tuple[views.EventView, ...], parts: tuple[bytes, ...],
           events: tuple[views.EventView, ...]) -> tuple[bytes, ...]:
    """Each event's field of ``events``, given those of ``known`` (the round's events as an
    earlier answer showed them): kept while ``events`` shows the same, made from the first it
    shows otherwise (the hole card, once turned), and for those it adds."""
    if events[:len(known)] != known:
        same = [*map(is_, events, known), False].index(False)
        known, parts = events[:same], parts[:same]
    if len(events) > len(known):
        new = []
        for e in events[len(known):]:  # found by the event object (_kept_event) or made
            found = _events.get(id(e))
            new.append(found[1] if found is not None and found[0] is e else _kept_event(e))
        parts += tuple(new)
    return parts


def _round_head(head: tuple[str, ...]) -> tuple[tuple[str, ...], bytes, bytes, bytes,
                                                 tuple[views.EventView, ...], tuple[bytes, ...]]:
    """A round's entry in ``_rounds`` with no events yet: its id's field, its game's (fields 3
    to 7) and its start's."""
    round_id, game = head[0], head[1:6]
    return (head, _len(1, round_id.encode()) if round_id else b"",
            _games.get(game) or _kept(_games, game, _game), _len(21, _timestamp(head[6])), (),
            ())


def answer_wire(view: views.RoundView) -> bytes:
    """The wire bytes of an answer whose only field, number 1, is ``view`` (``StartRoundResponse``
    and ``ActResponse``): what the runtime encodes such a response to once the view's bytes are
    parsed into its ``round``."""
    return round_view_wire(view, True)


# ----- its parts, each a whole field of the round (tag, length, message) ----------------------


def _game(game: str, rules_digest: str, level: str, mode: str, currency: str) -> bytes:
    """Fields 3 to 7: the game, its rules' digest, the level, the mode and the currency."""
    return ((_len(3, game.encode()) if game else b"")
            + (_len(4, rules_digest.encode()) if rules_digest else b"")
            + (_len(5, level.encode()) if level else b"")
            + (_MODE.get(mode) or (b"\x30" + _v(mode_enum(mode)) if mode_enum(mode) else b""))
            + (_len(7, currency.encode()) if currency else b""))


def _turn(hand: int | None, decision: str | None, *legal: tuple[Any, ...]) -> bytes:
    """Fields 9 and 10: whose decision is awaited, and which; then the legal actions (``legal``:
    each one's ``_LEGAL_KEY`` values). Neither without a hand and a decision awaited."""
    if hand is None or decision is None:
        return b""
    turn = (b"\x08" + _v(hand) if hand else b"") + _DECISION[decision]
    return b"\x4a" + _v(len(turn)) + turn + b"".join(
        [_legal.get(key) or _kept(_legal, key, _legal_action) for key in legal])


def _total(staked: int, returned: int, balance: int) -> bytes:
    """Fields 14 to 16: the round's total staked and returned, and the balance after it (0
    written too: the field is ``optional``)."""
    return ((b"\x70" + _v(staked) if staked else b"") + (b"\x78" + _v(returned) if returned
                                                         else b"")
            + b"\x80\x01" + _v(balance))


def _cards_used(first: int, following: int) -> bytes:
    """Field 18: the shoe's positions the round used, ``[first, following)``."""
    used = (b"\x08" + _v(first) if first else b"") + (b"\x10" + _v(following) if following
                                                      else b"")
    return b"\x92\x01" + _v(len(used)) + used


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
    """The dealer's field (11): the cards shown, then (kept by their values) a card for each
    dealt face down and the total and flags: a dealer first seen most often differs from one
    seen before only by a card."""
    key = (hidden_cards, total, soft, blackjack)
    tail = _dealer_tails.get(key) or _kept(_dealer_tails, key, _dealer_tail)
    try:  # every card's code known: its field found in one C call
        body = b"".join(map(_DEALER_CARD.__getitem__, cards)) + tail
    except KeyError:
        body = b"".join([_DEALER_CARD.get(code) or _card(b"\x0a", code) for code in cards]) + tail
    size = len(body)  # _len's, inline
    return b"\x5a" + (_SMALL[size] if size < 1 << 14 else _varint(size)) + body


def _dealer_tail(hidden_cards: int, total: int, soft: bool, blackjack: bool) -> bytes:
    """The dealer's fields after the cards shown: a dealt hole card shows as dealt, face down;
    then the total and the flags."""
    return (_DEALER_HIDDEN * hidden_cards + (b"\x10" + _v(total) if total else b"")
            + (b"\x18\x01" if soft else b"") + (b"\x20\x01" if blackjack else b""))


def _hand(  # noqa: PLR0917 (a key's values, in its order)
        bet: int, hand_id: int, seat: int, cards: tuple[str, ...], total: int, soft: bool,
        blackjack: bool, from_split: bool, outcome: str | None) -> bytes:
    """A hand's field (12), joined from its leading fields (id, seat, bet), its cards and its
    trailing ones (total, flags, outcome), each end kept by its values: a hand first seen is
    most often one seen before with a card more, so only its cards are new."""
    key: tuple[Any, ...] = (hand_id, seat, bet)
    head = _hand_heads.get(key) or _kept(_hand_heads, key, _hand_head)
    key = (total, soft, blackjack, from_split, outcome)
    tail = _hand_tails.get(key) or _kept(_hand_tails, key, _hand_tail)
    try:  # every card's code known: its field found in one C call
        body = head + b"".join(map(_HAND_CARD.__getitem__, cards)) + tail
    except KeyError:
        body = head + b"".join([_HAND_CARD.get(code) or _card(b"\x22", code)
                                for code in cards]) + tail
    size = len(body)  # _len's, inline: a hand is met anew at nearly every transition
    return b"\x62" + (_SMALL[size] if size < 1 << 14 else _varint(size)) + body


def _hand_head(hand_id: int, seat: int, bet: int) -> bytes:
    """A hand's fields 1 to 3: its id, its seat and its bet."""
    return ((b"\x08" + _v(hand_id) if hand_id else b"") + (b"\x10" + _v(seat) if seat else b"")
            + (b"\x18" + _v(bet) if bet else b""))


def _hand_tail(total: int, soft: bool, blackjack: bool, from_split: bool, outcome: str | None
               ) -> bytes:
    """A hand's fields 5 to 9, after its cards (4): its total, its flags and its outcome."""
    return ((b"\x28" + _v(total) if total else b"") + (b"\x30\x01" if soft else b"")
            + (b"\x38\x01" if blackjack else b"") + (b"\x40\x01" if from_split else b"")
            + _HAND_OUTCOME[outcome])


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


def _timestamp(text: str) -> bytes:
    """A ``google.protobuf.Timestamp``'s bytes for a stored time, as
    :func:`rng_service.api.calls.set_timestamp` reads one: RFC 3339 in UTC
    (``2026-01-02T03:04:05.123456Z``, as ``ports.utc_now`` writes it) directly, any other form
    through the runtime's ``FromJsonString``. In the stored form the seconds follow from the
    whole second's text alone and the nanoseconds from the six digits after it, so the seconds'
    field, once read, is kept by that text (``_seconds``)."""
    stored = len(text) == 27 and text[19] == "." and text[26] == "Z"
    if stored:
        micros = text[20:26]
        stored = micros.isascii() and micros.isdigit()
        whole = _seconds.get(text[:19]) if stored else None
        if whole is not None:
            nanos = int(micros) * 1000
            return whole + (b"\x10" + _v(nanos) if nanos else b"")
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
    whole = b"\x08" + _v(seconds) if seconds else b""
    if stored:
        if len(_seconds) >= MAX_KEPT:
            _seconds.clear()
        _seconds[text[:19]] = whole
    nanos = when.microsecond * 1000
    return whole + (b"\x10" + _v(nanos) if nanos else b"")
