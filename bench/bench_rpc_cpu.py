"""The server's CPU per round transition over gRPC, against a stateless RPC's (the stack's floor).

    .venv/bin/python bench/bench_rpc_cpu.py [--clients 4] [--processes 1,2] [--seconds 10]

For each ``--processes`` count, starts a real ``fairshoe serve --processes N`` as
``bench_service.py`` does (SQLite in WAL mode with ``synchronous=FULL``, logs to a file, metrics
on) and drives it from ``--clients`` threads, each on a channel (a connection) of its own and
each a player playing complete rounds through ``StartRound`` and ``Act`` (the strategy of
``bench_service.py``), then ``MathService.EvaluateHand`` in a closed loop from as many threads.
For each it reads the serve's CPU time (``utime + stime`` from ``/proc``, all threads of the
serve and of its worker processes) at the start and at the end of the measured window and
divides it by the calls answered in that window: CPU the server spends per call, whatever the
machine's other load (the client runs in this process and is not counted). ``EvaluateHand``
does almost no work of its own, so its figure is the fixed cost of one RPC through the server's
stack (interceptors, the RPC log line, metrics, protobuf), and ``/EvaluateHand`` is a
transition's CPU in units of it (issue target: at most 1.5). ``/(EvaluateHand+floor)`` adds
``bench_transition.py``'s durable floor, measured after each serve at the sizes it stored: a
transition cannot cost less than the RPC plus one durable transaction of what it writes and one
Ed25519 signature, so this is the ratio that can approach 1. ``calls/s vs 1 process`` is the
scaling: on a machine whose cores the client and the database share it cannot show what more
cores give, but the CPU per transition must not rise with the count.

The figures move with the machine's other load (GIL hand-offs, caches): compare two versions by
alternating runs and taking medians, e.g. an older tree first on ``PYTHONPATH``::

    for i in 1 2 3 4 5; do
      PYTHONPATH=/path/to/old/tree .venv/bin/python bench/bench_rpc_cpu.py --seconds 8
      .venv/bin/python bench/bench_rpc_cpu.py --seconds 8
    done
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from bench_service import (
    Clock,
    Players,
    drive,
    start_fairshoe,
    stateless_worker,
    wait_ready,
)
from bench_transition import durable_floor
from tables import print_table

COLUMNS = ("processes", "RPCs", "clients", "calls", "calls/s", "server CPU s",
           "server CPU ms/call", "/EvaluateHand", "/(EvaluateHand+floor)",
           "calls/s vs 1 process")


def row(processes: int, name: str, clients: int, seconds: float, calls: int, *, cpu: float,
        floor: float, durable: float, base: float | None) -> list[str]:
    """One table row; ``floor`` is EvaluateHand's CPU per call in the same server, ``durable``
    the durable floor's CPU per transition (bench_transition.py), ``base`` the calls/s of the
    same RPCs from one process (None: this is it)."""
    rate, per_call = calls / seconds, cpu / max(calls, 1)
    return [str(processes), name, str(clients), str(calls), f"{rate:.0f}", f"{cpu:.2f}",
            f"{per_call * 1000:.2f}", f"{per_call / floor:.2f}" if floor else "-",
            f"{per_call / (floor + durable):.2f}" if durable else "-",
            f"{rate / base:.2f}" if base else "1.00"]


def channels(port: int, count: int) -> list[grpc.Channel]:
    """``count`` channels with a connection each (gRPC shares one between a process's channels
    to one address unless told not to), so `serve --processes N`'s kernel spreads them."""
    options: Any = [("grpc.max_concurrent_streams", 1000), ("grpc.use_local_subchannel_pool", 1)]
    made = [grpc.insecure_channel(f"127.0.0.1:{port}", options=options) for _ in range(count)]
    for channel in made:
        wait_ready(channel)
    return made


def measure(root: Path, processes: int, args: argparse.Namespace,
            base: dict[str, float]) -> list[list[str]]:
    """Both rows for a `serve --processes N`; ``base`` keeps one process's rates."""
    env = dict(e.split("=", 1) for e in args.server_env)
    server = start_fairshoe(root / f"data-{processes}", env, processes)
    try:
        made = channels(server.port, args.clients)
        pid, n, s, w = server.proc.pid, args.clients, args.seconds, args.warmup
        played = drive(n, Clock(w, s), Players(made, f"c{processes}").worker, pid)
        evaluated = drive(n, Clock(w, s), stateless_worker(made), pid)
        for channel in made:
            channel.close()
    finally:
        server.stop()
    durable_tally = durable_floor(root / f"data-{processes}" / "fairshoe.db", 400)
    durable = durable_tally.cpu / durable_tally.calls
    transitions = played.calls + played.starts
    floor = evaluated.cpu["server"] / max(evaluated.calls, 1)
    rates = {"transitions": transitions / s, "evaluate": evaluated.calls / s}
    rows = [row(processes, "StartRound+Act", n, s, transitions, cpu=played.cpu["server"],
                floor=floor, durable=durable, base=base.get("transitions")),
            row(processes, "EvaluateHand", n, s, evaluated.calls, cpu=evaluated.cpu["server"],
                floor=floor, durable=0.0, base=base.get("evaluate"))]
    if processes == 1:
        base.update(rates)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4,
                        help="client threads, each on a channel of its own (default 4)")
    parser.add_argument("--processes", default="1",
                        help="comma-separated `serve --processes` counts to measure in turn "
                             "(default 1; e.g. 1,2)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="uncounted seconds first")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for fairshoe serve; repeatable")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.processes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="bench-rpc-cpu-"))
    try:
        base: dict[str, float] = {}
        rows = [r for processes in sorted(counts) for r in measure(root, processes, args, base)]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"fairshoe serve (SQLite WAL, synchronous=FULL), {args.seconds:g} s after "
              f"{args.warmup:g} s warm-up; {os.cpu_count()} CPUs, load average {load}; server "
              f"CPU from /proc over the serve's process tree, the client not counted")
        print_table(COLUMNS, rows)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
