"""The transparency log's merge delay on PostgreSQL: how long a committed leaf waits in the queue
(``log_queue``) before a sequencer merges it, against the sequencer's interval, in one run.

    .venv/bin/python bench/bench_merge_delay.py [--writers 1,4,16] [--seconds 3] [--pause-ms 10]

One ``PostgresStorage`` (one replica, its own background sequencer, as ``fairshoe serve`` runs
it) on the tests' throwaway PostgreSQL (tests/support/pg_server.py: ``fsync=on``,
``synchronous_commit=on``), a fresh database per row. ``--writers`` threads of the same process
each commit a transaction logging one leaf, then pause ``--pause-ms``; so the sequencer's thread
shares the process's GIL with that many busy threads, as it shares it with a server's workers.
A sampler on its own connection reads the queue every 5 ms: a leaf's delay is from the first
sample that sees it (it committed) to the first that does not (it was merged), to within the
sampler's actual interval (printed). The bound (rng_service/storage/sequencer.py) is the
interval plus two passes; ``p99 / interval`` is the yardstick's ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg
from tables import print_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.pg_server import started_server

from rng_service.service.ports import LeafKind, NewLeaf
from rng_service.storage.postgres import MERGE_INTERVAL_S, PostgresStorage

COLUMNS = ("writers", "leaves/s", "delay p50 ms", "p99 ms", "max ms", "sampled every ms",
           "interval ms", "p99 / interval")
SAMPLE_SECONDS = 0.005
KEY = NewLeaf(LeafKind.KEY, "ed25519:bench", b'{"bench":"key"}')


def _quantile(values: Sequence[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(url: str, writers: int, seconds: float, pause: float) -> list[str]:
    storage = PostgresStorage(url, max_size=writers + 1)
    end = time.perf_counter() + seconds
    written = [0] * writers

    def write(k: int) -> None:
        i = 0
        while time.perf_counter() < end:
            with storage.transaction() as uow:
                uow.append_leaf("default", NewLeaf(LeafKind.SHOE_COMMITMENT, f"w{k}-{i}",
                                                   f"w{k}-{i}".encode()), prerequisite=KEY)
            i += 1
            time.sleep(pause)
        written[k] = i

    threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
    first_seen: dict[int, float] = {}
    delays: list[float] = []
    samples = 0
    began = time.perf_counter()
    for t in threads:
        t.start()
    with psycopg.connect(url, autocommit=True) as conn:
        while any(t.is_alive() for t in threads) or first_seen:
            now = time.perf_counter()
            queued = {int(seq) for seq, in conn.execute("SELECT seq FROM log_queue").fetchall()}
            samples += 1
            for seq in queued:
                first_seen.setdefault(seq, now)
            for seq in [s for s in first_seen if s not in queued]:
                delays.append(now - first_seen.pop(seq))
            time.sleep(SAMPLE_SECONDS)
    elapsed = time.perf_counter() - began
    storage.close()
    delays.sort()
    p99 = _quantile(delays, 0.99)
    return [str(writers), f"{sum(written) / seconds:.0f}", f"{_quantile(delays, 0.5) * 1000:.0f}",
            f"{p99 * 1000:.0f}", f"{delays[-1] * 1000:.0f}", f"{elapsed * 1000 / samples:.0f}",
            f"{MERGE_INTERVAL_S * 1000:.0f}", f"{p99 / MERGE_INTERVAL_S:.1f}x"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pause-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    pg = started_server()
    try:
        rows = [measure(pg.url(pg.create_database()), int(n), args.seconds, args.pause_ms / 1000)
                for n in args.writers.split(",")]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.seconds:g} s per row, each writer pausing {args.pause_ms:g} ms between "
              f"commits; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
              f"{load}; PostgreSQL fsync=on, synchronous_commit=on on the same machine")
        print_table(COLUMNS, rows)
    finally:
        pg.remove()


if __name__ == "__main__":
    main()
