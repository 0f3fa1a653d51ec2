"""The server's CPU per round transition over gRPC, against a stateless RPC's (the stack's floor),
driven by the Python client and by a compiled Go client, each measuring its own CPU as well.

    .venv/bin/python bench/bench_rpc_cpu.py [--clients 4] [--processes 1,2] [--seconds 10]
                                            [--client python,go] [--go-arg=-shared]

For each ``--processes`` count, starts a real ``fairshoe serve --processes N`` as
``bench_service.py`` does (SQLite in WAL mode with ``synchronous=FULL``, logs to a file, metrics
on) and drives it with each ``--client`` in turn, ``--clients`` at a time, each on a connection of
its own and each a player playing complete rounds through ``StartRound`` and ``Act`` (the strategy
of ``bench_service.py``), then ``MathService.EvaluateHand`` in a closed loop from as many:

* ``python``: threads of this process (grpcio, ``bench_service.Players`` and
  ``stateless_worker``); its CPU is this process's over the window, from ``/proc``;
* ``go``: bench/loadgen, goroutines of a small Go program (gRPC-Go from Debian's packages,
  built offline by tests/support/go_loadgen.py, cached by its sources' digest) playing the same
  rounds; its CPU is its own getrusage over the window, which it prints with its calls, its
  errors (counted by method and status code, never hidden) and latencies. It marks the
  window's opening and closing on its stdout, and the server's CPU is read at those marks.

For each it reads the serve's CPU time (``utime + stime`` from ``/proc``, all threads of the serve
and of its worker processes) at the start and at the end of the measured window and divides it by
the calls answered in that window: CPU the server spends per call, whatever the machine's other
load. ``EvaluateHand`` does almost no work of its own, so its figure is the fixed cost of one RPC
through the server's stack (interceptors, the RPC log line, metrics, protobuf), and
``/EvaluateHand`` is a transition's CPU in units of the same client's (issue target: at most 1.5).
``/(EvaluateHand+floor)`` adds ``bench_transition.py``'s durable floor, measured after each
serve at the sizes it stored: a transition cannot cost less than the RPC plus one durable
transaction of what it writes and one Ed25519 signature, so this is the ratio that can approach 1.
``client CPU ms/call`` is what the client spends per call (a transition or an ``EvaluateHand``),
``/Python`` that against the Python client's in the same run: on a 2-core machine the client's CPU
comes out of what the server can use, so a cheap client lets the server show its rate.
``calls/s vs 1 process`` is the scaling: on a machine whose cores the client and the database
share it cannot show what more cores give, but the CPU per transition must not rise with the
count. Latencies are of ``Act`` (rounds) and of ``EvaluateHand``, as the client measures them.

The figures move with the machine's other load (GIL hand-offs, caches): compare two versions by
alternating runs and taking medians, e.g. an older tree first on ``PYTHONPATH``::

    for i in 1 2 3 4 5; do
      PYTHONPATH=/path/to/old/tree .venv/bin/python bench/bench_rpc_cpu.py --seconds 8
      .venv/bin/python bench/bench_rpc_cpu.py --seconds 8
    done
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from bench_service import (
    Clock,
    Players,
    Result,
    cpu_seconds,
    drive,
    start_fairshoe,
    stateless_worker,
    wait_ready,
)
from bench_transition import durable_floor
from tables import print_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import go_loadgen

COLUMNS = ("processes", "client", "RPCs", "clients", "calls/s", "errors", "client CPU ms/call",
           "/Python", "server CPU ms/call", "/EvaluateHand", "/(EvaluateHand+floor)",
           "calls/s vs 1 process", "p50 ms", "p99 ms")
ROUNDS, EVALUATE = "StartRound+Act", "EvaluateHand"


@dataclass(frozen=True)
class Measured:
    """One client's run of one workload: calls answered in the window and the CPU around them."""

    calls: int
    seconds: float
    client_cpu: float
    server_cpu: float
    p50: float  # seconds, of Act or EvaluateHand
    p99: float
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    cores: float = 0.0  # the client's CPU seconds per second of the window
    threads: int = 0  # how many threads may run its code at once (0: any)

    def per_call(self, cpu: float) -> float:
        """``cpu`` per answered call (0 if none answered)."""
        return cpu / self.calls if self.calls else 0.0


