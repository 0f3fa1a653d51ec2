"""The shape of an RFC 9162 tree: node ids, and which subtrees a proof is made of.

Everything here is arithmetic on sizes and indices; no hashing. A proof is a list of subtree hashes
``MTH(D[begin:end])``; :func:`inclusion_ranges` and :func:`consistency_ranges` say which ranges, in
the order RFC 9162 puts them, and :func:`range_nodes` which stored perfect nodes make up each one.
Keeping the shape apart from the hashing lets storage fetch every node of a proof in one query.
"""

from __future__ import annotations

from dataclasses import dataclass

from rng_service.core.errors import InvalidInput
from rng_service.log.hashing import check_size

Range = tuple[int, int]  # leaves [begin, end)


@dataclass(frozen=True, slots=True, order=True)
class NodeID:
    """The perfect subtree at ``level`` (0 = leaves) and ``index`` (counted from 0 at each level).

    It covers leaves ``[index << level, (index + 1) << level)``. Its hash never changes once the
    log has that many leaves, so storage can write it once and never update it.

    >>> NodeID(2, 1).leaves()
    (4, 8)
    """

    level: int
    index: int

    def leaves(self) -> Range:
        """The range of leaf indices ``[start, end)`` the node covers."""
        return self.index << self.level, (self.index + 1) << self.level


def split_point(n: int) -> int:
    """The largest power of two smaller than ``n`` (n >= 2): where RFC 9162 splits a tree of n.

    >>> [split_point(n) for n in (2, 3, 4, 5, 8, 9)]
    [1, 2, 2, 4, 4, 8]
    """
    return 1 << ((n - 1).bit_length() - 1)


def range_nodes(begin: int, end: int) -> list[NodeID]:
    """The fewest perfect nodes that cover leaves ``[begin, end)``, left to right.

    This is the compact range of ``[begin, end)``: at most two nodes per level.

    >>> range_nodes(0, 7)
    [NodeID(level=2, index=0), NodeID(level=1, index=2), NodeID(level=0, index=6)]
    >>> range_nodes(3, 8)
    [NodeID(level=0, index=3), NodeID(level=2, index=1)]
    """
    if not 0 <= begin <= end:
        raise InvalidInput("range", f"need 0 <= begin <= end, got [{begin}, {end})")
    nodes = []
    while begin < end:
        # The biggest aligned block at begin that still fits: limited by begin's alignment
        # (its lowest set bit) and by what is left of the range.
        level = (end - begin).bit_length() - 1
        if begin:
            level = min(level, (begin & -begin).bit_length() - 1)
        nodes.append(NodeID(level, begin >> level))
        begin += 1 << level
    return nodes


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """The subtrees of the inclusion proof of leaf ``index`` in a tree of ``size`` leaves.

    RFC 9162 section 2.1.3.1 PATH(m, D[n]), leaf level first, the root's other child last.

    >>> inclusion_ranges(2, 5)
    [(3, 4), (0, 2), (4, 5)]
    """
    size = check_size(size, "tree_size", low=1)
    index = check_size(index, "leaf_index")
    if index >= size:
        raise InvalidInput("leaf_index", f"must be below tree_size {size}, got {index}")
    path: list[Range] = []
    begin, end = 0, size
    while end - begin > 1:
        mid = begin + split_point(end - begin)
        if index < mid:
            path.append((mid, end))
            end = mid
        else:
            path.append((begin, mid))
            begin = mid
    path.reverse()  # found top-down; the RFC lists them bottom-up
    return path


def consistency_ranges(old_size: int, new_size: int) -> list[Range]:
    """The subtrees of the consistency proof from ``old_size`` to ``new_size`` leaves.

    RFC 9162 section 2.1.4.1 PROOF(m, D[n]) = SUBPROOF(m, D[n], true). Empty when the sizes are
    equal or the old tree is empty (nothing to prove).

    >>> consistency_ranges(3, 7)
    [(2, 3), (3, 4), (0, 2), (4, 7)]
    >>> consistency_ranges(4, 8)
    [(4, 8)]
    """
    new_size = check_size(new_size, "new_size")
    old_size = check_size(old_size, "old_size")
    if old_size > new_size:
        raise InvalidInput("old_size", f"must not exceed new_size {new_size}, got {old_size}")
    if old_size in (0, new_size):
        return []
    proof: list[Range] = []
    begin, end, whole = 0, new_size, True  # whole: SUBPROOF's b, "old tree is D[0:m] itself"
    while old_size != end:
        mid = begin + split_point(end - begin)
        if old_size <= mid:
            proof.append((mid, end))
            end = mid
        else:
            proof.append((begin, mid))
            begin, whole = mid, False
    if not whole:
        proof.append((begin, end))  # SUBPROOF(m, D[m], false) = {MTH(D[m])}
    proof.reverse()
    return proof
