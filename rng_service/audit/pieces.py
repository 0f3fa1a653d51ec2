"""What the audit's two passes (:mod:`rng_service.audit.verifier`) hand between its processes:
a file as pass 1 read it (:class:`Read`) with a round record's claims, the rounds sorted for
pass 2 and grouped by shoe and into pieces, and a shoe's rounds as checked
(:data:`ShoeChecked`). Named tuples: what the workers send back is unpickled by the audit's own
process alone, at about a third of a dataclass's cost."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from rng_service.audit.commitments import CommitmentFailed, SealedCommitment
from rng_service.audit.files import Status
from rng_service.audit.reveals import RevealFailed, Sealed
from rng_service.audit.round_checks import Pending, Place


class Read(NamedTuple):
    """A file as pass 1 read it: why it failed (field, message, check), or the claims of a round
    record (and its leaf and bytes), or a shoe reveal or commitment verified (and its leaf), or the
    JSON object of another file (and its leaf, if it is an envelope). Its path is the auditor's: it
    is not sent back. (Named tuples, here and below: what the workers send back is unpickled by
    this process alone, at about a third of a dataclass's cost.)"""

    failure: tuple[str | None, str, str] | None = None
    envelope: dict[str, Any] | None = None
    #: an envelope's :class:`LeafFile`, pickled (by the worker: the store keeps it so), or
    #: ``b""`` if no log check may ask for it (:attr:`Auditor._keep_leaves`)
    leaf: bytes | None = None
    claims: Claims | None = None
    #: a shoe reveal: the id its findings are named by, and the reveal as verified, sealed as
    #: the scratch store keeps it
    reveal: tuple[str, Sealed | RevealFailed] | None = None
    #: a shoe commitment: the id its findings are named by, and the commitment as verified,
    #: sealed as the scratch store keeps it
    commitment: tuple[str, SealedCommitment | CommitmentFailed] | None = None
    #: a round record's bytes as read, which pass 2 checks (the file is read once), and where
    #: its payload's sorted encoding lies in them if they are exactly an envelope's sorted
    #: encoding (:func:`~rng_service.crypto.signing.payload_span`)
    data: bytes | None = None
    span: tuple[int, int] | None = None


#: a round's finding as its worker makes it: every member but the path, which the auditor has
#: (kind, ident, status, field, message, void, check)
FindingParts = tuple[str, str, Status, str | None, str, bool, str]


class Checked(NamedTuple):
    """A round as its shoe's worker checked it: its finding (:data:`FindingParts`), its id once
    ``round.id`` read it (judged in :meth:`Auditor._merged`), and, if it passed, its rules
    digest, game and service version for the summary."""

    finding: FindingParts
    round_id: str | None
    tally: tuple[str, str, str] | None


#: a shoe's rounds as checked, in order (its reveal is not sent back: checking its rounds does
#: not change it, :mod:`rng_service.audit.reveals`)
ShoeChecked = list[Checked]


def pass_two_order(item: Pending) -> tuple[str, int, str]:
    """The order rounds are checked and reported in: by shoe, start, then path."""
    return (item.shoe_id, item.start, item.text)


#: what pass 1 found of a shoe that its rounds' checks look up: its commitment if it is
#: committed, pickled as the scratch store keeps it, and (in a worker process; None when
#: checked here) why its commitment or its reveal failed, if they did
Known = tuple[bytes | None, str | None, str | None]
#: a piece of pass 2 as handed out: the rule sets pickled (None: checked here), and whole shoes,
#: each its rounds (sorted by start, then path, with their bytes), its reveal pickled, if one
#: verified, and what pass 1 found of it
Piece = tuple[bytes | None, list[tuple[list[Pending] | list["SentRound"], bytes | None, Known]]]
#: a round as a piece sends it to a worker process: :class:`Pending`'s members, the path as text
SentRound = tuple[str, str, str, int, int, str, bool, bool, bytes | None, tuple[int, int] | None]
#: what this process keeps of a piece handed out until its findings come back: each shoe's id,
#: its rounds' paths and the ids they claimed
Handed = list[tuple[str, list[Path], list[str]]]


def by_shoe(pending: Iterable[Pending]) -> Iterator[list[Pending]]:
    """The rounds (sorted by shoe and start) grouped by shoe. One shoe is held at a time."""
    group: list[Pending] = []
    for item in pending:
        if group and group[-1].shoe_id != item.shoe_id:
            yield group
            group = []
        group.append(item)
    if group:
        yield group


def placed_rounds(group: list[Pending]) -> list[tuple[Pending, Place]]:
    """One shoe's rounds, in order, each with its place: the round before it in its shoe and
    the first void one before it."""
    placed: list[tuple[Pending, Place]] = []
    previous: Pending | None = None
    voided: Pending | None = None
    for item in group:
        placed.append((item, Place(len(group), previous, voided)))
        voided = voided or (item if item.void else None)
        previous = item
    return placed


def in_pieces(shoes: Iterable[list[Pending]], most: int) -> Iterator[list[list[Pending]]]:
    """Whole shoes gathered into pieces of about ``most`` rounds (a longer shoe alone)."""
    piece: list[list[Pending]] = []
    rounds = 0
    for shoe in shoes:
        piece.append(shoe)
        rounds += len(shoe)
        if rounds >= most:
            yield piece
            piece, rounds = [], 0
    if piece:
        yield piece


#: what a round record claims, as :class:`Pending` holds it after its path: its id, shoe, start,
#: end, finished_at and whether it is void
Claims = tuple[str, str, int, int, str, bool]


def claims_of(path: Path, payload: object) -> Claims:
    """What the round record in ``path`` claims, to queue it for pass 2: what
    :func:`~rng_service.audit.claims.label`, ``claimed_str`` and ``claimed_int`` read of its
    members, inline (pass 1 asks it of every round, in the audit's own process when it has no
    workers; tests/audit/test_audit_read.py holds it to them)."""
    if not isinstance(payload, dict):
        return (path.name, "", -1, -1, "", False)
    round_id, finished_at = payload.get("round_id"), payload.get("finished_at")
    shoe = payload.get("shoe")
    if not isinstance(shoe, dict):
        shoe = {}
    shoe_id, start, end = shoe.get("id"), shoe.get("start"), shoe.get("end")
    return (round_id if isinstance(round_id, str) and round_id else path.name,
            shoe_id if isinstance(shoe_id, str) else "",
            start if type(start) is int else -1, end if type(end) is int else -1,
            finished_at if isinstance(finished_at, str) else "", payload.get("status") == "void")


def pending_round(path: Path, payload: object, *, data: bytes | None = None) -> Pending:
    """A round record queued for pass 2, by what it claims."""
    return Pending(path, *claims_of(path, payload), data=data)
