"""Shoe reveals (``fairshoe.reveal/v1``): :func:`read_reveal` checks a verified reveal's payload
(decks within bounds, client seed within its length, whether the seed opens the commitment), and
:class:`Reveal` recomputes its shoe from the seed, once, for the rounds dealt from it (a shoe
that deals one round only as far as that round reads it, :meth:`Reveal.round_cards`). Whether the
shoe can be recomputed at all is known as the reveal is read (:func:`read_reveal`): a shuffle fails
on its inputs alone (:func:`~rng_service.rng.shoe.check_shoe_inputs`), before any card is drawn,
so a reveal is the same before and after its rounds are checked and goes back to the scratch store
no more.

The named checks of a reveal file, as it is read (:class:`RevealIndex`): ``shoe.signature``,
``shoe.reveal`` (its members) and ``shoe.unique`` (two different signed reveals of one shoe).
Those of its line, once the rounds are checked (:func:`reveal_finding`): ``shoe.seed`` (the seed
opens the commitment), ``shoe.commitment`` (:mod:`rng_service.audit.commitments`),
``shoe.one-seed`` (no other shoe has the commitment) and ``shoe.shuffle`` (the shoe can be
recomputed). A round's check against its shoe's reveal is ``round.shoe`` (:class:`RoundShoe`).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from game_math.cards import Card
from rng_service.audit.checks import Check, Named, SignatureCheck, Signed, Subject, run_checks
from rng_service.audit.claims import label, printable
from rng_service.audit.failures import AuditFailure, Doc, Unrevealed, fail
from rng_service.audit.files import Finding, Status, text_path, tok
from rng_service.audit.round_checks import RoundCase
from rng_service.audit.spill import Kept
from rng_service.core.json_input import JsonObject
from rng_service.crypto.signing import VerificationError
from rng_service.records.schema import REVEAL_SCHEMA
from rng_service.rng.shoe import (
    MAX_CLIENT_SEED_BYTES,
    MAX_DECKS,
    InvalidShoeInput,
    LazyShoe,
    check_shoe_inputs,
    seed_commitment,
    shoe_cards,
)

#: what a shoe is recomputed as: the whole list, or a LazyShoe
_Shoe = TypeVar("_Shoe", list[Card], LazyShoe)
_Beside = TypeVar("_Beside")


@dataclass
class Reveal:
    """A shoe reveal whose signature verified, and whether its seed opens its commitment."""

    shoe_id: str
    commitment: str
    seed: bytes
    client_seed: bytes
    decks: int
    #: the file it was read from (:attr:`path`): as text until asked for, as a reveal unpickled
    #: in pass 2 never is (a Path made from text costs a sixth of a round's decoding)
    where: Path | str
    opens: bool
    #: other shoe ids revealed with the same commitment (so the same seed)
    shared_with: tuple[str, ...] = ()
    #: why the shoe cannot be recomputed from this seed (its inputs checked as it was read)
    unusable: str | None = None
    _cards: list[Card] | None = None

    @property
    def path(self) -> Path:
        """The file the reveal was read from."""
        where = self.where
        if isinstance(where, str):
            where = self.where = text_path(where)
        return where

    @path.setter
    def path(self, path: Path) -> None:
        self.where = path

    def cards(self) -> list[Card]:
        """The shoe recomputed from the seed; AuditFailure on ``reveal.seed`` if it cannot be."""
        if self._cards is None:
            self._cards = self._shuffled(shoe_cards)
        return self._cards

    def round_cards(self, rounds: int) -> Sequence[Card]:
        """The shoe for the checks of one of its ``rounds`` rounds: a shoe that deals one round
        is a :class:`~rng_service.rng.shoe.LazyShoe`, the same cards shuffled only as far as the
        round reads them (a shoe per round: a few cards of 104 or 312; a 6-deck shoe's shuffle
        costs a half to a third); a shoe of several rounds is recomputed once, for all
        (:meth:`cards`)."""
        if rounds == 1 and self._cards is None:
            return self._shuffled(LazyShoe)
        return self.cards()

    def _shuffled(self, shuffle: Callable[[bytes, bytes, int], _Shoe]) -> _Shoe:
        """``shuffle(seed, client seed, decks)``; AuditFailure on ``reveal.seed`` if the
        inputs cannot make a shoe (its constructor checks them, as shoe_cards does)."""
        if self.unusable is not None:
            fail("reveal.seed", self.unusable)
        try:
            cards = shuffle(self.seed, self.client_seed, self.decks)
        except (ValueError, InvalidShoeInput) as exc:
            # the seed's length is the shoe module's rule (InvalidShoeInput), not the audit's
            self.unusable = _cannot_shuffle(exc)
            fail("reveal.seed", self.unusable)
        return cards

    def fields(self) -> RevealFields:
        """The reveal as the scratch store keeps it and the processes send it: its members in
        a flat tuple, its path as text, never its cards (pickled with no class to look up, at a
        fraction of the cost of the object: :func:`from_fields`)."""
        return (str(self.where), self.shoe_id, self.commitment, self.seed, self.client_seed,
                self.decks, self.opens, self.shared_with, self.unusable)

    def __reduce__(self) -> tuple[Any, ...]:
        # never its cards, and its path as text (a pickled Path is rebuilt from its parts)
        return (from_fields, (self.fields(),))

    def same_as(self, other: Reveal) -> bool:
        """True if ``other`` reveals the same shoe: same commitment, seed, client seed and
        decks (the file it came from may differ)."""
        return (self.commitment, self.seed, self.client_seed, self.decks) == (
            other.commitment, other.seed, other.client_seed, other.decks)


#: a reveal's members as :meth:`Reveal.fields` gives them: its file's path, shoe id, commitment,
#: seed, client seed, decks, whether the seed opens the commitment, the shoes that share it, and
#: why the shoe cannot be recomputed
RevealFields = tuple[str, str, str, bytes, bytes, int, bool, tuple[str, ...], str | None]


def from_fields(fields: RevealFields) -> Reveal:
    """The reveal of :meth:`Reveal.fields`."""
    where, shoe_id, commitment, seed, client_seed, decks, opens, shared_with, unusable = fields
    return Reveal(shoe_id, commitment, seed, client_seed, decks, where, opens, shared_with,
                  unusable)


def from_pickled(data: bytes) -> Reveal:
    """The reveal of :meth:`Reveal.fields` pickled (as the scratch store keeps it)."""
    return from_fields(pickle.loads(data))


def _cannot_shuffle(exc: Exception) -> str:
    """Why a shoe cannot be recomputed, as a reveal's line and its rounds' say it."""
    return f"cannot shuffle the shoe: {exc}"


def read_reveal(payload: Mapping[str, Any], path: Path) -> Reveal:
    """The reveal in a verified payload; AuditFailure on the member out of bounds."""
    doc = Doc(payload, "")
    seed = doc.get_hex("seed")  # its length is the shoe's rule: shoe_cards checks it (Reveal.cards)
    decks = doc.get_int("decks")
    if not 1 <= decks <= MAX_DECKS:
        fail("decks", f"must be 1..{MAX_DECKS}, got {decks}")
    client_seed = doc.get_hex("client_seed")
    if len(client_seed) > MAX_CLIENT_SEED_BYTES:
        fail("client_seed", f"has {len(client_seed)} bytes, more than {MAX_CLIENT_SEED_BYTES}")
    commitment = doc.get_str("commitment")
    try:  # whether the shoe can be recomputed: a shuffle fails on its inputs, or never
        check_shoe_inputs(seed, client_seed, decks)
        unusable = None
    except InvalidShoeInput as exc:
        unusable = _cannot_shuffle(exc)
    return Reveal(doc.get_str("shoe_id"), commitment, seed, client_seed, decks, path,
                  opens=seed_commitment(seed) == commitment, unusable=unusable)


# --- a reveal file, as it is read ----------------------------------------------------------------


class RevealCase(Signed):
    """A reveal file being checked: its envelope, its payload once verified, its reveal once
    read."""

    def __init__(self, path: Path, envelope: dict[str, Any]) -> None:
        self.path = path
        self.envelope = envelope
        self.payload: dict[str, Any] = {}
        self.reveal: Reveal | None = None


class RevealSignature(SignatureCheck[RevealCase]):
    """1. A shoe reveal is signed by a key the auditor trusts."""

    name = "shoe.signature"
    schema = REVEAL_SCHEMA


class RevealRecord(Check[RevealCase]):
    """3. A reveal's members: decks within bounds, the client seed within its length
    (:func:`read_reveal`)."""

    name = "shoe.reveal"

    def check(self, subject: RevealCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.reveal = read_reveal(subject.payload, subject.path)


class RevealUnique(Named):
    """3. One reveal per shoe: two signed reveals of one shoe that differ both fail, and so does
    every round of the shoe; an identical copy is a line of its own."""

    name = "shoe.unique"


#: why a reveal file failed its checks: the field, the message, the failure as the reveal's
#: rounds quote it, and the check's name
RevealFailed = tuple[str | None, str, str, str]


class Sealed(NamedTuple):
    """A reveal that verified, pickled where it was verified (perhaps a worker process) as the
    scratch store keeps it: the audit's own process stores it without making a :class:`Reveal`
    of it and pickling that again (it does only for a second reveal of one shoe)."""

    shoe_id: str
    commitment: str
    data: bytes

    def reveal(self) -> Reveal:
        """The reveal sealed."""
        return from_pickled(self.data)


class RevealIndex:
    """The shoe reveals of a collection, by shoe id, each verified when read (:meth:`verify`,
    perhaps in a worker process) and kept (:meth:`take`): in the audit's scratch store
    (:class:`~rng_service.audit.spill.Kept`, set as the audit runs), so that a collection of a
    shoe per round holds none of them in memory; what was wrong with those that failed, for
    their rounds' lines."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey]) -> None:
        self.checks = (RevealSignature(trusted), RevealRecord())
        #: the reveals that verified, in the order read: set by the auditor while it runs
        self.kept: Kept[RevealFields] | None = None
        self.bad: dict[str, str] = {}  # shoe id -> why its reveal failed
        self.conflicts: set[str] = set()
        #: the shoe whose rounds are being checked, and its reveal (carried to a worker with
        #: them: a worker never reads the store)
        self._checking: tuple[str, Reveal | None] | None = None

    def _store(self) -> Kept[RevealFields]:
        assert self.kept is not None, "set by the auditor while it runs"
        return self.kept

    def seal(self, path: Path, envelope: dict[str, Any]) -> Sealed | RevealFailed:
        """:meth:`verify`, the reveal sealed as the scratch store keeps it (run in a worker
        process as the file is read)."""
        verified = self.verify(path, envelope)
        if isinstance(verified, tuple):
            return verified
        return Sealed(verified.shoe_id, verified.commitment,
                      pickle.dumps(verified.fields(), pickle.HIGHEST_PROTOCOL))

    def verify(self, path: Path, envelope: dict[str, Any]) -> Reveal | RevealFailed:
        """A reveal file's checks (pure: run in a worker process as the file is read): the
        reveal, or why it failed."""
        case = RevealCase(path, envelope)
        try:
            run_checks(self.checks, case)
        except VerificationError as exc:
            return (exc.field, str(exc), str(exc), case.check)
        except AuditFailure as exc:
            return (exc.field, exc.message, str(exc), case.check)
        assert case.reveal is not None
        return case.reveal

    def add(self, path: Path, envelope: dict[str, Any]) -> list[Finding]:
        """Verify a reveal and keep it (:meth:`seal`, :meth:`take`)."""
        return self.take(path, label(envelope.get("payload"), "shoe_id", path),
                         self.seal(path, envelope))

    def take(self, path: Path, ident: str, verified: Sealed | RevealFailed) -> list[Finding]:
        """Keep a verified reveal for the rounds (its line is made after them): the FAIL
        findings now, if it failed, or the OK one of a copy. A sealed reveal was read from
        ``path`` (it names it as its file)."""
        if not isinstance(verified, Sealed):
            field, message, why, check = verified
            self.bad[ident] = f"the reveal {tok(path.name)} failed: {why}"
            return [Finding("shoe", ident, path, Status.FAIL, field, message, check=check)]
        store = self._store()
        if verified.shoe_id not in self.conflicts and store.add_pickled(
                verified.shoe_id, verified.commitment, verified.data):
            return []
        reveal = verified.reveal()
        reveal.path = path
        kept = store.get(reveal.shoe_id)
        known = None if kept is None else from_fields(kept)
        if reveal.shoe_id in self.conflicts or (known is not None and not known.same_as(reveal)):
            # two signed reveals of one shoe that differ: neither can be believed
            self.conflicts.add(reveal.shoe_id)
            store.pop(reveal.shoe_id)
            self.bad[reveal.shoe_id] = f"has two different signed reveals ({tok(path.name)})"
            out = []
            for one, other in ((known, path), (reveal, known.path if known else None)):
                if one is not None:
                    also = f" (also {tok(other)})" if other else ""
                    out.append(Finding("shoe", ident, one.path, Status.FAIL, "shoe_id",
                                       f"is revealed twice, differently{also}",
                                       check=RevealUnique.name))
            return out
        assert known is not None
        # a copy: a line of its own, the first one is used
        return [Finding("shoe", ident, path, Status.OK,
                        message=f"the same reveal as {tok(known.path)}",
                        check=RevealUnique.name)]

    def unsigned(self, shoe_id: str, path: Path) -> None:
        """A bare reveal payload, unsigned: the rounds of its shoe say so."""
        self.bad.setdefault(shoe_id, f"the reveal {tok(path.name)} is not signed")

    def flag_shared_commitments(self) -> None:
        """Mark the reveals of shoe ids that share a commitment: one seed dealt as two shoes."""
        store = self._store()
        for shoe_ids in store.sharing_tags():
            for shoe_id in shoe_ids:
                kept = store.get(shoe_id)
                assert kept is not None
                reveal = from_fields(kept)
                reveal.shared_with = tuple(s for s in shoe_ids if s != shoe_id)
                store.replace(shoe_id, reveal.fields())

    def get(self, shoe_id: str) -> Reveal | None:
        """The reveal of ``shoe_id`` that verified, if any (in pass 2, the one carried with the
        shoe being checked)."""
        if self._checking is not None:
            return self._checking[1] if self._checking[0] == shoe_id else None
        kept = self._store().get(shoe_id)
        return None if kept is None else from_fields(kept)

    def checking(self, shoe_id: str | None, reveal: Reveal | None = None) -> None:
        """The rounds of ``shoe_id`` are checked next, against ``reveal`` (read from the store
        when they were handed out); None: they are done with."""
        self._checking = None if shoe_id is None else (shoe_id, reveal)

    def checked_shoe(self) -> str | None:
        """The shoe whose rounds are being checked, if any."""
        return None if self._checking is None else self._checking[0]

    def reveals(self) -> Iterator[Reveal]:
        """Every reveal that verified, in the order read."""
        return map(from_fields, self._store().values())

    def reveals_beside(self, other: Kept[_Beside]) -> Iterator[tuple[Reveal, _Beside | None]]:
        """:meth:`reveals`, each with what ``other`` (kept in the same store) keeps under its
        shoe id, or None (a shoe's commitment for its reveal's line: a join, not a look-up a
        reveal)."""
        return ((from_fields(fields), beside)
                for fields, beside in self._store().values_beside(other))

    def revealed(self) -> Container[str]:
        """The shoes with a reveal that verified."""
        return self._store()

    def judged(self) -> Container[str]:
        """The shoes with a reveal, good or bad: not in play."""
        return _Judged(self)


