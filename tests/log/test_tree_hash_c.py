"""The leaf and node hashes in C (``_tree_hash.c``) are the Python reference's, on random input
of any length (hypothesis), on RFC 9162's empty entry, and on every bytes-like value the
reference takes; what the reference refuses, C refuses too."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.log import hashing


def test_the_extension_is_built() -> None:
    assert hashing.leaf_hash is not hashing.leaf_hash_reference
    assert hashing.node_hash is not hashing.node_hash_reference


@settings(max_examples=500, deadline=None)
@given(entry=st.binary(max_size=5000))
def test_leaf_hash_is_the_reference(entry: bytes) -> None:
    assert hashing.leaf_hash(entry) == hashing.leaf_hash_reference(entry)
    assert hashing.leaf_hash(bytearray(entry)) == hashing.leaf_hash_reference(entry)
    assert hashing.leaf_hash(memoryview(entry)) == hashing.leaf_hash_reference(entry)


@settings(max_examples=500, deadline=None)
@given(left=st.binary(min_size=0, max_size=64), right=st.binary(min_size=0, max_size=64))
def test_node_hash_is_the_reference(left: bytes, right: bytes) -> None:
    assert hashing.node_hash(left, right) == hashing.node_hash_reference(left, right)
    assert hashing.node_hash(right, left) == hashing.node_hash_reference(right, left)


def test_known_answers() -> None:
    # RFC 9162 section 2.1.1: the empty entry's leaf; the prefixes keep a leaf from a node
    assert hashing.leaf_hash(b"").hex() == (
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    )
    assert hashing.node_hash(b"", b"") != hashing.leaf_hash(b"")
    assert hashing.node_hash(b"a", b"b") == hashing.node_hash_reference(b"a", b"b")


@pytest.mark.parametrize("bad", ["text", 7, None])
def test_what_the_reference_refuses_c_refuses(bad: object) -> None:
    with pytest.raises(TypeError):
        hashing.leaf_hash_reference(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hashing.leaf_hash(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hashing.node_hash(b"x", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hashing.node_hash_reference(b"x", bad)  # type: ignore[arg-type]