def from_python(result: Result, calls: int) -> Measured:
    """A drive() result (it raises at the client's first failed call: errors are 0 here)."""
    return Measured(calls, result.seconds, result.cpu["client"], result.cpu["server"],
                    result.quantile(0.5), result.quantile(0.99))


def python_runs(port: int, pid: int, processes: int, args: argparse.Namespace
                ) -> dict[str, Measured]:
    made = channels(port, args.clients)
    try:
        n, s, w = args.clients, args.seconds, args.warmup
        played = drive(n, Clock(w, s), Players(made, f"py{processes}").worker, pid)
        evaluated = drive(n, Clock(w, s), stateless_worker(made), pid)
    finally:
        for channel in made:
            channel.close()
    return {ROUNDS: from_python(played, played.calls + played.starts),
            EVALUATE: from_python(evaluated, evaluated.calls)}


def go_run(binary: Path, port: int, pid: int, workload: str, args: argparse.Namespace, *,
           run_id: str) -> Measured:
    """One run of the loadgen; the server's CPU read as it marks its window's ends."""
    argv = go_loadgen.argv(binary, f"127.0.0.1:{port}", [
        "-workload", workload, "-clients", str(args.clients), "-seconds", str(args.seconds),
        "-warmup", str(args.warmup), "-run-id", run_id, *args.go_arg])
    marks: list[float] = []
    result: dict[str, Any] = {}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stdout:
            event = json.loads(line)
            if event["event"] in ("measuring", "measured"):
                marks.append(cpu_seconds(pid))
            elif event["event"] == "result":
                result = event
        stderr = proc.stderr.read()
    # status 1: some calls failed, which the result counts; anything else is the loadgen's own
    if proc.returncode not in (0, 1) or not result or len(marks) != 2:
        raise RuntimeError(f"loadgen {workload} failed ({proc.returncode}):\n{stderr}")
    latency = result["methods"].get("Act" if workload == "rounds" else "EvaluateHand", {})
    return Measured(result["calls"], result["seconds"], result["cpu_seconds"],
                    marks[1] - marks[0], latency.get("p50_ms", 0.0) / 1000,
                    latency.get("p99_ms", 0.0) / 1000, result["errors"],
                    result["errors_by_kind"], result["error_samples"], result["cores"],
                    result["procs"])


def go_runs(binary: Path, port: int, pid: int, processes: int, args: argparse.Namespace
            ) -> dict[str, Measured]:
    return {ROUNDS: go_run(binary, port, pid, "rounds", args, run_id=f"go{processes}"),
            EVALUATE: go_run(binary, port, pid, "evaluate", args, run_id=f"go{processes}e")}


def channels(port: int, count: int) -> list[grpc.Channel]:
    """``count`` channels with a connection each (gRPC shares one between a process's channels
    to one address unless told not to), so `serve --processes N`'s kernel spreads them."""
    options: Any = [("grpc.max_concurrent_streams", 1000), ("grpc.use_local_subchannel_pool", 1)]
    made = [grpc.insecure_channel(f"127.0.0.1:{port}", options=options) for _ in range(count)]
    for channel in made:
        wait_ready(channel)
    return made


def ratio(value: float, base: float | None) -> str:
    return f"{value / base:.2f}" if base else "-"


def rows(processes: int, clients: int, runs: dict[str, dict[str, Measured]],
         base: dict[tuple[str, str], float], durable: float) -> list[list[str]]:
    """The rows of one `serve --processes N`: per client, its transitions and EvaluateHand.
    ``base`` keeps one process's rates (filled when ``processes`` is 1); ``durable`` is the
    durable floor's CPU seconds per transition."""
    table = []
    for client, measured in runs.items():
        floor = measured[EVALUATE].per_call(measured[EVALUATE].server_cpu)
        for name, m in measured.items():
            python = runs.get("python", {}).get(name)
            client_cpu, server_cpu = m.per_call(m.client_cpu), m.per_call(m.server_cpu)
            rate = m.calls / m.seconds if m.seconds else 0.0
            if processes == 1:
                base[(client, name)] = rate
            figures = [f"{client_cpu * 1000:.3f}",
                       ratio(client_cpu, python.per_call(python.client_cpu) if python else None),
                       f"{server_cpu * 1000:.2f}", ratio(server_cpu, floor),
                       ratio(server_cpu, floor + durable) if name == ROUNDS else "-",
                       ratio(rate, base.get((client, name))), f"{m.p50 * 1000:.2f}",
                       f"{m.p99 * 1000:.2f}"]
            table.append([str(processes), client, name, str(clients), f"{rate:.0f}",
                          str(m.errors), *(figures if m.calls else ["-"] * len(figures))])
    return table


