"""The part of a log's nodes a reader holds who has the compact range of its first leaves, every
leaf after them, and inclusion proofs of some of the first leaves (:class:`PartialTree`).

That is enough to prove, in the grown tree, the inclusion of every leaf appended and of every
older leaf whose proof was added, and the consistency of the older tree with the grown one:
an inclusion path in the grown tree needs, below the compact-range node holding the leaf, the
siblings its old proof gives, and above it compact-range nodes and nodes completed by the
appends. An auditor holding an export from an earlier checkpoint on uses it to carry proofs of
the leaves it keeps to the checkpoint it checked (:mod:`rng_service.audit.state`).

Memory: the nodes completed by the appends are kept one ``bytearray`` per level (about 64 bytes
per leaf, as :class:`~rng_service.log.nodes.MemoryNodeStore`); the others in a dict.
"""

from __future__ import annotations

from collections.abc import Sequence

from rng_service.core.errors import IntegrityFailure, NotFound
from rng_service.log.compact import CompactRange
from rng_service.log.hashing import HASH_SIZE, node_hash
from rng_service.log.proofs import inclusion_proof, verify_inclusion
from rng_service.log.tree import NodeID, Range, inclusion_ranges


def _perfect(span: Range) -> NodeID | None:
    """The perfect node covering exactly ``span``, if it is one."""
    begin, end = span
    width = end - begin
    if width <= 0 or width & (width - 1) or begin % width:
        return None
    return NodeID(width.bit_length() - 1, begin // width)


class PartialTree:
    """The nodes known of a log grown from the compact range ``frontier``.

    >>> from rng_service.log.nodes import MemoryNodeStore, compact_range_at
    >>> full = MemoryNodeStore()
    >>> hashes = [full.append_entry(bytes([i])) for i in range(7)]
    >>> part = PartialTree(compact_range_at(full, 3))
    >>> for i in range(3, 7):
    ...     part.append(full.get_node(NodeID(0, i)))
    >>> part.add_proof(1, full.get_node(NodeID(0, 1)), inclusion_proof(full, 1, 3))
    >>> part.inclusion_proof(1) == inclusion_proof(full, 1, 7)
    True
    """

    def __init__(self, frontier: CompactRange) -> None:
        self._range = frontier.copy()
        self._first = frontier.size
        self._old_root = frontier.root()
        self._extra: dict[NodeID, bytes] = dict(zip(frontier.node_ids(), frontier.hashes,
                                                    strict=True))
        #: per level, the index of its first node completed by an append, and the nodes from it
        self._levels: list[tuple[int, bytearray]] = []

    @property
    def size(self) -> int:
        """How many leaves the tree has now."""
        return self._range.size

    def root(self) -> bytes:
        """The root of the tree now."""
        return self._range.root()

    def append(self, leaf: bytes) -> None:
        """Add the leaf hash ``leaf`` as leaf number ``size``."""
        self._range.append(leaf, self._store)

    def _store(self, node: NodeID, value: bytes) -> None:
        if node.level == len(self._levels):
            self._levels.append((node.index, bytearray()))
        base, level = self._levels[node.level]
        # appends complete the nodes of each level in order
        assert len(level) == (node.index - base) * HASH_SIZE, (node, base, len(level))
        level += value

    def add_proof(self, index: int, leaf: bytes, proof: Sequence[bytes]) -> None:
        """Keep the nodes that the inclusion proof of leaf ``index`` (hash ``leaf``) in the
        frontier's tree shows; the proof is verified first (:class:`IntegrityFailure` if it
        does not hold, or contradicts a node known)."""
        verify_inclusion(leaf, index, self._first, list(proof), self._old_root)
        found: dict[NodeID, bytes] = {NodeID(0, index): leaf}
        node, begin, end = leaf, index, index + 1
        for span, sibling in zip(inclusion_ranges(index, self._first), proof, strict=True):
            sibling_id = _perfect(span)
            if sibling_id is not None:
                found[sibling_id] = sibling
            if span[0] < begin:
                node, begin = node_hash(sibling, node), span[0]
            else:
                node, end = node_hash(node, sibling), span[1]
            own = _perfect((begin, end))
            if own is not None:
                found[own] = node
        for node_id, value in found.items():
            known = self._extra.setdefault(node_id, value)
            if known != value:
                raise IntegrityFailure(f"the proof of leaf {index} contradicts node {node_id}",
                                       reason="LOG_NODES")

    def get_node(self, node: NodeID) -> bytes:
        """The hash of one perfect node known; :class:`NotFound` otherwise."""
        value = self._extra.get(node)
        if value is not None:
            return value
        if node.level < len(self._levels):
            base, level = self._levels[node.level]
            start = (node.index - base) * HASH_SIZE
            if node.index >= base and start < len(level):
                return bytes(level[start:start + HASH_SIZE])
        raise NotFound("node", f"node {node} is not known from the frontier, the leaves after it "
                       "and the proofs added")

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        """:meth:`~rng_service.log.nodes.NodeReader.get_nodes`."""
        return [self.get_node(node) for node in ids]

    def inclusion_proof(self, index: int) -> list[bytes]:
        """The inclusion proof of leaf ``index`` in the tree now (an appended leaf, or one whose
        proof was added; :class:`NotFound` otherwise)."""
        return inclusion_proof(self, index, self.size)
