"""The offline audit: check signed round records against revealed seeds and the game's rules.

For every round record (``rng_service.records.schema``):

1. its signature, by a key the auditor trusts (keys lying beside the records are never used);
2. the rules: ``rules_digest`` names a known rule set, one of the built-in games' or that of a
   rules document (``fairshoe.rules/v1``) found under the paths given, and it is the game named.
   A document's digest is recomputed from its content (``rules_from_dict(...).digest()``), never
   read from its file name: the signed digest is what makes an unsigned document trustworthy;
3. the shoe: it has the rules' number of decks; a reveal of it exists and is signed by a trusted
   key, its seed opens both the reveal's and the record's commitment, decks and client seed
   agree, and no other shoe id has the same commitment (a seed serves one shoe);
4. the round's place in its shoe, by the rules' shuffle policy: a shoe per round (``every_round``)
   deals exactly one round, from card 0; a cut-card shoe's rounds, ordered by ``shoe.start``,
   tile it from card 0 (each starts where the previous one ended: no burned cards, no card
   dealt twice) and each starts before the cut card (``Rules.cut_position``), so only the last may
   run past it;
5. the cards: the shoe is recomputed from (seed, client seed, decks) and every recorded card is
   compared with ``shoe[start:end]``;
6. the replay: ``game_math.Round`` is dealt the recomputed shoe from ``start`` with the recorded
   bets, and each recorded action is applied in turn: it must be awaited on the recorded hand, be
   legal, and give that hand the recorded cards. A round recorded void may stop awaiting a
   decision (a malfunction voided it mid-play); the replay is then voided with the recorded
   reason, which refuses a round the replay settled;
7. the outcome: the record is rebuilt from the replay and compared member by member (hands,
   dealer, every wager's stake, return and outcome, totals, status, end position).

Beside the replay, a record must respect what the live service enforces and what its key allows:

8. void: a round recorded void must have had no settled wager when it was voided (the live service
   refuses such a void: ``WAGER_SETTLED``), and a void round finishes its shoe, so any round of
   that shoe after it (by ``shoe.start``) fails;
9. times: ``started_at`` and ``finished_at`` are RFC 3339, in that order, no later than the
   audit's clock (:data:`CLOCK_SKEW` allowed), and a round starts no earlier than the round before
   it in its shoe finished; ``service_version`` is a version string;
10. the key's period: the signing key's validity period (:class:`AuditOptions` ``validity``, from
    the ``valid_from``/``valid_until`` of the trusted JWKs) covers ``finished_at``;
11. custom rules: a rules document under a built-in game's id whose rules are not that game's
    fails, and so does every round naming it, unless its digest is in ``allow_custom_rules``.

Every file is read bounded (:mod:`rng_service.audit.files`: a regular file of at most
``MAX_FILE_BYTES``, opened without blocking or following links, parsed by
:mod:`rng_service.core.json_input`) and checked within a per-file time bound (``file_timeout``);
below a directory named, links, FIFOs and other special files, and directories inside a record
directory, are FAIL lines, never followed. Every line is printed escaped (:meth:`Finding.line`).

Key records (``fairshoe.key/v1``, under ``keys/``) must be signed by the key they name, which must
be the trusted key of that id (their ``jwk``), within its validity period. Shoe commitments
(``fairshoe.shoe-commitment/v1``, under ``shoes/``) must be signed by a trusted key, one per shoe
and one shoe per commitment, and a committed shoe's rounds and reveal must agree with its
commitment (commitment, decks, game, rules). A committed shoe with no reveal is in play (a live
export holds the shoe being dealt and the next one): counted in the summary, and its rounds are
OPEN, checked as far as they can be without the seed and failed by nothing else; a later audit
checks them once the shoe is revealed. A round of a shoe neither revealed nor committed is
UNREVEALED, which fails. A collection's ``log/`` is checked by :mod:`rng_service.audit.log_audit`
(completeness against the auditor's checkpoint, ``AuditOptions.log``).

RNG records (``fairshoe.rng/v1``, under ``rng/``) are checked like a round, against their reveal
(``fairshoe.rng-reveal/v1``, under ``rng-reveals/``): both signatures by trusted keys, the
parameters within the convention's bounds, the reveal's seed opening the record's commitment
(:func:`rng_service.rng.draws.rng_commitment`; no two draws share one), and every result
recomputed from the seed, the kind, the parameters and the client seed by
:func:`rng_service.rng.draws.draw`, whose module docstring gives the exact byte convention. A
record without a reveal is unrevealed, so it does not pass.

The summary is a few short lines of counts, then the verdict: ``audit PASS`` or ``audit FAIL``
and what was judged, ``complete against checkpoint <size>`` (or ``NOT complete``) with
``--checkpoint``, else ``completeness not judged``.

The first disagreement is the record's failure, named by its field (``wagers[2].returned``). A
record whose shoe has no reveal yet is reported as unrevealed: it cannot be verified, so it does
not pass. Reveals and rules documents get a line of their own; a rules document whose content
does not hash to the digest its file name claims fails (it was altered). Rounds are checked
grouped by shoe, so a cut-card shoe shared by many rounds is recomputed once; a record that fails
keeps its claimed place in its shoe, so its neighbours are judged as if it were genuine.

Every file in a record directory, and every file named explicitly, must be a signed envelope (or
a rules document): anything else there fails, and a bare record or reveal payload fails as
unsigned. A record directory is a ``rounds/`` or ``reveals/`` directory that is not itself laid out
as a collection root (a directory holding ``rounds/``, ``reveals/`` or ``rules/``), and everything
below it up to the next collection root: roles are judged from the collection's own layout, so a
collection may be named ``rounds`` or kept under ``reveals/``. Elsewhere, ``*.json`` files are
read: a ``keys.jwks.json`` that is a JWK Set is passed over (keys beside the records are never
trusted), any other file that is neither an envelope nor a rules document is reported as skipped,
and a skip fails the audit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NoReturn

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from game_math.cards import CODE_OF, Card
from game_math.errors import BetError, GameMathError, IllegalAction, RulesError
from game_math.games import game_rules
from game_math.round import CardDealt, HandBet, Phase, Round, action_from_json
from game_math.rules import GAME_IDS, Rules, rules_from_dict
from rng_service.audit.files import (
    FileClock,
    FileTimeout,
    Finding,
    Status,
    Unreadable,
    clip,
    file_type,
    read_file,
    show,
    tok,
)
from rng_service.audit.log_audit import (
    LEAF_DIRS,
    Completeness,
    LeafFile,
    LogAudit,
    LogContext,
    LogSource,
    path_key,
)
from rng_service.core.errors import IntegrityFailure, NotFound
from rng_service.core.json_input import JsonObject
from rng_service.core.text import escape, token
from rng_service.core.times import CLOCK_SKEW, parse_rfc3339
from rng_service.crypto.keys import (
    ALWAYS_VALID,
    KeyFileError,
    KeyValidity,
    jwk_to_public_key,
    raw_public_bytes,
)
from rng_service.crypto.signing import VerificationError, decode_envelope, verify_envelope
from rng_service.log import DEFAULT_ORIGIN, leaf_hash
from rng_service.records.schema import (
    KEY_SCHEMA,
    KEYS_FILE,
    LOG_SUBDIR,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    RNG_REVEAL_SCHEMA,
    RNG_SCHEMA,
    RULES_SCHEMA,
    RULES_SUBDIR,
    SHOE_COMMITMENT_SCHEMA,
    ShoeRef,
    round_payload,
)
from rng_service.rng.draws import DrawRequest, InvalidDrawInput, check_request, draw, rng_commitment
from rng_service.rng.shoe import MAX_CLIENT_SEED_BYTES, MAX_DECKS, seed_commitment, shoe_cards

_ENVELOPE_MEMBERS: Final = frozenset({"format", "payload", "signature"})
_RULES_MEMBERS: Final = frozenset({"schema", "rules"})
_DIGEST_NAME: Final = re.compile(r"[0-9a-f]{64}")
#: directories whose every file must be a signed envelope
_RECORD_DIRS: Final = frozenset(LEAF_DIRS.values())
#: what a collection root holds beside its keys copy: how one is told from a record directory
_LAYOUT_DIRS: Final = (*sorted(_RECORD_DIRS), RULES_SUBDIR, LOG_SUBDIR)
_KEY_MEMBERS: Final = frozenset({"schema", "key_id", "jwk", "valid_from"})
_COMMITMENT_MEMBERS: Final = frozenset({"schema", "shoe_id", "commitment", "game", "rules_digest",
                                        "decks", "mode", "created_at"})
#: the money a shoe's rounds are played for (a commitment's and a live round record's ``mode``)
_MODES: Final = frozenset({"DEMO", "REAL"})
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
#: an unsigned payload of each schema fails as this kind of finding, named by this member
_BARE_KINDS: Final = {RECORD_SCHEMA: ("round", "round_id"), REVEAL_SCHEMA: ("shoe", "shoe_id"),
                      KEY_SCHEMA: ("key", "key_id"),
                      SHOE_COMMITMENT_SCHEMA: ("commitment", "shoe_id")}
#: members compared in this order after the replay, so a failure names the most telling one
_COMPARE_ORDER: Final = (
    "game", "rules_digest", "level", "shoe", "cards", "actions", "hands", "dealer", "wagers",
    "total_staked", "total_returned", "status", "void_reason",
)


@dataclass
class AuditReport:
    """What an audit found: one finding per file checked, plus the files it passed over
    and the tallies its summary prints."""

    findings: list[Finding] = field(default_factory=list)
    #: files that are neither envelopes nor rules documents: the audit did not check them, so fails
    skipped: list[Path] = field(default_factory=list)
    #: keys.jwks.json files beside the records: passed over, never trusted (keys come from --keys)
    keys_files: list[Path] = field(default_factory=list)
    #: rules digest -> (game, "built-in", "custom" or "custom, allowed"), for the summary
    rule_sets: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: service version -> records of it that passed, for the summary
    versions: Counter[str] = field(default_factory=Counter)
    #: shoes committed (in the collection or carried from an earlier audit) and not revealed:
    #: still in play, so neither a failure nor discarded; a later audit checks them
    open_shoes: list[str] = field(default_factory=list)
    #: what the log checks showed, one line of the summary per log
    log_notes: list[str] = field(default_factory=list)
    #: completeness against the auditor's checkpoint (None: not judged, no checkpoint given)
    completeness: Completeness | None = None

    def count(self, kind: str, status: Status | None = None) -> int:
        """How many findings are of ``kind`` (and of ``status``, if given)."""
        return sum(1 for f in self.findings
                   if f.kind == kind and (status is None or f.status is status))

    @property
    def passed(self) -> bool:
        """True only if at least one round or RNG record was checked, every file passed (a
        round of a shoe in play aside) and none was skipped."""
        return (self.count("round") + self.count("rng") > 0 and not self.skipped
                and all(f.status in (Status.OK, Status.OPEN) for f in self.findings))

    def verdict(self) -> str:
        """The last line: PASS or FAIL, then what was judged (completeness against which
        checkpoint, or not judged), then how many checks failed."""
        judged = (self.completeness.words() if self.completeness is not None else
                  "completeness not judged")
        bad = sum(1 for f in self.findings if f.status not in (Status.OK, Status.OPEN))
        bad += len(self.skipped)
        if self.passed:
            hint = (" (it needs a checkpoint obtained independently: --checkpoint)"
                    if self.completeness is None else "")
            return f"audit PASS, {judged}{hint}"
        return f"audit FAIL, {judged}" + (f": {bad} checks FAIL" if bad else "")

    def summary_lines(self) -> list[str]:
        """The report in a few short lines of counts, the verdict last, each escaped."""
        lines = [self._rounds_line(), self._shoes_line()]
        if self.count("rng") or self.count("rng-reveal"):
            lines.append(f"{self.count('rng')} RNG draws: {self.count('rng', Status.OK)} OK, "
                         f"{self.count('rng', Status.FAIL)} FAIL, "
                         f"{self.count('rng', Status.UNREVEALED)} unrevealed; "
                         f"{self.count('rng-reveal', Status.OK)} RNG reveals OK")
        others = [f"{self.count(kind)} {name}: {self.count(kind, Status.OK)} OK"
                  for kind, name in (("key", "key records"), ("commitment", "shoe commitments"),
                                     ("rules", "rules documents")) if self.count(kind)]
        if others:
            lines.append("; ".join(others))
        lines.extend(self.log_notes)
        problems = [f"{n} {what}" for n, what in (
            (self.count("leaf") + self.count("log", Status.FAIL), "log checks FAIL"),
            (self.count("state", Status.FAIL), "carried state checks FAIL"),
            (self.count("file"), "other files FAIL"),
            (len(self.skipped), "skipped (neither signed records nor rules documents)")) if n]
        if problems:
            lines.append("; ".join(problems))
        if self.keys_files:
            lines.append(f"{len(self.keys_files)} keys files not used (trusted keys come from "
                         "--keys only)")
        if self.versions:
            lines.append("service versions: " + ", ".join(
                f"{token(clip(v))} ({n})" for v, n in sorted(self.versions.items())))
        lines.extend(f"rules: {token(clip(game))} {digest[:16]} ({kind})"
                     for digest, (game, kind) in sorted(self.rule_sets.items()))
        lines.append(self.verdict())
        return [escape(line, backslash=False) for line in lines]

    def summary(self) -> str:
        """:meth:`summary_lines` as the audit command prints them."""
        return "\n".join(self.summary_lines())

    def _rounds_line(self) -> str:
        line = (f"{self.count('round')} rounds: {self.count('round', Status.OK)} OK, "
                f"{self.count('round', Status.FAIL)} FAIL")
        for status, words in ((Status.OPEN, "in play"), (Status.UNREVEALED, "unrevealed")):
            if self.count("round", status):
                line += f", {self.count('round', status)} {words}"
        void = sum(1 for f in self.findings if f.kind == "round" and f.void)
        return line + (f" ({void} void among the OK: stakes returned)" if void else "")

    def _shoes_line(self) -> str:
        line = f"{self.count('shoe')} shoe reveals: {self.count('shoe', Status.OK)} OK"
        if self.open_shoes:
            line += (f"; {len(self.open_shoes)} shoes in play (not finished: checked once "
                     "revealed)")
        return line


class AuditFailure(IntegrityFailure):
    """A check that failed: ``field`` names where, the message says how."""

    reason_code = "AUDIT_CHECK_FAILED"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)
        # the messages continue the field as a sentence ("rules_digest does not match ...")
        self.args = (f"{field} {message}",)
        self.message = message


class AuditInputError(NotFound):
    """A path that does not exist or cannot be read."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


