"""Inclusion and consistency proofs: made from stored nodes, checked by RFC 9162's algorithms.

Verification is pure and treats every argument as hostile. What is malformed on its face (a size
or index out of range, a hash that is not 32 bytes, a proof longer than any tree can need) raises
:class:`InvalidInput`; a well-formed proof that does not prove the claim (wrong number of hashes for
the tree's shape, a root that does not match) raises :class:`IntegrityFailure`. Both are
:class:`~rng_service.core.errors.FairshoeError`; a verifier returns ``None`` only on success.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rng_service.core.errors import IntegrityFailure, InvalidInput
from rng_service.log.hashing import EMPTY_ROOT, HASH_SIZE, check_hash, check_size, node_hash
from rng_service.log.nodes import NodeReader, hash_ranges
from rng_service.log.tree import consistency_ranges, inclusion_ranges

# No proof in a tree of at most 2**64 - 1 leaves has more hashes than this (a consistency proof
# has at most one per level plus the old tree's own subtree root).
MAX_PROOF_HASHES: Final = 65
INCLUSION_FAILED: Final = "INCLUSION_PROOF_INVALID"
CONSISTENCY_FAILED: Final = "CONSISTENCY_PROOF_INVALID"


# --- making proofs --------------------------------------------------------------------------------


def inclusion_proof(reader: NodeReader, index: int, size: int) -> list[bytes]:
    """The audit path of leaf ``index`` in the tree of the first ``size`` leaves (RFC 9162 2.1.3.1).

    ``size`` may be any size the log has reached, not only the current one.
    """
    return hash_ranges(reader, inclusion_ranges(index, size))


def consistency_proof(reader: NodeReader, old_size: int, new_size: int) -> list[bytes]:
    """The proof that the tree of ``old_size`` leaves is a prefix of that of ``new_size``
    (RFC 9162 2.1.4.1); empty when ``old_size`` is 0 or equals ``new_size``."""
    return hash_ranges(reader, consistency_ranges(old_size, new_size))


# --- checking them --------------------------------------------------------------------------------


def _check_proof(proof: object) -> list[bytes]:
    if isinstance(proof, bytes | str) or not isinstance(proof, Sequence):
        raise InvalidInput("proof", f"must be a sequence of hashes, got {type(proof).__name__}")
    if len(proof) > MAX_PROOF_HASHES:
        raise InvalidInput("proof", f"has {len(proof)} hashes; no proof needs over 65")
    path = list(proof)
    for i, h in enumerate(path):
        if type(h) is not bytes or len(h) != HASH_SIZE:  # else check_hash would return h
            path[i] = check_hash(h, f"proof[{i}]")
    return path


def _shift_to_odd(fn: int, sn: int) -> tuple[int, int]:
    """Right-shift both until fn's lowest bit is set or fn is 0 (RFC 9162 steps 4.b.ii, 6.b.iii)."""
    while fn and not fn & 1:
        fn, sn = fn >> 1, sn >> 1
    return fn, sn


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root_hash: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with ``root_hash``.

    RFC 9162 section 2.1.3.2, step for step. Raises :class:`IntegrityFailure` if it is not proven.

    >>> from rng_service.log.hashing import leaf_hash
    >>> verify_inclusion(leaf_hash(b"x"), 0, 1, [], leaf_hash(b"x"))  # one leaf: it is the root
    >>> verify_inclusion(leaf_hash(b"x"), 1, 1, [], leaf_hash(b"x"))
    Traceback (most recent call last):
    ...
    rng_service.core.errors.InvalidInput: leaf_index: must be below tree_size 1, got 1
    """
    leaf = check_hash(leaf_hash, "leaf_hash")
    root = check_hash(root_hash, "root_hash")
    size = check_size(size, "tree_size", low=1)
    index = check_size(index, "leaf_index")
    if index >= size:
        raise InvalidInput("leaf_index", f"must be below tree_size {size}, got {index}")
    path = _check_proof(proof)
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise IntegrityFailure(_count_message("inclusion", len(path)), reason=INCLUSION_FAILED)
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            fn, sn = _shift_to_odd(fn, sn)
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise IntegrityFailure(_count_message("inclusion", len(path)), reason=INCLUSION_FAILED)
    if r != root:
        raise IntegrityFailure(
            f"inclusion proof for leaf {index} does not lead to the root of the tree of {size}",
            reason=INCLUSION_FAILED,
        )


def verify_consistency(
    old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes
) -> None:
    """Check that the tree of ``old_size`` leaves and ``old_root`` is a prefix of the tree of
    ``new_size`` leaves and ``new_root`` (RFC 9162 section 2.1.4.2).

    The cases the RFC leaves out: equal sizes need an empty proof and equal roots; an old size of 0
    needs an empty proof and the empty tree's root (the empty tree is a prefix of every tree).

    >>> from rng_service.log.hashing import EMPTY_ROOT, leaf_hash
    >>> verify_consistency(0, 1, [], EMPTY_ROOT, leaf_hash(b"x"))
    >>> verify_consistency(2, 1, [], EMPTY_ROOT, EMPTY_ROOT)
    Traceback (most recent call last):
    ...
    rng_service.core.errors.InvalidInput: old_size: must not exceed new_size 1, got 2
    """
    first_hash = check_hash(old_root, "old_root")
    second_hash = check_hash(new_root, "new_root")
    first = check_size(old_size, "old_size")
    second = check_size(new_size, "new_size")
    if first > second:
        raise InvalidInput("old_size", f"must not exceed new_size {second}, got {first}")
    path = _check_proof(proof)
    if first in (0, second):
        _verify_trivial(first, second, path, first_hash, second_hash)
        return
    fr, sr = _consistency_roots(first, second, path, first_hash)
    if fr != first_hash:
        raise IntegrityFailure(
            f"consistency proof does not lead to the root of the tree of {first}",
            reason=CONSISTENCY_FAILED,
        )
    if sr != second_hash:
        raise IntegrityFailure(
            f"consistency proof does not lead to the root of the tree of {second}",
            reason=CONSISTENCY_FAILED,
        )


def _verify_trivial(first: int, second: int, path: list[bytes], first_hash: bytes,
                    second_hash: bytes) -> None:
    if path:
        raise IntegrityFailure(
            f"consistency proof from {first} to {second} must be empty, got {len(path)} hashes",
            reason=CONSISTENCY_FAILED,
        )
    if first == second and first_hash != second_hash:
        raise IntegrityFailure(f"two different roots for the tree of {first}",
                               reason=CONSISTENCY_FAILED)
    if first == 0 and first_hash != EMPTY_ROOT:
        raise IntegrityFailure("the root given for the empty tree is not the empty root",
                               reason=CONSISTENCY_FAILED)


def _consistency_roots(first: int, second: int, path: list[bytes], first_hash: bytes
                       ) -> tuple[bytes, bytes]:
    """RFC 9162 2.1.4.2 steps 1-7 for 0 < first < second: the (old, new) roots the proof gives."""
    if not path:
        raise IntegrityFailure(_count_message("consistency", 0), reason=CONSISTENCY_FAILED)
    if first & (first - 1) == 0:  # a power of two: the old tree is a subtree, left out of the proof
        path = [first_hash, *path]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise IntegrityFailure(_count_message("consistency", len(path)),
                                   reason=CONSISTENCY_FAILED)
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            fn, sn = _shift_to_odd(fn, sn)
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise IntegrityFailure(_count_message("consistency", len(path)),
                               reason=CONSISTENCY_FAILED)
    return fr, sr


def _count_message(kind: str, count: int) -> str:
    return f"{kind} proof has the wrong number of hashes ({count}) for the tree sizes given"
