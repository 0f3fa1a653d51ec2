"""What an auditor reads: signing keys, one round's record, a finished shoe's reveal, and the
export of every signed envelope stored in a time range (as a stream, or as a collection directory
that ``fairshoe audit verify`` checks).

Nothing here is trusted by being served: each envelope is returned as the canonical bytes that
were signed and stored in the transaction that ended its round, finished its shoe or made its
draw, and verifies against the keys on its own.

Export. Envelopes stored at ``start <= created_at < end`` are listed oldest first (ties: round
record, shoe reveal, RNG record, RNG reveal, then by id), read in pages of at most ``batch_size``
through short read snapshots, never all at once. ``end`` defaults to, and is capped at, the time the
export starts, so the set is fixed; records are immutable, so pages never overlap. A transaction
still committing at that instant may hold an envelope stamped just before it that the export
misses: export a closed period (an ``end`` a few seconds in the past) for a complete one.

The log. Each operator's transparency log (:mod:`rng_service.service.translog`) is served here
too: the latest signed checkpoint, inclusion and consistency proofs, and each record's or reveal's
leaf index with its proof. :meth:`AuditService.export_log` writes a collection of every leaf in a
range of the log (from an earlier checkpoint's size to the latest checkpoint's), with log/
(checkpoint, leaves.jsonl with inclusion proofs, frontier.json) so that an auditor can check that
nothing in the range is missing, reordered or replaced.

Errors: a malformed id or time range is ``InvalidInput`` naming the field (``round_id``,
``shoe_id``, ``end_time``); an unknown round (or one still open: it has no record yet) or shoe
``NotFound``; the reveal of a shoe still in play ``IllegalState`` reason ``SHOE_NOT_FINISHED``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from game_math.games import game_rules
from game_math.rules import GAME_IDS, Rules
from rng_service.core import config
from rng_service.core.errors import (
    IllegalState,
    IntegrityFailure,
    InvalidInput,
    NotFound,
    Unavailable,
    quote,
)
from rng_service.crypto.keys import (
    ActiveKey,
    KeyInfo,
    KeyStore,
    KeyStoreError,
    export_jwk,
    key_validity,
    public_key_jwk,
)
from rng_service.crypto.signing import VerificationError, decode_envelope
from rng_service.log import DEFAULT_ORIGIN, CompactRange, TileRef
from rng_service.records.schema import (
    KEYS_FILE,
    KEYS_SUBDIR,
    REVEALS_SUBDIR,
    RNG_REVEALS_SUBDIR,
    RNG_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SUBDIR,
    SHOES_SUBDIR,
    rules_digest,
    rules_file_bytes,
    write_file,
)
from rng_service.service import validate
from rng_service.service.export_spill import LeafSpill
from rng_service.service.ports import (
    EnvelopeKind,
    LeafKind,
    LogLeaf,
    ShoeStatus,
    Storage,
    StoredCheckpoint,
    StoredEnvelope,
)
from rng_service.service.translog import LeafProof, LogReader
from rng_service.service.witnessing import Witnessing, configured_witnesses, witnesses_for

DEFAULT_BATCH: Final = 500
MAX_BATCH: Final = 10_000
#: a time-range export's leaf notes written to its spill at a time
_NOTES: Final = 1000
#: the earliest instant an export may start at (stored times are RFC 3339 text, which sort)
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ID: Final = re.compile(r"[0-9a-f]{32}\Z")
_KEY_ID: Final = re.compile(r"ed25519:[0-9a-f]{32}\Z")
LOG_SUBDIR: Final = "log"
CHECKPOINT_FILE: Final = "checkpoint"
LEAVES_FILE: Final = "leaves.jsonl"
FRONTIER_FILE: Final = "frontier.json"
#: where each kind of envelope goes in a collection directory (records.schema's layout)
SUBDIRS: Final = {
    EnvelopeKind.ROUND: ROUNDS_SUBDIR,
    EnvelopeKind.SHOE_REVEAL: REVEALS_SUBDIR,
    EnvelopeKind.RNG: RNG_SUBDIR,
    EnvelopeKind.RNG_REVEAL: RNG_REVEALS_SUBDIR,
}
#: where each kind of leaf's entry goes in a collection directory
LEAF_SUBDIRS: Final = {
    LeafKind.KEY: KEYS_SUBDIR,
    LeafKind.SHOE_COMMITMENT: SHOES_SUBDIR,
    **{LeafKind(str(kind)): sub for kind, sub in SUBDIRS.items()},
}
_ENVELOPE_OF: Final = {LeafKind(str(kind)): kind for kind in EnvelopeKind}


@dataclass(frozen=True)
class SignedEnvelope:
    """One stored envelope with what a client needs to route it: schema and signing key id."""

    schema: str
    key_id: str
    envelope: bytes = field(repr=False)

    @classmethod
    def parse(cls, data: bytes) -> SignedEnvelope:
        """Schema and key id read from the stored bytes (informative: the bytes are the fact)."""
        try:
            envelope = decode_envelope(data)
            payload, signature = envelope["payload"], envelope["signature"]
            return cls(str(payload["schema"]), str(signature["key_id"]), data)
        except (VerificationError, KeyError, TypeError) as exc:
            raise IntegrityFailure(f"a stored envelope is not readable: {exc}",
                                   reason="STORED_ENVELOPE") from None


@dataclass(frozen=True)
class ProofView:
    """A proof as answered: ``leaf_index`` (or the first size of a consistency proof), the tree
    size, the hashes, and the checkpoint of that size when the caller asked for the latest."""

    leaf_index: int
    tree_size: int
    hashes: tuple[bytes, ...] = field(repr=False)
    checkpoint: str


@dataclass(frozen=True)
class ProvedEntry:
    """One logged envelope with its place in the log: the entry bytes (exactly as logged), its
    leaf index and its inclusion proof in the tree of the evidence's checkpoint."""

    leaf_index: int
    envelope: bytes = field(repr=False)
    proof: tuple[bytes, ...] = field(repr=False)