def _fail(field: str, message: str) -> NoReturn:
    raise AuditFailure(field, message)


# --- typed access to an untrusted payload --------------------------------------------------------


class _Doc(JsonObject):
    """The one typed JSON reader (:mod:`rng_service.core.json_input`), failing a record: a
    missing member or a wrong type is an :class:`AuditFailure` naming the member's path."""

    error = AuditFailure


# --- reveals -------------------------------------------------------------------------------------


@dataclass
class Reveal:
    """A shoe reveal whose signature verified, and whether its seed opens its commitment."""

    shoe_id: str
    commitment: str
    seed: bytes
    client_seed: bytes
    decks: int
    path: Path
    opens: bool
    #: other shoe ids revealed with the same commitment (so the same seed)
    shared_with: tuple[str, ...] = ()
    #: why the shoe cannot be recomputed from this seed, once that was tried
    unusable: str | None = None
    recomputed: bool = False
    _cards: list[Card] | None = None

    def cards(self) -> list[Card]:
        """The shoe recomputed from the seed; AuditFailure on ``reveal.seed`` if it cannot be."""
        if self.unusable is not None:
            _fail("reveal.seed", self.unusable)
        if self._cards is None:
            try:
                self._cards = shoe_cards(self.seed, self.client_seed, self.decks)
            except ValueError as exc:
                # the seed's length is the shoe module's rule (InvalidShoeInput), not the audit's
                self.unusable = f"cannot shuffle the shoe: {exc}"
                _fail("reveal.seed", self.unusable)
            self.recomputed = True
        return self._cards

    def drop_cards(self) -> None:
        """Forget the recomputed shoe; :meth:`cards` recomputes it if asked again."""
        self._cards = None

    def same_as(self, other: Reveal) -> bool:
        """True if ``other`` reveals the same shoe: same commitment, seed, client seed and
        decks (the file it came from may differ)."""
        return (self.commitment, self.seed, self.client_seed, self.decks) == (
            other.commitment, other.seed, other.client_seed, other.decks)


def _read_reveal(payload: Mapping[str, Any], path: Path) -> Reveal:
    doc = _Doc(payload, "")
    seed = doc.get_hex("seed")  # its length is the shoe's rule: shoe_cards checks it (Reveal.cards)
    decks = doc.get_int("decks")
    if not 1 <= decks <= MAX_DECKS:
        _fail("decks", f"must be 1..{MAX_DECKS}, got {decks}")
    client_seed = doc.get_hex("client_seed")
    if len(client_seed) > MAX_CLIENT_SEED_BYTES:
        _fail("client_seed", f"has {len(client_seed)} bytes, more than {MAX_CLIENT_SEED_BYTES}")
    commitment = doc.get_str("commitment")
    return Reveal(doc.get_str("shoe_id"), commitment, seed, client_seed, decks, path,
                  opens=seed_commitment(seed) == commitment)


# --- rounds --------------------------------------------------------------------------------------


def _parse_rules(data: dict[str, Any]) -> Rules:
    try:
        return rules_from_dict(data)
    except RulesError as exc:
        _fail(f"rules.{exc.key}", str(exc).removeprefix(f"{exc.key}: "))
    except (GameMathError, ValueError, TypeError, KeyError, RecursionError) as exc:
        _fail("rules", f"cannot be read: {type(exc).__name__}: {exc}")


