"""Shoe commitments (``fairshoe.shoe-commitment/v1``, under ``shoes/``): each must be signed by a
trusted key within its validity period, one per shoe and one shoe per commitment, and a committed
shoe's rounds and reveal must agree with it (commitment, decks, game, rules, mode). A committed
shoe with no reveal is in play: its rounds are checked by a later audit (:class:`CommitmentIndex`).

The named checks: ``commitment.signature`` and ``commitment.record`` (a commitment file),
``commitment.unique`` (one per shoe), ``commitment.one-seed`` (one shoe per commitment),
``round.commitment`` (a committed shoe's round) and ``shoe.commitment`` (its reveal).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Container, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.checks import Check, Named, SignatureCheck, Signed, run_checks
from rng_service.audit.claims import label
from rng_service.audit.failures import AuditFailure, Doc, exact_members, fail
from rng_service.audit.files import Finding, Status, show, tok
from rng_service.audit.reveals import RevealLine
from rng_service.audit.round_checks import MODES, RoundCase, round_mode
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
    each verified when read; the rounds and the reveal of a committed shoe must agree with it."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey], times: Times) -> None:
        self.checks = (CommitmentSignature(trusted), CommitmentRecord(times))
        self.shoes: dict[str, Commitment] = {}
        self.bad: dict[str, str] = {}  # shoe id -> why its commitment cannot be used
        self._kept: list[Commitment] = []

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

    def add(self, path: Path, envelope: dict[str, Any]) -> list[Finding]:
        """Verify one commitment file and keep it (:meth:`verify`, :meth:`take`)."""
        return self.take(path, label(envelope.get("payload"), "shoe_id", path),
                         self.verify(path, envelope))

    def take(self, path: Path, ident: str, verified: Commitment | CommitmentFailed
             ) -> list[Finding]:
        """Keep a verified commitment, in the walk's order: a FAIL finding now, or none (its
        line comes with :meth:`findings`, once the reveals are known)."""
        if isinstance(verified, tuple):
            field, message, check = verified
            self.bad.setdefault(ident, f"its commitment {tok(path.name)} failed: {message}")
            return [Finding("commitment", ident, path, Status.FAIL, field, message, check=check)]
        found = verified
        known = self.shoes.get(found.shoe_id)
        if found.shoe_id in self.bad or (known is not None and not known.same_as(found)):
            # two signed commitments of one shoe that differ: neither can be believed
            self.shoes.pop(found.shoe_id, None)
            self.bad[found.shoe_id] = "is committed twice, differently"
            pairs = [(path, known.path), (known.path, path)] if known else [(path, None)]
            return [Finding("commitment", ident, one, Status.FAIL, "shoe_id",
                            "is committed twice, differently"
                            + (f" (also {tok(other)})" if other else ""),
                            check=CommitmentUnique.name)
                    for one, other in pairs]
        if known is None:
            self.shoes[found.shoe_id] = found
        self._kept.append(found)
        return []

    def check_round(self, doc: JsonObject, shoe: JsonObject) -> None:
        """A round of a committed shoe names its commitment, decks, game and rules, and was
        played for the shoe's money (a live round's ``mode``: demo play never dealt from a
        real-money shoe, nor real money from a demo one)."""
        shoe_id = shoe.get_str("id")
        if shoe_id in self.bad:
            fail("shoe.id", f"{tok(shoe_id)}: {self.bad[shoe_id]}")
        known = self.shoes.get(shoe_id)
        if known is None:
            return
        where = f"the shoe's commitment {tok(known.path.name)}"
        for name, recorded, committed in (
                ("shoe.commitment", shoe.get_str("commitment"), known.commitment),
                ("shoe.decks", shoe.get_int("decks"), known.decks),
                ("game", doc.get_str("game"), known.game),
                ("rules_digest", doc.get_str("rules_digest"), known.rules_digest),
                ("mode", round_mode(doc) or known.mode, known.mode)):
            if recorded != committed:
                fail(name, f"recorded {show(recorded)}, but {where} has {show(committed)}")

    def check_reveal(self, line: RevealLine) -> None:
        """Fail if the reveal of a committed shoe contradicts its commitment (or the shoe's
        commitments failed); the line is then named by the reveal's own shoe id."""
        reveal = line.reveal
        shoe_id = reveal.shoe_id
        if shoe_id in self.bad:
            line.ident = shoe_id
            fail("shoe_id", self.bad[shoe_id])
        known = self.shoes.get(shoe_id)
        if known is None:
            return
        for name, revealed, committed in (("commitment", reveal.commitment, known.commitment),
                                          ("decks", reveal.decks, known.decks)):
            if revealed != committed:
                line.ident = shoe_id
                fail(name, f"revealed {show(revealed)}, but the shoe's commitment "
                      f"{tok(known.path.name)} has {show(committed)}")

    def findings(self, revealed: Container[str]) -> list[Finding]:
        """A line per commitment that verified: OK, unless another shoe has its commitment."""
        by_value = Counter(c.commitment for c in self.shoes.values())
        out = []
        for c in self._kept:
            if c.shoe_id not in self.shoes:
                continue  # conflicting: its FAIL lines are in already
            if by_value[c.commitment] > 1:
                out.append(Finding("commitment", c.shoe_id, c.path, Status.FAIL, "commitment",
                                   f"{tok(c.commitment)} is also another shoe's: a seed serves "
                                   "one shoe", check=CommitmentOneSeed.name))
                continue
            seen = "revealed" if c.shoe_id in revealed else "in play (not revealed yet)"
            out.append(Finding("commitment", c.shoe_id, c.path, Status.OK,
                               message=f"{tok(c.game)}, {c.decks} decks: {seen}",
                               check=CommitmentRecord.name))
        return out

    def never_revealed(self, revealed: Container[str]) -> list[str]:
        """The committed shoes with no reveal (nor a failed one), sorted: in play."""
        return sorted(shoe_id for shoe_id in self.shoes if shoe_id not in revealed)


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
