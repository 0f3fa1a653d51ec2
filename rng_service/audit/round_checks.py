"""The checks of one round record against its rules and its shoe's reveal (the numbered checks
1 and 3 to 9 of :mod:`rng_service.audit.verifier`), each a named check
(:class:`~rng_service.audit.checks.Check`) of a :class:`RoundCase`, run in this order (the
orchestrator, :mod:`rng_service.audit.verifier`, lists them in ``round_checks``):

- ``round.read`` (:class:`RoundRead`): the record's bytes, as pass 1 read them, decoded;
- ``round.signature`` (:class:`RoundSignature`): signed by a trusted key;
- ``round.id`` (:class:`RoundId`): no other record has the round's id;
- ``round.times`` and ``round.key-period`` (:mod:`rng_service.audit.times`);
- ``round.version`` (:class:`RoundVersion`): the record's ``service_version`` is a version string
  (:func:`check_version`);
- ``round.rules`` (:mod:`rng_service.audit.rules_index`): the rule set the round names;
- ``round.decks`` (:class:`RoundDecks`): the shoe has the rules' number of decks
  (:func:`check_decks`);
- ``round.place`` (:class:`RoundPlace`): the round's place in its shoe, by the rules' shuffle
  policy (:func:`check_place`): a shoe per round (``every_round``) deals exactly one round, from
  card 0; a cut-card shoe's rounds, ordered by ``shoe.start``, tile it from card 0 (no burned
  cards, no card dealt twice) and each starts before the cut card (``Rules.cut_position``); no
  round follows a void one in its shoe;
- ``round.commitment`` (:mod:`rng_service.audit.commitments`) and ``round.shoe``
  (:mod:`rng_service.audit.reveals`): the shoe's commitment and its reveal;
- ``round.cards`` (:class:`RoundCards`): every recorded card is ``shoe[start:end]`` of the
  recomputed shoe (:func:`check_cards`);
- ``round.replay`` (:class:`RoundReplay`): ``game_math.Round`` is dealt the recomputed shoe with
  the recorded bets (:func:`deal`; a round void before its deal, no card and no action, is voided
  at once) and each recorded action is applied in turn (:func:`replay_actions`);
- ``round.outcome`` (:class:`RoundOutcome`): the record is rebuilt from the replay and compared
  member by member; a round recorded void must have had no settled wager (:func:`check_outcome`);
  a live round's ``mode`` is DEMO or REAL (:func:`round_mode`);
- ``round.wallet`` (:mod:`rng_service.audit.wallet_checks`): a seamless-wallet round's ``wallet``
  agrees with the replay's stakes and returns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import orjson

from game_math.cards import CODE_OF, Card, CardError
from game_math.errors import BetError, IllegalAction
from game_math.round import CardDealt, HandBet, Phase, Round, action_from_json
from game_math.rules import Rules
from rng_service.audit.checks import Check, SignatureCheck, Signed
from rng_service.audit.claims import load
from rng_service.audit.failures import AuditFailure, Doc, fail
from rng_service.audit.files import Unreadable, show, text_path
from rng_service.audit.spill import FirstSeen
from rng_service.core.json_input import JsonObject
from rng_service.core.text import token
from rng_service.crypto.signing import VerificationError, decode_signed, decode_signed_again
from rng_service.records.schema import RECORD_SCHEMA, ShoeRef, round_payload

#: the C walk that finds a replay the very value of the recorded one (None: not built)
_same_value: Callable[[object, object], bool] | None
try:  # the comparison's common case in C, built with the package (pyproject)
    from rng_service.audit._same_value import same_value as _built_same_value
except ImportError:  # pragma: no cover - a build without the C extensions
    _same_value = None
else:
    _same_value = _built_same_value

if TYPE_CHECKING:  # reveals.py holds the round's check against its reveal, so imports this
    from rng_service.audit.reveals import Reveal

#: the money a shoe's rounds are played for (a commitment's and a live round record's ``mode``)
MODES: Final = frozenset({"DEMO", "REAL"})
#: members compared in this order after the replay, so a failure names the most telling one
_COMPARE_ORDER: Final = (
    "game", "rules_digest", "level", "shoe", "cards", "actions", "hands", "dealer", "wagers",
    "total_staked", "total_returned", "status", "void_reason",
)
#: orjson's options for :func:`_same`: sorted keys, and a subclass of str, int, dict or list
#: refused rather than written as its base
_EXACT: Final = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS
#: the members of a hand's bet (``HandBet.from_json``), and the side bets of one without them
_HAND_BET_MEMBERS: Final = frozenset({"bet", "side_bets"})
_NO_SIDE_BETS: Final[dict[str, int]] = {}
#: what a round's case reads as its envelope and payload before its checks set them (never changed)
_NOTHING: Final[dict[str, Any]] = {}
#: a service version: what importlib.metadata reports, or "unknown"
_VERSION: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")


def check_version(doc: JsonObject) -> str:
    """The record's ``service_version``, if it is a version string."""
    version = doc.get_str("service_version")
    if not _VERSION.fullmatch(version):
        fail("service_version", f"{show(version)} is not a version (letters, digits and "
              ". + ! _ -, at most 64 characters)")
    return version


