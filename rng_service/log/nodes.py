"""Where proofs get their hashes: the :class:`NodeReader` port and an in-memory store.

The log stores every *perfect* node (a complete subtree: a leaf, or two equal-sized perfect
children) as it is completed; there are ``2n - popcount(n)`` of them for ``n`` leaves, under two
per append. A perfect node's hash never changes, so a store only ever inserts. Any subtree a proof
needs, perfect or not, is the fold of at most ``2 log n`` perfect nodes (:func:`range_nodes`), so
proofs for any past tree size come from the same immutable nodes.

Persisting (storage's side): fill a table ``(level, index) -> hash`` (primary key, insert-only) from
:meth:`CompactRange.append`'s ``visit`` callback in the transaction that appends the leaf, and serve
:meth:`NodeReader.get_nodes` with one ``WHERE (level, index) IN (...)`` query. Grouping nodes into
tiles (e.g. C2SP tlog-tiles' 8 levels x 256 hashes) is a storage choice behind the same method.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rng_service.core.errors import IntegrityFailure, NotFound
from rng_service.log.compact import CompactRange
from rng_service.log.hashing import EMPTY_ROOT, HASH_SIZE, check_size, leaf_hash, node_hash
from rng_service.log.tree import NodeID, Range, range_nodes, split_point


class NodeReader(Protocol):
    """Hashes of stored perfect nodes, fetched in one batch."""

    def get_nodes(self, ids: Sequence[NodeID]) -> Sequence[bytes | bytearray | memoryview]:
        """The hash of each perfect node in ``ids``, in the same order.

        A node the log does not have yet (it needs more leaves than are stored) raises
        :class:`~rng_service.core.errors.NotFound`. Callers check the length and the size of
        every hash returned, so a faulty store surfaces as :class:`IntegrityFailure`.
        """
        ...


def fold_right(hashes: Sequence[bytes]) -> bytes:
    """The hash of consecutive subtrees, biggest first, combined from the right.

    For the perfect nodes of an RFC 9162 subtree (:func:`range_nodes` of a range whose start is
    aligned to its size rounded up to a power of two) this is the subtree's MTH.
    """
    if not hashes:
        return EMPTY_ROOT
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def fetch_nodes(reader: NodeReader, ids: Sequence[NodeID]) -> list[bytes]:
    """``reader.get_nodes(ids)``, checked: one 32-byte hash per id, or :class:`IntegrityFailure`."""
    answer = list(reader.get_nodes(ids)) if ids else []
    if len(answer) != len(ids):
        raise IntegrityFailure(
            f"node store returned {len(answer)} hashes for {len(ids)} nodes", reason="LOG_NODES"
        )
    hashes = []
    for node, value in zip(ids, answer, strict=True):
        # Database drivers hand back bytea/BLOB columns as bytes, bytearray or memoryview.
        if not isinstance(value, bytes | bytearray | memoryview) or len(value) != HASH_SIZE:
            raise IntegrityFailure(f"node store returned a bad hash for {node}", reason="LOG_NODES")
        hashes.append(bytes(value))
    return hashes


def hash_ranges(reader: NodeReader, ranges: Sequence[Range]) -> list[bytes]:
    """MTH of each RFC 9162 subtree in ``ranges``, from one batch of node reads."""
    groups = [range_nodes(begin, end) for begin, end in ranges]
    hashes = fetch_nodes(reader, [node for group in groups for node in group])
    result, at = [], 0
    for group in groups:
        result.append(fold_right(hashes[at : at + len(group)]))
        at += len(group)
    return result


def root_at(reader: NodeReader, size: int) -> bytes:
    """The root hash of the log when it had ``size`` leaves (any size up to the current one)."""
    size = check_size(size, "tree_size")
    return fold_right(fetch_nodes(reader, range_nodes(0, size)))


def compact_range_at(reader: NodeReader, size: int) -> CompactRange:
    """The compact range of the first ``size`` leaves, rebuilt from stored nodes.

    For recovery (a lost or suspect state row) and for checking a stored state against the nodes.
    """
    size = check_size(size, "tree_size")
    return CompactRange(size, fetch_nodes(reader, range_nodes(0, size)))


class MemoryNodeStore:
    """An append-only log held in memory: its compact range and every perfect node.

    Each level is one ``bytearray`` of concatenated 32-byte hashes (about 64 bytes per leaf in all,
    not a Python object per node). A reference for storage implementations and a test double.

    >>> store = MemoryNodeStore()
    >>> [store.append_entry(e) for e in (b"", b"\\x00", b"\\x10")]
    [0, 1, 2]
    >>> store.root().hex()[:16], store.node_count
    ('aeb6bcfe274b70a1', 4)
    """

    def __init__(self) -> None:
        self._range = CompactRange()
        self._levels: list[bytearray] = []

    @property
    def size(self) -> int:
        """How many leaves the log has."""
        return self._range.size

    @property
    def node_count(self) -> int:
        """How many perfect nodes are stored: ``2 * size - popcount(size)``."""
        return sum(len(level) for level in self._levels) // HASH_SIZE

    def compact_range(self) -> CompactRange:
        """A copy of the current state (what a database would keep in one row)."""
        return self._range.copy()

    def root(self) -> bytes:
        """The root hash at the current size."""
        return self._range.root()

    def append(self, leaf: bytes) -> int:
        """Append a leaf hash; returns its index."""
        index = self._range.size
        self._range.append(leaf, self._store)
        return index

    def append_entry(self, entry: bytes) -> int:
        """Append ``leaf_hash(entry)``; returns its index."""
        return self.append(leaf_hash(entry))

    def inclusion_proofs(self, size: int) -> list[list[bytes]]:
        """The inclusion proof of every leaf in the tree of the first ``size`` leaves, in leaf
        order: each equal to ``proofs.inclusion_proof(self, index, size)``, all of them made in
        one descent of the tree (a collection's log proves each of its thousands of leaves; one
        proof at a time cost about 140 µs a leaf).

        >>> store = MemoryNodeStore()
        >>> _ = [store.append_entry(bytes([i])) for i in range(3)]
        >>> [len(p) for p in store.inclusion_proofs(3)]
        [2, 2, 1]
        """
        size = check_size(size, "tree_size")
        if size > self.size:
            raise NotFound("tree", f"no tree of {size} leaves in a log of {self.size}")
        proofs: list[list[bytes]] = []
        if size:
            self._descend(0, size, [], proofs)
        return proofs

    def _subtree(self, begin: int, end: int) -> bytes:
        """The MTH of leaves ``[begin, end)``, an RFC 9162 subtree (its start is aligned)."""
        width = end - begin
        if width & (width - 1) == 0:  # perfect: stored
            level = width.bit_length() - 1
            start = (begin >> level) * HASH_SIZE
            return bytes(self._levels[level][start : start + HASH_SIZE])
        mid = begin + split_point(width)
        return node_hash(self._subtree(begin, mid), self._subtree(mid, end))

    def _descend(self, begin: int, end: int, above: list[bytes], out: list[list[bytes]]) -> None:
        # ``above``: the proof's hashes from this subtree's sibling up to the root's other child
        if end - begin == 1:
            out.append(above)
            return
        mid = begin + split_point(end - begin)
        self._descend(begin, mid, [self._subtree(mid, end), *above], out)
        self._descend(mid, end, [self._subtree(begin, mid), *above], out)

    def _store(self, node: NodeID, value: bytes) -> None:
        if node.level == len(self._levels):
            self._levels.append(bytearray())
        level = self._levels[node.level]
        # Nodes arrive in order at each level: anything else is a bug in the append path.
        assert len(level) == node.index * HASH_SIZE, (node, len(level))
        level += value

    def get_node(self, node: NodeID) -> bytes:
        """The hash of one perfect node; :class:`NotFound` if the log is too small for it."""
        start = node.index * HASH_SIZE
        if not 0 <= node.level < len(self._levels) or not 0 <= start < len(
            self._levels[node.level]
        ):
            raise NotFound("node", f"no perfect node {node} in a log of {self.size} leaves")
        return bytes(self._levels[node.level][start : start + HASH_SIZE])

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        """:meth:`NodeReader.get_nodes`: the hashes of ``ids``, in order."""
        return [self.get_node(node) for node in ids]