@dataclass(frozen=True)
class RoundEvidence:
    """What a player needs to check one round alone: its record, its shoe's commitment and,
    once the shoe is finished, its reveal, each proven in one signed checkpoint (``record`` is
    None only for a round stored before the log existed: then ``record_envelope`` stands alone);
    and the witnesses' keys the service submits checkpoints to (as configured here, so a
    player should compare them with what each witness publishes)."""

    origin: str
    round_id: str
    checkpoint: str
    tree_size: int
    record_envelope: bytes = field(repr=False)
    record: ProvedEntry | None
    commitment: ProvedEntry | None
    reveal: ProvedEntry | None
    witnesses: tuple[str, ...]


@dataclass(frozen=True)
class PublicKeyView:
    """A signing key's public half and when it signs (``valid_until`` None: the active key)."""

    key_id: str
    jwk: dict[str, str]
    valid_from: datetime
    valid_until: datetime | None


@dataclass(frozen=True)
class SigningKeys:
    """The key store's public keys, oldest first, and the same as a JWK Set."""
    keys: tuple[PublicKeyView, ...]  # oldest first
    jwks_json: str  # the same keys as a JWK Set, each with valid_from/valid_until members


@dataclass
class CollectionStats:
    """What :meth:`AuditService.export_collection` wrote."""

    counts: dict[EnvelopeKind, int] = field(default_factory=lambda: dict.fromkeys(EnvelopeKind, 0))
    rule_sets: set[str] = field(default_factory=set)
    leaves: int = 0  # lines of log/leaves.jsonl
    logged: dict[LeafKind, int] = field(default_factory=dict)  # keys and shoe commitments


def stamp(when: datetime) -> str:
    """``when`` as stored (:func:`rng_service.service.ports.utc_now`): RFC 3339 UTC with
    microseconds, zero-padded so that text order is time order."""
    utc = when.astimezone(UTC)
    return (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
            f"{utc.second:02d}.{utc.microsecond:06d}Z")


