"""What one audit hands to the next: the shoes still in play at the checkpoint it verified.

An audit from an earlier checkpoint on (``--since``) sees only the leaves after it. A cut-card
shoe dealt across that boundary has its commitment and first rounds before it, its later rounds
and reveal after it: without the first rounds the later ones cannot be placed (the first round
of a shoe starts at card 0), and without the commitment a round of a shoe committed before the
boundary and still in play looks unrevealed. ``fairshoe audit verify --checkpoint CP
--save-state FILE`` therefore writes, once the audit passed, the state a later audit needs, and
``--since FILE`` takes it in place of the bare checkpoint.

The state (:data:`STATE_SCHEMA`, one canonical JSON object: keys sorted, no spaces, UTF-8, one
line) holds:

* ``origin``, ``size``, ``root`` and ``checkpoint``: the log and the signed checkpoint the audit
  verified (the note's own text); the later export must continue from it (its frontier hashes to
  ``root``), so a state of another log or another checkpoint is refused;
* ``shoes``: per shoe committed and not revealed at that checkpoint, ``shoe_id``, ``next_card``
  (the card its next round starts at: where its last round ended, 0 if none was dealt) and
  ``leaves``: its commitment and its rounds, each ``{"index", "entry", "proof"}``, the envelope
  exactly as logged (``entry``, its UTF-8 text) with its inclusion proof in the checkpoint's
  tree.

Nothing in the state is trusted: the checkpoint must be signed by a trusted key for the
operator's log, and each leaf is proven in it, so an altered byte, a leaf moved, or a leaf
from another log fails naming the state. The carried rounds are then checked with the export's
as one shoe (place, times, commitment, and once the reveal is in, cards and replay), so a
round left out of the state is a gap in its shoe, and the state's ``next_card`` must be where
its rounds end. Proofs of carried leaves are carried on to the later checkpoint
(:class:`~rng_service.log.partial.PartialTree`), so a shoe may span any number of audits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rng_service.audit.checks import Named
from rng_service.audit.claims import claimed_int, leaf_file
from rng_service.audit.files import (
    MAX_FILE_BYTES,
    Unreadable,
    read_file,
    show,
    tok,
)
from rng_service.core.errors import FairshoeError, InvalidInput
from rng_service.core.json_input import JsonLimits, parse_json
from rng_service.crypto.signing import VerificationError, decode_envelope
from rng_service.log import Checkpoint, verify_checkpoint, verify_inclusion
from rng_service.log.hashing import leaf_hash
from rng_service.log.note import MAX_NOTE_BYTES, NoteVerifier
from rng_service.log.proofs import MAX_PROOF_HASHES
from rng_service.records.schema import RECORD_SCHEMA, SHOE_COMMITMENT_SCHEMA

STATE_SCHEMA: Final = "fairshoe.audit-state/v1"
#: the largest state read: a shoe's rounds are tens of kilobytes, an operator has many tables
MAX_STATE_BYTES: Final = 64 << 20
_LIMITS: Final = JsonLimits(max_bytes=MAX_STATE_BYTES, max_depth=6,
                            max_string_chars=MAX_FILE_BYTES)
_MEMBERS: Final = frozenset({"schema", "origin", "size", "root", "checkpoint", "shoes"})
_SHOE_MEMBERS: Final = frozenset({"shoe_id", "next_card", "leaves"})
_LEAF_MEMBERS: Final = frozenset({"index", "entry", "proof"})
_HEX_HASH: Final = re.compile(r"[0-9a-f]{64}")


class StateError(InvalidInput):
    """The state cannot be used: ``field`` names where, the message says how."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(field, message)
        self.message = message


@dataclass(frozen=True)
class CarriedLeaf:
    """A leaf of a shoe in play, proven in the state's checkpoint."""

    index: int
    data: bytes  # the envelope's bytes: the leaf's entry
    proof: tuple[bytes, ...]
    schema: str  # a shoe commitment or a round record

    @property
    def leaf_hash(self) -> bytes:
        """The leaf's hash."""
        return leaf_hash(self.data)


@dataclass(frozen=True)
class CarriedShoe:
    """A shoe in play at the state's checkpoint: its commitment (if logged) and rounds."""

    shoe_id: str
    next_card: int
    leaves: tuple[CarriedLeaf, ...]


