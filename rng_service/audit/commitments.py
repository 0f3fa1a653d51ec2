"""Shoe commitments (``fairshoe.shoe-commitment/v1``, under ``shoes/``): each must be signed by a
trusted key within its validity period, one per shoe and one shoe per commitment, and a committed
shoe's rounds and reveal must agree with it (commitment, decks, game, rules, mode). A committed
shoe with no reveal is in play: its rounds are checked by a later audit (:class:`CommitmentIndex`).

What the audit keeps of them lives in its scratch store (:mod:`rng_service.audit.spill`), not in
memory: a collection that reshuffles every round commits a shoe per record. Each shoe's first
commitment is kept by shoe id and tagged with its value (:class:`~rng_service.audit.spill.Kept`:
the look-ups of its rounds and reveal, and the values two shoes share, a query), and every
commitment kept, a copy included, is appended in the walk's order for its line
(:class:`~rng_service.audit.spill.Appended`). In memory are only what failed (few, each a FAIL
line) and, in pass 2, the commitment of the shoe being checked, which travels with its rounds.

The named checks: ``commitment.signature`` and ``commitment.record`` (a commitment file),
``commitment.unique`` (one per shoe), ``commitment.one-seed`` (one shoe per commitment),
``round.commitment`` (a committed shoe's round) and ``shoe.commitment`` (its reveal).
"""

from __future__ import annotations

import dataclasses
import pickle
import re
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.checks import Check, Named, SignatureCheck, Signed, run_checks
from rng_service.audit.claims import label
from rng_service.audit.failures import AuditFailure, Doc, exact_members, fail
from rng_service.audit.files import Finding, Status, show, tok
from rng_service.audit.reveals import RevealLine
from rng_service.audit.round_checks import MODES, RoundCase, round_mode
from rng_service.audit.spill import Appended, Kept, SpillDb
from rng_service.audit.times import Times
from rng_service.core.json_input import JsonObject
from rng_service.crypto.signing import VerificationError
from rng_service.records.schema import SHOE_COMMITMENT_SCHEMA
from rng_service.rng.shoe import MAX_DECKS

_COMMITMENT_MEMBERS: Final = frozenset({"schema", "shoe_id", "commitment", "game", "rules_digest",
                                        "decks", "mode", "created_at"})
_HEX64: Final = re.compile(r"[0-9a-f]{64}")

#: why a commitment file failed its checks: the field, the message and the check's name
CommitmentFailed = tuple[str | None, str, str]


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

    def fields(self) -> CommitmentFields:
        """The commitment as the scratch store keeps it and the processes send it: its members
        in a flat tuple, its path as text (pickled with no class to look up, at a fraction of
        the cost of the object: :func:`commitment_of`)."""
        return (self.shoe_id, self.commitment, self.game, self.rules_digest, self.decks,
                self.mode, str(self.path))


#: a commitment's members as :meth:`Commitment.fields` gives them: shoe id, commitment, game,
#: rules digest, decks, mode and its file's path
CommitmentFields = tuple[str, str, str, str, int, str, str]


def commitment_of(fields: CommitmentFields) -> Commitment:
    """The commitment of :meth:`Commitment.fields`."""
    shoe_id, commitment, game, digest, decks, mode, where = fields
    return Commitment(shoe_id, commitment, game, digest, decks, mode, Path(where))


class SealedCommitment(NamedTuple):
    """A commitment that verified, pickled where it was verified (perhaps a worker process) as
    the scratch store keeps it (:meth:`Commitment.fields`): the audit's own process stores the
    bytes as they are (it unpickles them only for a second commitment of one shoe)."""

    shoe_id: str
    commitment: str
    data: bytes


class CommitmentCase(Signed):
    """A commitment file being checked: its envelope, and its payload once verified."""

    def __init__(self, path: Path, envelope: dict[str, Any]) -> None:
        self.path = path
        self.envelope = envelope
        self.payload: dict[str, Any] = {}
        self.found: Commitment | None = None


class CommitmentSignature(SignatureCheck[CommitmentCase]):
    """A shoe commitment is signed by a key the auditor trusts."""

    name = "commitment.signature"
    schema = SHOE_COMMITMENT_SCHEMA


