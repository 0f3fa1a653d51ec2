"""Shoe reveals (``fairshoe.reveal/v1``): :func:`read_reveal` checks a verified reveal's payload
(decks within bounds, client seed within its length, whether the seed opens the commitment), and
:class:`Reveal` recomputes its shoe from the seed, once, for the rounds dealt from it (a shoe
that deals one round only as far as that round reads it, :meth:`Reveal.round_cards`).

The named checks of a reveal file, as it is read (:class:`RevealIndex`): ``shoe.signature``,
``shoe.reveal`` (its members) and ``shoe.unique`` (two different signed reveals of one shoe).
Those of its line, once the rounds are checked (:func:`reveal_finding`): ``shoe.seed`` (the seed
opens the commitment), ``shoe.commitment`` (:mod:`rng_service.audit.commitments`),
``shoe.one-seed`` (no other shoe has the commitment) and ``shoe.shuffle`` (the shoe can be
recomputed). A round's check against its shoe's reveal is ``round.shoe`` (:class:`RoundShoe`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from game_math.cards import Card
from rng_service.audit.checks import Check, Named, SignatureCheck, Signed, Subject, run_checks
from rng_service.audit.claims import label, printable
from rng_service.audit.failures import AuditFailure, Doc, Unrevealed, fail
from rng_service.audit.files import Finding, Status, tok
from rng_service.audit.round_checks import RoundCase
from rng_service.core.json_input import JsonObject
from rng_service.crypto.signing import VerificationError
from rng_service.records.schema import REVEAL_SCHEMA
from rng_service.rng.shoe import (
    MAX_CLIENT_SEED_BYTES,
    MAX_DECKS,
    InvalidShoeInput,
    LazyShoe,
    seed_commitment,
    shoe_cards,
)

#: what a shoe is recomputed as: the whole list, or a LazyShoe
_Shoe = TypeVar("_Shoe", list[Card], LazyShoe)


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
            self.unusable = f"cannot shuffle the shoe: {exc}"
            fail("reveal.seed", self.unusable)
        self.recomputed = True
        return cards

    def drop_cards(self) -> None:
        """Forget the recomputed shoe; :meth:`cards` recomputes it if asked again."""
        self._cards = None

    def same_as(self, other: Reveal) -> bool:
        """True if ``other`` reveals the same shoe: same commitment, seed, client seed and
        decks (the file it came from may differ)."""
        return (self.commitment, self.seed, self.client_seed, self.decks) == (
            other.commitment, other.seed, other.client_seed, other.decks)


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
    return Reveal(doc.get_str("shoe_id"), commitment, seed, client_seed, decks, path,
                  opens=seed_commitment(seed) == commitment)


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


class RevealIndex:
    """The shoe reveals of a collection, by shoe id, each verified when read; what was wrong with
    those that failed, for their rounds' lines."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey]) -> None:
        self.checks = (RevealSignature(trusted), RevealRecord())
        self.reveals: dict[str, Reveal] = {}
        self.bad: dict[str, str] = {}  # shoe id -> why its reveal failed
        self.conflicts: set[str] = set()

    def add(self, path: Path, envelope: dict[str, Any]) -> list[Finding]:
        """Verify a reveal and keep it for the rounds (its line is made after them): the FAIL
        findings now, if it failed, or the OK one of a copy."""
        ident = label(envelope.get("payload"), "shoe_id", path)
        case = RevealCase(path, envelope)
        try:
            run_checks(self.checks, case)
        except VerificationError as exc:
            self.bad[ident] = f"the reveal {tok(path.name)} failed: {exc}"
            return [Finding("shoe", ident, path, Status.FAIL, exc.field, str(exc),
                            check=case.check)]
        except AuditFailure as exc:
            self.bad[ident] = f"the reveal {tok(path.name)} failed: {exc}"
            return [Finding("shoe", ident, path, Status.FAIL, exc.field, exc.message,
                            check=case.check)]
        reveal = case.reveal
        assert reveal is not None
        known = self.reveals.get(reveal.shoe_id)
        if reveal.shoe_id in self.conflicts or (known is not None and not known.same_as(reveal)):
            # two signed reveals of one shoe that differ: neither can be believed
            self.conflicts.add(reveal.shoe_id)
            self.reveals.pop(reveal.shoe_id, None)
            self.bad[reveal.shoe_id] = f"has two different signed reveals ({tok(path.name)})"
            out = []
            for one, other in ((known, path), (reveal, known.path if known else None)):
                if one is not None:
                    also = f" (also {tok(other)})" if other else ""
                    out.append(Finding("shoe", ident, one.path, Status.FAIL, "shoe_id",
                                       f"is revealed twice, differently{also}",
                                       check=RevealUnique.name))
            return out
        if known is not None:  # a copy: a line of its own, the first one is used
            return [Finding("shoe", ident, path, Status.OK,
                            message=f"the same reveal as {tok(known.path)}",
                            check=RevealUnique.name)]
        self.reveals[reveal.shoe_id] = reveal
        return []

    def unsigned(self, shoe_id: str, path: Path) -> None:
        """A bare reveal payload, unsigned: the rounds of its shoe say so."""
        self.bad.setdefault(shoe_id, f"the reveal {tok(path.name)} is not signed")

    def flag_shared_commitments(self) -> None:
        """Mark the reveals of shoe ids that share a commitment: one seed dealt as two shoes."""
        shoes: dict[str, list[str]] = {}
        for reveal in self.reveals.values():
            shoes.setdefault(reveal.commitment, []).append(reveal.shoe_id)
        for shoe_ids in shoes.values():
            for shoe_id in shoe_ids if len(shoe_ids) > 1 else ():
                self.reveals[shoe_id].shared_with = tuple(s for s in shoe_ids if s != shoe_id)

    def judged(self) -> set[str]:
        """The shoes with a reveal, good or bad: not in play."""
        return set(self.reveals) | set(self.bad) | self.conflicts


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
    """3. The shoe can be recomputed from the seed (recomputed here if no round got as far)."""

    name = "shoe.shuffle"

    def check(self, subject: RevealLine) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        reveal = subject.reveal
        if not reveal.recomputed:  # no round of this shoe got as far: recompute it once here
            with contextlib.suppress(AuditFailure):  # the failure is kept in reveal.unusable
                reveal.cards()
            reveal.drop_cards()
        if reveal.unusable is not None:
            fail("seed", reveal.unusable)


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
    opened = seed_commitment(reveal.seed)
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
        reveal = self.index.reveals.get(shoe_id)
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
