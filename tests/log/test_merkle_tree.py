"""Tree hashes: the compact range and the node store against RFC 9162's MTH and known vectors."""

from __future__ import annotations

import json

import pytest
from log_helpers import VECTORS, RefTree, entries, ref_leaf

from rng_service.core.errors import IntegrityFailure, InvalidInput, NotFound
from rng_service.log import (
    EMPTY_ROOT,
    CompactRange,
    MemoryNodeStore,
    NodeID,
    compact_range_at,
    leaf_hash,
    node_hash,
    range_nodes,
    root_at,
)

LEAVES = [bytes.fromhex(x) for x in VECTORS["leaves"]]
ROOTS = [bytes.fromhex(x) for x in VECTORS["roots"]]
MAX_SIZE = 300


@pytest.fixture(scope="module")
def store() -> MemoryNodeStore:
    s = MemoryNodeStore()
    for entry in entries(MAX_SIZE):
        s.append_entry(entry)
    return s


@pytest.fixture(scope="module")
def ref() -> RefTree:
    return RefTree(entries(MAX_SIZE))


def test_hash_primitives_match_the_rfc_prefixes() -> None:
    assert leaf_hash(b"").hex() == ROOTS[1].hex()  # the one-leaf tree of "" is its leaf hash
    assert ROOTS[0] == EMPTY_ROOT
    assert node_hash(b"a" * 32, b"b" * 32) != node_hash(b"b" * 32, b"a" * 32)
    assert leaf_hash(b"x") == ref_leaf(b"x")


def test_known_roots_for_every_size_of_the_reference_tree() -> None:
    cr = CompactRange()
    assert cr.root() == ROOTS[0]
    for size, entry in enumerate(LEAVES, start=1):
        cr.append(leaf_hash(entry))
        assert cr.root() == ROOTS[size], size


def test_compact_range_is_the_known_right_edge() -> None:
    # transparency-dev/merkle testonly CompactTrees(): the edge after each append
    nodes = [[bytes.fromhex(h) for h in level] for level in VECTORS["node_hashes"]]
    cr = CompactRange()
    for size, entry in enumerate(LEAVES, start=1):
        cr.append(leaf_hash(entry))
        want = [nodes[node.level][node.index] for node in range_nodes(0, size)]
        assert list(cr.hashes) == want


def test_store_keeps_every_known_node() -> None:
    store = MemoryNodeStore()
    for entry in LEAVES:
        store.append_entry(entry)
    for level, row in enumerate(VECTORS["node_hashes"]):
        for index, value in enumerate(row):
            assert store.get_node(NodeID(level, index)).hex() == value


def test_roots_for_sizes_1_to_300_match_the_recursive_mth(
    store: MemoryNodeStore, ref: RefTree
) -> None:
    cr = CompactRange()
    for size, entry in enumerate(entries(MAX_SIZE), start=1):
        cr.append(leaf_hash(entry))
        want = ref.mth(0, size)
        assert cr.root() == want, size
        assert root_at(store, size) == want, size  # past roots from the stored nodes


def test_append_visits_each_node_once_bottom_up(store: MemoryNodeStore) -> None:
    seen: list[NodeID] = []
    cr = CompactRange()
    for size, entry in enumerate(entries(MAX_SIZE), start=1):
        cr.append(leaf_hash(entry), lambda node, value: seen.append(node))
        # 2n - popcount(n) perfect nodes in a tree of n leaves: under two per append
        assert len(seen) == 2 * size - size.bit_count()
    assert len(set(seen)) == len(seen)
    assert store.node_count == len(seen)


def test_visited_hashes_are_the_stored_ones(store: MemoryNodeStore) -> None:
    cr = CompactRange()
    for entry in entries(64):
        cr.append(leaf_hash(entry), lambda node, value: assert_stored(store, node, value))


def assert_stored(store: MemoryNodeStore, node: NodeID, value: bytes) -> None:
    assert store.get_node(node) == value


