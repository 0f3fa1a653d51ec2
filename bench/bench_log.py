"""The transparency log's costs: appends per second, proof sizes and proof times.

    .venv/bin/python bench/bench_log.py [--naive 256 1024 4096] [--appends 1000000]
                                        [--compact-only 10000000] [--repeat 3]

Tables (best of ``--repeat`` passes where timed, so noise from other processes inflates nothing):

1. **Appends with a root after each**, incremental (:class:`CompactRange`: append, then ``root()``)
   against the naive baseline that rehashes the whole tree from its leaf hashes after every
   append (RFC 9162's MTH, O(n) per append), growing a log to each ``--naive`` size in one run.
2. **Appends at scale**: :class:`CompactRange` alone (the O(log n) state a database row holds) and
   :class:`MemoryNodeStore` (which also keeps every perfect node, ~64 bytes per leaf), growing
   to ``--appends`` leaves; ``--compact-only`` adds a compact-range-only run (no node storage:
   10**7 leaves of nodes would take 640 MB).
3. **Proof sizes** at 10**6 and 10**7 leaves from the tree's shape (hashes x 32 bytes): inclusion
   for the first, middle and last leaf and the worst case, consistency from a few old sizes.
4. **Proof times** in the ``--appends``-leaf store: make a proof (batch node read + folds) and
   verify it; sign and verify a checkpoint.
5. **Appends through storage** (``--storage`` leaves; 0 skips): the log's tables in a SQLite file
   (or ``--database URL``, e.g. a PostgreSQL test database), one or ten leaves per write
   transaction, and an inclusion proof read from the stored nodes.
Leaf hashes come from a pool of 65536 precomputed ones: their values do not change the cost.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tables import print_table

from rng_service.crypto.keys import SigningKey
from rng_service.log import (
    DEFAULT_ORIGIN,
    Checkpoint,
    CompactRange,
    MemoryNodeStore,
    checkpoint_verifier,
    consistency_proof,
    consistency_ranges,
    inclusion_proof,
    inclusion_ranges,
    leaf_hash,
    node_hash,
    root_at,
    sign_checkpoint,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
)
from rng_service.service.ports import LeafKind, NewLeaf, Storage, UnitOfWork
from rng_service.storage import open_storage

POOL = [leaf_hash(i.to_bytes(4, "big")) for i in range(1 << 16)]
MASK = (1 << 16) - 1


def naive_root(leaves: list[bytes], begin: int, end: int) -> bytes:
    """RFC 9162 MTH by recursion over all the leaves: the baseline that rehashes everything."""
    n = end - begin
    if n == 1:
        return leaves[begin]
    k = 1 << ((n - 1).bit_length() - 1)
    return node_hash(naive_root(leaves, begin, begin + k), naive_root(leaves, begin + k, end))


def grow_naive(size: int) -> float:
    leaves: list[bytes] = []
    start = time.perf_counter()
    for i in range(size):
        leaves.append(POOL[i & MASK])
        naive_root(leaves, 0, len(leaves))
    return time.perf_counter() - start


def grow_incremental(size: int, *, with_root: bool) -> float:
    cr = CompactRange()
    start = time.perf_counter()
    for i in range(size):
        cr.append(POOL[i & MASK])
        if with_root:
            cr.root()
    return time.perf_counter() - start


def grow_store(size: int) -> tuple[float, MemoryNodeStore]:
    store = MemoryNodeStore()
    start = time.perf_counter()
    for i in range(size):
        store.append(POOL[i & MASK])
    return time.perf_counter() - start, store


def best(repeat: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeat))


def per_second(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}"


def naive_table(sizes: list[int], repeat: int) -> None:
    print("\n## 1. Appends, each followed by the root (appends/s)")
    rows = []
    for size in sizes:
        naive = best(repeat, partial(grow_naive, size))
        incremental = best(repeat, partial(grow_incremental, size, with_root=True))
        rows.append([f"{size:,}", per_second(size, naive), per_second(size, incremental),
                     f"{naive / incremental:,.0f}x"])
    print_table(("leaves", "naive rehash", "compact range", "speed-up"), rows)


def scale_table(appends: int, compact_only: int, repeat: int) -> MemoryNodeStore:
    print("\n## 2. Appends at scale (appends/s, growing an empty log)")
    rows = []
    compact = best(repeat, lambda: grow_incremental(appends, with_root=False))
    store_time, store = grow_store(appends)
    rows.append([f"{appends:,}", per_second(appends, compact), per_second(appends, store_time),
                 f"{store.node_count:,}", f"{store.node_count * 32 / 2**20:,.0f} MiB",
                 f"{len(store.compact_range().to_bytes())} B"])
    if compact_only:
        seconds = grow_incremental(compact_only, with_root=False)
        cr_bytes = 9 + 32 * compact_only.bit_count()
        nodes = 2 * compact_only - compact_only.bit_count()
        rows.append([f"{compact_only:,}", per_second(compact_only, seconds), "(not run)",
                     f"{nodes:,}", f"{nodes * 32 / 2**20:,.0f} MiB", f"{cr_bytes} B"])
    print_table(("leaves", "compact range", "+ node store", "nodes", "node bytes", "state row"),
                rows)
    return store


def proof_size_table() -> None:
    print("\n## 3. Proof sizes by tree shape (hashes / bytes)")
    rows = []
    for n in (10**6, 10**7):
        worst = (n - 1).bit_length()  # a leaf under the left perfect subtree of the deepest split
        assert worst == len(inclusion_ranges(0, n))
        cells = [f"{n:,}"]
        for i in (0, n // 2, n - 1):
            count = len(inclusion_ranges(i, n))
            cells.append(f"{count} / {count * 32} B")
        cells.append(f"{worst} / {worst * 32} B")
        for m in (1, n // 2, n - 1000):
            count = len(consistency_ranges(m, n))
            cells.append(f"{count} / {count * 32} B")
        rows.append(cells)
    print_table(("leaves", "incl. first", "incl. middle", "incl. last", "incl. max",
                 "cons. from 1", "cons. from n/2", "cons. from n-1000"), rows)


def timed_us(repeat: int, count: int, run: Callable[[], object]) -> float:
    def once() -> float:
        start = time.perf_counter()
        for _ in range(count):
            run()
        return time.perf_counter() - start
    return best(repeat, once) / count * 1e6


def proof_time_table(store: MemoryNodeStore, repeat: int) -> None:
    n, key = store.size, SigningKey.generate()
    root, index, old = store.root(), n // 3, n // 2 + n // 7 + 1
    old_root = root_at(store, old)
    incl = inclusion_proof(store, index, n)
    cons = consistency_proof(store, old, n)
    leaf = POOL[index & MASK]
    note = sign_checkpoint(Checkpoint(DEFAULT_ORIGIN, n, root), key)
    trusted = [checkpoint_verifier(key.public_key)]
    cp = Checkpoint(DEFAULT_ORIGIN, n, root)
    rows = [
        ["inclusion proof: make", f"{len(incl)}",
         f"{timed_us(repeat, 2000, lambda: inclusion_proof(store, index, n)):.1f}"],
        ["inclusion proof: verify", f"{len(incl)}",
         f"{timed_us(repeat, 2000, lambda: verify_inclusion(leaf, index, n, incl, root)):.1f}"],
        ["consistency proof: make", f"{len(cons)}",
         f"{timed_us(repeat, 2000, lambda: consistency_proof(store, old, n)):.1f}"],
        ["consistency proof: verify", f"{len(cons)}",
         f"{timed_us(repeat, 2000, lambda: verify_consistency(old, n, cons, old_root, root)):.1f}"],
        ["root of a past size", "-", f"{timed_us(repeat, 2000, lambda: root_at(store, old)):.1f}"],
        ["checkpoint: sign", "-", f"{timed_us(repeat, 500, lambda: sign_checkpoint(cp, key)):.1f}"],
        ["checkpoint: parse + verify", "-",
         f"{timed_us(repeat, 500, lambda: verify_checkpoint(note, trusted)):.1f}"],
    ]
    print(f"\n## 4. Proof and checkpoint times at {n:,} leaves (µs per call)")
    print_table(("operation", "hashes", "µs"), rows)


class _Nodes:
    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def get_nodes(self, ids: list) -> list[bytes]:  # type: ignore[type-arg]
        return self.uow.get_log_nodes("default", ids)


def storage_appends(storage: Storage, count: int, per_transaction: int, tag: str) -> float:
    key = NewLeaf(LeafKind.KEY, "ed25519:" + "0" * 32, b"key")
    start = time.perf_counter()
    for t in range(count // per_transaction):
        with storage.transaction() as uow:
            for i in range(per_transaction):
                ident = f"{tag}-{t}-{i}"
                uow.append_leaf("default", NewLeaf(LeafKind.SHOE_COMMITMENT, ident,
                                                   ident.encode()), prerequisite=key)
    return time.perf_counter() - start


def storage_table(count: int, database: str | None, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        storage = open_storage(database or str(Path(tmp) / "bench.db"))
        try:
            rows = []
            for per in (1, 10):
                seconds = storage_appends(storage, count, per, f"x{per}")
                rows.append([f"{per} per transaction", per_second(count, seconds)])
            with storage.snapshot() as uow:
                size = uow.log_size("default")
                nodes = _Nodes(uow)
                micros = timed_us(repeat, 200, lambda: inclusion_proof(nodes, size // 3, size))
            rows.append([f"inclusion proof read at {size:,} leaves", f"{micros:.0f} µs"])
        finally:
            storage.close()
    print(f"\n## 5. Appends through storage ({storage.describe()}; appends/s)")
    print_table(("what", "rate"), rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--naive", type=int, nargs="+", default=[256, 1024, 4096],
                        help="log sizes for the naive-rehash comparison")
    parser.add_argument("--appends", type=int, default=10**6,
                        help="leaves appended for the scale table and the proof times")
    parser.add_argument("--compact-only", type=int, default=10**7,
                        help="leaves for a compact-range-only run (0: skip)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--storage", type=int, default=2000,
                        help="leaves appended through storage (0: skip)")
    parser.add_argument("--database", help="database for the storage table (default: a "
                                           "temporary SQLite file)")
    args = parser.parse_args()
    print(f"# Python {platform.python_version()} on {platform.machine()}")
    naive_table(args.naive, args.repeat)
    store = scale_table(args.appends, args.compact_only, args.repeat)
    proof_size_table()
    proof_time_table(store, args.repeat)
    if args.storage:
        storage_table(args.storage, args.database, args.repeat)


if __name__ == "__main__":
    main()