def check_decks(shoe: JsonObject, rules: Rules) -> None:
    """The shoe has the rules' number of decks."""
    decks = shoe.get_int("decks")
    if decks != rules.decks:
        fail("shoe.decks", f"recorded {decks}: {rules.game} deals from {rules.decks}-deck shoes")


class Pending(NamedTuple):
    """A round record queued for pass 2, with what it claims about its place (-1: unreadable),
    its times and whether it is void. Its file (:attr:`path`) is kept as text until asked for:
    a Pending unpickled (by a worker, or from a sorted run on disk) is rarely asked, and a Path
    made from text costs a sixth of a round's decoding. (A named tuple: one is made for every
    round pass 1 reads, by the audit's own process, at a third of a frozen dataclass's cost,
    whose every member is set through ``object.__setattr__``.)"""

    where: Path | str
    round_id: str
    shoe_id: str
    start: int
    end: int
    finished_at: str = ""
    void: bool = False
    follow: bool = False  # named by the auditor: a link to it may be followed
    #: the envelope's bytes: as pass 1 read them, or carried from an earlier audit's state
    #: (``path`` names it there)
    data: bytes | None = None
    #: where the payload's sorted encoding lies in ``data``, if pass 1 decoded these bytes and
    #: found them exactly an envelope's sorted encoding: pass 2 parses them again unchecked
    #: (:func:`~rng_service.crypto.signing.decode_signed_again`)
    span: tuple[int, int] | None = None

    @property
    def path(self) -> Path:
        """The round record's file (or ``<state>#leaf<index>``, carried from a state): the
        audit's process asks it once of a round (to name its finding)."""
        where = self.where
        return where if isinstance(where, Path) else text_path(where)

    @property
    def text(self) -> str:
        """:attr:`path` as text (what the rounds are sorted by), without making the Path."""
        where = self.where
        return where if isinstance(where, str) else str(where)

    def __reduce__(self) -> tuple[Any, ...]:
        # sent to the audit's workers and sorted in runs on disk: the path as text (a pickled
        # Path is rebuilt from its parts, at twice the cost)
        return (Pending, (self.text, *self[1:]))


class Place(NamedTuple):
    """What the other records say about a round's shoe: how many rounds it dealt, the round just
    before this one (by ``shoe.start``), if any, and the first void round before it, if any. (A
    named tuple: one is made for every round pass 2 checks, at half a frozen dataclass's cost.)"""

    rounds_in_shoe: int
    previous: Pending | None
    voided: Pending | None = None