class _Judged:
    """The shoes with a reveal, good or bad (:meth:`RevealIndex.judged`)."""

    def __init__(self, index: RevealIndex) -> None:
        self._index = index

    def __contains__(self, shoe_id: object) -> bool:
        index = self._index
        return (shoe_id in index.bad or shoe_id in index.conflicts
                or shoe_id in index.revealed())


# --- a reveal's line, once the rounds are checked ------------------------------------------------


class RevealLine(Subject):
    """A verified reveal whose line is being made; ``ident`` names the line."""

    def __init__(self, reveal: Reveal) -> None:
        self.reveal = reveal
        self.ident = printable(reveal.shoe_id, reveal.path)


class SeedOpens(Check[RevealLine]):
    """3. The reveal's seed opens its commitment."""

    name = "shoe.seed"

    def check(self, subject: RevealLine) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        if not subject.reveal.opens:
            fail("seed", f"does not open the commitment {tok(subject.reveal.commitment)}")


class SeedServesOneShoe(Check[RevealLine]):
    """3. No other shoe id is revealed with the same commitment: a seed serves one shoe."""

    name = "shoe.one-seed"

    def check(self, subject: RevealLine) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        reveal = subject.reveal
        if reveal.shared_with:
            fail("commitment", f"{tok(reveal.commitment)} is also the commitment of shoe "
                  f"{', '.join(map(tok, reveal.shared_with))}: a seed serves one shoe")


