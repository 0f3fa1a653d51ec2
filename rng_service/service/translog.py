"""The service's side of the transparency log: what is appended, and checkpoints and proofs.

Each operator has its own log, origin ``f"{base_origin}/{operator}"`` (an operator's export is
complete by itself; one global log would hold other tenants' leaves). A leaf's entry is exactly the
canonical bytes of one signed envelope, appended in the transaction that stores it
(:meth:`UnitOfWork.append_leaf`): a shoe's commitment when the shoe is created, a round's record
when it ends, a shoe's reveal, an RNG draw's record and reveal. Before the first leaf a key signs,
the key itself (``fairshoe.key/v1``, signed by that key) is appended: :class:`LogWriter` passes it
as every append's prerequisite and storage appends it once, under the log's lock.

Checkpoints (C2SP tlog-checkpoint notes, signed with the service's Ed25519 key under the origin's
name) are made on demand, not per append: :meth:`LogReader.checkpoint` returns the latest stored
one if it covers the log's current size, else signs, stores and returns a new one. Proofs are
read from the stored perfect nodes, O(log n) rows, for any size up to the current one.

Errors: a leaf index or size out of range is ``InvalidInput`` naming the field (``leaf_index``,
``tree_size``, ``from_size``, ``to_size``); an unknown leaf ``NotFound``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rng_service.core.errors import IntegrityFailure, InvalidInput, NotFound, quote
from rng_service.crypto.keys import ActiveKey, SigningKey, public_key_jwk
from rng_service.crypto.signing import sign_and_encode
from rng_service.log import (
    DEFAULT_ORIGIN,
    Checkpoint,
    CompactRange,
    NodeID,
    TileRef,
    compact_range_at,
    consistency_proof,
    encode_bundle,
    fetch_nodes,
    inclusion_proof,
    inclusion_ranges,
    parse_checkpoint,
    range_nodes,
    root_at,
    sign_checkpoint,
)
from rng_service.records.schema import key_payload, shoe_commitment_payload
from rng_service.service.ports import (
    LeafKind,
    LogLeaf,
    NewLeaf,
    ShoeRow,
    Storage,
    StoredCheckpoint,
    UnitOfWork,
    utc_now,
)
from rng_service.service.witnessing import Witnessing


def log_origin(operator: str, base_origin: str = DEFAULT_ORIGIN) -> str:
    """The origin (and checkpoint key name) of ``operator``'s log."""
    return f"{base_origin}/{operator}"


def _rfc3339_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class LogWriter:
    """Appends signed envelopes to an operator's log, each after its signing key's leaf."""

    def __init__(self, signer: SigningKey, *, valid_from: str | None = None) -> None:
        """``valid_from``: when the key began to sign (its key ring entry), RFC 3339; default
        now (the key leaf is made once per writer and appended only if its key is unlogged)."""
        self.signer = signer
        payload = key_payload(key_id=signer.key_id, jwk=public_key_jwk(signer.public_key),
                              valid_from=valid_from or _rfc3339_now())
        self._key_leaf = NewLeaf(LeafKind.KEY, signer.key_id, sign_and_encode(payload, signer))

    @property
    def key_leaf(self) -> NewLeaf:
        """The leaf of this writer's signing key (appended before its first use in a log)."""
        return self._key_leaf

    def append(self, uow: UnitOfWork, operator: str, kind: LeafKind, ident: str,
               envelope: bytes) -> None:
        """Log ``envelope`` (signed by this writer's key) in ``uow``'s transaction."""
        uow.append_leaf(operator, NewLeaf(kind, ident, envelope), prerequisite=self._key_leaf)

    def commit_shoe(self, uow: UnitOfWork, row: ShoeRow) -> None:
        """Sign and log a new shoe's commitment (before its client seed or any card)."""
        payload = shoe_commitment_payload(
            shoe_id=row.shoe_id, commitment=row.commitment, game=row.game,
            rules_digest=row.rules_digest, decks=row.decks, mode=str(row.mode),
            created_at=row.created_at)
        self.append(uow, row.operator, LeafKind.SHOE_COMMITMENT, row.shoe_id,
                    sign_and_encode(payload, self.signer))