def check_place(shoe: JsonObject, rules: Rules, place: Place) -> None:
    """The round's start in its shoe, by the rules' shuffle policy (see the module docstring)."""
    start = shoe.get_int("start")
    if place.voided is not None:
        fail("shoe.start", f"is {start}, after round {token(place.voided.round_id)} of this shoe "
              f"was voided (ending at {place.voided.end}): a void round finishes its shoe, and no "
              "further round is dealt from it")
    cut = rules.cut_position
    if cut is None:
        if place.rounds_in_shoe > 1:
            fail("shoe.id", f"{shoe.get_str('id')} dealt {place.rounds_in_shoe} rounds: "
                  f"{rules.game} reshuffles every round, so a shoe deals one")
        if start != 0:
            fail("shoe.start", f"is {start}: {rules.game} reshuffles every round, so a round "
                  "starts at card 0 of its shoe")
        return
    previous = place.previous
    if previous is None and start != 0:
        fail("shoe.start", f"is {start}: the first round of a shoe starts at card 0 (no record "
              "of a round before it; a shoe begun before an earlier audit's checkpoint is "
              "carried by that audit's --save-state, given as --since)")
    if previous is not None and previous.end >= 0 and start != previous.end:
        gap = start - previous.end
        cards = f"{abs(gap)} card{'s' if abs(gap) > 1 else ''}"
        how = f"{cards} burned" if gap > 0 else f"{cards} dealt twice"
        fail("shoe.start", f"is {start}, but the shoe's previous round {previous.round_id} "
              f"ended at {previous.end} ({how})")
    if start >= cut:
        fail("shoe.start", f"is {start}, at or past the cut card at {cut}: the shoe was due for "
              "a reshuffle")


def check_cards(doc: JsonObject, shoe: JsonObject, cards: Sequence[Card]) -> None:
    """Every recorded card is the recomputed shoe's card at its position, ``[start, end)``."""
    start, end = shoe.get_int("start"), shoe.get_int("end")
    if not 0 <= start <= end <= len(cards):
        fail("shoe.end", f"positions [{start}, {end}) are outside a {len(cards)}-card shoe")
    recorded = doc.get_list("cards")
    if len(recorded) != end - start:
        fail("cards", f"recorded {len(recorded)} cards for shoe positions [{start}, {end})")
    if recorded == [CODE_OF[card] for card in cards[start:end]]:  # str == str: exact
        return
    for i, (code, card) in enumerate(zip(recorded, cards[start:end], strict=True)):
        if code != CODE_OF[card]:
            fail(f"cards[{i}]", f"recorded {show(code)}, shoe {show(CODE_OF[card])} "
                  f"(position {start + i})")


def deal(doc: JsonObject, rules: Rules, cards: Sequence[Card],
         shoe: JsonObject | None = None) -> Round:
    """The round dealt from the recomputed shoe at ``shoe.start``, with the recorded bets; a
    round recorded void with no card dealt and no action is voided before its deal (its
    stakes were placed, none was confirmed taken: a seamless wallet that did not answer).
    ``shoe``: the record's ``shoe`` member, if the caller has read it already."""
    bets = doc.get_obj("bets")
    items = bets.get_list("hands")
    if shoe is None:
        shoe = doc.get_obj("shoe")
    try:
        hands = [_hand_bet(item, i) for i, item in enumerate(items)]
        return Round(rules, cards, hands, _side_stakes(bets), start=shoe.get_int("start"),
                     level=doc.get_str("level"),
                     void=(doc.get_opt_str("void_reason") or "") if unstarted(doc, shoe)
                     else None)
    except BetError as exc:
        fail(f"bets.{exc.field}" if exc.field != "level" else "level",
              str(exc).removeprefix(f"{exc.field}: "))


def _hand_bet(item: object, index: int) -> HandBet:
    """``HandBet.from_json(item, f"hands[{index}]")``: a plain bet (an object of an integer
    ``bet`` and, if any, an object of ``side_bets``) made here, without its ``Mapping`` tests
    and its where's text (two fifths of its cost); any other read by it, which says what is
    wrong with it (tests/audit/test_round_replay.py holds the two alike)."""
    if type(item) is dict and item.keys() <= _HAND_BET_MEMBERS:
        bet, side = item.get("bet"), item.get("side_bets", _NO_SIDE_BETS)
        if type(bet) is int and type(side) is dict:
            return HandBet(bet, dict(side))
    return HandBet.from_json(item, f"hands[{index}]")