@dataclass(frozen=True)
class AuditState:
    """A state read and verified (module docstring)."""

    path: Path
    note: bytes
    checkpoint: Checkpoint
    shoes: tuple[CarriedShoe, ...]


def _object(value: object, members: frozenset[str], where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise StateError(where or None, "is not a JSON object")
    extra, missing = sorted(set(value) - members), sorted(members - set(value))
    if extra or missing:
        at = f"{where}." if where else ""
        raise StateError(f"{at}{(extra or missing)[0]}",
                         "is not expected" if extra else "is missing")
    return value


def _int(value: object, where: str) -> int:
    if type(value) is not int or not 0 <= value <= 2**64 - 1:
        raise StateError(where, "must be an integer in [0, 2**64 - 1]")
    return value


def _hashes(value: object, where: str) -> tuple[bytes, ...]:
    if type(value) is not list or len(value) > MAX_PROOF_HASHES or not all(
            type(item) is str and _HEX_HASH.fullmatch(item) for item in value):
        raise StateError(where, f"must be a list of at most {MAX_PROOF_HASHES} hashes (64 "
                         "lowercase hex digits each)")
    return tuple(bytes.fromhex(item) for item in value)


def read_state(path: Path, verifiers: Sequence[NoteVerifier], origin: str) -> AuditState:
    """The state in ``path``, verified against the trusted ``verifiers`` for the log ``origin``;
    :class:`StateError` naming the first thing that does not hold."""
    try:
        data = read_file(path, follow=True, limit=MAX_STATE_BYTES)
        doc = _object(parse_json(data, _LIMITS), _MEMBERS, "")
    except Unreadable as exc:
        raise StateError(None, str(exc)) from None
    except FairshoeError as exc:
        raise StateError(None, f"is not a state: {exc}") from None
    if doc["schema"] != STATE_SCHEMA:
        raise StateError("schema", f"is {show(doc['schema'])}: this audit reads states of "
                         f"{STATE_SCHEMA} (another version, or not a state)")
    if doc["origin"] != origin:
        raise StateError("origin", f"is {show(doc['origin'])}: a state of that log, not of the "
                         f"operator's log {tok(origin)} (--operator, --log-origin)")
    head, note = _checkpoint(doc, verifiers, origin)
    shoes = doc["shoes"]
    if type(shoes) is not list:
        raise StateError("shoes", "must be a list")
    carried = [_shoe(shoe, f"shoes[{i}]", head) for i, shoe in enumerate(shoes)]
    seen: set[str] = set()
    for shoe in carried:
        if shoe.shoe_id in seen:
            raise StateError("shoes", f"list shoe {tok(shoe.shoe_id)} twice")
        seen.add(shoe.shoe_id)
    return AuditState(path, note, head, tuple(carried))


def _checkpoint(doc: dict[str, Any], verifiers: Sequence[NoteVerifier], origin: str
                ) -> tuple[Checkpoint, bytes]:
    text = doc["checkpoint"]
    if type(text) is not str or len(text) > MAX_NOTE_BYTES:
        raise StateError("checkpoint", "must be the text of a signed checkpoint")
    note = text.encode("utf-8")
    try:
        head = verify_checkpoint(note, verifiers, origin=origin)
    except FairshoeError as exc:
        raise StateError("checkpoint", f"does not verify as a checkpoint of {tok(origin)} "
                         f"signed by a trusted key: {exc}") from None
    for name, stated, signed in (("size", doc["size"], head.size),
                                 ("root", doc["root"], head.root_hash.hex())):
        if stated != signed:
            raise StateError(name, f"is {show(stated)}, but the state's checkpoint has "
                             f"{show(signed)}: the state was altered")
    return head, note


def _shoe(value: object, where: str, head: Checkpoint) -> CarriedShoe:
    doc = _object(value, _SHOE_MEMBERS, where)
    shoe_id, next_card = doc["shoe_id"], _int(doc["next_card"], f"{where}.next_card")
    if type(shoe_id) is not str or not shoe_id:
        raise StateError(f"{where}.shoe_id", "must be a shoe id")
    leaves = doc["leaves"]
    if type(leaves) is not list or not leaves:
        raise StateError(f"{where}.leaves", "must be a list of the shoe's leaves")
    carried: list[CarriedLeaf] = []
    end = 0
    for j, item in enumerate(leaves):
        leaf, claimed_end = _leaf(item, f"{where}.leaves[{j}]", head, shoe_id)
        if carried and leaf.index <= carried[-1].index:
            raise StateError(f"{where}.leaves[{j}].index", "is not after the leaf before it")
        if leaf.schema == SHOE_COMMITMENT_SCHEMA and j:
            raise StateError(f"{where}.leaves[{j}]", "is a commitment after the shoe's rounds")
        if leaf.schema == RECORD_SCHEMA:
            end = claimed_end
        carried.append(leaf)
    if next_card != end:
        raise StateError(f"{where}.next_card", f"is {next_card}, but the shoe's carried rounds "
                         f"end at card {end}: the state was altered, or a round left out")
    return CarriedShoe(shoe_id, next_card, tuple(carried))


def _leaf(value: object, where: str, head: Checkpoint, shoe_id: str) -> tuple[CarriedLeaf, int]:
    doc = _object(value, _LEAF_MEMBERS, where)
    index, entry = _int(doc["index"], f"{where}.index"), doc["entry"]
    proof = _hashes(doc["proof"], f"{where}.proof")
    if type(entry) is not str:
        raise StateError(f"{where}.entry", "must be an envelope's text")
    data = entry.encode("utf-8")
    try:
        if index >= head.size:
            raise ValueError(f"leaf {index} is beyond the checkpoint's {head.size} leaves")
        verify_inclusion(leaf_hash(data), index, head.size, list(proof), head.root_hash)
    except (FairshoeError, ValueError) as exc:
        raise StateError(where, f"does not prove its entry is leaf {index} of the state's "
                         f"checkpoint (size {head.size}): {exc}; the state was altered, or is "
                         "of another log") from None
    try:
        envelope = decode_envelope(data)
    except VerificationError as exc:
        raise StateError(f"{where}.entry", f"is not a signed envelope: {exc}") from None
    claims = leaf_file(data, envelope)
    if claims.schema not in (SHOE_COMMITMENT_SCHEMA, RECORD_SCHEMA) or claims.subject != shoe_id:
        raise StateError(f"{where}.entry", f"is not a commitment or round of shoe "
                         f"{tok(shoe_id)}")
    payload = envelope.get("payload")
    end = claimed_int(payload.get("shoe") if isinstance(payload, dict) else None, "end")
    return CarriedLeaf(index, data, proof, claims.schema), end


def state_checkpoint(data: bytes) -> str:
    """The checkpoint note a state names, unverified (an export from it on checks the note
    against the log); :class:`StateError` if ``data`` is not a state."""
    try:
        doc = _object(parse_json(data, _LIMITS), _MEMBERS, "")
    except FairshoeError as exc:
        raise StateError(None, f"is not a state: {exc}") from None
    if doc["schema"] != STATE_SCHEMA or type(doc["checkpoint"]) is not str:
        raise StateError("schema", f"is {show(doc['schema'])}, not {STATE_SCHEMA}")
    return doc["checkpoint"]


def state_text(note: bytes, head: Checkpoint, shoes: Iterable[CarriedShoe]) -> str:
    """The state as written: canonical JSON (keys sorted, no spaces, UTF-8), one line."""
    doc = {
        "schema": STATE_SCHEMA, "origin": head.origin, "size": head.size,
        "root": head.root_hash.hex(), "checkpoint": note.decode("utf-8"),
        "shoes": [{"shoe_id": shoe.shoe_id, "next_card": shoe.next_card,
                   "leaves": [{"index": leaf.index, "entry": leaf.data.decode("utf-8"),
                               "proof": [h.hex() for h in leaf.proof]}
                              for leaf in shoe.leaves]}
                  for shoe in sorted(shoes, key=lambda s: s.shoe_id)],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


class StateRead(Named):
    """The state given as ``--since``: read and verified (:func:`read_state`), else it fails."""

    name = "state.read"


class StateSave(Named):
    """The state for the next audit: each leaf of a shoe in play proven in the checkpoint, the
    file unchanged since the audit read it, else it cannot be saved."""

    name = "state.save"