def _instant(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInput(name, "must be a time with a time zone")
    return value


def time_range(start: datetime | None, end: datetime | None,
               now: datetime | None = None) -> tuple[str, str]:
    """``[start, end)`` as stored times: start defaults to the epoch, end to now and is capped
    at now; an empty range is InvalidInput on ``end_time``."""
    now = now or datetime.now(UTC)
    lo = max(_instant(start, "start_time") or EPOCH, EPOCH)
    hi = min(_instant(end, "end_time") or now, now)
    if hi <= lo:
        raise InvalidInput("end_time", f"must be after start_time ({stamp(lo)}) and not after "
                           f"now, got {stamp(hi)}")
    return stamp(lo), stamp(hi)


def _ident(value: object, field: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidInput(field, f"must be 32 lowercase hex digits, got {quote(value)}")
    return value


def _builtin_rules() -> dict[str, Rules]:
    return {rules_digest(game_rules(g)): game_rules(g) for g in GAME_IDS}


class AuditService:
    """The AuditService use cases over storage and the key store. Holds no per-request state."""

    def __init__(self, storage: Storage, keys: KeyStore, *, read_only: bool = False) -> None:
        """``read_only``: the storage is a read-only database (checkpoints signed for an export
        are not stored)."""
        self._storage = storage
        self._keys = keys
        self._read_only = read_only
        self._reader: LogReader | None = None

    # --- the transparency log --------------------------------------------------------------

    def _log(self) -> LogReader:
        """The log reader, signing checkpoints with the key store's active key (followed through
        rotations)."""
        if self._reader is None:
            try:
                signer = ActiveKey(self._keys)
                signer.current()  # fails now if there is no usable key
            except KeyStoreError as exc:
                raise Unavailable(f"the key store cannot be read: {exc}",
                                  reason="KEY_STORE") from None
            witnesses = [] if self._read_only else configured_witnesses()
            self._reader = LogReader(self._storage, signer, store_checkpoints=not self._read_only,
                                     base_origin=config.log_base_origin() or DEFAULT_ORIGIN,
                                     witnessing=Witnessing(witnesses) if witnesses else None)
        return self._reader

    def _operator(self, operator: str) -> str:
        with self._storage.snapshot() as uow:
            return validate.operator(operator, uow)

    def checkpoint(self, operator: str) -> StoredCheckpoint:
        """The latest signed checkpoint of ``operator``'s log (signed now if older than it)."""
        return self._log().checkpoint(self._operator(operator))

    def log_tile(self, operator: str, tile: TileRef) -> bytes:
        """A hash tile or entry bundle of ``operator``'s log (C2SP tlog-tiles), from the same
        stored nodes as its checkpoints and proofs."""
        return self._log().tile(self._operator(operator), tile)

    def log_origin(self, operator: str) -> str:
        """The origin of ``operator``'s log."""
        return self._log().origin(operator)

    def inclusion_proof(self, operator: str, leaf: int | tuple[LeafKind, str], tree_size: int
                        ) -> ProofView:
        """The inclusion proof of ``leaf`` (an index, or a kind and id) in the tree of
        ``tree_size`` leaves; with ``tree_size`` 0, in the latest checkpoint's tree (returned)."""
        op, log = self._operator(operator), self._log()
        index = leaf if isinstance(leaf, int) else log.leaf_index(op, *leaf)
        note = ""
        if tree_size == 0:
            checkpoint = log.checkpoint(op)
            tree_size, note = checkpoint.size, checkpoint.note
        return ProofView(index, tree_size, tuple(log.inclusion(op, index, tree_size)), note)

    def consistency_proof(self, operator: str, from_size: int, to_size: int) -> ProofView:
        """The consistency proof between two tree sizes; ``to_size`` 0: the latest
        checkpoint's (returned). ``leaf_index`` of the answer is ``from_size``."""
        op, log = self._operator(operator), self._log()
        note = ""
        if to_size == 0:
            checkpoint = log.checkpoint(op)
            to_size, note = checkpoint.size, checkpoint.note
        return ProofView(from_size, to_size, tuple(log.consistency(op, from_size, to_size)), note)

    def leaf_proof(self, operator: str, kind: LeafKind, ident: str) -> LeafProof | None:
        """Index and inclusion proof of a logged envelope to the latest checkpoint (None if it
        predates the log)."""
        return self._log().prove(self._operator(operator), kind, ident)

    def round_evidence(self, operator: str, round_id: str) -> RoundEvidence:
        """The record of a finished round with its shoe's commitment and, if the shoe is
        finished, its reveal, all proven in one checkpoint (the latest stored one that holds
        them, else a new one), so one root checks the three. A shoe still in play has no
        reveal here: its seed is stored sealed until the shoe finishes, and only a finished
        shoe's reveal is ever logged."""
        record = self.round_record(operator, round_id)  # validates; NotFound while open
        rid = validate.round_id(round_id)
        op, log = self._operator(operator), self._log()
        shoe_id = _shoe_of(StoredEnvelope(EnvelopeKind.ROUND, rid, record.envelope, ""))
        if shoe_id is None or not _ID.match(shoe_id):
            raise IntegrityFailure(f"the record of round {rid} names no shoe",
                                   reason="STORED_ENVELOPE")
        wanted = ((LeafKind.ROUND, rid), (LeafKind.SHOE_COMMITMENT, shoe_id),
                  (LeafKind.SHOE_REVEAL, shoe_id))
        indices = []
        for kind, ident in wanted:
            with contextlib.suppress(NotFound):  # not logged (yet): no proof of it below
                indices.append(log.leaf_index(op, kind, ident))
        # the latest stored checkpoint holding the three leaves will do: a crowd of players
        # asking makes no new checkpoint (a signature and the witnesses' round trips) each
        checkpoint = log.checkpoint(op, covering=max(indices, default=0))

        def proved(kind: LeafKind, ident: str) -> ProvedEntry | None:
            found = log.proved_leaf(op, kind, ident, checkpoint.size)
            if found is None:
                return None
            leaf, proof = found
            return ProvedEntry(leaf.index, leaf.entry or b"", tuple(proof))

        witnesses = () if self._read_only else tuple(
            w.cosigner.vkey() for w in witnesses_for(configured_witnesses(), op))
        return RoundEvidence(
            origin=log.origin(op), round_id=rid, checkpoint=checkpoint.note,
            tree_size=checkpoint.size, record_envelope=record.envelope,
            record=proved(LeafKind.ROUND, rid),
            commitment=proved(LeafKind.SHOE_COMMITMENT, shoe_id),
            reveal=proved(LeafKind.SHOE_REVEAL, shoe_id), witnesses=witnesses)

    # --- keys ------------------------------------------------------------------------------

    def signing_keys(self) -> SigningKeys:
        """Every public signing key, oldest first, with its validity period."""
        try:
            infos = self._keys.list_keys()
            public = self._keys.public_keys([info.key_id for info in infos])
            views = tuple(self._key_view(info, public[info.key_id]) for info in infos)
            jwks = export_jwk(public, validity={info.key_id: info for info in infos})
        except KeyStoreError as exc:  # names files and key ids only, never key material
            raise Unavailable(f"the key store cannot be read: {exc}", reason="KEY_STORE") from None
        return SigningKeys(views, jwks)

    @staticmethod
    def _key_view(info: KeyInfo, key: Ed25519PublicKey) -> PublicKeyView:
        validity = key_validity(info)
        until = validity.get("valid_until")
        return PublicKeyView(info.key_id, public_key_jwk(key, info),
                             datetime.fromisoformat(validity["valid_from"]),
                             None if until is None else datetime.fromisoformat(until))

    # --- one record ------------------------------------------------------------------------

    def round_record(self, operator: str, round_id: str) -> SignedEnvelope:
        """The signed record of a finished (or void) round."""
        rid = validate.round_id(round_id)
        with self._storage.snapshot() as uow:
            op = validate.operator(operator, uow)
            data = uow.get_record(op, rid)
            if data is None:
                row = uow.get_round(op, rid)
                why = "it is still open" if row is not None else "no such round"
                raise NotFound("round_id", f"no record of round {rid}: {why}")
        return SignedEnvelope.parse(data)

    def shoe_reveal(self, operator: str, shoe_id: str) -> SignedEnvelope:
        """The signed reveal of a finished shoe's seed; IllegalState while it is in play."""
        sid = _ident(shoe_id, "shoe_id")
        with self._storage.snapshot() as uow:
            op = validate.operator(operator, uow)
            row = uow.get_shoe(op, sid)
            if row is None:
                raise NotFound("shoe_id", f"no shoe {sid}")
            data = uow.get_reveal(op, sid)
        if data is None:
            if row.status in (ShoeStatus.COMMITTED, ShoeStatus.IN_PLAY):
                raise IllegalState(f"shoe {sid} is {row.status}: its seed is revealed once it "
                                   "is finished", reason="SHOE_NOT_FINISHED")
            raise IllegalState(f"shoe {sid} is finished and its reveal is being stored (the "
                               "service's recovery stores it)", reason="REVEAL_PENDING")
        return SignedEnvelope.parse(data)

    # --- export ----------------------------------------------------------------------------

    def export(self, operator: str, start: datetime | None = None, end: datetime | None = None,
               *, batch_size: int = DEFAULT_BATCH) -> Iterator[StoredEnvelope]:
        """Every envelope stored in ``[start, end)``, oldest first. The arguments are checked
        now; the envelopes are read page by page as the iterator is consumed."""
        lo, hi = time_range(start, end)
        size = _batch(batch_size)
        with self._storage.snapshot() as uow:
            op = validate.operator(operator, uow)
        return self._pages(op, lo, hi, size)

    def _pages(self, operator: str, lo: str, hi: str, size: int) -> Iterator[StoredEnvelope]:
        after: StoredEnvelope | None = None
        while True:
            with self._storage.snapshot() as uow:  # one short snapshot per page
                page = uow.list_envelopes(operator, lo, hi, after, size)
            yield from page
            if len(page) < size:
                return
            after = page[-1]

    def export_collection(self, out_dir: Path, operator: str, start: datetime | None = None,
                          end: datetime | None = None, *, batch_size: int = DEFAULT_BATCH
                          ) -> CollectionStats:
        """Write the envelopes of ``[start, end)`` as a collection directory: rounds/, reveals/,
        rng/, rng-reveals/, rules/<digest>.json for every rule set a record names, and
        keys.jwks.json (the key store's public keys, a convenience copy, never a trust anchor);
        and log/: the checkpoint, leaves.jsonl for the logged envelopes held (with the key and
        shoe commitment leaves they depend on, in keys/ and shoes/) and frontier.json.
        ``out_dir`` must be new or empty. Envelopes, leaves and proofs are read ``batch_size``
        at a time and the leaves to list are kept on disk until the checkpoint
        (:class:`~rng_service.service.export_spill.LeafSpill`): memory does not grow with the
        number of envelopes."""
        envelopes = self.export(operator, start, end, batch_size=batch_size)
        keys = self.signing_keys().jwks_json
        op = self._operator(operator)
        _prepare(out_dir)
        with LeafSpill() as spill:
            held = _Held(spill)
            stats = write_collection(out_dir, held.watch(envelopes))
            write_file(out_dir / KEYS_FILE, keys.encode("utf-8"))
            # taken after the envelopes were read, so it covers the leaf of every one written
            checkpoint = self._log().checkpoint(op)
            self._find_held(op, spill, checkpoint.size, batch_size)
            first = spill.first()
            with LogWriterFiles(out_dir) as files:
                for indices in spill.indices(batch_size):  # one short snapshot per page
                    for leaf, proof in self._log().proved_leaves_at(op, indices,
                                                                    checkpoint.size):
                        files.add(leaf, proof, write_entry=leaf.kind.stored_in_log)
                        stats.leaves += 1
                files.finish(checkpoint.note, self._log().frontier(
                    op, checkpoint.size if first is None else first))
        return stats

    def _find_held(self, operator: str, spill: LeafSpill, tree_size: int, size: int) -> None:
        """The index of each leaf ``spill`` holds, if it is logged within ``tree_size`` leaves
        (an envelope stored before the log existed has none)."""
        for kind, idents in spill.held(size):
            with self._storage.snapshot() as uow:
                found = uow.find_leaves(operator, kind, idents)
            spill.find(leaf.index for leaf in found if leaf.index < tree_size)

    def export_log(self, out_dir: Path, operator: str, since: str | None = None, *,
                   batch_size: int = DEFAULT_BATCH) -> CollectionStats:
        """Write every leaf of ``operator``'s log from ``since``'s size (a checkpoint note the
        caller kept; 0 without one) up to the latest checkpoint's size, as a collection
        (:func:`write_log_collection`). ``out_dir`` must be new or empty."""
        size = _batch(batch_size)
        op, log = self._operator(operator), self._log()
        checkpoint = log.checkpoint(op)
        first = 0 if since is None else log.check_since(op, since, checkpoint.size)
        found = LeafRangeExport(checkpoint.note, first, log.frontier(op, first),
                                self._proved_pages(op, first, checkpoint.size, size))
        return write_log_collection(out_dir, self.signing_keys().jwks_json, found)

    def export_leaves(self, operator: str, from_size: int, *,
                      batch_size: int = DEFAULT_BATCH) -> LeafRangeExport:
        """The leaves of ``operator``'s log from ``from_size`` up to the latest checkpoint's
        size, each with its inclusion proof in that checkpoint's tree; the arguments are checked
        now, the leaves read page by page as they are iterated. InvalidInput naming
        ``from_tree_size`` beyond the checkpoint's size."""
        size = _batch(batch_size)
        op, log = self._operator(operator), self._log()
        checkpoint = log.checkpoint(op)
        if isinstance(from_size, bool) or not isinstance(from_size, int) \
                or not 0 <= from_size <= checkpoint.size:
            raise InvalidInput("from_tree_size", f"must be 0..{checkpoint.size} (the latest "
                               f"checkpoint's size), got {quote(from_size)}")
        return LeafRangeExport(checkpoint.note, from_size, log.frontier(op, from_size),
                               self._proved_pages(op, from_size, checkpoint.size, size))

    def _proved_pages(self, operator: str, first: int, tree_size: int, size: int
                      ) -> Iterator[tuple[LogLeaf, list[bytes]]]:
        for start in range(first, tree_size, size):  # one short snapshot per page
            yield from self._log().proved_leaves(operator, start, min(start + size, tree_size),
                                                 tree_size)


@dataclass(frozen=True)
class LeafRangeExport:
    """A range of an operator's log as exported: the signed checkpoint the proofs lead to, the
    first leaf index, the compact range of the leaves before it, and the leaves ``[first,
    checkpoint size)`` in index order, each with its inclusion proof (read as iterated)."""

    checkpoint: str
    first: int
    frontier: CompactRange
    leaves: Iterable[tuple[LogLeaf, Sequence[bytes]]] = field(repr=False)


def write_log_collection(out_dir: Path, jwks_json: str, found: LeafRangeExport
                         ) -> CollectionStats:
    """Write a leaf-range export as a collection: each entry in its subdirectory (keys/, shoes/,
    rounds/, reveals/, rng/, rng-reveals/), the rules of its rounds, keys.jwks.json
    (``jwks_json``, a convenience copy) and log/ (checkpoint, leaves.jsonl with the inclusion
    proofs, frontier.json). ``out_dir`` must be new or empty."""
    _prepare(out_dir)
    write_file(out_dir / KEYS_FILE, jwks_json.encode("utf-8"))
    builtin, stats = _builtin_rules(), CollectionStats()
    with LogWriterFiles(out_dir) as files:
        for leaf, proof in found.leaves:
            files.add(leaf, proof, write_entry=True)
            _count(stats, leaf, out_dir, builtin)
        files.finish(found.checkpoint, found.frontier)
    return stats


class _Held:
    """Which logged envelopes a time-range export wrote, and the key and shoe commitment leaves
    they depend on (a verifier checks that those come first), noted in a spill on disk."""

    def __init__(self, spill: LeafSpill) -> None:
        self._spill = spill
        self._keys: set[str] = set()  # the signing keys seen: a handful in a log's life

    def watch(self, envelopes: Iterable[StoredEnvelope]) -> Iterator[StoredEnvelope]:
        """``envelopes``, noting each as it passes (a page of notes at a time)."""
        noted: list[tuple[LeafKind, str]] = []
        for item in envelopes:
            envelope = SignedEnvelope.parse(item.envelope)
            if envelope.key_id not in self._keys:
                self._keys.add(envelope.key_id)
                noted.append((LeafKind.KEY, envelope.key_id))
            shoe_id = _shoe_of(item)
            if shoe_id is not None:
                noted.append((LeafKind.SHOE_COMMITMENT, shoe_id))
            noted.append((LeafKind(str(item.kind)), item.ident))
            if len(noted) >= _NOTES:
                self._spill.hold(noted)
                noted.clear()
            yield item
        self._spill.hold(noted)


def _shoe_of(item: StoredEnvelope) -> str | None:
    if item.kind is EnvelopeKind.SHOE_REVEAL:
        return item.ident
    if item.kind is not EnvelopeKind.ROUND:
        return None
    try:
        shoe_id = json.loads(item.envelope)["payload"]["shoe"]["id"]
    except (ValueError, KeyError, TypeError):
        return None
    return shoe_id if isinstance(shoe_id, str) else None


def _count(stats: CollectionStats, leaf: LogLeaf, out_dir: Path,
           builtin: dict[str, Rules]) -> None:
    """Count a leaf written by a log export, and write its rules if it is a round record."""
    stats.leaves += 1
    if leaf.kind in _ENVELOPE_OF:
        kind = _ENVELOPE_OF[leaf.kind]
        stats.counts[kind] += 1
        if kind is EnvelopeKind.ROUND:
            item = StoredEnvelope(kind, leaf.ident, leaf.entry or b"", "")
            _write_rules(out_dir, _record_digest(item), builtin, stats)
    else:
        stats.logged[leaf.kind] = stats.logged.get(leaf.kind, 0) + 1


class LogWriterFiles:
    """Writes a collection's log/ directory: entries to their subdirectories, one line per leaf
    to log/leaves.jsonl (streamed, so an export of millions of leaves is not held in memory),
    then log/checkpoint and log/frontier.json.

    A file is one leaf: an entry whose file exists already is refused (IntegrityFailure), not
    written over the earlier leaf's. The collection directory was new or empty, so the disk is
    the record of what was written, and no map of every path is kept. An entry not written here
    (``write_entry`` False: a time-range export's envelopes, written beforehand) is the caller's
    to keep unique: the database holds one leaf per (kind, id)."""

    def __init__(self, out_dir: Path) -> None:
        self._out = out_dir
        (out_dir / LOG_SUBDIR).mkdir(exist_ok=True)
        self._lines = (out_dir / LOG_SUBDIR / LEAVES_FILE).open("w", encoding="utf-8")

    def __enter__(self) -> LogWriterFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self._lines.close()

    def add(self, leaf: LogLeaf, proof: Sequence[bytes], *, write_entry: bool) -> None:
        """One leaf: its entry written to its path (if ``write_entry``), its line listed."""
        path = leaf_path(leaf.kind, leaf.ident)
        if write_entry:
            if (self._out / path).exists():  # writing it would overwrite an earlier leaf's
                raise IntegrityFailure(f"leaf {leaf.index}: {path} is also leaf "
                                       f"{self._listed(path)}: two leaves of one id cannot be "
                                       "one collection", reason="LOG_LEAF")
            write_file(self._out / path, leaf.entry or b"")
        line = {"index": leaf.index, "path": path, "proof": [h.hex() for h in proof]}
        self._lines.write(json.dumps(line, separators=(",", ":")) + "\n")

    def _listed(self, path: str) -> str:
        """The index of the leaf listed at ``path``, read back from leaves.jsonl (an error's
        detail, once: not worth a map of every path in memory)."""
        self._lines.flush()
        with (self._out / LOG_SUBDIR / LEAVES_FILE).open(encoding="utf-8") as lines:
            for text in lines:
                line = json.loads(text)
                if line["path"] == path:
                    return str(line["index"])
        return "?"  # not listed: the directory was not new after all

    def finish(self, checkpoint: str, frontier: CompactRange) -> None:
        """The checkpoint the proofs lead to, and the compact range before the first leaf."""
        self._lines.flush()
        os.fsync(self._lines.fileno())
        write_file(self._out / LOG_SUBDIR / CHECKPOINT_FILE, checkpoint.encode("utf-8"))
        doc = {"size": frontier.size, "hashes": [h.hex() for h in frontier.hashes]}
        write_file(self._out / LOG_SUBDIR / FRONTIER_FILE,
                   (json.dumps(doc, indent=2) + "\n").encode("utf-8"))


def leaf_path(kind: LeafKind, ident: str) -> str:
    """Where a leaf's entry is in a collection, relative, e.g. ``rounds/<id>.json``."""
    pattern = _KEY_ID if kind is LeafKind.KEY else _ID
    if not isinstance(ident, str) or not pattern.match(ident):  # never a path from the database
        raise IntegrityFailure(f"a logged {kind} has a malformed id {quote(ident)}",
                               reason="LOG_LEAF")
    return f"{LEAF_SUBDIRS[kind]}/{ident}.json"


def _batch(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise InvalidInput("batch_size", f"must be 1..{MAX_BATCH}, got {quote(value)}")
    return value


def _prepare(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InvalidInput("out", f"{out_dir} must be a new or empty directory")
    for sub in (*LEAF_SUBDIRS.values(), RULES_SUBDIR, LOG_SUBDIR):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)


def write_collection(out_dir: Path, envelopes: Iterable[StoredEnvelope]) -> CollectionStats:
    """Each envelope as ``<subdir>/<id>.json`` (its stored bytes), and the rules document of
    every rule set the round records name; the subdirectories must exist."""
    builtin, stats = _builtin_rules(), CollectionStats()
    for item in envelopes:
        ident = _ident(item.ident, "ident")  # stored ids are service-made hex: never a path
        write_file(out_dir / SUBDIRS[item.kind] / f"{ident}.json", item.envelope)
        stats.counts[item.kind] += 1
        if item.kind is EnvelopeKind.ROUND:
            _write_rules(out_dir, _record_digest(item), builtin, stats)
    return stats


def _record_digest(item: StoredEnvelope) -> str:
    try:
        digest = json.loads(item.envelope)["payload"]["rules_digest"]
    except (ValueError, KeyError, TypeError):
        digest = None
    if not isinstance(digest, str):
        raise IntegrityFailure(f"the record of round {item.ident} names no rules digest",
                               reason="STORED_ENVELOPE")
    return digest


def _write_rules(out_dir: Path, digest: str, builtin: dict[str, Rules],
                 stats: CollectionStats) -> None:
    if digest in stats.rule_sets:
        return
    rules = builtin.get(digest)
    if rules is None:
        raise IntegrityFailure(f"rules {digest} are not a built-in game's: their document "
                               "cannot be exported", reason="UNKNOWN_RULES")
    write_file(out_dir / RULES_SUBDIR / f"{digest}.json", rules_file_bytes(rules))
    stats.rule_sets.add(digest)
