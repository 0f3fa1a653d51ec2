"""Inclusion and consistency proofs: made as RFC 9162 says, accepted only when they prove it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from log_helpers import VECTORS, RefTree, entries

from rng_service.core.errors import FairshoeError, IntegrityFailure, InvalidInput, NotFound
from rng_service.log import (
    EMPTY_ROOT,
    MemoryNodeStore,
    NodeID,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_at,
    verify_consistency,
    verify_inclusion,
)

LEAVES = [bytes.fromhex(x) for x in VECTORS["leaves"]]
ROOTS = [bytes.fromhex(x) for x in VECTORS["roots"]]
EXHAUSTIVE = 64  # every (index, size) and (old, new) pair up to this size
BIG = 2048  # hypothesis draws sizes up to this
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")


def build(items: Sequence[bytes]) -> MemoryNodeStore:
    store = MemoryNodeStore()
    for entry in items:
        store.append_entry(entry)
    return store


@pytest.fixture(scope="module")
def small() -> tuple[MemoryNodeStore, RefTree]:
    return build(entries(EXHAUSTIVE)), RefTree(entries(EXHAUSTIVE))


BIG_STORE = build(entries(BIG))
BIG_ROOTS = [root_at(BIG_STORE, n) for n in range(BIG + 1)]
REFERENCE = build(LEAVES)


# --- known answers --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", VECTORS["inclusion"], ids=lambda c: f"{c['index']}-of-{c['size']}")
def test_known_inclusion_proofs(case: dict[str, object]) -> None:
    index, size = case["index"], case["size"]
    assert isinstance(index, int) and isinstance(size, int) and isinstance(case["proof"], list)
    want = [bytes.fromhex(h) for h in case["proof"]]
    assert inclusion_proof(REFERENCE, index, size) == want
    verify_inclusion(leaf_hash(LEAVES[index]), index, size, want, ROOTS[size])


@pytest.mark.parametrize("case", VECTORS["consistency"], ids=lambda c: f"{c['old']}-to-{c['new']}")
def test_known_consistency_proofs(case: dict[str, object]) -> None:
    old, new = case["old"], case["new"]
    assert isinstance(old, int) and isinstance(new, int) and isinstance(case["proof"], list)
    want = [bytes.fromhex(h) for h in case["proof"]]
    assert consistency_proof(REFERENCE, old, new) == want
    verify_consistency(old, new, want, ROOTS[old], ROOTS[new])


# --- against the recursive reference, exhaustively ------------------------------------------------


def test_inclusion_proofs_are_rfc_paths(small: tuple[MemoryNodeStore, RefTree]) -> None:
    store, ref = small
    for size in range(1, EXHAUSTIVE + 1):
        root = ref.mth(0, size)
        for index in range(size):
            proof = inclusion_proof(store, index, size)
            assert proof == ref.path(index, 0, size), (index, size)
            verify_inclusion(leaf_hash(ref.entries[index]), index, size, proof, root)


def test_consistency_proofs_are_rfc_proofs(small: tuple[MemoryNodeStore, RefTree]) -> None:
    store, ref = small
    for new in range(1, EXHAUSTIVE + 1):
        for old in range(1, new + 1):
            proof = consistency_proof(store, old, new)
            assert proof == ref.proof(old, new), (old, new)
            verify_consistency(old, new, proof, ref.mth(0, old), ref.mth(0, new))


# --- what must not verify (the probes of transparency-dev/merkle's verify_test.go) ----------------


def inclusion_probes(index: int, size: int, proof: list[bytes], root: bytes, leaf: bytes
                     ) -> list[tuple[str, tuple[object, ...]]]:
    probes: list[tuple[str, tuple[object, ...]]] = [
        ("index - 1", (leaf, index - 1, size, proof, root)),
        ("index + 1", (leaf, index + 1, size, proof, root)),
        ("index ^ 2", (leaf, index ^ 2, size, proof, root)),
        ("size * 2", (leaf, index, size * 2, proof, root)),
        ("size // 2", (leaf, index, size // 2, proof, root)),
        ("wrong leaf", (leaf_hash(b"WrongLeaf"), index, size, proof, root)),
        ("empty root", (leaf, index, size, proof, EMPTY_ROOT)),
        ("other root", (leaf, index, size, proof, SOME_HASH)),
        ("trailing root", (leaf, index, size, [*proof, root], root)),
        ("preceding root", (leaf, index, size, [root, *proof], root)),
        ("trailing garbage", (leaf, index, size, [*proof, b""], root)),
    ]
    for i in range(len(proof)):
        flipped = [*proof]
        flipped[i] = bytes([proof[i][0] ^ 8]) + proof[i][1:]
        probes.append((f"proof[{i}] bit 3", (leaf, index, size, flipped, root)))
    if proof:
        probes.append(("removed last", (leaf, index, size, proof[:-1], root)))
    if len(proof) > 1:
        probes.append(("inserted", (leaf, index, size, [proof[0], SOME_HASH, *proof[1:]], root)))
    return probes


def consistency_probes(old: int, new: int, proof: list[bytes], root1: bytes, root2: bytes
                       ) -> list[tuple[str, tuple[object, ...]]]:
    probes: list[tuple[str, tuple[object, ...]]] = [
        ("old - 1", (old - 1, new, proof, root1, root2)),
        ("old + 1", (old + 1, new, proof, root1, root2)),
        ("old ^ 2", (old ^ 2, new, proof, root1, root2)),
        ("new * 2", (old, new * 2, proof, root1, root2)),
        ("new // 2", (old, new // 2, proof, root1, root2)),
        ("wrong root1", (old, new, proof, SOME_HASH, root2)),
        ("wrong root2", (old, new, proof, root1, SOME_HASH)),
        ("swapped roots", (old, new, proof, root2, root1)),
        ("empty proof", (old, new, [], root1, root2)),
        ("trailing root1", (old, new, [*proof, root1], root1, root2)),
        ("trailing root2", (old, new, [*proof, root2], root1, root2)),
        ("preceding root1", (old, new, [root1, *proof], root1, root2)),
        ("preceding root2", (old, new, [root2, *proof], root1, root2)),
        ("preceding proof[0]", (old, new, [proof[0], *proof], root1, root2)),
        ("truncated", (old, new, proof[:-1], root1, root2)),
    ]
    for i in range(len(proof)):
        flipped = [*proof]
        flipped[i] = bytes([proof[i][0] ^ 16]) + proof[i][1:]
        probes.append((f"proof[{i}] bit 4", (old, new, flipped, root1, root2)))
    return probes


def accepted(check: Callable[..., None], probes: list[tuple[str, tuple[object, ...]]]
             ) -> list[str]:
    """The probes ``check`` wrongly accepts: any FairshoeError is a rejection, nothing else is."""
    wrong = []
    for name, args in probes:
        try:
            check(*args)
        except FairshoeError:
            continue
        wrong.append(name)
    return wrong


def test_corrupted_inclusion_proofs_fail(small: tuple[MemoryNodeStore, RefTree]) -> None:
    store, ref = small
    for size in range(1, 33):
        for index in range(size):
            proof = inclusion_proof(store, index, size)
            probes = inclusion_probes(index, size, proof, ref.mth(0, size),
                                      leaf_hash(ref.entries[index]))
            assert accepted(verify_inclusion, probes) == [], (index, size)


def test_corrupted_consistency_proofs_fail(small: tuple[MemoryNodeStore, RefTree]) -> None:
    store, ref = small
    for new in range(2, 33):
        for old in range(1, new):
            proof = consistency_proof(store, old, new)
            probes = consistency_probes(old, new, proof, ref.mth(0, old), ref.mth(0, new))
            assert accepted(verify_consistency, probes) == [], (old, new)


# --- properties over bigger trees -----------------------------------------------------------------

sizes = st.integers(min_value=1, max_value=BIG)


@st.composite
def index_and_size(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(sizes)
    return draw(st.integers(0, size - 1)), size


@st.composite
def old_and_new(draw: st.DrawFn) -> tuple[int, int]:
    new = draw(sizes)
    return draw(st.integers(0, new)), new


@settings(max_examples=300, deadline=None)
@given(index_and_size(), st.data())
def test_every_inclusion_proof_verifies_and_any_flip_fails(case: tuple[int, int],
                                                           data: st.DataObject) -> None:
    index, size = case
    leaf, root = leaf_hash(index.to_bytes(4, "big")), BIG_ROOTS[size]
    proof = inclusion_proof(BIG_STORE, index, size)
    verify_inclusion(leaf, index, size, proof, root)
    if proof:
        i = data.draw(st.integers(0, len(proof) - 1), label="element")
        byte = data.draw(st.integers(0, 31), label="byte")
        bad = [*proof]
        bad[i] = bad[i][:byte] + bytes([bad[i][byte] ^ 0x01]) + bad[i][byte + 1 :]
        with pytest.raises(IntegrityFailure):
            verify_inclusion(leaf, index, size, bad, root)
    other = data.draw(st.integers(0, size - 1).filter(lambda j: j != index), label="other")
    with pytest.raises(IntegrityFailure):  # the proof of one leaf is no proof for another index
        verify_inclusion(leaf, other, size, proof, root)


@settings(max_examples=300, deadline=None)
@given(old_and_new(), st.data())
def test_every_consistency_proof_verifies_and_any_flip_fails(case: tuple[int, int],
                                                             data: st.DataObject) -> None:
    old, new = case
    proof = consistency_proof(BIG_STORE, old, new)
    verify_consistency(old, new, proof, BIG_ROOTS[old], BIG_ROOTS[new])
    if proof:
        i = data.draw(st.integers(0, len(proof) - 1), label="element")
        byte = data.draw(st.integers(0, 31), label="byte")
        bad = [*proof]
        bad[i] = bad[i][:byte] + bytes([bad[i][byte] ^ 0x80]) + bad[i][byte + 1 :]
        with pytest.raises(IntegrityFailure):
            verify_consistency(old, new, bad, BIG_ROOTS[old], BIG_ROOTS[new])
    if 0 < old < new:
        with pytest.raises(IntegrityFailure):  # a fork: same sizes, another old tree
            verify_consistency(old, new, proof, SOME_HASH, BIG_ROOTS[new])


# --- trivial cases and hostile input --------------------------------------------------------------


def test_trivial_consistency() -> None:
    root = leaf_hash(b"x")
    verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    verify_consistency(0, 5, [], EMPTY_ROOT, SOME_HASH)
    verify_consistency(1, 1, [], root, root)
    for args in [
        (1, 1, [], root, SOME_HASH),  # one size, two roots: a fork
        (0, 5, [], SOME_HASH, SOME_HASH),  # the empty tree has one root
        (0, 0, [EMPTY_ROOT], EMPTY_ROOT, EMPTY_ROOT),  # nothing to prove, yet a proof
        (1, 1, [root], root, root),
        (1, 2, [], root, SOME_HASH),  # something to prove, and no proof
    ]:
        with pytest.raises(IntegrityFailure):
            verify_consistency(*args)


GOOD = leaf_hash(b"x")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((GOOD, 0, 0, [], GOOD), "tree_size"),
        ((GOOD, 1, 1, [], GOOD), "leaf_index"),
        ((GOOD, -1, 1, [], GOOD), "leaf_index"),
        ((GOOD, 0, 2**64, [], GOOD), "tree_size"),
        ((GOOD, True, 2, [GOOD], GOOD), "leaf_index"),
        ((GOOD, 0, 2.0, [GOOD], GOOD), "tree_size"),
        ((GOOD[:31], 0, 1, [], GOOD), "leaf_hash"),
        ((GOOD, 0, 1, [], GOOD + b"\x00"), "root_hash"),
        (("x" * 32, 0, 1, [], GOOD), "leaf_hash"),
        ((GOOD, 0, 2, [GOOD[:16]], GOOD), "proof[0]"),
        ((GOOD, 0, 2, [None], GOOD), "proof[0]"),
        ((GOOD, 0, 2, GOOD, GOOD), "proof"),
        ((GOOD, 0, 2, None, GOOD), "proof"),
        ((GOOD, 0, 2, [GOOD] * 66, GOOD), "proof"),
    ],
)
def test_malformed_inclusion_input_is_invalid_input(args: tuple[object, ...], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        verify_inclusion(*args)  # type: ignore[arg-type]
    assert err.value.field == field


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((2, 1, [], GOOD, GOOD), "old_size"),
        ((-1, 1, [], GOOD, GOOD), "old_size"),
        ((1, 2**64, [GOOD], GOOD, GOOD), "new_size"),
        ((1, 2, [GOOD], GOOD[:1], GOOD), "old_root"),
        ((1, 2, [GOOD], GOOD, b""), "new_root"),
        ((1, 2, [b"\x00" * 33], GOOD, GOOD), "proof[0]"),
        ((1, 2, "abc", GOOD, GOOD), "proof"),
        ((1, 2, [GOOD] * 100, GOOD, GOOD), "proof"),
    ],
)
def test_malformed_consistency_input_is_invalid_input(args: tuple[object, ...],
                                                      field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        verify_consistency(*args)  # type: ignore[arg-type]
    assert err.value.field == field


def test_huge_sizes_are_handled_without_work() -> None:
    # A hostile size near 2**64 must fail on the proof length, not loop or overflow.
    with pytest.raises(IntegrityFailure):
        verify_inclusion(GOOD, 2**63, 2**64 - 1, [GOOD] * 3, GOOD)
    with pytest.raises(IntegrityFailure):
        verify_consistency(2**63 - 1, 2**64 - 1, [GOOD] * 3, GOOD, GOOD)


def test_proofs_need_the_nodes_to_exist() -> None:
    with pytest.raises(NotFound):
        inclusion_proof(REFERENCE, 0, 9)
    with pytest.raises(InvalidInput):
        inclusion_proof(REFERENCE, 8, 8)
    with pytest.raises(InvalidInput):
        consistency_proof(REFERENCE, 5, 4)


class LyingStore:
    """A node store returning the wrong number or size of hashes."""

    def __init__(self, answer: list[bytes]) -> None:
        self.answer = answer

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        return self.answer


@pytest.mark.parametrize("answer", [[], [bytes(31)], [bytes(32)] * 9])
def test_a_faulty_store_is_an_integrity_failure(answer: list[bytes]) -> None:
    with pytest.raises(IntegrityFailure):
        inclusion_proof(LyingStore(answer), 0, 8)


class DriverStore:
    """A store whose driver returns memoryviews, as psycopg does for bytea."""

    def __init__(self, inner: MemoryNodeStore) -> None:
        self.inner = inner

    def get_nodes(self, ids: Sequence[NodeID]) -> list[memoryview]:
        return [memoryview(h) for h in self.inner.get_nodes(ids)]


def test_bytes_like_answers_are_accepted() -> None:
    assert inclusion_proof(DriverStore(REFERENCE), 5, 8) == inclusion_proof(REFERENCE, 5, 8)
    assert root_at(DriverStore(REFERENCE), 8) == ROOTS[8]


def test_proofs_for_past_sizes_come_from_the_same_nodes() -> None:
    # A proof against an old checkpoint must not change as the log grows.
    small, grown = build(entries(100)), BIG_STORE
    assert inclusion_proof(small, 17, 100) == inclusion_proof(grown, 17, 100)
    assert consistency_proof(small, 37, 100) == consistency_proof(grown, 37, 100)


def test_all_inclusion_proofs_at_once_are_each_leafs_proof() -> None:
    # every size up to 70 (perfect trees, one leaf over, ragged right borders) and each size's
    # earlier trees: the bulk descent gives exactly the one-at-a-time proofs
    store = MemoryNodeStore()
    for n in range(1, 71):
        store.append_entry(n.to_bytes(2, "big"))
        for size in {n, n // 2 or 1, n - 1 or 1}:
            proofs = store.inclusion_proofs(size)
            assert proofs == [inclusion_proof(store, i, size) for i in range(size)]
            root = root_at(store, size)
            for i in (0, size - 1):
                verify_inclusion(leaf_hash((i + 1).to_bytes(2, "big")), i, size, proofs[i], root)
    assert store.inclusion_proofs(0) == []
    with pytest.raises(NotFound):
        store.inclusion_proofs(71)