class RulesIndex:
    """The rule sets a record may name, by digest: the built-in games' and those of the rules
    documents added. Only a digest recomputed from a document's content enters the index.

    A document whose game id is a built-in game's but whose rules differ from that game's is a
    custom rule set posing as the built-in game (blackjack paying 1:2 as ``double-exposure``): it
    fails, and so does every round naming it, unless the auditor named its digest in ``allowed``
    (``--allow-custom-rules``). A custom rule set under an id of its own is reported as custom.
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.builtin: dict[str, Rules] = {game_rules(g).digest(): game_rules(g) for g in GAME_IDS}
        self.builtin_of: dict[str, str] = {r.game: d for d, r in self.builtin.items()}
        self.allowed = frozenset(allowed)
        self.documents: dict[str, Rules] = {}
        #: custom rule sets under a built-in game's id that the auditor did not allow
        self.impostors: dict[str, Rules] = {}
        #: digest a document's file name claims -> (that document, the digest it really has)
        self.altered: dict[str, tuple[Path, str]] = {}

    def add_document(self, data: dict[str, Any], path: Path) -> tuple[Rules, str]:
        """Index a rules document; AuditFailure if it is not one or its name belies it."""
        doc = _Doc(data, "")
        if doc.get_str("schema") != RULES_SCHEMA:
            _fail("schema", f"is {show(doc.data['schema'])}, not {RULES_SCHEMA}")
        extra = sorted(set(data) - _RULES_MEMBERS)
        if extra:
            _fail(extra[0], "is not a member of a rules document")
        rules = _parse_rules(doc.get_obj("rules").data)
        digest = rules.digest()
        claimed = path.stem
        if _DIGEST_NAME.fullmatch(claimed) and claimed != digest:
            self.altered[claimed] = (path, digest)
            _fail("rules", f"hash to {digest}, not to the digest {claimed} the file is named "
                  "after: the document was altered")
        builtin = self.builtin_of.get(rules.game)
        if builtin is not None and digest != builtin and digest not in self.allowed:
            self.impostors[digest] = rules
            _fail("rules.game", f"is {show(rules.game)}, a built-in game's id, but these rules "
                  f"(digest {digest}) are not the built-in {rules.game}'s ({builtin}): a custom "
                  f"rule set passes only if the auditor names it (--allow-custom-rules {digest})")
        self.documents.setdefault(digest, rules)
        return rules, digest

    def is_builtin(self, digest: str) -> bool:
        """True if ``digest`` is the rule set of a built-in game."""
        return digest in self.builtin

    def label(self, digest: str) -> str:
        """How the summary names a rule set: built-in, custom, or custom and allowed."""
        if digest in self.builtin:
            return "built-in"
        return "custom, allowed" if digest in self.allowed else "custom"

    def resolve(self, digest: str, game: str) -> Rules:
        """The rule set a record names; AuditFailure on ``rules_digest`` or ``game`` if none."""
        rules = (self.builtin.get(digest) or self.documents.get(digest)
                 or self.impostors.get(digest))
        if rules is None:
            hint = ""
            if digest in self.altered:
                path, real = self.altered[digest]
                hint = f" ({tok(path)} is named after it but hashes to {real}: it was altered)"
            _fail("rules_digest", f"{digest} is not a built-in rule set and no rules document "
                  f"given hashes to it{hint}: pass its rules file (rules/{digest}.json, schema "
                  f"{RULES_SCHEMA}) among the PATHS")
        if rules.game != game:
            _fail("game", f"recorded {show(game)}, rule set {digest} is for {show(rules.game)}")
        if digest in self.impostors:
            _fail("rules_digest", f"{digest} is a custom rule set under the built-in game id "
                  f"{show(game)}, which the auditor did not allow (--allow-custom-rules)")
        return rules


def _check_decks(shoe: JsonObject, rules: Rules) -> None:
    decks = shoe.get_int("decks")
    if decks != rules.decks:
        _fail("shoe.decks", f"recorded {decks}: {rules.game} deals from {rules.decks}-deck shoes")


@dataclass(frozen=True)
class _Pending:
    """A round record queued for pass 2, with what it claims about its place (-1: unreadable),
    its times and whether it is void."""

    path: Path
    round_id: str
    shoe_id: str
    start: int
    end: int
    finished_at: str = ""
    void: bool = False
    follow: bool = False  # named by the auditor: a link to it may be followed


@dataclass(frozen=True)
class _Place:
    """What the other records say about a round's shoe: how many rounds it dealt, the round just
    before this one (by ``shoe.start``), if any, and the first void round before it, if any."""

    rounds_in_shoe: int
    previous: _Pending | None
    voided: _Pending | None = None


def _check_place(shoe: JsonObject, rules: Rules, place: _Place) -> None:
    """The round's start in its shoe, by the rules' shuffle policy (see the module docstring)."""
    start = shoe.get_int("start")
    if place.voided is not None:
        _fail("shoe.start", f"is {start}, after round {token(place.voided.round_id)} of this shoe "
              f"was voided (ending at {place.voided.end}): a void round finishes its shoe, and no "
              "further round is dealt from it")
    cut = rules.cut_position
    if cut is None:
        if place.rounds_in_shoe > 1:
            _fail("shoe.id", f"{shoe.get_str('id')} dealt {place.rounds_in_shoe} rounds: "
                  f"{rules.game} reshuffles every round, so a shoe deals one")
        if start != 0:
            _fail("shoe.start", f"is {start}: {rules.game} reshuffles every round, so a round "
                  "starts at card 0 of its shoe")
        return
    previous = place.previous
    if previous is None and start != 0:
        _fail("shoe.start", f"is {start}: the first round of a shoe starts at card 0 (no record "
              "of a round before it)")
    if previous is not None and previous.end >= 0 and start != previous.end:
        gap = start - previous.end
        cards = f"{abs(gap)} card{'s' if abs(gap) > 1 else ''}"
        how = f"{cards} burned" if gap > 0 else f"{cards} dealt twice"
        _fail("shoe.start", f"is {start}, but the shoe's previous round {previous.round_id} "
              f"ended at {previous.end} ({how})")
    if start >= cut:
        _fail("shoe.start", f"is {start}, at or past the cut card at {cut}: the shoe was due for "
              "a reshuffle")


def _check_shoe(shoe: JsonObject, reveal: Reveal) -> None:
    recorded = shoe.get_str("commitment")
    opened = seed_commitment(reveal.seed)
    if not reveal.opens:
        # the reveal is inconsistent; the round's own commitment says which half was changed
        if opened == recorded:
            _fail("reveal.commitment", f"{tok(reveal.commitment)} is not what the seed opens "
                  f"({opened}, as this record committed)")
        _fail("reveal.seed", f"does not open the commitment {recorded}")
    if recorded != reveal.commitment:
        _fail("shoe.commitment", f"recorded {recorded}, the revealed seed opens {opened}")
    if shoe.get_int("decks") != reveal.decks:
        _fail("shoe.decks", f"recorded {shoe.get_int('decks')}, revealed shoe has {reveal.decks}")
    if shoe.get_hex("client_seed") != reveal.client_seed:
        _fail("shoe.client_seed", f"recorded {shoe.get_str('client_seed')}, "
              f"revealed {reveal.client_seed.hex()}")
    if reveal.shared_with:
        _fail("shoe.commitment", f"{recorded} is also the commitment of shoe "
              f"{', '.join(reveal.shared_with)}: a seed serves one shoe")


def _check_cards(doc: JsonObject, shoe: JsonObject, cards: list[Card]) -> None:
    start, end = shoe.get_int("start"), shoe.get_int("end")
    if not 0 <= start <= end <= len(cards):
        _fail("shoe.end", f"positions [{start}, {end}) are outside a {len(cards)}-card shoe")
    recorded = doc.get_list("cards")
    if len(recorded) != end - start:
        _fail("cards", f"recorded {len(recorded)} cards for shoe positions [{start}, {end})")
    for i, (code, card) in enumerate(zip(recorded, cards[start:end], strict=True)):
        if code != CODE_OF[card]:
            _fail(f"cards[{i}]", f"recorded {show(code)}, shoe {show(CODE_OF[card])} "
                  f"(position {start + i})")


def _deal(doc: JsonObject, rules: Rules, cards: list[Card]) -> Round:
    bets = doc.get_obj("bets")
    items = bets.get_list("hands")
    try:
        hands = [HandBet.from_json(item, f"hands[{i}]") for i, item in enumerate(items)]
        return Round(rules, cards, hands, bets.get_int_map("side_bets"),
                     start=doc.get_obj("shoe").get_int("start"), level=doc.get_str("level"))
    except BetError as exc:
        _fail(f"bets.{exc.field}" if exc.field != "level" else "level",
              str(exc).removeprefix(f"{exc.field}: "))


def _replay_actions(doc: JsonObject, rnd: Round) -> None:
    entries = doc.get_list("actions")
    for i, item in enumerate(entries):
        entry = _Doc(item, f"actions[{i}]")
        hand = entry.get_int("hand")
        turn = rnd.turn
        if rnd.finished:
            _fail(entry.path, f"the replayed round was over after {i} actions")
        if turn.hand != hand:
            _fail(entry.at("hand"), f"recorded {hand}, the replay awaits hand {turn.hand}")
        try:
            action = action_from_json(entry.get("action"))
            events = rnd.act(action)
        except (ValueError, IllegalAction) as exc:
            _fail(entry.at("action"), f"{show(entry.get('action'))} is refused: {exc}")
        dealt = [CODE_OF[e.card] for e in events
                 if isinstance(e, CardDealt) and e.hand == hand and e.card is not None]
        recorded = entry.get_list("cards")
        if recorded != dealt:
            _fail(entry.at("cards"), f"recorded {show(recorded)}, replay {show(dealt)}")
    if not rnd.finished and doc.get_str("status") != "void":  # void: a malfunction stopped play
        _fail("actions", f"end after {len(entries)} actions, but the replay awaits a "
              f"{rnd.turn.decision} decision on hand {rnd.turn.hand}")


def _compare(path: str, recorded: object, replay: object) -> None:
    """Fails at the first member where ``recorded`` and ``replay`` differ (types included)."""
    if isinstance(recorded, dict) and isinstance(replay, dict):
        for key in [*replay, *(k for k in recorded if k not in replay)]:
            sub = f"{path}.{key}" if path else key
            if key not in recorded:
                _fail(sub, f"is missing (replay {show(replay[key])})")
            if key not in replay:
                _fail(sub, "is not a member of a round record")
            _compare(sub, recorded[key], replay[key])
    elif isinstance(recorded, list) and isinstance(replay, list):
        for i, (r, p) in enumerate(zip(recorded, replay, strict=False)):
            _compare(f"{path}[{i}]", r, p)
        if len(recorded) != len(replay):
            _fail(path, f"recorded {len(recorded)} entries, replay {len(replay)}")
    elif type(recorded) is not type(replay) or recorded != replay:
        _fail(path, f"recorded {show(recorded)}, replay {show(replay)}")


def _round_mode(doc: JsonObject) -> str | None:
    """A live round's ``mode`` (DEMO or REAL); None for a record of the replay, which plays no
    money and records none (a signed record cannot lose the member it was signed with)."""
    if not doc.has("mode"):
        return None
    mode = doc.get_str("mode")
    if mode not in _MODES:
        _fail("mode", f"must be DEMO or REAL, got {show(mode)}")
    return mode


def _check_outcome(payload: dict[str, Any], doc: JsonObject, rnd: Round) -> None:
    status = doc.get_str("status")
    if status == "void" and rnd.phase is not Phase.VOID:
        if rnd.finished:
            _fail("status", 'recorded "void", but the replay settled the round after the '
                  "recorded actions: a settled round cannot be voided")
        settled = [w for w in rnd.wagers if w.returned is not None]
        if settled:
            _fail("status", f'recorded "void", but wager {settled[0].id} ({settled[0].kind}) '
                  f"was settled before the void (returned {settled[0].returned}): only a round "
                  "with no settled wager can be voided")
        rnd.void(doc.get_opt_str("void_reason") or "")  # a malfunction: stakes returned
    shoe = doc.get_obj("shoe")
    expected = round_payload(
        rnd, round_id=doc.get_str("round_id"),
        shoe=ShoeRef(shoe.get_str("id"), shoe.get_str("commitment"), shoe.get_int("decks"),
                     shoe.get_hex("client_seed")),
        started_at=doc.get_str("started_at"), finished_at=doc.get_str("finished_at"),
        version=doc.get_str("service_version"), mode=_round_mode(doc))
    ordered = {k: expected[k] for k in _COMPARE_ORDER}
    ordered.update(expected)
    _compare("", payload, ordered)


# --- what the auditor decides: times, custom rules, the per-file bound ---------------------------


#: the log origin of the operator ``default`` (the service's DEFAULT_OPERATOR) under the default
#: base origin: each operator's log is ``<base origin>/<operator>``
DEFAULT_LOG_ORIGIN: Final = f"{DEFAULT_ORIGIN}/default"


@dataclass(frozen=True)
class AuditOptions:
    """The auditor's choices beside the trusted keys.

    ``validity``: each trusted key's validity period (key id -> :class:`KeyValidity`; a key not
    listed is always valid): a record verifies only if its key was valid at the record's time.
    ``allow_custom_rules``: digests of custom rule sets under a built-in game's id to accept.
    ``now``: the time the audit judges "the future" by (default: the clock when it starts).
    ``file_timeout``: seconds one file's checks may take before the file fails unchecked (0: no
    bound; enforced with SIGALRM, so only when the audit runs in the main thread).
    ``log``: the checkpoint(s) the auditor obtained and the operator's log origin
    (:mod:`rng_service.audit.log_audit`); with a checkpoint the paths audited must be one
    collection directory, whose completeness is judged against it.
    """

    validity: Mapping[str, KeyValidity] = field(default_factory=dict)
    allow_custom_rules: frozenset[str] = frozenset()
    now: datetime | None = None
    file_timeout: float = 10.0
    log: LogSource = field(default_factory=lambda: LogSource(origin=DEFAULT_LOG_ORIGIN))



#: how far past the auditor's clock a record's time may lie (clocks differ a little)
#: a service version: what importlib.metadata reports, or "unknown"
_VERSION: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")


def _check_version(doc: JsonObject) -> str:
    version = doc.get_str("service_version")
    if not _VERSION.fullmatch(version):
        _fail("service_version", f"{show(version)} is not a version (letters, digits and "
              ". + ! _ -, at most 64 characters)")
    return version


class _Times:
    """The time checks: RFC 3339 format, order, not in the future, and within the signing key's
    validity period."""

    def __init__(self, options: AuditOptions) -> None:
        self.now = options.now or datetime.now(UTC)
        self.validity = options.validity

    def read(self, doc: JsonObject, name: str) -> datetime:
        text = doc.get_str(name)
        when = parse_rfc3339(text)
        if when is None:
            _fail(name, f"{show(text)} is not an RFC 3339 time (e.g. 2024-05-01T12:00:00.000Z)")
        if when > self.now + CLOCK_SKEW:
            _fail(name, f"{show(text)} is in the future (the audit's clock: "
                  f"{self.now.isoformat(timespec='seconds')})")
        return when

    def check_round(self, doc: JsonObject, previous: _Pending | None) -> None:
        """``started_at`` no later than ``finished_at``, and no earlier than the finish of the
        round before it in its shoe: a shoe deals its rounds one after another."""
        started, finished = self.read(doc, "started_at"), self.read(doc, "finished_at")
        if finished < started:
            _fail("finished_at", f"{show(doc.get_str('finished_at'))} is before started_at "
                  f"{show(doc.get_str('started_at'))}")
        before = parse_rfc3339(previous.finished_at) if previous is not None else None
        if previous is not None and before is not None and started < before:
            _fail("started_at", f"{show(doc.get_str('started_at'))} is before the shoe's "
                  f"previous round {token(previous.round_id)} finished "
                  f"({show(previous.finished_at)}): a shoe deals its rounds one at a time")

    def signed_within(self, kid: str, doc: JsonObject, name: str) -> None:
        """The key ``kid`` was valid at the record's time ``name`` (it signs when it is made)."""
        validity = self.validity.get(kid, ALWAYS_VALID)
        if not validity.covers(self.read(doc, name)):
            _fail("signature.key_id", f"{kid} signed a record dated {show(doc.get_str(name))} "
                  f"({name}), but that key is {validity.describe()}")