class ShoeShuffles(Check[RevealLine]):
    """3. The shoe can be recomputed from the seed: its inputs are those a shuffle takes
    (:func:`~rng_service.rng.shoe.check_shoe_inputs`, checked as the reveal was read: the one
    way a shuffle fails, before it draws a card); the rounds dealt from it recompute the cards
    they read."""

    name = "shoe.shuffle"

    def check(self, subject: RevealLine) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        if subject.reveal.unusable is not None:
            fail("seed", subject.reveal.unusable)


def reveal_finding(reveal: Reveal, checks: Sequence[Check[RevealLine]]) -> Finding:
    """The line of a verified reveal: the first of ``checks`` it fails, else OK."""
    line = RevealLine(reveal)
    try:
        run_checks(checks, line)
    except AuditFailure as exc:
        return Finding("shoe", line.ident, reveal.path, Status.FAIL, exc.field, exc.message,
                       check=line.check)
    return Finding("shoe", line.ident, reveal.path, Status.OK,
                   message=f"revealed ({reveal.decks} decks)", check=line.check)


# --- a round against its shoe's reveal -----------------------------------------------------------


def check_shoe(shoe: JsonObject, reveal: Reveal) -> None:
    """The reveal's seed opens the record's commitment, with the same decks and client seed,
    and no other shoe has that commitment."""
    recorded = shoe.get_str("commitment")
    # what the seed opens: the reveal's commitment if it opens that (read_reveal hashed it)
    opened = reveal.commitment if reveal.opens else seed_commitment(reveal.seed)
    if not reveal.opens:
        # the reveal is inconsistent; the round's own commitment says which half was changed
        if opened == recorded:
            fail("reveal.commitment", f"{tok(reveal.commitment)} is not what the seed opens "
                  f"({opened}, as this record committed)")
        fail("reveal.seed", f"does not open the commitment {recorded}")
    if recorded != reveal.commitment:
        fail("shoe.commitment", f"recorded {recorded}, the revealed seed opens {opened}")
    if shoe.get_int("decks") != reveal.decks:
        fail("shoe.decks", f"recorded {shoe.get_int('decks')}, revealed shoe has {reveal.decks}")
    if shoe.get_hex("client_seed") != reveal.client_seed:
        fail("shoe.client_seed", f"recorded {shoe.get_str('client_seed')}, "
              f"revealed {reveal.client_seed.hex()}")
    if reveal.shared_with:
        fail("shoe.commitment", f"{recorded} is also the commitment of shoe "
              f"{', '.join(reveal.shared_with)}: a seed serves one shoe")