class Signers:
    """The :class:`LogWriter` of the key that signs now: a fixed key, or the key store's active
    key followed through rotations (:class:`~rng_service.crypto.keys.ActiveKey`), one writer
    (and key leaf) per key. A use case takes :meth:`current` once and signs and logs everything
    of its transaction with it."""

    def __init__(self, keys: SigningKey | ActiveKey, *, valid_from: str | None = None) -> None:
        """``valid_from`` is for a fixed key (when it began to sign); an active key says its own."""
        self._keys = keys
        self._fixed = LogWriter(keys, valid_from=valid_from) if isinstance(keys, SigningKey) \
            else None
        self._writers: dict[str, LogWriter] = {}

    def current(self) -> LogWriter:
        """The writer of the key that signs now."""
        if self._fixed is not None:
            return self._fixed
        assert isinstance(self._keys, ActiveKey)
        active = self._keys.current()
        writer = self._writers.get(active.key.key_id)
        if writer is None:
            writer = LogWriter(active.key, valid_from=active.valid_from)
            self._writers[active.key.key_id] = writer  # a few keys in a process's life
        return writer


@dataclass(frozen=True)
class LeafProof:
    """Where one envelope is in its log: its index, and its inclusion proof in the tree of the
    signed checkpoint's size."""

    leaf_index: int
    tree_size: int
    hashes: tuple[bytes, ...] = field(repr=False)
    checkpoint: str


class _Nodes:
    """:class:`~rng_service.log.NodeReader` over one operator's stored nodes in ``uow``."""

    def __init__(self, uow: UnitOfWork, operator: str) -> None:
        self._uow, self._operator = uow, operator

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        return self._uow.get_log_nodes(self._operator, ids)


class _Prefetched:
    """:class:`~rng_service.log.NodeReader` over nodes read beforehand."""

    def __init__(self, hashes: Sequence[bytes], ids: Sequence[NodeID]) -> None:
        self._known = dict(zip(ids, hashes, strict=True))

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        try:
            return [self._known[node] for node in ids]
        except KeyError as missing:
            raise NotFound("tree_size", f"node {missing} was not read") from None