# --- the audit -----------------------------------------------------------------------------------


#: how deep the walk goes below a directory named on the command line
MAX_DIR_DEPTH: Final = 32


@dataclass(frozen=True)
class _Entry:
    """A file the walk found: read it (``strict``: it must be an envelope or a rules document),
    or, with ``problem``, fail it unread (a link, a FIFO, a directory where records lie)."""

    path: Path
    strict: bool
    problem: str | None = None
    follow: bool = False
    log: bool = False  # the log/ directory of a collection root: for the log checks, not read


def _files(paths: Iterable[Path]) -> Iterator[_Entry]:
    """Every file named, and the files under every directory: all of them in a record directory,
    ``*.json`` elsewhere. A strict file must be a signed envelope or a rules document: it is named
    explicitly or lies in a record directory (:func:`_strict_below`). Below a directory named,
    nothing is followed: a symbolic link, a FIFO or any other special file, and a directory inside
    a record directory, is an entry with a problem (a FAIL line), never read and never skipped."""
    for path in paths:
        try:
            mode = path.stat().st_mode  # what the auditor names is followed
        except OSError:
            raise AuditInputError(f"{token(str(path))}: no such file or directory") from None
        if stat.S_ISDIR(mode):
            # the name of a directory passed itself counts (``lab/rounds`` given alone), hence
            # absolute(): ``.`` has no name of its own
            yield from _walk(path, path.absolute().name, inherited=False, depth=0)
        else:
            yield _Entry(path, strict=True, follow=True)  # _read refuses a non-regular file