class RoundShoe(Check[RoundCase]):
    """3. The round's shoe has a reveal that verified (else the round is UNREVEALED, or OPEN if
    its shoe is committed and in play), and its seed opens the record's commitment with the same
    decks and client seed (:func:`check_shoe`)."""

    name = "round.shoe"

    def __init__(self, index: RevealIndex, committed: Container[str]) -> None:
        self.index = index
        self.committed = committed

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        shoe = subject.shoe
        shoe_id = shoe.get_str("id")
        claimed = self.index.checked_shoe()
        if claimed is not None and claimed != shoe_id:
            # the rounds are checked with the reveal of the shoe they claimed when sorted; as
            # they are checked on the bytes pass 1 read, only a piece put together wrong (or a
            # case made without bytes, which reads its file) can claim another shoe here
            fail("shoe.id", f"is {tok(shoe_id)}, but was {tok(claimed)} when the audit "
                  "sorted the rounds: the record changed during the audit")
        reveal = self.index.get(shoe_id)
        if reveal is None:
            if shoe_id in self.index.bad:
                fail("shoe.id", self.index.bad[shoe_id])
            if shoe_id in self.committed:  # committed, not finished: no reveal is due
                raise Unrevealed(f"{tok(shoe_id)} is in play (committed, not finished): its "
                                  "round is checked once the shoe is revealed, by a later audit",
                                  in_play=True)
            raise Unrevealed(f"{tok(shoe_id)} has no reveal yet: the round cannot be verified")
        check_shoe(shoe, reveal)
        subject.reveal = reveal