def measure(root: Path, processes: int, args: argparse.Namespace, binary: Path | None
            ) -> tuple[dict[str, dict[str, Measured]], float]:
    """Every client's runs against one `serve --processes N`, and the durable floor's CPU
    seconds per transition at the sizes that serve stored."""
    env = dict(e.split("=", 1) for e in args.server_env)
    server = start_fairshoe(root / f"data-{processes}", env, processes)
    runs: dict[str, dict[str, Measured]] = {}
    try:
        for client in args.client:
            if client == "python":
                runs[client] = python_runs(server.port, server.proc.pid, processes, args)
            else:
                assert binary is not None
                runs[client] = go_runs(binary, server.port, server.proc.pid, processes, args)
    finally:
        server.stop()
    durable = durable_floor(root / f"data-{processes}" / "fairshoe.db", 400)
    return runs, durable.cpu / durable.calls


def warnings(processes: int, runs: dict[str, dict[str, Measured]]) -> list[str]:
    """A line per run whose client saw failed calls (how many of which, and the first messages),
    and per run whose client was near its threads' limit (then it, not the server, set the
    rate)."""
    lines = []
    for client, measured in runs.items():
        for name, m in measured.items():
            where = f"processes {processes}, {client} {name}"
            if m.errors:
                lines.append(f"{where}: {m.errors} failed calls {json.dumps(m.error_kinds)}; "
                             f"first: {'; '.join(m.error_samples)}")
            if m.threads and m.cores > 0.8 * m.threads:
                lines.append(f"{where}: the loadgen used {m.cores:.2f} cores of its "
                             f"-procs {m.threads}: raise it (--go-arg=-procs=N)")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4,
                        help="client threads or goroutines, each on a connection of its own "
                             "(default 4)")
    parser.add_argument("--processes", default="1",
                        help="comma-separated `serve --processes` counts to measure in turn "
                             "(default 1; e.g. 1,2)")
    parser.add_argument("--client", default="python,go",
                        help="comma-separated clients to drive the server with, in turn: python, "
                             "go (default both)")
    parser.add_argument("--go-arg", action="append", default=[], metavar="ARG",
                        help="a further loadgen option, e.g. --go-arg=-shared (one connection "
                             "for all goroutines); repeatable")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="uncounted seconds first")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for fairshoe serve; repeatable")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args(argv)
    args.client = args.client.split(",")
    if not args.client or set(args.client) - {"python", "go"}:
        parser.error("--client: python, go or both")
    counts = [int(c) for c in args.processes.split(",")]
    binary = go_loadgen.build() if "go" in args.client else None
    root = Path(tempfile.mkdtemp(prefix="bench-rpc-cpu-"))
    try:
        base: dict[tuple[str, str], float] = {}
        table, failures = [], []
        for processes in sorted(counts):
            runs, durable = measure(root, processes, args, binary)
            table += rows(processes, args.clients, runs, base, durable)
            failures += warnings(processes, runs)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"fairshoe serve (SQLite WAL, synchronous=FULL), {args.seconds:g} s after "
              f"{args.warmup:g} s warm-up; {os.cpu_count()} CPUs, load average {load}; server "
              f"CPU from /proc over the serve's process tree; client CPU: the Python client's "
              f"process from /proc, the Go loadgen's getrusage; calls: transitions (StartRound "
              f"or Act) or EvaluateHand; latencies of Act or EvaluateHand")
        print_table(COLUMNS, table)
        for line in failures:
            print(line)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