class CommitmentRecord(Check[CommitmentCase]):
    """A commitment's members: exactly those of a commitment, SHA-256 digests, decks within
    bounds, DEMO or REAL, and signed within its key's validity period (``created_at``)."""

    name = "commitment.record"

    def __init__(self, times: Times) -> None:
        self.times = times

    def check(self, subject: CommitmentCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        payload, path = subject.payload, subject.path
        doc = Doc(payload, "")
        exact_members(payload, _COMMITMENT_MEMBERS, "shoe commitment")
        commitment, digest = doc.get_str("commitment"), doc.get_str("rules_digest")
        for name, value in (("commitment", commitment), ("rules_digest", digest)):
            if not _HEX64.fullmatch(value):
                fail(name, f"{show(value)} is not a SHA-256 digest (64 lowercase hex digits)")
        decks = doc.get_int("decks")
        if not 1 <= decks <= MAX_DECKS:
            fail("decks", f"must be 1..{MAX_DECKS}, got {decks}")
        mode = doc.get_str("mode")
        if mode not in MODES:
            fail("mode", f"must be DEMO or REAL, got {show(mode)}")
        self.times.signed_within(subject.envelope["signature"]["key_id"], doc, "created_at")
        subject.found = Commitment(doc.get_str("shoe_id"), commitment, doc.get_str("game"),
                                   digest, decks, mode, path)


class CommitmentUnique(Named):
    """One commitment per shoe: two signed commitments of one shoe that differ both fail (and
    the shoe's rounds and reveal with them)."""

    name = "commitment.unique"


class CommitmentOneSeed(Named):
    """One shoe per commitment: a commitment value that two shoes share fails (one seed dealt as
    two shoes)."""

    name = "commitment.one-seed"


class CommitmentIndex:
    """The shoe commitments (``fairshoe.shoe-commitment/v1``, under ``shoes/``) of a collection:
    each verified when read (:meth:`seal`, perhaps in a worker process) and kept (:meth:`take`)
    in the audit's scratch store (:meth:`store_in`, as the audit runs); the rounds and the
    reveal of a committed shoe must agree with it. A shoe is *committed* if a commitment of it
    verified and no other of it differs."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey], times: Times) -> None:
        self.checks = (CommitmentSignature(trusted), CommitmentRecord(times))
        #: each shoe's first commitment that verified, by shoe id, tagged with its value
        self.kept: Kept[CommitmentFields] | None = None
        #: every commitment kept (a copy of one too), in the walk's order: their lines
        self.lines: Appended[CommitmentFields] | None = None
        self.bad: dict[str, str] = {}  # shoe id -> why its commitment cannot be used
        #: the shoes with two signed commitments that differ: kept, but not committed
        self.conflicts: set[str] = set()
        #: the shoe whose rounds or reveal are being checked, and its commitment (carried to a
        #: worker with its rounds: a worker never reads the store)
        self._checking: tuple[str, CommitmentFields | None] | None = None

    def store_in(self, spill: SpillDb | None) -> None:
        """Keep the commitments in ``spill`` from now on (None: the audit is over)."""
        self.kept = None if spill is None else Kept(spill)
        self.lines = None if spill is None else Appended(spill)

    def _store(self) -> tuple[Kept[CommitmentFields], Appended[CommitmentFields]]:
        assert self.kept is not None and self.lines is not None, "set by the auditor while it runs"
        return self.kept, self.lines

    def verify(self, path: Path, envelope: dict[str, Any]) -> Commitment | CommitmentFailed:
        """A commitment file's checks (pure: run in a worker process as the file is read): the
        commitment, or why it failed (field, message, check)."""
        case = CommitmentCase(path, envelope)
        try:
            run_checks(self.checks, case)
        except (VerificationError, AuditFailure) as exc:
            message = exc.message if isinstance(exc, AuditFailure) else str(exc)
            return (exc.field, message, case.check)
        assert case.found is not None
        return case.found

    def seal(self, path: Path, envelope: dict[str, Any]) -> SealedCommitment | CommitmentFailed:
        """:meth:`verify`, the commitment sealed as the scratch store keeps it (run in a worker
        process as the file is read)."""
        verified = self.verify(path, envelope)
        if isinstance(verified, tuple):
            return verified
        return SealedCommitment(verified.shoe_id, verified.commitment,
                                pickle.dumps(verified.fields(), pickle.HIGHEST_PROTOCOL))

    def add(self, path: Path, envelope: dict[str, Any]) -> list[Finding]:
        """Verify one commitment file and keep it (:meth:`seal`, :meth:`take`)."""
        return self.take(path, label(envelope.get("payload"), "shoe_id", path),
                         self.seal(path, envelope))

    def take(self, path: Path, ident: str, verified: SealedCommitment | CommitmentFailed
             ) -> list[Finding]:
        """Keep a verified commitment, in the walk's order: a FAIL finding now, or none (its
        line comes with :meth:`findings`, once the reveals are known). A sealed commitment was
        read from ``path`` (it names it as its file)."""
        if not isinstance(verified, SealedCommitment):
            field, message, check = verified
            self.bad.setdefault(ident, f"its commitment {tok(path.name)} failed: {message}")
            return [Finding("commitment", ident, path, Status.FAIL, field, message, check=check)]
        kept, lines = self._store()
        shoe_id = verified.shoe_id
        known = None
        if shoe_id not in self.conflicts:
            # a commitment that failed before this one (its file sorts first) leaves the shoe
            # failed as it would after it, not committed twice: it is nobody's commitment
            if kept.add_pickled(shoe_id, verified.commitment, verified.data):
                lines.append_pickled(verified.data)  # the shoe's first: the usual case
                return []
            fields = kept.get(shoe_id)
            known = None if fields is None else commitment_of(fields)
        found = commitment_of(pickle.loads(verified.data))
        if shoe_id in self.conflicts or (known is not None and not known.same_as(found)):
            # two signed commitments of one shoe that differ: neither can be believed
            self.conflicts.add(shoe_id)
            self.bad[shoe_id] = "is committed twice, differently"
            pairs = [(path, known.path), (known.path, path)] if known else [(path, None)]
            return [Finding("commitment", ident, one, Status.FAIL, "shoe_id",
                            "is committed twice, differently"
                            + (f" (also {tok(other)})" if other else ""),
                            check=CommitmentUnique.name)
                    for one, other in pairs]
        lines.append_pickled(verified.data)  # a copy: a line of its own
        return []

    def carried(self, shoe_ids: list[str]) -> list[bytes | None]:
        """The commitment of each of ``shoe_ids`` if it is committed, pickled as kept (to go
        with its rounds to pass 2), with one query for all of them."""
        kept, _ = self._store()
        return [None if shoe_id in self.conflicts else data
                for shoe_id, data in zip(shoe_ids, kept.get_many_pickled(shoe_ids), strict=True)]

    def checking(self, shoe_id: str | None, fields: CommitmentFields | bytes | None = None
                 ) -> None:
        """The rounds or the reveal of ``shoe_id`` are checked next, against its commitment
        (``fields``, or them pickled; None: it is not committed); ``shoe_id`` None: they are
        done with."""
        known: CommitmentFields | None = (pickle.loads(fields) if isinstance(fields, bytes)
                                           else fields)
        if shoe_id is not None and shoe_id in self.conflicts:
            known = None
        self._checking = None if shoe_id is None else (shoe_id, known)

    def _known(self, shoe_id: str) -> CommitmentFields | None:
        """The commitment of ``shoe_id`` if it is committed (while a shoe is being checked,
        only its own is known)."""
        if self._checking is not None:
            return self._checking[1] if self._checking[0] == shoe_id else None
        if shoe_id in self.conflicts:
            return None
        return self._store()[0].get(shoe_id)

    def __contains__(self, shoe_id: object) -> bool:
        """True if ``shoe_id`` is committed (while a shoe is being checked, of it alone)."""
        return isinstance(shoe_id, str) and self._known(shoe_id) is not None

    def path_of(self, shoe_id: str) -> Path:
        """The file of a committed shoe's commitment (KeyError if it is not committed)."""
        known = self._known(shoe_id)
        if known is None:
            raise KeyError(shoe_id)
        return Path(known[-1])

    def check_round(self, doc: JsonObject, shoe: JsonObject) -> None:
        """A round of a committed shoe names its commitment, decks, game and rules, and was
        played for the shoe's money (a live round's ``mode``: demo play never dealt from a
        real-money shoe, nor real money from a demo one)."""
        shoe_id = shoe.get_str("id")
        if shoe_id in self.bad:
            fail("shoe.id", f"{tok(shoe_id)}: {self.bad[shoe_id]}")
        known = self._known(shoe_id)
        if known is None:
            return
        _, commitment, game, digest, decks, mode, where = known
        for name, recorded, committed in (
                ("shoe.commitment", shoe.get_str("commitment"), commitment),
                ("shoe.decks", shoe.get_int("decks"), decks),
                ("game", doc.get_str("game"), game),
                ("rules_digest", doc.get_str("rules_digest"), digest),
                ("mode", round_mode(doc) or mode, mode)):
            if recorded != committed:
                fail(name, f"recorded {show(recorded)}, but the shoe's commitment "
                     f"{tok(Path(where).name)} has {show(committed)}")

    def check_reveal(self, line: RevealLine) -> None:
        """Fail if the reveal of a committed shoe contradicts its commitment (or the shoe's
        commitments failed); the line is then named by the reveal's own shoe id."""
        reveal = line.reveal
        shoe_id = reveal.shoe_id
        if shoe_id in self.bad:
            line.ident = shoe_id
            fail("shoe_id", self.bad[shoe_id])
        known = self._known(shoe_id)
        if known is None:
            return
        _, commitment, _, _, decks, _, where = known
        for name, revealed, committed in (("commitment", reveal.commitment, commitment),
                                          ("decks", reveal.decks, decks)):
            if revealed != committed:
                line.ident = shoe_id
                fail(name, f"revealed {show(revealed)}, but the shoe's commitment "
                      f"{tok(Path(where).name)} has {show(committed)}")

    def findings(self, revealed: Container[str]) -> Iterator[Finding]:
        """A line per commitment kept, in the walk's order, made as it is taken: OK, unless
        another shoe has its commitment (those found by a query on the store's tags)."""
        kept, lines = self._store()
        shared = set()
        for shoe_ids in kept.sharing_tags():  # each a failure: few
            committed = [shoe_id for shoe_id in shoe_ids if shoe_id not in self.conflicts]
            if len(committed) > 1:
                shared.update(committed)
        for shoe_id, commitment, game, _, decks, _, where in lines:
            if shoe_id in self.conflicts:
                continue  # conflicting: its FAIL lines are in already
            if shoe_id in shared:
                yield Finding("commitment", shoe_id, Path(where), Status.FAIL, "commitment",
                              f"{tok(commitment)} is also another shoe's: a seed serves "
                              "one shoe", check=CommitmentOneSeed.name)
                continue
            seen = "revealed" if shoe_id in revealed else "in play (not revealed yet)"
            yield Finding("commitment", shoe_id, Path(where), Status.OK,
                          message=f"{tok(game)}, {decks} decks: {seen}",
                          check=CommitmentRecord.name)

    def never_revealed(self, judged: Container[str], revealed: Kept[Any]) -> list[str]:
        """The committed shoes with no reveal (nor a failed one), sorted: in play. Those with
        a reveal that verified (``revealed``, kept in the same store) are left out by a query;
        ``judged`` holds those too, and those whose reveal failed."""
        kept, _ = self._store()
        return sorted(shoe_id for shoe_id in kept.keys_absent(revealed)
                      if shoe_id not in self.conflicts and shoe_id not in judged)


class RoundCommitment(Check[RoundCase]):
    """A round of a committed shoe names its commitment, decks, game and rules, and was played
    for the shoe's money (:meth:`CommitmentIndex.check_round`)."""

    name = "round.commitment"

    def __init__(self, index: CommitmentIndex) -> None:
        self.index = index

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        self.index.check_round(subject.doc, subject.shoe)


class RevealCommitment(Check[RevealLine]):
    """The reveal of a committed shoe agrees with its commitment (commitment, decks)
    (:meth:`CommitmentIndex.check_reveal`)."""

    name = "shoe.commitment"

    def __init__(self, index: CommitmentIndex) -> None:
        self.index = index

    def check(self, subject: RevealLine) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        self.index.check_reveal(subject)