def _is_dir(path: Path) -> bool:
    """A real directory (not a link to one)."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _is_collection(directory: Path) -> bool:
    """Laid out as a collection root (``RecordWriter``): it holds a rounds/, reveals/ or rules/
    directory. A record directory holds envelopes only, so it never looks like one."""
    return any(_is_dir(directory / name) for name in _LAYOUT_DIRS)


def _strict_below(directory: Path, name: str, inherited: bool) -> bool:
    """Whether the files in ``directory`` must be envelopes. Roles are judged relative to the
    nearest collection root, never from a name anywhere in the path: a collection may be called
    ``rounds`` or kept under ``reveals/``, and its keys copy must still be passed over."""
    if _is_collection(directory):
        return False
    return inherited or name in _RECORD_DIRS


def _walk(directory: Path, name: str, inherited: bool, depth: int) -> Iterator[_Entry]:
    strict = _strict_below(directory, name, inherited)
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        yield _Entry(directory, True, f"cannot be listed: {exc.strerror}")
        return
    root = _is_collection(directory)
    for entry in entries:
        if root and entry.name == LOG_SUBDIR:
            yield _Entry(entry, False, log=True)  # the log checks read it, link or not
        else:
            yield from _classify(entry, strict, depth)


def _classify(entry: Path, strict: bool, depth: int) -> Iterator[_Entry]:
    try:
        mode = entry.lstat().st_mode
    except OSError as exc:
        yield _Entry(entry, True, f"cannot be read: {exc.strerror}")
        return
    if stat.S_ISLNK(mode):
        yield _Entry(entry, True, "is a symbolic link: links are never followed (put what it "
                     "points to in the collection itself)")
    elif stat.S_ISDIR(mode):
        if strict and not _is_collection(entry):
            yield _Entry(entry, True, "is a directory inside a record directory, which holds "
                         "signed envelopes only: not read")
        elif depth >= MAX_DIR_DEPTH:
            yield _Entry(entry, True, f"is more than {MAX_DIR_DEPTH} directories deep: not read")
        else:
            yield from _walk(entry, entry.name, strict, depth + 1)
    elif stat.S_ISREG(mode):
        if strict or entry.suffix == ".json":
            yield _Entry(entry, strict)
    else:
        yield _Entry(entry, True, f"is {file_type(mode)}, not a regular file: not read")


def _load(path: Path, follow: bool = False) -> dict[str, Any]:
    """The envelope (or rules document) in ``path``: Unreadable, or VerificationError if it is
    not one JSON object within the bounds of :mod:`rng_service.core.json_input`."""
    return decode_envelope(read_file(path, follow))


def _printable(value: object, path: Path) -> str:
    """A record's claimed id for its line (escaped when printed), else its file's name."""
    return value if isinstance(value, str) and value else path.name


def _claimed_str(obj: object, member: str) -> str:
    value = obj.get(member) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _label(payload: object, member: str, path: Path) -> str:
    return _printable(payload.get(member) if isinstance(payload, dict) else None, path)


def _claimed_int(obj: object, member: str) -> int:
    value = obj.get(member) if isinstance(obj, dict) else None
    return value if type(value) is int else -1


def _leaf_file(data: bytes, envelope: dict[str, Any]) -> LeafFile:
    """What the log checks need of an envelope file: its leaf hash and its claims (unverified)."""
    payload = envelope.get("payload")
    schema = _claimed_str(payload, "schema")
    subject_of = {KEY_SCHEMA: payload, REVEAL_SCHEMA: payload, SHOE_COMMITMENT_SCHEMA: payload,
                  RECORD_SCHEMA: payload.get("shoe") if isinstance(payload, dict) else None}
    member = {KEY_SCHEMA: "key_id", RECORD_SCHEMA: "id"}.get(schema, "shoe_id")
    subject = _claimed_str(subject_of.get(schema), member)
    signer = _claimed_str(envelope.get("signature"), "key_id")
    return LeafFile(leaf_hash(data), schema or None, signer or None, subject or None)


def _exact_members(payload: Mapping[str, Any], members: frozenset[str], what: str) -> None:
    extra = sorted(set(payload) - members)
    if extra:
        _fail(extra[0], f"is not a member of a {what}")


def _is_jwk_set(data: dict[str, Any]) -> bool:
    keys = data.get("keys")
    return set(data) == {"keys"} and isinstance(keys, list) and all(
        isinstance(k, dict) for k in keys)


# --- RNG draws ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RngReveal:
    """An RNG reveal whose signature verified."""

    draw_id: str
    commitment: str
    seed: bytes
    path: Path


class RngAudit:
    """The checks of RNG records and reveals (module docstring): each record is judged against
    its draw's reveal once every file has been read."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey], times: _Times | None = None,
                 clock: FileClock | None = None) -> None:
        self.trusted = trusted
        self.times = times or _Times(AuditOptions())
        self.clock = clock or FileClock(0)
        self.reveals: dict[str, _RngReveal] = {}
        self.bad_reveals: dict[str, str] = {}  # draw id -> why its reveal cannot be used
        self.records: list[tuple[Path, dict[str, Any]]] = []
        self._findings: list[Finding] = []

    def add(self, path: Path, envelope: dict[str, Any], schema: str) -> None:
        """Take one signed RNG file: a record is kept to be judged once every reveal is
        read; a reveal is verified now and indexed by draw id (a bad or conflicting one
        is a failed finding, an identical copy an OK one)."""
        if schema == RNG_SCHEMA:
            self.records.append((path, envelope))
            return
        ident = _label(envelope.get("payload"), "draw_id", path)
        try:
            payload = verify_envelope(envelope, self.trusted, schema=RNG_REVEAL_SCHEMA)
            reveal = self._read_reveal(payload, path)
        except (VerificationError, AuditFailure) as exc:
            where = exc.field
            message = exc.message if isinstance(exc, AuditFailure) else str(exc)
            self.bad_reveals[ident] = f"the reveal {tok(path.name)} failed: {message}"
            self._findings.append(Finding("rng-reveal", ident, path, Status.FAIL, where, message))
            return
        known = self.reveals.get(reveal.draw_id)
        if known is not None and known != dataclasses.replace(reveal, path=known.path):
            self.bad_reveals[reveal.draw_id] = "has two different signed reveals"
            self._findings.append(Finding("rng-reveal", ident, path, Status.FAIL, "draw_id",
                                          f"is revealed twice, differently (also "
                                          f"{tok(known.path)})"))
            return
        if known is not None:  # a copy: a line of its own, the first one is used
            self._findings.append(Finding("rng-reveal", ident, path, Status.OK,
                                          message=f"the same reveal as {tok(known.path)}"))
            return
        self.reveals[reveal.draw_id] = reveal

    @staticmethod
    def _read_reveal(payload: dict[str, Any], path: Path) -> _RngReveal:
        doc = _Doc(payload, "")
        reveal = _RngReveal(doc.get_str("draw_id"), doc.get_str("commitment"),
                            doc.get_hex("seed"), path)
        if rng_commitment(reveal.seed) != reveal.commitment:
            _fail("seed", f"does not open the commitment {tok(reveal.commitment)}")
        return reveal

    def findings(self) -> list[Finding]:
        """A line per record, then per reveal that verified (failed reveals have theirs)."""
        seen: dict[str, Path] = {}
        commitments = Counter(r.commitment for r in self.reveals.values())
        for path, envelope in sorted(self.records, key=lambda item: str(item[0])):
            self._findings.append(self._timed_check(path, envelope, seen, commitments))
        for reveal in self.reveals.values():
            shared = commitments[reveal.commitment] > 1
            self._findings.append(Finding(
                "rng-reveal", reveal.draw_id, reveal.path, Status.FAIL if shared else Status.OK,
                "commitment" if shared else None,
                "is also another draw's: a seed serves one draw" if shared else "revealed"))
        return self._findings

    def _timed_check(self, path: Path, envelope: dict[str, Any], seen: dict[str, Path],
                     commitments: Counter[str]) -> Finding:
        try:
            with self.clock.bound():
                return self._check(path, envelope, seen, commitments)
        except FileTimeout:
            return Finding("rng", _label(envelope.get("payload"), "draw_id", path), path,
                           Status.FAIL, message=self.clock.too_slow)

    def _check(self, path: Path, envelope: dict[str, Any], seen: dict[str, Path],
               commitments: Counter[str]) -> Finding:
        ident = _label(envelope.get("payload"), "draw_id", path)
        try:
            payload = verify_envelope(envelope, self.trusted, schema=RNG_SCHEMA)
            doc = _Doc(payload, "")
            self.times.signed_within(envelope["signature"]["key_id"], doc, "drawn_at")
            _check_version(doc)
            message = self._verify(payload, path, seen, commitments)
        except VerificationError as exc:
            return Finding("rng", ident, path, Status.FAIL, exc.field, str(exc))
        except AuditFailure as exc:
            return Finding("rng", ident, path, Status.FAIL, exc.field, exc.message)
        except _Unrevealed as exc:
            return Finding("rng", ident, path, Status.UNREVEALED, "draw_id", str(exc))
        return Finding("rng", ident, path, Status.OK, message=message)

    def _verify(self, payload: dict[str, Any], path: Path, seen: dict[str, Path],
                commitments: Counter[str]) -> str:
        doc = _Doc(payload, "")
        draw_id = doc.get_str("draw_id")
        if seen.setdefault(draw_id, path) != path:
            _fail("draw_id", f"is also the id of {token(str(seen[draw_id]))}")
        request = _draw_request(doc)
        client_seed, commitment = doc.get_hex("client_seed"), doc.get_str("commitment")
        reveal = self.reveals.get(draw_id)
        if reveal is None:
            if draw_id in self.bad_reveals:
                _fail("draw_id", self.bad_reveals[draw_id])
            raise _Unrevealed(f"{tok(draw_id)} has no reveal: the draw cannot be verified")
        if reveal.commitment != commitment:
            _fail("commitment", f"recorded {tok(commitment)}, revealed {tok(reveal.commitment)}")
        if commitments[commitment] > 1:
            _fail("commitment", "is also another draw's: a seed serves one draw")
        try:
            expected = draw(reveal.seed, request, client_seed)
        except InvalidDrawInput as exc:
            _fail("client_seed", str(exc))
        _compare_results(doc.get_list("results"), expected)
        return f"{request.kind} {dict(request.parameters)}: {len(expected)} results recomputed"