def _size(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(name, f"must be an integer in {low}..{high}, got {quote(value)}")
    return value


def _dense(operator: str, leaves: Sequence[LogLeaf], start: int, end: int) -> None:
    """IntegrityFailure naming the first leaf of ``[start, end)`` that ``leaves`` lack: a row
    deleted behind the service must fail the export, not leave a gap in it."""
    for expected, leaf in enumerate([*leaves, None], start):
        if expected == end:
            return
        if leaf is None or leaf.index != expected:
            raise IntegrityFailure(f"log of {operator}: leaf {expected} is missing from the "
                                   "database (its node hashes hold it: the log's rows were "
                                   "altered)", reason="LOG_LEAF")


def _proved(uow: UnitOfWork, operator: str, leaves: list[LogLeaf], tree_size: int
            ) -> list[tuple[LogLeaf, list[bytes]]]:
    """Each of ``leaves`` with its inclusion proof in the tree of ``tree_size`` leaves."""
    # every node the page's proofs need, read in a few batches, not one query per leaf
    needed = sorted({node for leaf in leaves
                     for begin, stop in inclusion_ranges(leaf.index, tree_size)
                     for node in range_nodes(begin, stop)})
    nodes = _Prefetched(uow.get_log_nodes(operator, needed), needed)
    return [(leaf, inclusion_proof(nodes, leaf.index, tree_size)) for leaf in leaves]


class LogReader:
    """Checkpoints and proofs of the operators' logs; signs checkpoints with ``signer`` (a fixed
    key, or the key store's active key followed through rotations)."""

    def __init__(self, storage: Storage, signer: SigningKey | ActiveKey, *,
                 base_origin: str = DEFAULT_ORIGIN, store_checkpoints: bool = True,
                 witnessing: Witnessing | None = None) -> None:
        """``store_checkpoints`` False: a checkpoint signed here is returned but not stored (a
        read-only database, e.g. an export). ``witnessing``: each checkpoint signed here is
        stored with the cosignatures of the witnesses that gave one."""
        self._storage = storage
        self._signer = signer
        self._base = base_origin
        self._store = store_checkpoints
        self._witnessing = witnessing

    def _signing_key(self) -> SigningKey:
        signer = self._signer
        return signer if isinstance(signer, SigningKey) else signer.current().key

    def origin(self, operator: str) -> str:
        """The origin of ``operator``'s log."""
        return log_origin(operator, self._base)

    def checkpoint(self, operator: str, *, covering: int | None = None) -> StoredCheckpoint:
        """The latest signed checkpoint, made now if the stored one is older than the log. With
        ``covering``, the latest stored one is enough if it holds leaf ``covering`` (a record's
        proof needs no newer checkpoint: no signature and no write per read)."""
        if covering is None:  # every leaf committed until now, sequenced
            self._storage.integrate_log(operator)
        with self._storage.snapshot() as uow:
            latest = uow.latest_checkpoint(operator)
            if latest is not None and covering is not None and latest.size > covering:
                return latest
            size = uow.log_size(operator)
            state = uow.log_state(operator)
        if latest is not None and latest.size >= size:
            return latest
        tree = CompactRange() if state is None else CompactRange.from_bytes(state)
        note = sign_checkpoint(Checkpoint(self.origin(operator), tree.size, tree.root(),
                                          datetime.now(UTC)), self._signing_key())
        if self._witnessing is not None and tree.size:
            note = self._witnessing.cosign(
                operator, self.origin(operator), tree.size, note,
                lambda old: self.consistency(operator, old, tree.size))
        made = StoredCheckpoint(operator, tree.size, note, utc_now())
        if not self._store:
            return made
        with self._storage.transaction() as uow:
            uow.put_checkpoint(made)  # a concurrent replica's of the same size is kept instead
            stored = uow.latest_checkpoint(operator)
        return stored if stored is not None else made

    def inclusion(self, operator: str, leaf_index: int, tree_size: int) -> list[bytes]:
        """The inclusion proof of leaf ``leaf_index`` in the tree of ``tree_size`` leaves."""
        with self._storage.snapshot() as uow:
            size = uow.log_size(operator)
            if isinstance(leaf_index, int) and leaf_index >= size:
                raise NotFound("leaf_index", f"the log of {operator} has {size} leaves, no leaf "
                               f"{leaf_index}")
            tree = _size(tree_size, "tree_size", 1, size)
            index = _size(leaf_index, "leaf_index", 0, tree - 1)
            return inclusion_proof(_Nodes(uow, operator), index, tree)

    def consistency(self, operator: str, from_size: int, to_size: int) -> list[bytes]:
        """The proof that the tree of ``from_size`` leaves is a prefix of that of ``to_size``."""
        with self._storage.snapshot() as uow:
            size = uow.log_size(operator)
            second = _size(to_size, "to_size", 0, size)
            first = _size(from_size, "from_size", 0, second)
            return consistency_proof(_Nodes(uow, operator), first, second)

    def tile(self, operator: str, tile: TileRef) -> bytes:
        """The bytes of a C2SP tlog-tiles hash tile or entry bundle of ``operator``'s log, from
        one snapshot: a hash tile is its stored perfect nodes, a bundle its leaves' entries
        (each checked against its leaf hash by storage). NotFound (field ``tile``) while the
        log is too small for it: an empty tile is never served."""
        with self._storage.snapshot() as uow:
            size = uow.log_size(operator)
            if tile.tree_size_needed() > size:
                raise NotFound("tile", f"the log of {operator} has {size} leaves, too few for "
                               f"{tile.path()}")
            if not tile.is_bundle:
                return b"".join(fetch_nodes(_Nodes(uow, operator), tile.nodes()))
            start, end = tile.leaves()
            leaves = uow.list_leaves(operator, start, end)
            _dense(operator, leaves, start, end)
        return encode_bundle(leaf.entry or b"" for leaf in leaves)

    def _find(self, operator: str, kind: LeafKind, ident: str) -> LogLeaf | None:
        """The leaf of ``kind`` under ``ident``, sequencing the queue first if it is not in the
        log yet (committed but not merged), or None."""
        with self._storage.snapshot() as uow:
            found = uow.find_leaf(operator, kind, ident)
        if found is None:
            # read again whatever this call merged: another replica's sequencer may have merged
            # the leaf meanwhile, or while this one waited for the log's row, leaving nothing
            # queued here (integrate_log returns only its own count, 0 then)
            self._storage.integrate_log(operator)
            with self._storage.snapshot() as uow:
                found = uow.find_leaf(operator, kind, ident)
        return found

    def leaf_index(self, operator: str, kind: LeafKind, ident: str) -> int:
        """The index of the leaf of ``kind`` logged under ``ident``; NotFound if none is."""
        found = self._find(operator, kind, ident)
        if found is None:
            raise NotFound("leaf", f"no {kind} leaf {quote(ident)} in the log of {operator}")
        return found.index

    def prove(self, operator: str, kind: LeafKind, ident: str) -> LeafProof | None:
        """Index, inclusion proof and the checkpoint it proves to, for the envelope of ``kind``
        under ``ident``; None if it is not in the log (stored before the log existed)."""
        found = self._find(operator, kind, ident)
        if found is None:
            return None
        checkpoint = self.checkpoint(operator, covering=found.index)
        proof = self.inclusion(operator, found.index, checkpoint.size)
        return LeafProof(found.index, checkpoint.size, tuple(proof), checkpoint.note)

    def proved_leaves(self, operator: str, start: int, end: int, tree_size: int
                      ) -> list[tuple[LogLeaf, list[bytes]]]:
        """Leaves ``[start, end)`` with their entries, each with its inclusion proof in the tree
        of ``tree_size`` leaves, from one snapshot."""
        with self._storage.snapshot() as uow:
            leaves = uow.list_leaves(operator, start, end)
            _dense(operator, leaves, start, end)
            return _proved(uow, operator, leaves, tree_size)

    def proved_leaves_at(self, operator: str, indices: Sequence[int], tree_size: int
                         ) -> list[tuple[LogLeaf, list[bytes]]]:
        """The leaves at ``indices`` (ascending, each below ``tree_size``) with their entries,
        each with its inclusion proof in the tree of ``tree_size`` leaves, from one snapshot:
        a page of a time-range export, whose leaves are not contiguous."""
        with self._storage.snapshot() as uow:
            leaves = uow.list_leaves_at(operator, indices)
            if [leaf.index for leaf in leaves] != list(indices):
                missing = sorted(set(indices) - {leaf.index for leaf in leaves})
                raise IntegrityFailure(f"log of {operator}: leaf {missing[0]} is missing from "
                                       "the database (its node hashes hold it: the log's rows "
                                       "were altered)", reason="LOG_LEAF")
            return _proved(uow, operator, leaves, tree_size)

    def proved_leaf(self, operator: str, kind: LeafKind, ident: str, tree_size: int
                    ) -> tuple[LogLeaf, list[bytes]] | None:
        """The leaf of ``kind`` under ``ident`` with its entry and its inclusion proof in the
        tree of ``tree_size`` leaves; None if it is not logged within that tree."""
        with self._storage.snapshot() as uow:
            found = uow.find_leaf(operator, kind, ident)
            if found is None or found.index >= tree_size:
                return None
            (leaf,) = uow.list_leaves(operator, found.index, found.index + 1)
            return leaf, inclusion_proof(_Nodes(uow, operator), leaf.index, tree_size)

    def frontier(self, operator: str, size: int) -> CompactRange:
        """The compact range of the first ``size`` leaves (what a verifier holding only the
        leaves from ``size`` on needs to recompute the root)."""
        with self._storage.snapshot() as uow:
            return compact_range_at(_Nodes(uow, operator), size)

    def check_since(self, operator: str, note: str, size: int) -> int:
        """The size of an earlier checkpoint ``note`` of this log, once its origin is this log's,
        its size at most ``size`` and its root the log's root at its size (so the log has only
        grown since); InvalidInput naming ``since`` otherwise."""
        try:
            earlier = parse_checkpoint(note).checkpoint
        except InvalidInput as exc:
            raise InvalidInput("since", f"not a checkpoint: {exc}") from None
        if earlier.origin != self.origin(operator):
            raise InvalidInput("since", f"a checkpoint of {quote(earlier.origin)}, not of "
                               f"{quote(self.origin(operator))}")
        if earlier.size > size:
            raise InvalidInput("since", f"of size {earlier.size}, beyond the log's {size}")
        with self._storage.snapshot() as uow:
            root = root_at(_Nodes(uow, operator), earlier.size)
        if root != earlier.root_hash:
            raise IntegrityFailure(f"the log's root at size {earlier.size} is not the --since "
                                   "checkpoint's: the log was not only appended to since",
                                   reason="LOG_INCONSISTENT")
        return earlier.size
