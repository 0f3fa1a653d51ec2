"""Replicas on one database: complete rounds per second and ``Act`` latency for one replica on
SQLite, one on PostgreSQL and two on PostgreSQL, beside the echo baseline, in one run.

    .venv/bin/python bench/bench_replicas.py [--clients 16] [--seconds 5] [--warmup 1]

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
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

COLUMNS = ("setup", "clients", "RPC/s", "p50 ms", "p99 ms", "rounds/s")
OPTIONS: Any = [("grpc.max_concurrent_streams", 1000)]


def spread(players: list[Players]) -> Callable[[int, Clock, Tally], None]:
    def worker(i: int, clock: Clock, tally: Tally) -> None:
        players[i % len(players)].worker(i, clock, tally)

    return worker


def row(setup: str, clients: int, result: Result, rounds: bool = True) -> list[str]:
    return [setup, str(clients), f"{result.rate:.0f}", ms(result.quantile(0.5)),
            ms(result.quantile(0.99)), f"{result.rounds / result.seconds:.1f}" if rounds else "-"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args(argv)
    n = args.clients
    root = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    pg = started_server()
    procs: list[Process] = []
    rows = []

    def measure(setup: str, tag: str, servers: list[Process]) -> None:
        channels = [grpc.insecure_channel(f"127.0.0.1:{p.port}", options=OPTIONS)
                    for p in servers]
        for channel in channels:
            wait_ready(channel)
        players = [Players(channel, f"{tag}r{k}") for k, channel in enumerate(channels)]
        rows.append(row(setup, n, drive(n, Clock(args.warmup, args.seconds), spread(players))))
        for p in servers:
            p.stop()
        for channel in channels:
            channel.close()

    def fresh_pg_url() -> str:
        name = pg.create_database()
        migrate(pg.url(name))
        return pg.url(name)

    try:
        echo = start_echo(root / "echo")
        procs.append(echo)
        channel = grpc.insecure_channel(f"127.0.0.1:{echo.port}", options=OPTIONS)
        wait_ready(channel)
        rows.append(row("echo (grpc.aio)", n, drive(n, Clock(args.warmup, args.seconds),
                                                    echo_worker(channel, typical_act_request())),
                        rounds=False))
        echo.stop()

        procs.append(start_fairshoe(root / "sqlite", {}))
        measure("1 replica, SQLite", "s1", procs[-1:])

        procs.append(start_fairshoe(root / "pg1", {"FAIRSHOE_DATABASE_URL": fresh_pg_url()}))
        measure("1 replica, PostgreSQL", "p1", procs[-1:])

        url = fresh_pg_url()
        keys = root / "pg2-keys"
        keys.mkdir(mode=0o700)
        pair = []
        for i in range(2):
            data = root / f"pg2-{i}"
            data.mkdir()
            (data / "keys").symlink_to(keys, target_is_directory=True)
            pair.append(start_fairshoe(data, {"FAIRSHOE_DATABASE_URL": url}))
            procs.append(pair[-1])
        measure("2 replicas, PostgreSQL", "p2", pair)

        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.seconds:g} s per setup after {args.warmup:g} s warm-up, {n} clients; "
              f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}; "
              "RPC = echo calls or Act calls; PostgreSQL fsync=on, synchronous_commit=on on the "
              "same machine")
        print_table(COLUMNS, rows)
    finally:
        for proc in procs:
            if proc.proc.poll() is None:
                proc.stop()
        pg.remove()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