def _side_stakes(bets: JsonObject) -> dict[str, int]:
    """``bets.get_int_map("side_bets")``: an object of integers taken as it is, anything else
    read by it (which fails it)."""
    side = bets.data.get("side_bets")
    if type(side) is dict and all(type(stake) is int for stake in side.values()):
        return dict(side)
    return bets.get_int_map("side_bets")


def unstarted(doc: JsonObject, shoe: JsonObject | None = None) -> bool:
    """The record is of a round void before its deal: no card dealt and no action. ``shoe``:
    the record's ``shoe`` member, if the caller has read it already."""
    if doc.get_str("status") != "void":
        return False
    if shoe is None:
        shoe = doc.get_obj("shoe")
    return (not doc.get_list("cards") and not doc.get_list("actions")
            and shoe.get_int("start") == shoe.get_int("end"))


def replay_actions(doc: JsonObject, rnd: Round) -> None:
    """Apply each recorded action in turn: awaited on the recorded hand, legal, and giving that
    hand the recorded cards; the actions end when the round does (unless it was voided).

    An entry is read from its object as it is; a reader of it (``Doc``), which names what is
    wrong, is made only for a member missing or of the wrong type. The hand awaited is the one
    in play (``Round.hand_in_play``), else ``Round.turn``'s (insurance, or none), which is made
    only then: the two made for every action were a fifth of the replay's own work."""
    entries = doc.get_list("actions")
    for i, item in enumerate(entries):
        hand = item.get("hand") if type(item) is dict else None
        if type(hand) is not int:
            hand = _entry(item, i).get_int("hand")  # fails, naming the entry or its member
        in_play = rnd.hand_in_play
        if rnd.finished:
            fail(f"actions[{i}]", f"the replayed round was over after {i} actions")
        awaited = in_play.id if in_play is not None else rnd.turn.hand
        if awaited != hand:
            fail(f"actions[{i}].hand", f"recorded {hand}, the replay awaits hand {awaited}")
        try:
            action = action_from_json(item["action"] if "action" in item
                                      else _entry(item, i).get("action"))
            events = rnd.act(action)
        except (ValueError, CardError, IllegalAction) as exc:
            fail(f"actions[{i}].action", f"{show(item['action'])} is refused: {exc}")
        dealt = [CODE_OF[e.card] for e in events
                 if isinstance(e, CardDealt) and e.hand == hand and e.card is not None]
        recorded = item.get("cards")
        if type(recorded) is not list:
            recorded = _entry(item, i).get_list("cards")  # fails
        if recorded != dealt:
            fail(f"actions[{i}].cards", f"recorded {show(recorded)}, replay {show(dealt)}")
    if not rnd.finished and doc.get_str("status") != "void":  # void: a malfunction stopped play
        fail("actions", f"end after {len(entries)} actions, but the replay awaits a "
              f"{rnd.turn.decision} decision on hand {rnd.turn.hand}")


def _entry(item: object, index: int) -> Doc:
    """The reader of action entry ``index``, which fails on what is wrong with it."""
    return Doc(item, f"actions[{index}]")


def _compare(path: str, recorded: object, replay: object) -> None:
    """Fails at the first member where ``recorded`` and ``replay`` differ (types included)."""
    if isinstance(recorded, dict) and isinstance(replay, dict):
        for key in [*replay, *(k for k in recorded if k not in replay)]:
            sub = f"{path}.{key}" if path else key
            if key not in recorded:
                fail(sub, f"is missing (replay {show(replay[key])})")
            if key not in replay:
                fail(sub, "is not a member of a round record")
            _compare(sub, recorded[key], replay[key])
    elif isinstance(recorded, list) and isinstance(replay, list):
        for i, (r, p) in enumerate(zip(recorded, replay, strict=False)):
            _compare(f"{path}[{i}]", r, p)
        if len(recorded) != len(replay):
            fail(path, f"recorded {len(recorded)} entries, replay {len(replay)}")
    elif type(recorded) is not type(replay) or recorded != replay:
        fail(path, f"recorded {show(recorded)}, replay {show(replay)}")


