"""RFC 9162 (Certificate Transparency v2) Merkle tree hashing, section 2.1.1.

The leaf and interior-node hashes carry different one-byte prefixes (0x00, 0x01), so no leaf can
ever be passed off as an interior node (second-preimage resistance); the tree of n leaves splits
at the largest power of two smaller than n, which makes every left subtree perfect.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

from rng_service.core.errors import InvalidInput

HASH_SIZE: Final = 32
LEAF_PREFIX: Final = b"\x00"
NODE_PREFIX: Final = b"\x01"
# MTH({}) = SHA-256 of the empty string (RFC 9162 section 2.1.1).
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
# Sizes and indices are uint64 on the wire (RFC 9162 and C2SP checkpoints).
MAX_TREE_SIZE: Final = 2**64 - 1


def leaf_hash_reference(entry: bytes) -> bytes:
    """The hash of one log entry: SHA-256(0x00 || entry). The reference of the C
    :func:`leaf_hash` (tests/log/test_tree_hash_c.py).

    >>> leaf_hash_reference(b"").hex()
    '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d'
    """
    return hashlib.sha256(LEAF_PREFIX + entry).digest()


def node_hash_reference(left: bytes, right: bytes) -> bytes:
    """The hash of an interior node: SHA-256(0x01 || left || right). The reference of the C
    :func:`node_hash`."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


leaf_hash: Callable[[bytes], bytes]
node_hash: Callable[[bytes, bytes], bytes]
try:  # in C (_tree_hash.c): one call, no prefixed copy of the entry, no hashlib object
    from rng_service.log._tree_hash import leaf_hash, node_hash
except ImportError:  # a build without the extension
    leaf_hash, node_hash = leaf_hash_reference, node_hash_reference


def empty_root() -> bytes:
    """The root of the empty tree, SHA-256 of nothing.

    >>> empty_root().hex()
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    """
    return EMPTY_ROOT


def check_hash(value: object, field: str) -> bytes:
    """``value`` if it is a 32-byte hash, else :class:`InvalidInput` naming ``field``."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidInput(field, f"must be {HASH_SIZE} bytes, got {type(value).__name__}")
    data = bytes(value)
    if len(data) != HASH_SIZE:
        raise InvalidInput(field, f"must be {HASH_SIZE} bytes, got {len(data)}")
    return data


def check_size(value: object, field: str, *, low: int = 0) -> int:
    """``value`` if it is an int in [low, 2**64 - 1], else :class:`InvalidInput` naming ``field``.

    ``bool`` is refused although it is an ``int``: ``True`` as a tree size is a caller's bug.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= MAX_TREE_SIZE:
        raise InvalidInput(field, f"must be in [{low}, 2**64 - 1], got {value}")
    return value
