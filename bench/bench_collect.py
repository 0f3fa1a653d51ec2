"""``fairshoe collect rounds``: rounds per second today against the serial collection it replaced.

Both write a real collection (signed records, reveals, commitments, the log with every proof)
into a temporary directory on the same filesystem, with a key from a temporary key store:

* ``serial``, the yardstick: ``schema.collect_rounds`` into a ``LoggedRecordWriter`` in one
  process, each file written and fsynced (with its directory) before the next: how ``collect
  rounds`` ran before it had workers;
* ``w=1``, ``w=2``: ``collect_in_workers`` with one and two workers (batches of whole shoes,
  each envelope's file written as it is signed, the collection synced once before its log).

Every collection is kept until the bench ends: on a filesystem without a journal (this VM's
ext4) a new file's inode is searched for past every inode freed nearby in the last minute or so,
so deleting one run's tens of thousands of files can make the next run's file creation dearer
(creating a file cost 20-650 µs of kernel CPU here, depending on what was deleted near it).

Runs alternate (serial, w=1, w=2, then again), so load that comes and goes touches all alike.
For each: rounds per wall second (the best of the repeats), CPU µs per round (this process and
its workers, from ``getrusage``), the cores the run got (CPU seconds per wall second), and
``2-core``: ``2 x rounds per CPU second``, what two cores would give the run when its wall time
is CPU-bound (the serial run's is not: it waits on one fsync after another). ``vs serial``
divides ``w=2``'s wall rate by the serial one's; the target (issue 21) is at least 10x the
306 rounds/s the issue measured (``w=2 vs 306``: the wall rate, which needs a quiet machine;
``2-core vs 306``: what two free cores give at the CPU per round measured); the serial
yardstick, measured in the same run, shows how fast this disk's fsyncs are today.

    .venv/bin/python bench/bench_collect.py [--games G,G] [--rounds N] [--serial-rounds N]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from game_math.rules import Rules
from rng_service.crypto.keys import KeyStore, SigningKey, key_validity
from rng_service.records.collect_workers import collect_in_workers
from rng_service.records.logged import LoggedRecordWriter
from rng_service.records.schema import collect_rounds

TARGET = 10.0
#: rounds/s of ``collect rounds`` when issue 21 was written (20,000 double-exposure rounds in 65 s)
ISSUE_RATE = 306.0


@dataclass
class Run:
    """The best wall rate of a way of collecting, and its CPU per round and cores used."""

    rate: float = 0.0
    cpu_us: float = float("inf")
    cores: float = 0.0

    def add(self, rounds: int, wall: float, cpu: float) -> None:
        if rounds / wall > self.rate:
            self.rate, self.cores = rounds / wall, cpu / wall
        self.cpu_us = min(self.cpu_us, 1e6 * cpu / rounds)


def _cpu() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(collect: Callable[[LoggedRecordWriter], int], key: SigningKey, valid_from: str,
           run: Run, parent: Path) -> None:
    out = Path(tempfile.mkdtemp(prefix="collection-", dir=parent))  # deleted when the bench ends
    cpu, started = _cpu(), time.perf_counter()
    writer = LoggedRecordWriter(out, key, valid_from=valid_from)
    rounds = collect(writer)
    writer.finish()
    run.add(rounds, time.perf_counter() - started, _cpu() - cpu)


def _serial(rules: Rules, rounds: int) -> Callable[[LoggedRecordWriter], int]:
    def collect(writer: LoggedRecordWriter) -> int:
        return collect_rounds(rules, rounds, writer, basic_strategy_action).rounds
    return collect


def _workers(rules: Rules, rounds: int, workers: int) -> Callable[[LoggedRecordWriter], int]:
    def collect(writer: LoggedRecordWriter) -> int:
        return collect_in_workers(rules, rounds, writer, basic_strategy_action,
                                  workers=workers).rounds
    return collect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="double-exposure,snap")
    parser.add_argument("--rounds", type=int, default=10_000, help="rounds per worker run")
    parser.add_argument("--serial-rounds", type=int, default=1_000, help="rounds per serial run")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", type=Path, help="where to write the collections (default: the "
                        "system's temporary directory)")
    args = parser.parse_args()
    store_dir = Path(tempfile.mkdtemp(prefix="bench-collect-keys-"))
    parent = Path(tempfile.mkdtemp(prefix="bench-collect-", dir=args.dir))
    try:
        store = KeyStore(store_dir)
        info = store.create()
        key = store.load_signing_key()
        valid_from = key_validity(info)["valid_from"]
        print(f"{'game':<16} {'serial':>8} {'w=1':>8} {'w=2':>8} {'vs serial':>9} "
              f"{'cpu us/round s/1/2':>20} {'cores s/1/2':>15} {'2-core':>8} {'2-core vs':>9} "
              f"{'w=2 vs 306':>10} {'2-core vs 306':>13}")
        for game in args.games.split(","):
            rules = game_rules(game)
            basic_strategy(rules)  # the analysis outside the timings
            runs = {name: Run() for name in ("serial", "w=1", "w=2")}
            for _ in range(args.repeat):
                _timed(_serial(rules, args.serial_rounds), key, valid_from, runs["serial"],
                       parent)
                _timed(_workers(rules, args.rounds, 1), key, valid_from, runs["w=1"], parent)
                _timed(_workers(rules, args.rounds, 2), key, valid_from, runs["w=2"], parent)
            serial, one, two = runs["serial"], runs["w=1"], runs["w=2"]
            two_core = 2e6 / two.cpu_us
            print(f"{game:<16} {serial.rate:>8,.0f} {one.rate:>8,.0f} {two.rate:>8,.0f} "
                  f"{two.rate / serial.rate:>8.1f}x "
                  f"{serial.cpu_us:>6,.0f}/{one.cpu_us:>5,.0f}/{two.cpu_us:>5,.0f}    "
                  f"{serial.cores:>4.2f}/{one.cores:>4.2f}/{two.cores:>4.2f} "
                  f"{two_core:>8,.0f} {two_core / serial.rate:>8.1f}x "
                  f"{two.rate / ISSUE_RATE:>9.1f}x {two_core / ISSUE_RATE:>12.1f}x")
        print(f"target: w=2 at least {TARGET:.0f}x the {ISSUE_RATE:.0f} rounds/s issue 21 "
              f"measured ({TARGET * ISSUE_RATE:,.0f}/s)")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(store_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