def round_mode(doc: JsonObject) -> str | None:
    """A live round's ``mode`` (DEMO or REAL); None for a record of the replay, which plays no
    money and records none (a signed record cannot lose the member it was signed with)."""
    if not doc.has("mode"):
        return None
    mode = doc.get_str("mode")
    if mode not in MODES:
        fail("mode", f"must be DEMO or REAL, got {show(mode)}")
    return mode


def check_outcome(payload: dict[str, Any], doc: JsonObject, rnd: Round,
                  recorded: bytes = b"", shoe: JsonObject | None = None) -> None:
    """The record rebuilt from the replay equals the recorded one, member by member; a round
    recorded void is voided in the replay, if no wager was settled. (Its ``wallet`` is checked
    against the replay next, by ``round.wallet``.) ``recorded``: the payload's canonical bytes,
    if the caller has them (:func:`rng_service.crypto.signing.verify_signed`); ``shoe``: the
    record's ``shoe`` member, if the caller has read it already."""
    status = doc.get_str("status")
    if status == "void" and rnd.phase is not Phase.VOID:
        if rnd.finished:
            fail("status", 'recorded "void", but the replay settled the round after the '
                  "recorded actions: a settled round cannot be voided")
        settled = [w for w in rnd.wagers if w.returned is not None]
        if settled:
            fail("status", f'recorded "void", but wager {settled[0].id} ({settled[0].kind}) '
                  f"was settled before the void (returned {settled[0].returned}): only a round "
                  "with no settled wager can be voided")
        rnd.void(doc.get_opt_str("void_reason") or "")  # a malfunction: stakes returned
    if shoe is None:
        shoe = doc.get_obj("shoe")
    expected = round_payload(
        rnd, round_id=doc.get_str("round_id"),
        shoe=ShoeRef(shoe.get_str("id"), shoe.get_str("commitment"), shoe.get_int("decks"),
                     shoe.get_hex("client_seed")),
        started_at=doc.get_str("started_at"), finished_at=doc.get_str("finished_at"),
        version=doc.get_str("service_version"), mode=round_mode(doc),
        wallet=payload.get("wallet"))  # checked below, against the replay's stakes
    if not _same(payload, expected, recorded):
        ordered = {k: expected[k] for k in _COMPARE_ORDER}
        ordered.update(expected)
        _compare("", payload, ordered)


def _same(recorded: dict[str, Any], replay: dict[str, Any], recorded_bytes: bytes = b"") -> bool:
    """:func:`_same_reference`'s answer: a replay found the very value of the recorded one,
    type for type, by the C walk (:data:`_same_value`) is the same without more; any other is
    judged by the reference (tests/audit/test_round_compare.py holds the two alike)."""
    if _same_value is not None and _same_value(recorded, replay):
        return True
    return _same_reference(recorded, replay, recorded_bytes)


def _same_reference(recorded: dict[str, Any], replay: dict[str, Any],
                    recorded_bytes: bytes = b"") -> bool:
    """True only if :func:`_compare` would find no difference, in a sixth of its time: equal as
    Python values (a list is not a tuple) and equal canonical bytes (``1`` is not ``true`` nor
    ``1.0``; orjson refuses a subclass of str or int, as _compare's type test would). False
    leaves it to _compare, which names the first difference. (An Enum, which orjson writes as
    its value, is the one type this cannot tell from its value: the recorded side is parsed
    JSON, and the replay's is :func:`round_payload`'s, whose output the writer signs, and
    signing refuses an Enum.)

    ``recorded_bytes``, the recorded payload's canonical bytes as its signature check made
    them, spare encoding it again: the replay's bytes equal to them are the recorded value's
    own encoding, every type spelled as parsed. (They differ from orjson's only where JCS
    orders keys otherwise, a key beyond U+FFFF: then the recorded side is encoded here.)"""
    if recorded != replay:
        return False
    try:
        replay_bytes = orjson.dumps(replay, option=_EXACT)
        if recorded_bytes and replay_bytes == recorded_bytes:
            return True
        return bool(orjson.dumps(recorded, option=_EXACT) == replay_bytes)
    except TypeError:  # orjson.JSONEncodeError: a subclass, or what JSON has no type for
        return False


