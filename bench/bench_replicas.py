"""Replicas on one database: complete rounds per second and ``Act`` latency for one replica on
SQLite and 1, 2, ... on PostgreSQL, beside the echo baseline, in one run, with the lock waits.

    .venv/bin/python bench/bench_replicas.py [--clients 16] [--seconds 5] [--replicas 1,2,3]

On PostgreSQL a sampler reads ``pg_stat_activity`` and ``pg_locks`` every 5 ms during the
measured window: the mean number of backends waiting for a lock, that times the window per
transition (the lock-wait time a transition spends, by Little's law), the share of the
waits on the log's sequencer row (``log_state``) and the two things most waited on, and the
merge delay: how long each leaf committed but not yet sequenced (``log_queue``) stayed queued,
p99 and max, against its bound (rng_service/storage/sequencer.py).

The client is bench_service.py's (each thread a player playing complete rounds of all four games,
Act latency as the client measures it); with two replicas, thread ``i`` talks to replica
``i % 2``. PostgreSQL is the tests' throwaway server (tests/support/pg_server.py: ``fsync=on``,
``synchronous_commit=on``, started as an unprivileged user when run as root), one fresh
database per setup. Every ``fairshoe serve`` is production-like: OS-seeded shoes, full
durability, logs to a file; the replicas of a setup share one key directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import psycopg
from bench_service import (
    Clock,
    Players,
    Process,
    Result,
    Tally,
    drive,
    echo_worker,
    ms,
    start_echo,
    start_fairshoe,
    typical_act_request,
    wait_ready,
)
from tables import print_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.pg_server import started_server

from rng_service.storage.postgres import migrate

COLUMNS = ("setup", "clients", "RPC/s", "p50 ms", "p99 ms", "rounds/s",
           "lock-waiting backends", "lock wait ms/transition", "on log_state", "most waited on",
           "merge delay p99 / max ms", "sampled every ms")
#: how often the lock sampler looks at pg_stat_activity
SAMPLE_SECONDS = 0.005
#: each backend waiting for a lock, with what it waits on: the relation of its ungranted lock,
#: or (a row lock's waiter waits on the holder's transaction id, which names no relation) of
#: the tuple lock it holds meanwhile, or the lock's type (an advisory lock, a transaction id)
_WAITING = """
SELECT a.pid, COALESCE(c.relname, t.relname, l.locktype, '') FROM pg_stat_activity a
LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
LEFT JOIN pg_class c ON c.oid = l.relation
LEFT JOIN LATERAL (SELECT tc.relname FROM pg_locks tl JOIN pg_class tc ON tc.oid = tl.relation
                   WHERE tl.pid = a.pid AND tl.granted AND tl.locktype = 'tuple' LIMIT 1) t
    ON TRUE
WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid()
"""
#: the leaves committed and not yet sequenced (none before the queue existed)
_QUEUED = "SELECT seq FROM log_queue"


class LockSampler(threading.Thread):
    """Samples, every SAMPLE_SECONDS while the clock's window runs, the database's backends
    waiting for a lock (``pg_stat_activity.wait_event_type = 'Lock'``) and what each waits on
    (``pg_locks``). The mean number waiting times the window is the lock-wait time spent
    (Little's law). And the merge delay: each queued leaf (``log_queue``) from the first
    sample that sees it (it committed) to the first that does not (it was sequenced), so to
    within a sample's interval (printed: under load a sample takes longer than SAMPLE_SECONDS),
    and without its transaction's own COMMIT."""

    def __init__(self, url: str, clock: Clock) -> None:
        super().__init__(daemon=True)
        self.url, self.clock = url, clock
        self.samples = 0
        self.waiting = 0
        self.on: Counter[str] = Counter()  # waits by what they wait on
        self.first_seen: dict[int, float] = {}  # queued leaf -> when first seen
        self.delays: list[float] = []  # merge delays seen, seconds
        self.has_queue = False

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            queue = conn.execute("SELECT to_regclass('log_queue')").fetchone()
            self.has_queue = queue is not None and queue[0] is not None
            while self.clock.running():
                now = time.perf_counter()
                if self.clock.counts(now):
                    rows = conn.execute(_WAITING).fetchall()
                    self.samples += 1
                    waits = dict(rows)  # one line per backend
                    self.waiting += len(waits)
                    self.on.update(waits.values())
                    if self.has_queue:
                        self._queue(conn, now)
                time.sleep(SAMPLE_SECONDS)

    def _queue(self, conn: psycopg.Connection[Any], now: float) -> None:
        queued = {int(seq) for seq, in conn.execute(_QUEUED).fetchall()}
        for seq in queued:
            self.first_seen.setdefault(seq, now)
        for seq in [s for s in self.first_seen if s not in queued]:
            self.delays.append(now - self.first_seen.pop(seq))

    def columns(self, seconds: float, transitions: int) -> list[str]:
        if not self.samples:
            return ["-"] * 6
        mean = self.waiting / self.samples
        share = self.on["log_state"] / self.waiting if self.waiting else 0.0
        top = ", ".join(f"{what} {n / self.waiting:.0%}" for what, n in self.on.most_common(2))
        merge = "-"
        if self.has_queue:
            delays = sorted(self.delays) or [0.0]
            p99 = delays[min(len(delays) - 1, int(0.99 * len(delays)))]
            merge = f"{p99 * 1000:.0f} / {delays[-1] * 1000:.0f}"
        return [f"{mean:.2f}", f"{mean * seconds * 1000 / max(transitions, 1):.2f}",
                f"{share:.0%}", top or "-", merge, f"{seconds * 1000 / self.samples:.0f}"]
OPTIONS: Any = [("grpc.max_concurrent_streams", 1000)]


def spread(players: list[Players]) -> Callable[[int, Clock, Tally], None]:
    def worker(i: int, clock: Clock, tally: Tally) -> None:
        players[i % len(players)].worker(i, clock, tally)

    return worker


def row(setup: str, clients: int, result: Result, rounds: bool = True,
        locks: LockSampler | None = None) -> list[str]:
    transitions = result.calls + result.starts
    return [setup, str(clients), f"{result.rate:.0f}", ms(result.quantile(0.5)),
            ms(result.quantile(0.99)), f"{result.rounds / result.seconds:.1f}" if rounds else "-",
            *(locks.columns(result.seconds, transitions) if locks else ["-"] * 6)]


class Setups:
    """The servers of each setup, measured in turn by one client."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args, self.root = args, root
        self.pg = started_server()
        self.procs: list[Process] = []
        self.rows: list[list[str]] = []

    def measure(self, setup: str, tag: str, servers: list[Process], url: str | None = None
                ) -> None:
        n = self.args.clients
        channels = [grpc.insecure_channel(f"127.0.0.1:{p.port}", options=OPTIONS)
                    for p in servers]
        for channel in channels:
            wait_ready(channel)
        players = [Players(channel, f"{tag}r{k}") for k, channel in enumerate(channels)]
        clock = Clock(self.args.warmup, self.args.seconds)
        locks = LockSampler(url, clock) if url else None
        if locks:
            locks.start()
        result = drive(n, clock, spread(players))
        if locks:
            locks.join()
        self.rows.append(row(setup, n, result, locks=locks))
        for p in servers:
            p.stop()
        for channel in channels:
            channel.close()

    def echo(self) -> None:
        echo = start_echo(self.root / "echo")
        self.procs.append(echo)
        channel = grpc.insecure_channel(f"127.0.0.1:{echo.port}", options=OPTIONS)
        wait_ready(channel)
        clock = Clock(self.args.warmup, self.args.seconds)
        self.rows.append(row("echo (grpc.aio)", self.args.clients, drive(
            self.args.clients, clock, echo_worker(channel, typical_act_request())),
            rounds=False))
        echo.stop()

    def sqlite(self) -> None:
        self.procs.append(start_fairshoe(self.root / "sqlite", {}))
        self.measure("1 replica, SQLite", "s1", self.procs[-1:])

    def postgres(self, replicas: int) -> None:
        """``replicas`` servers on one fresh database, sharing one key directory."""
        name = self.pg.create_database()
        url = self.pg.url(name)
        migrate(url)
        keys = self.root / f"pg{replicas}-keys"
        keys.mkdir(mode=0o700)
        servers = []
        for i in range(replicas):
            data = self.root / f"pg{replicas}-{i}"
            data.mkdir()
            (data / "keys").symlink_to(keys, target_is_directory=True)
            servers.append(start_fairshoe(data, {"FAIRSHOE_DATABASE_URL": url}))
            self.procs.append(servers[-1])
        plural = "replica" if replicas == 1 else "replicas"
        self.measure(f"{replicas} {plural}, PostgreSQL", f"p{replicas}", servers, url)

    def close(self) -> None:
        for proc in self.procs:
            if proc.proc.poll() is None:
                proc.stop()
        self.pg.remove()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--replicas", default="1,2",
                        help="comma-separated PostgreSQL replica counts (default 1,2)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    setups = Setups(args, root)
    try:
        setups.echo()
        setups.sqlite()
        for replicas in (int(c) for c in args.replicas.split(",")):
            setups.postgres(replicas)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.seconds:g} s per setup after {args.warmup:g} s warm-up, {args.clients} "
              f"clients; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
              f"{load}; RPC = echo calls or Act calls; PostgreSQL fsync=on, "
              "synchronous_commit=on on the same machine; lock waits sampled every "
              f"{SAMPLE_SECONDS * 1000:g} ms from pg_stat_activity and pg_locks")
        print_table(COLUMNS, setups.rows)
    finally:
        setups.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
