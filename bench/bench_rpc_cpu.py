"""The server's CPU per round transition over gRPC, against a stateless RPC's (the stack's floor).

    .venv/bin/python bench/bench_rpc_cpu.py [--clients 4] [--seconds 10] [--warmup 2]

Starts a real ``fairshoe serve`` as ``bench_service.py`` does (SQLite in WAL mode with
``synchronous=FULL``, logs to a file, metrics on) and drives it from ``--clients`` threads, each
a player playing complete rounds through ``StartRound`` and ``Act`` (the strategy of
``bench_service.py``), then ``MathService.EvaluateHand`` in a closed loop from as many threads.
For each it reads the server process's CPU time (``utime + stime`` of ``/proc/<pid>/stat``, all
its threads) at the start and at the end of the measured window and divides it by the calls
answered in that window: CPU the server spends per call, whatever the machine's other load
(the client runs in this process and is not counted). ``EvaluateHand`` does almost no work of its
own, so its figure is the fixed cost of one RPC through the server's stack (interceptors, the
RPC log line, metrics, protobuf); a transition's figure less it is what the round service costs.

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
    Process,
    drive,
    start_fairshoe,
    stateless_worker,
    wait_ready,
)
from tables import print_table

COLUMNS = ("RPCs", "clients", "calls", "calls/s", "server CPU s", "server CPU ms/call")


def row(name: str, clients: int, seconds: float, calls: int, cpu: float) -> list[str]:
    return [name, str(clients), str(calls), f"{calls / seconds:.0f}", f"{cpu:.2f}",
            f"{cpu * 1000 / max(calls, 1):.2f}"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="uncounted seconds first")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for fairshoe serve; repeatable")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-rpc-cpu-"))
    server: Process | None = None
    try:
        server = start_fairshoe(root / "data", dict(e.split("=", 1) for e in args.server_env))
        options: Any = [("grpc.max_concurrent_streams", 1000)]
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=options)
        wait_ready(channel)
        pid, n, s, w = server.proc.pid, args.clients, args.seconds, args.warmup
        played = drive(n, Clock(w, s), Players(channel, "c").worker, pid)
        evaluated = drive(n, Clock(w, s), stateless_worker(channel), pid)
        rows = [row("StartRound+Act", n, s, played.calls + played.starts, played.cpu["server"]),
                row("EvaluateHand", n, s, evaluated.calls, evaluated.cpu["server"])]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"fairshoe serve (SQLite WAL, synchronous=FULL), {s:g} s after {w:g} s warm-up; "
              f"{os.cpu_count()} CPUs, load average {load}")
        print_table(COLUMNS, rows)
    finally:
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