def _draw_request(doc: JsonObject) -> DrawRequest:
    params = doc.get_obj("parameters")
    request = DrawRequest(doc.get_str("kind"), {k: params.get_int(k) for k in params.data})
    try:
        check_request(request)
    except InvalidDrawInput as exc:
        _fail("parameters", str(exc))
    return request


def _compare_results(recorded: list[Any], expected: list[int]) -> None:
    if len(recorded) != len(expected):
        _fail("results", f"recorded {len(recorded)} values, recomputed {len(expected)}")
    for i, (got, want) in enumerate(zip(recorded, expected, strict=True)):
        if type(got) is not int or got != want:
            _fail(f"results[{i}]", f"recorded {show(got)}, recomputed {want}")


# --- key records and shoe commitments ----------------------------------------------------------


@dataclass(frozen=True)
class Commitment:
    """A shoe commitment whose signature verified: the shoe, its seed's commitment and what it
    was created for."""

    shoe_id: str
    commitment: str
    game: str
    rules_digest: str
    decks: int
    mode: str
    path: Path

    def same_as(self, other: Commitment) -> bool:
        """True if ``other`` commits to the same (the file it came from may differ)."""
        return dataclasses.replace(other, path=self.path) == self


class CommitmentIndex:
    """The shoe commitments (``fairshoe.shoe-commitment/v1``, under ``shoes/``) of a collection:
    each verified when read; the rounds and the reveal of a committed shoe must agree with it."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey], times: _Times) -> None:
        self.trusted = trusted
        self.times = times
        self.shoes: dict[str, Commitment] = {}
        self.bad: dict[str, str] = {}  # shoe id -> why its commitment cannot be used
        self._kept: list[Commitment] = []

    def add(self, path: Path, envelope: dict[str, Any]) -> list[Finding]:
        """Verify one commitment file: a FAIL finding now, or none (its line comes with
        :meth:`findings`, once the reveals are known)."""
        ident = _label(envelope.get("payload"), "shoe_id", path)
        try:
            payload = verify_envelope(envelope, self.trusted, schema=SHOE_COMMITMENT_SCHEMA)
            found = self._read(payload, envelope["signature"]["key_id"], path)
        except (VerificationError, AuditFailure) as exc:
            message = exc.message if isinstance(exc, AuditFailure) else str(exc)
            self.bad.setdefault(ident, f"its commitment {tok(path.name)} failed: {message}")
            return [Finding("commitment", ident, path, Status.FAIL, exc.field, message)]
        known = self.shoes.get(found.shoe_id)
        if found.shoe_id in self.bad or (known is not None and not known.same_as(found)):
            # two signed commitments of one shoe that differ: neither can be believed
            self.shoes.pop(found.shoe_id, None)
            self.bad[found.shoe_id] = "is committed twice, differently"
            pairs = [(path, known.path), (known.path, path)] if known else [(path, None)]
            return [Finding("commitment", ident, one, Status.FAIL, "shoe_id",
                            "is committed twice, differently"
                            + (f" (also {tok(other)})" if other else ""))
                    for one, other in pairs]
        if known is None:
            self.shoes[found.shoe_id] = found
        self._kept.append(found)
        return []

    def _read(self, payload: dict[str, Any], kid: str, path: Path) -> Commitment:
        doc = _Doc(payload, "")
        _exact_members(payload, _COMMITMENT_MEMBERS, "shoe commitment")
        commitment, digest = doc.get_str("commitment"), doc.get_str("rules_digest")
        for name, value in (("commitment", commitment), ("rules_digest", digest)):
            if not _HEX64.fullmatch(value):
                _fail(name, f"{show(value)} is not a SHA-256 digest (64 lowercase hex digits)")
        decks = doc.get_int("decks")
        if not 1 <= decks <= MAX_DECKS:
            _fail("decks", f"must be 1..{MAX_DECKS}, got {decks}")
        mode = doc.get_str("mode")
        if mode not in _MODES:
            _fail("mode", f"must be DEMO or REAL, got {show(mode)}")
        self.times.signed_within(kid, doc, "created_at")
        return Commitment(doc.get_str("shoe_id"), commitment, doc.get_str("game"), digest,
                          decks, mode, path)

    def check_round(self, doc: JsonObject, shoe: JsonObject) -> None:
        """A round of a committed shoe names its commitment, decks, game and rules, and was
        played for the shoe's money (a live round's ``mode``: demo play never dealt from a
        real-money shoe, nor real money from a demo one)."""
        shoe_id = shoe.get_str("id")
        if shoe_id in self.bad:
            _fail("shoe.id", f"{tok(shoe_id)}: {self.bad[shoe_id]}")
        known = self.shoes.get(shoe_id)
        if known is None:
            return
        where = f"the shoe's commitment {tok(known.path.name)}"
        for name, recorded, committed in (
                ("shoe.commitment", shoe.get_str("commitment"), known.commitment),
                ("shoe.decks", shoe.get_int("decks"), known.decks),
                ("game", doc.get_str("game"), known.game),
                ("rules_digest", doc.get_str("rules_digest"), known.rules_digest),
                ("mode", _round_mode(doc) or known.mode, known.mode)):
            if recorded != committed:
                _fail(name, f"recorded {show(recorded)}, but {where} has {show(committed)}")

    def check_reveal(self, reveal: Reveal) -> Finding | None:
        """A FAIL finding if the reveal of a committed shoe contradicts its commitment."""
        path, shoe_id = reveal.path, reveal.shoe_id
        if shoe_id in self.bad:
            return Finding("shoe", shoe_id, path, Status.FAIL, "shoe_id", self.bad[shoe_id])
        known = self.shoes.get(shoe_id)
        if known is None:
            return None
        for name, revealed, committed in (("commitment", reveal.commitment, known.commitment),
                                          ("decks", reveal.decks, known.decks)):
            if revealed != committed:
                return Finding("shoe", shoe_id, path, Status.FAIL, name,
                               f"revealed {show(revealed)}, but the shoe's commitment "
                               f"{tok(known.path.name)} has {show(committed)}")
        return None

    def findings(self, revealed: Mapping[str, object]) -> list[Finding]:
        """A line per commitment that verified: OK, unless another shoe has its commitment."""
        by_value = Counter(c.commitment for c in self.shoes.values())
        out = []
        for c in self._kept:
            if c.shoe_id not in self.shoes:
                continue  # conflicting: its FAIL lines are in already
            if by_value[c.commitment] > 1:
                out.append(Finding("commitment", c.shoe_id, c.path, Status.FAIL, "commitment",
                                   f"{tok(c.commitment)} is also another shoe's: a seed serves "
                                   "one shoe"))
                continue
            seen = "revealed" if c.shoe_id in revealed else "in play (not revealed yet)"
            out.append(Finding("commitment", c.shoe_id, c.path, Status.OK,
                               message=f"{tok(c.game)}, {c.decks} decks: {seen}"))
        return out

    def never_revealed(self, revealed: Iterable[str]) -> list[str]:
        """The committed shoes with no reveal (nor a failed one), sorted: in play."""
        return sorted(set(self.shoes) - set(revealed))


_NOT_ENVELOPE: Final = ("is not a signed envelope (members format, payload and signature) "
                        "nor a rules document")


class Auditor:
    """Verifies files against the keys in ``trusted``; :meth:`run` returns the report."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey],
                 options: AuditOptions | None = None) -> None:
        self.trusted = trusted
        self.options = options or AuditOptions()
        self.times = _Times(self.options)
        self.clock = FileClock(self.options.file_timeout)
        self.report = AuditReport()
        self.reveals: dict[str, Reveal] = {}
        self.bad_reveals: dict[str, str] = {}  # shoe id -> why its reveal failed
        self.conflicts: set[str] = set()
        self.rules = RulesIndex(self.options.allow_custom_rules)
        self._round_ids: dict[str, Path] = {}
        self.draws = RngAudit(trusted, self.times, self.clock)
        self.commitments = CommitmentIndex(trusted, self.times)
        #: every envelope file read, by path_key: what the log checks match leaves.jsonl with
        self.leaf_files: dict[str, LeafFile] = {}
        #: collection roots holding a log/ directory, as the walk found them
        self.log_roots: list[Path] = []

    def run(self, paths: Iterable[Path],
            on_round: Callable[[Finding], None] | None = None) -> AuditReport:
        """Audit every file under ``paths`` and return the report. Reveals are read first,
        then rounds are checked shoe by shoe; ``on_round`` (if given) sees each round's
        finding as soon as it is made. The log of each collection is checked last."""
        paths = list(paths)
        with self.clock.installed():
            pending = self._sort_files(paths)
            if on_round is not None:  # bare, unsigned records are found in pass 1
                for finding in [f for f in self.report.findings if f.kind == "round"]:
                    on_round(finding)
            self._check_rounds(pending, on_round)
            for reveal in self.reveals.values():
                self.report.findings.append(self._timed_reveal(reveal))
            self.report.findings.extend(self.draws.findings())
            self.report.findings.extend(self.commitments.findings(self.reveals))
            self.report.open_shoes = self.commitments.never_revealed(
                set(self.reveals) | set(self.bad_reveals) | self.conflicts)
            self._check_logs(paths)
        return self.report

    def _check_logs(self, paths: list[Path]) -> None:
        """The log checks: of the one collection named, against the auditor's checkpoint if one
        is given; else of every collection with a log/, against its own checkpoint."""
        source = self.options.log
        context = LogContext(self.trusted, self.options.validity, self.times.now + CLOCK_SKEW,
                             self.clock)
        roots = self.log_roots
        if source.checkpoint is not None:
            if len(paths) != 1 or not paths[0].is_dir():
                self._add("log", str(source.checkpoint), source.checkpoint, Status.FAIL,
                          message="a checkpoint judges one collection: name exactly one "
                                  "collection directory")
                self.report.completeness = Completeness(None, 0, complete=False)
                return
            roots = [paths[0]]
        for root in roots:
            log = LogAudit(root, self.leaf_files, source, context)
            self.report.findings.extend(log.run())
            if log.summary:
                self.report.log_notes.append(log.summary)
            if log.completeness is not None:
                self.report.completeness = log.completeness

    # pass 1: reveals are verified, rounds queued by shoe

    def _sort_files(self, paths: Iterable[Path]) -> list[_Pending]:
        pending: list[_Pending] = []
        for entry in _files(paths):
            if entry.log:
                self.log_roots.append(entry.path.parent)
                continue
            if entry.problem is not None:
                self._add("file", str(entry.path), entry.path, Status.FAIL,
                          message=entry.problem)
                continue
            try:
                with self.clock.bound():
                    self._sort_file(entry, pending)
            except FileTimeout:
                self._add("file", str(entry.path), entry.path, Status.FAIL,
                          message=self.clock.too_slow)
        self._flag_shared_commitments()
        return pending

    def _check_rounds(self, pending: list[_Pending],
                      on_round: Callable[[Finding], None] | None) -> None:
        """Pass 2: the rounds grouped by shoe, in shoe order, each knowing the round before it
        and the first void round before it in its shoe."""
        pending.sort(key=lambda p: (p.shoe_id, p.start, str(p.path)))
        rounds_in_shoe = Counter(p.shoe_id for p in pending)
        previous: _Pending | None = None
        voided: _Pending | None = None
        for item in pending:
            if previous is not None and previous.shoe_id != item.shoe_id:
                if previous.shoe_id in self.reveals:  # rounds come grouped by shoe
                    self.reveals[previous.shoe_id].drop_cards()
                previous = voided = None
            finding = self._timed_round(item, _Place(rounds_in_shoe[item.shoe_id], previous,
                                                     voided))
            self.report.findings.append(finding)
            if on_round is not None:
                on_round(finding)
            voided = voided or (item if item.void else None)
            previous = item

    def _sort_file(self, entry: _Entry, pending: list[_Pending]) -> None:
        path, strict = entry.path, entry.strict
        try:
            data = read_file(path, entry.follow)
            envelope = decode_envelope(data)
        except Unreadable as exc:
            self._add("file", str(path), path, Status.FAIL, message=str(exc))
            return
        except VerificationError as exc:  # not JSON at all: a truncated or damaged record?
            self._add("file", str(path), path, Status.FAIL, exc.field,
                      message=f"{_NOT_ENVELOPE}: {exc}")
            return
        if envelope.get("schema") == RULES_SCHEMA:
            self._add_rules(path, envelope)
            return
        if not _ENVELOPE_MEMBERS & set(envelope):
            self._not_an_envelope(path, envelope, strict)
            return
        payload = envelope.get("payload")
        schema = payload.get("schema") if isinstance(payload, dict) else None
        self.leaf_files[path_key(path)] = _leaf_file(data, envelope)
        if schema == REVEAL_SCHEMA:
            self._add_reveal(path, envelope)
        elif schema == RECORD_SCHEMA:
            shoe = payload.get("shoe") if isinstance(payload, dict) else None
            shoe_id = shoe.get("id") if isinstance(shoe, dict) else None
            pending.append(_Pending(
                path, _label(payload, "round_id", path),
                shoe_id if isinstance(shoe_id, str) else "",
                _claimed_int(shoe, "start"), _claimed_int(shoe, "end"),
                finished_at=_claimed_str(payload, "finished_at"),
                void=_claimed_str(payload, "status") == "void", follow=entry.follow))
        elif schema in (RNG_SCHEMA, RNG_REVEAL_SCHEMA):
            self.draws.add(path, envelope, schema)
        elif schema == KEY_SCHEMA:
            self.report.findings.append(self._key_record(path, envelope))
        elif schema == SHOE_COMMITMENT_SCHEMA:
            self.report.findings.extend(self.commitments.add(path, envelope))
        else:
            self._add("file", str(path), path, Status.FAIL, "payload.schema",
                      message=f"{show(schema)} is none of {', '.join(sorted(LEAF_DIRS))}")

    def _key_record(self, path: Path, envelope: dict[str, Any]) -> Finding:
        """A key record (``fairshoe.key/v1``): signed by the key it names, which is the trusted
        key of that id, within its validity period."""
        ident = _label(envelope.get("payload"), "key_id", path)
        try:
            payload = verify_envelope(envelope, self.trusted, schema=KEY_SCHEMA)
            message = self._verify_key(payload, envelope["signature"]["key_id"])
        except VerificationError as exc:
            return Finding("key", ident, path, Status.FAIL, exc.field, str(exc))
        except AuditFailure as exc:
            return Finding("key", ident, path, Status.FAIL, exc.field, exc.message)
        return Finding("key", ident, path, Status.OK, message=message)

    def _verify_key(self, payload: dict[str, Any], signer: str) -> str:
        doc = _Doc(payload, "")
        _exact_members(payload, _KEY_MEMBERS, "key record")
        kid = doc.get_str("key_id")
        if signer != kid:
            _fail("signature.key_id", f"is {tok(signer)}: a key record is signed by the key it "
                  f"names ({tok(kid)})")
        try:
            public = jwk_to_public_key(doc.get_obj("jwk").data, where="jwk")
        except KeyFileError as exc:
            _fail("jwk", str(exc).removeprefix("jwk: "))
        if raw_public_bytes(public) != raw_public_bytes(self.trusted[kid]):
            _fail("jwk", f"is not the trusted key {tok(kid)}")
        self.times.signed_within(kid, doc, "valid_from")
        return f"the trusted key, valid from {show(doc.get_str('valid_from'))}"

    def _not_an_envelope(self, path: Path, data: dict[str, Any], strict: bool) -> None:
        """A JSON object without any envelope member: an unsigned payload fails as the round or
        reveal it claims to be; only a keys file outside the record directories is passed over."""
        schema = data.get("schema")
        if isinstance(schema, str) and schema in _BARE_KINDS:
            kind, member = _BARE_KINDS[schema]
            ident = _label(data, member, path)
            if kind == "shoe":
                self.bad_reveals.setdefault(ident, f"the reveal {tok(path.name)} is not signed")
            self._add(kind, ident, path, Status.FAIL, "signature",
                      message="is missing: the file holds a bare payload, not a signed envelope")
        elif strict:
            self._add("file", str(path), path, Status.FAIL, message=_NOT_ENVELOPE)
        elif path.name == KEYS_FILE:
            if _is_jwk_set(data):
                self.report.keys_files.append(path)  # never trusted: keys come from --keys
            else:
                self._add("file", str(path), path, Status.FAIL,
                          message=f'is not a JWK Set ({{"keys": [...]}}) and {_NOT_ENVELOPE}')
        else:
            self.report.skipped.append(path)

    def _add(self, kind: str, ident: str, path: Path, status: Status, field: str | None = None,
             *, message: str = "") -> Finding:
        finding = Finding(kind, ident, path, status, field, message)
        self.report.findings.append(finding)
        return finding

    def _add_rules(self, path: Path, data: dict[str, Any]) -> None:
        try:
            rules, digest = self.rules.add_document(data, path)
        except AuditFailure as exc:
            self._add("rules", path.name, path, Status.FAIL, exc.field, message=exc.message)
            return
        self._add("rules", digest, path, Status.OK,
                  message=f"{token(clip(rules.game))} ({self.rules.label(digest)})")

    def _add_reveal(self, path: Path, envelope: dict[str, Any]) -> None:
        """Verify a reveal and keep it for the rounds; its line is added after them."""
        ident = _label(envelope.get("payload"), "shoe_id", path)
        try:
            payload = verify_envelope(envelope, self.trusted, schema=REVEAL_SCHEMA)
            reveal = _read_reveal(payload, path)
        except VerificationError as exc:
            self.bad_reveals[ident] = f"the reveal {tok(path.name)} failed: {exc}"
            self._add("shoe", ident, path, Status.FAIL, exc.field, message=str(exc))
            return
        except AuditFailure as exc:
            self.bad_reveals[ident] = f"the reveal {tok(path.name)} failed: {exc}"
            self._add("shoe", ident, path, Status.FAIL, exc.field, message=exc.message)
            return
        known = self.reveals.get(reveal.shoe_id)
        if reveal.shoe_id in self.conflicts or (known is not None and not known.same_as(reveal)):
            # two signed reveals of one shoe that differ: neither can be believed
            self.conflicts.add(reveal.shoe_id)
            self.reveals.pop(reveal.shoe_id, None)
            self.bad_reveals[reveal.shoe_id] = (f"has two different signed reveals "
                                                f"({tok(path.name)})")
            for one, other in ((known, path), (reveal, known.path if known else None)):
                if one is not None:
                    also = f" (also {tok(other)})" if other else ""
                    self._add("shoe", ident, one.path, Status.FAIL, "shoe_id",
                              message=f"is revealed twice, differently{also}")
            return
        if known is not None:  # a copy: a line of its own, the first one is used
            self._add("shoe", ident, path, Status.OK,
                      message=f"the same reveal as {tok(known.path)}")
            return
        self.reveals[reveal.shoe_id] = reveal

    def _flag_shared_commitments(self) -> None:
        """Mark the reveals of shoe ids that share a commitment: one seed dealt as two shoes."""
        shoes: dict[str, list[str]] = {}
        for reveal in self.reveals.values():
            shoes.setdefault(reveal.commitment, []).append(reveal.shoe_id)
        for shoe_ids in shoes.values():
            for shoe_id in shoe_ids if len(shoe_ids) > 1 else ():
                self.reveals[shoe_id].shared_with = tuple(s for s in shoe_ids if s != shoe_id)

    def _reveal_finding(self, reveal: Reveal) -> Finding:
        ident, path = _printable(reveal.shoe_id, reveal.path), reveal.path
        if not reveal.opens:
            return Finding("shoe", ident, path, Status.FAIL, "seed",
                           f"does not open the commitment {tok(reveal.commitment)}")
        against = self.commitments.check_reveal(reveal)
        if against is not None:
            return against
        if reveal.shared_with:
            return Finding("shoe", ident, path, Status.FAIL, "commitment",
                           f"{tok(reveal.commitment)} is also the commitment of shoe "
                           f"{', '.join(map(tok, reveal.shared_with))}: a seed serves one shoe")
        if not reveal.recomputed:  # no round of this shoe got as far: recompute it once here
            with contextlib.suppress(AuditFailure):  # the failure is kept in reveal.unusable
                reveal.cards()
            reveal.drop_cards()
        if reveal.unusable is not None:
            return Finding("shoe", ident, path, Status.FAIL, "seed", reveal.unusable)
        return Finding("shoe", ident, path, Status.OK, message=f"revealed ({reveal.decks} decks)")

    def _timed_reveal(self, reveal: Reveal) -> Finding:
        try:
            with self.clock.bound():
                return self._reveal_finding(reveal)
        except FileTimeout:
            return Finding("shoe", reveal.shoe_id, reveal.path, Status.FAIL,
                           message=self.clock.too_slow)

    # pass 2: rounds

    def _timed_round(self, item: _Pending, place: _Place) -> Finding:
        try:
            with self.clock.bound():
                return self.check_round(item.path, place, follow=item.follow)
        except FileTimeout:
            return Finding("round", item.round_id, item.path, Status.FAIL,
                           message=self.clock.too_slow)

    def check_round(self, path: Path, place: _Place, *, follow: bool = False) -> Finding:
        """The finding on one round record: its signature, its rules and its shoe's reveal
        checked and the round replayed. Any failure becomes a FAIL (or UNREVEALED)
        finding; nothing raised by a bad record escapes."""
        try:
            envelope = _load(path, follow)
        except Unreadable as exc:
            return Finding("round", path.name, path, Status.FAIL, message=str(exc))
        except VerificationError as exc:
            return Finding("round", path.name, path, Status.FAIL, exc.field, str(exc))
        ident = _label(envelope.get("payload"), "round_id", path)
        try:
            payload = verify_envelope(envelope, self.trusted, schema=RECORD_SCHEMA)
            message, void = self._verify_round(payload, path, place,
                                               kid=envelope["signature"]["key_id"])
        except VerificationError as exc:
            return Finding("round", ident, path, Status.FAIL, exc.field, str(exc))
        except AuditFailure as exc:
            return Finding("round", ident, path, Status.FAIL, exc.field, exc.message)
        except _Unrevealed as exc:
            status = Status.OPEN if exc.in_play else Status.UNREVEALED
            return Finding("round", ident, path, status, "shoe.id", str(exc))
        except (GameMathError, ValueError, TypeError, KeyError, RecursionError) as exc:
            # a payload no check anticipated: still a failure, never a crash of the audit
            return Finding("round", ident, path, Status.FAIL, "record",
                           f"cannot be replayed: {type(exc).__name__}: {exc}")
        return Finding("round", ident, path, Status.OK, message=message, void=void)

    def _verify_round(self, payload: dict[str, Any], path: Path, place: _Place, *,
                      kid: str) -> tuple[str, bool]:
        doc = _Doc(payload, "")
        round_id = doc.get_str("round_id")
        seen = self._round_ids.setdefault(round_id, path)
        if seen != path:
            _fail("round_id", f"is also the id of {token(str(seen))}")
        self.times.check_round(doc, place.previous)
        self.times.signed_within(kid, doc, "finished_at")
        version = _check_version(doc)
        digest = doc.get_str("rules_digest")
        rules = self.rules.resolve(digest, doc.get_str("game"))
        shoe = doc.get_obj("shoe")
        _check_decks(shoe, rules)
        _check_place(shoe, rules, place)
        self.commitments.check_round(doc, shoe)
        shoe_id = shoe.get_str("id")
        reveal = self.reveals.get(shoe_id)
        if reveal is None:
            if shoe_id in self.bad_reveals:
                _fail("shoe.id", self.bad_reveals[shoe_id])
            if shoe_id in self.commitments.shoes:  # committed, not finished: no reveal is due
                raise _Unrevealed(f"{tok(shoe_id)} is in play (committed, not finished): its "
                                  "round is checked once the shoe is revealed, by a later audit",
                                  in_play=True)
            raise _Unrevealed(f"{tok(shoe_id)} has no reveal yet: the round cannot be verified")
        _check_shoe(shoe, reveal)
        cards = reveal.cards()
        _check_cards(doc, shoe, cards)
        rnd = _deal(doc, rules, cards)
        _replay_actions(doc, rnd)
        _check_outcome(payload, doc, rnd)
        if digest not in self.report.rule_sets:
            self.report.rule_sets[digest] = (rules.game, self.rules.label(digest))
        self.report.versions[version] += 1
        void = rnd.phase is Phase.VOID
        return (f"{tok(rules.game)} shoe {tok(shoe_id)} [{rnd.start}, {rnd.position}) "
                f"staked {rnd.total_staked} returned {rnd.total_returned}"
                + (" (void)" if void else "")), void


class _Unrevealed(Exception):
    """The round's shoe has not been revealed (yet); ``in_play``: its commitment is known, so the
    shoe is still in play rather than its reveal missing."""

    def __init__(self, message: str, *, in_play: bool = False) -> None:
        super().__init__(message)
        self.in_play = in_play


def audit_paths(paths: Iterable[Path], trusted: Mapping[str, Ed25519PublicKey],
                on_round: Callable[[Finding], None] | None = None, *,
                options: AuditOptions | None = None) -> AuditReport:
    """Verify every record and reveal under ``paths`` against the ``trusted`` keys."""
    return Auditor(trusted, options).run(paths, on_round)