# --- the round's checks, as named objects --------------------------------------------------------


class RoundCase(Signed):
    """A round record being checked: what each check established for the checks after it (the
    payload once its signature verified, the rules it names, its shoe's reveal and cards, the
    replayed round). What the checks set is read from the class until they have (a case is
    made for every round, and its constructor set them all: a fifth of the pass's glue)."""

    envelope: dict[str, Any] = _NOTHING
    payload: dict[str, Any] = _NOTHING
    #: the id, once ``round.id`` read it (it judges the id once every round is checked)
    round_id: str | None = None
    doc: Doc = Doc(_NOTHING, "")
    version = ""
    #: ``finished_at``, once ``round.times`` read it (``round.key-period`` needs it again)
    finished: datetime | None = None
    rules: Rules | None = None
    reveal: Reveal | None = None
    cards: Sequence[Card] = ()
    rnd: Round | None = None
    _shoe: JsonObject | None = None

    def __init__(self, path: Path | str, place: Place, *, follow: bool = False,
                 data: bytes | None = None, span: tuple[int, int] | None = None) -> None:
        #: the record's file (:attr:`path`), as text until asked for (:class:`Pending`)
        self.where = path
        self.place = place
        self.follow = follow
        #: the envelope's bytes (as pass 1 read them, or carried from an earlier audit's
        #: state), and where pass 1 found the payload's encoding in them (:class:`Pending`)
        self.data = data
        self.span = span

    @property
    def path(self) -> Path:
        """The record's file (or ``<state>#leaf<index>``, carried from a state)."""
        where = self.where
        if isinstance(where, str):
            where = self.where = text_path(where)
        return where

    @property
    def ident(self) -> str:
        """What the round's line is named by: the id it claims, else its file's name (its
        Path made only then: :func:`~rng_service.audit.claims.label`)."""
        payload = self.envelope.get("payload")
        claimed = payload.get("round_id") if isinstance(payload, dict) else None
        return claimed if isinstance(claimed, str) and claimed else self.path.name

    @property
    def kid(self) -> str:
        """The id of the key that signed the record."""
        return str(self.envelope["signature"]["key_id"])

    @property
    def shoe(self) -> JsonObject:
        """The record's ``shoe`` member (read once, by the first check that needs it)."""
        if self._shoe is None:
            self._shoe = self.doc.get_obj("shoe")
        return self._shoe

    def need_rules(self) -> Rules:
        """The rules ``round.rules`` found (it runs before every check that needs them)."""
        assert self.rules is not None, "round.rules runs first"
        return self.rules

    def need_round(self) -> Round:
        """The round ``round.replay`` replayed."""
        assert self.rnd is not None, "round.replay runs first"
        return self.rnd


class RoundRead(Check[RoundCase]):
    """The record's bytes decoded, one JSON object: the bytes pass 1 read and hashed into the
    log check (carried with the round through the sort), or those carried from an earlier
    audit; the file is read here only for a case made without bytes. Bytes that pass 1 decoded
    and found exactly an envelope's sorted encoding, within every limit (``span``), are parsed
    again without those checks (:func:`~rng_service.crypto.signing.decode_signed_again`):
    decoding a round costs half as much the second time."""

    name = "round.read"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        data, span = subject.data, subject.span
        try:
            subject.envelope, subject.encoded = (
                load(subject.path, subject.follow) if data is None
                else decode_signed(data) if span is None
                else decode_signed_again(data, span))
        except Unreadable as exc:
            fail(None, str(exc))
        except VerificationError as exc:
            fail(exc.field, str(exc))


class RoundSignature(SignatureCheck[RoundCase]):
    """1. The record is a round record signed by a key the auditor trusts (the envelope's
    failures: ``signature.*``, ``payload.schema``)."""

    name = "round.signature"
    schema = RECORD_SCHEMA

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        super().check(subject)
        subject.doc = Doc(subject.payload, "")


