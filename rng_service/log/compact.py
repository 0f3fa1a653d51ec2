"""The compact range of a log: the O(log n) state from which the next root is computed.

For a tree of ``size`` leaves the compact range ``[0, size)`` is the list of perfect subtree roots
along the right edge, one per set bit of ``size``, biggest (leftmost) first. Appending a leaf pushes
its hash and merges equal-sized neighbours (one node hash per trailing 1-bit of the old size, one on
average); the root folds the list from the right (one hash per set bit). Nothing is ever rehashed.
This is the technique of transparency-dev/merkle's ``compact`` package, for the range starting at 0.

Persisting: :meth:`CompactRange.to_bytes` (or :meth:`to_json`) is the whole state, at most
``9 + 64 * 32`` bytes; store it with the size it belongs to, in the transaction that appends the
leaf. The ``visit`` callback of :meth:`CompactRange.append` reports each perfect node as it is
completed, which is how a node table (or tiles) is filled.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Final

from rng_service.core.errors import IntegrityFailure, InvalidInput
from rng_service.log.hashing import EMPTY_ROOT, HASH_SIZE, check_hash, check_size, node_hash
from rng_service.log.tree import NodeID, range_nodes

NodeVisitor = Callable[[NodeID, bytes], None]

# Serialised form: a version byte, the size as a big-endian uint64, then the hashes in order.
# The version byte lets a later layout be told apart from this one in stored rows.
_FORMAT_V1: Final = 1
_HEADER: Final = 1 + 8
_CORRUPT: Final = "LOG_STATE_CORRUPT"


class CompactRange:
    """The right edge of the tree over leaves ``[0, size)``: enough to append and to compute roots.

    >>> from rng_service.log.hashing import leaf_hash
    >>> cr = CompactRange()
    >>> cr.root().hex()
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    >>> for entry in (b"", b"\\x00", b"\\x10"):
    ...     cr.append(leaf_hash(entry))
    >>> cr.size, len(cr.hashes), cr.root().hex()[:16]
    (3, 2, 'aeb6bcfe274b70a1')
    >>> CompactRange.from_bytes(cr.to_bytes()) == cr
    True
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Iterable[bytes] = ()) -> None:
        """The range of a tree of ``size`` leaves, from its right-edge hashes (biggest first)."""
        self._size = check_size(size, "size")
        self._hashes = [check_hash(h, f"hashes[{i}]") for i, h in enumerate(hashes)]
        if len(self._hashes) != size.bit_count():
            raise InvalidInput(
                "hashes",
                f"a tree of {size} leaves has {size.bit_count()} right-edge hashes, "
                f"got {len(self._hashes)}",
            )

    @property
    def size(self) -> int:
        """How many leaves the tree has."""
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The right-edge subtree roots, biggest (leftmost) first."""
        return tuple(self._hashes)

    def node_ids(self) -> list[NodeID]:
        """Which perfect nodes :attr:`hashes` are, in the same order."""
        return range_nodes(0, self._size)

    def append(self, leaf: bytes, visit: NodeVisitor | None = None) -> None:
        """Add the leaf hash ``leaf`` as leaf number ``size``; O(log n), one node hash on average.

        ``visit(node_id, hash)`` is called for the new leaf and for every perfect node the append
        completes, bottom-up: each node of the tree is reported exactly once over the log's life.
        """
        leaf = check_hash(leaf, "leaf_hash")
        if self._size == 2**64 - 1:
            raise InvalidInput("size", "the log is full (2**64 - 1 leaves)")
        node, level, index = leaf, 0, self._size
        if visit is not None:
            visit(NodeID(0, index), node)
        # Each trailing 1-bit of the old size is a perfect sibling on the left, same height: merge.
        while index & 1:
            node = node_hash(self._hashes.pop(), node)
            level, index = level + 1, index >> 1
            if visit is not None:
                visit(NodeID(level, index), node)
        self._hashes.append(node)
        self._size += 1

    def root(self) -> bytes:
        """MTH of the tree: the right-edge hashes folded from the right (RFC 9162 section 2.1.1).

        The fold gives MTH because the smaller subtrees to the right of each edge node form exactly
        the right child that RFC 9162's split at the largest power of two produces.
        """
        if not self._hashes:
            return EMPTY_ROOT
        root = self._hashes[-1]
        for left in reversed(self._hashes[:-1]):
            root = node_hash(left, root)
        return root

    def copy(self) -> CompactRange:
        """An independent copy (appending to it leaves this one as it is)."""
        return CompactRange(self._size, self._hashes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompactRange):
            return NotImplemented
        return self._size == other._size and self._hashes == other._hashes

    __hash__ = None  # type: ignore[assignment]  # mutable: not a dict key

    def __repr__(self) -> str:
        return f"CompactRange(size={self._size}, root={self.root().hex()[:16]}...)"

    # --- storage ----------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """``0x01 || size (uint64, big-endian) || hashes``: the whole state, at most 2057 bytes."""
        return bytes([_FORMAT_V1]) + self._size.to_bytes(8, "big") + b"".join(self._hashes)

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactRange:
        """The range :meth:`to_bytes` wrote; :class:`IntegrityFailure` if ``data`` is not one."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidInput("data", f"must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER or data[0] != _FORMAT_V1:
            raise IntegrityFailure("stored compact range: unknown format", reason=_CORRUPT)
        size = int.from_bytes(data[1:_HEADER], "big")
        body = data[_HEADER:]
        if len(body) != HASH_SIZE * size.bit_count():
            raise IntegrityFailure(
                f"stored compact range: {len(body)} hash bytes for size {size}", reason=_CORRUPT
            )
        # built without __init__'s checks, which these slices pass by construction (a size of
        # 8 bytes is a uint64; one 32-byte hash per set bit): read on every append
        state = cls.__new__(cls)
        state._size = size
        state._hashes = [body[i : i + HASH_SIZE] for i in range(0, len(body), HASH_SIZE)]
        return state

    def to_json(self) -> str:
        """``{"hashes": [hex, ...], "size": n}`` (sorted keys, no spaces)."""
        doc = {"hashes": [h.hex() for h in self._hashes], "size": self._size}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> CompactRange:
        """The range :meth:`to_json` wrote; :class:`IntegrityFailure` if ``text`` is not one."""
        try:
            doc = json.loads(text)
            size, hashes = doc["size"], doc["hashes"]
            if set(doc) != {"size", "hashes"} or not isinstance(hashes, list):
                raise ValueError("members")
            if not all(isinstance(h, str) and h == h.lower() for h in hashes):
                raise ValueError("hashes must be lowercase hex")
            return cls(size, [bytes.fromhex(h) for h in hashes])
        except (ValueError, TypeError, KeyError, InvalidInput) as exc:
            raise IntegrityFailure(
                f"stored compact range is not valid JSON state: {exc}", reason=_CORRUPT
            ) from None