@pytest.mark.parametrize("size", [0, 1, 2, 3, 7, 8, 100, 255, 256, 300])
def test_compact_range_round_trips_and_rebuilds_from_nodes(store: MemoryNodeStore,
                                                           size: int) -> None:
    cr = compact_range_at(store, size)
    assert cr.size == size and len(cr.hashes) == size.bit_count()
    assert CompactRange.from_bytes(cr.to_bytes()) == cr
    assert CompactRange.from_json(cr.to_json()) == cr
    assert len(cr.to_bytes()) == 9 + 32 * size.bit_count()
    assert cr.root() == root_at(store, size)


def test_restored_range_appends_like_the_original() -> None:
    a = CompactRange()
    for entry in entries(37):
        a.append(leaf_hash(entry))
    b = CompactRange.from_bytes(a.to_bytes())
    for entry in entries(100)[37:]:
        a.append(leaf_hash(entry))
        b.append(leaf_hash(entry))
    assert a == b and a.root() == b.root()


def test_copy_is_independent() -> None:
    a = CompactRange()
    a.append(leaf_hash(b"x"))
    b = a.copy()
    b.append(leaf_hash(b"y"))
    assert a.size == 1 and b.size == 2


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x02" + bytes(8),  # unknown format version
        b"\x01" + (1).to_bytes(8, "big"),  # size 1 without its hash
        b"\x01" + (2).to_bytes(8, "big") + bytes(64),  # one hash too many
        b"\x01" + (3).to_bytes(8, "big") + bytes(63),  # a short hash
    ],
)
def test_corrupt_stored_state_is_an_integrity_failure(data: bytes) -> None:
    with pytest.raises(IntegrityFailure):
        CompactRange.from_bytes(data)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"size": 1}',
        '{"size": 1, "hashes": []}',
        '{"size": 1, "hashes": ["zz"]}',
        '{"size": -1, "hashes": []}',
        '{"size": true, "hashes": ["' + "00" * 32 + '"]}',
        '{"size": 1, "hashes": ["' + "AA" * 32 + '"]}',
        '{"size": 0, "hashes": [], "extra": 1}',
    ],
)
def test_corrupt_json_state_is_an_integrity_failure(text: str) -> None:
    with pytest.raises(IntegrityFailure):
        CompactRange.from_json(text)


def test_json_state_is_plain() -> None:
    cr = CompactRange()
    cr.append(leaf_hash(b""))
    assert json.loads(cr.to_json()) == {"hashes": [VECTORS["roots"][1]], "size": 1}


@pytest.mark.parametrize(
    ("size", "hashes"),
    [(1, []), (0, [bytes(32)]), (-1, []), (True, [bytes(32)]), (1, [bytes(31)]), (1, ["x" * 32])],
)
def test_constructor_refuses_a_range_that_cannot_be(size: object, hashes: list[object]) -> None:
    with pytest.raises(InvalidInput):
        CompactRange(size, hashes)  # type: ignore[arg-type]


@pytest.mark.parametrize("leaf", [b"", bytes(31), bytes(33), "a" * 32, None])
def test_append_refuses_what_is_not_a_leaf_hash(leaf: object) -> None:
    with pytest.raises(InvalidInput):
        CompactRange().append(leaf)  # type: ignore[arg-type]


def test_missing_nodes_are_not_found(store: MemoryNodeStore) -> None:
    with pytest.raises(NotFound):
        store.get_node(NodeID(0, MAX_SIZE))
    with pytest.raises(NotFound):
        store.get_node(NodeID(40, 0))
    with pytest.raises(NotFound):
        root_at(store, MAX_SIZE + 1)


@pytest.mark.parametrize(("begin", "end"), [(0, 0), (0, 1), (3, 8), (5, 13), (1, 300), (64, 65)])
def test_range_nodes_cover_the_range_exactly(begin: int, end: int) -> None:
    nodes = range_nodes(begin, end)
    covered = [leaf for node in nodes for leaf in range(*node.leaves())]
    assert covered == list(range(begin, end))
    per_level = [n.level for n in nodes]
    assert all(per_level.count(level) <= 2 for level in per_level)
