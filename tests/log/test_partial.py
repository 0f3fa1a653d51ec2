"""PartialTree: from the compact range of a log's first leaves, the leaves after them and the old
proofs of some first leaves, the proofs in the grown tree are exactly those of the whole log."""

from __future__ import annotations

import pytest

from rng_service.core.errors import IntegrityFailure, NotFound
from rng_service.log import MemoryNodeStore, compact_range_at, consistency_proof, inclusion_proof
from rng_service.log.partial import PartialTree
from rng_service.log.tree import NodeID


@pytest.fixture(scope="module")
def full() -> MemoryNodeStore:
    store = MemoryNodeStore()
    for i in range(70):
        store.append_entry(i.to_bytes(2, "big"))
    return store


def grown(full: MemoryNodeStore, old: int, new: int) -> PartialTree:
    part = PartialTree(compact_range_at(full, old))
    for i in range(old, new):
        part.append(full.get_node(NodeID(0, i)))
    return part


def test_proofs_in_the_grown_tree_are_the_whole_logs(full: MemoryNodeStore) -> None:
    for old in range(0, 40):
        for new in range(old, 70, 3):
            part = grown(full, old, new)
            assert part.root() == compact_range_at(full, new).root()
            for leaf in range(old):
                part.add_proof(leaf, full.get_node(NodeID(0, leaf)),
                               inclusion_proof(full, leaf, old))
            for leaf in range(new):
                assert part.inclusion_proof(leaf) == inclusion_proof(full, leaf, new)
            if old:
                assert consistency_proof(part, old, new) == consistency_proof(full, old, new)


def test_an_old_leaf_without_its_proof_cannot_be_proven(full: MemoryNodeStore) -> None:
    part = grown(full, 13, 30)
    with pytest.raises(NotFound):
        part.inclusion_proof(2)
    assert part.inclusion_proof(12) == inclusion_proof(full, 12, 30)  # a frontier node's leaf


def test_a_proof_that_does_not_hold_is_refused(full: MemoryNodeStore) -> None:
    part = grown(full, 13, 30)
    proof = inclusion_proof(full, 5, 13)
    with pytest.raises(IntegrityFailure):
        part.add_proof(5, full.get_node(NodeID(0, 6)), proof)  # another leaf's hash
    with pytest.raises(IntegrityFailure):
        part.add_proof(5, full.get_node(NodeID(0, 5)), [bytes(32), *proof[1:]])