class RoundId(Check[RoundCase]):
    """No other round record of the collection has this round's id (``round_id is also the id
    of ...``): the first record of an id in the rounds' order keeps it. The rounds are checked
    shoe by shoe, perhaps by several processes, so :meth:`check` reads the id and :meth:`first`
    judges it once every round is checked, in that order (the auditor then fails the record
    here, whatever a later check of it found)."""

    name = "round.id"

    def __init__(self, seen: FirstSeen | None = None) -> None:
        #: the first record of each id: in the audit's scratch store, so a million ids are
        #: not held in memory
        self.seen = seen or FirstSeen()

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.round_id = subject.doc.get_str("round_id")

    def first(self, round_id: str, path: Path) -> None:
        """Fail unless ``path`` is the first record, in the rounds' order, of ``round_id``."""
        failure = self.first_many([(round_id, path)])[0]
        if failure is not None:
            raise failure

    def claim(self, round_id: str) -> None:
        """A round's id as pass 1 read it (:class:`Pending`), claimed before any is judged
        (:meth:`FirstSeen.claim`)."""
        self.seen.claim(round_id)

    def first_many(self, rounds: Sequence[tuple[str, Path]],
                   claimed: Sequence[str] | None = None) -> list[AuditFailure | None]:
        """:meth:`first` of each ``(round_id, path)`` in turn, judged together: how each
        fails, or None. ``claimed``: the id each round claimed as pass 1 read it, every round
        of the audit's having claimed its own (:meth:`claim`): a round that has the id it
        claimed, an id no other round claimed, is first without the store
        (:meth:`FirstSeen.first_many`)."""
        texts = [str(path) for _, path in rounds]
        seen = self.seen.first_many([(round_id, text) for (round_id, _), text
                                     in zip(rounds, texts, strict=True)], claimed)
        return [None if first == text else
                AuditFailure("round_id", f"is also the id of {token(first)}")
                for first, text in zip(seen, texts, strict=True)]


class RoundVersion(Check[RoundCase]):
    """9. ``service_version`` is a version string."""

    name = "round.version"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.version = check_version(subject.doc)


class RoundDecks(Check[RoundCase]):
    """3. The shoe has the rules' number of decks (``shoe.decks recorded N: GAME deals from
    M-deck shoes``)."""

    name = "round.decks"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        check_decks(subject.shoe, subject.need_rules())


class RoundPlace(Check[RoundCase]):
    """4 and 8. The round's place in its shoe, by the rules' shuffle policy, and no round after a
    void one (``shoe.start``, ``shoe.id``: :func:`check_place`)."""

    name = "round.place"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        check_place(subject.shoe, subject.need_rules(), subject.place)


class RoundCards(Check[RoundCase]):
    """5. The shoe recomputed from the reveal's seed (``reveal.seed cannot shuffle the shoe``),
    and every recorded card is its card at that position (``cards[i]``, ``cards``,
    ``shoe.end``)."""

    name = "round.cards"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        assert subject.reveal is not None, "round.shoe runs first"
        subject.cards = subject.reveal.round_cards(subject.place.rounds_in_shoe)
        check_cards(subject.doc, subject.shoe, subject.cards)


class RoundReplay(Check[RoundCase]):
    """6. The round dealt from the recomputed shoe with the recorded bets (``bets.*``,
    ``level``), and each recorded action replayed (``actions[i].*``, ``actions``)."""

    name = "round.replay"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.rnd = deal(subject.doc, subject.need_rules(), subject.cards, subject.shoe)
        replay_actions(subject.doc, subject.rnd)


class RoundOutcome(Check[RoundCase]):
    """7 and 8. The record rebuilt from the replay equals the recorded one, member by member, and
    a round recorded void had no settled wager (``status``, ``hands``, ``wagers[i].*``, ...)."""

    name = "round.outcome"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        check_outcome(subject.payload, subject.doc, subject.need_round(),
                      subject.payload_bytes, subject.shoe)
