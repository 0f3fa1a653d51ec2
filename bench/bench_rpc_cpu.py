"""The server's CPU per round transition over gRPC, against a stateless RPC's (the stack's floor),
driven by the Python client and by a compiled Go client, each measuring its own CPU as well,
for each count of serving processes on SQLite and of replicas on PostgreSQL.

    .venv/bin/python bench/bench_rpc_cpu.py [--clients 4] [--processes 1,2] [--replicas 1,2,3]
                                            [--seconds 10] [--client python,go] [--go-arg=-shared]

For each ``--processes`` count, starts a real ``fairshoe serve --processes N`` as
``bench_service.py`` does (SQLite in WAL mode with ``synchronous=FULL``, logs to a file, metrics
on); for each ``--replicas`` count, ``fairshoe serve --processes N`` on a fresh database of a
throwaway PostgreSQL cluster (tests/support/pg_server.py: ``fsync=on``,
``synchronous_commit=on``, on the same machine), each of whose N processes is a replica (its own
connection pool and log sequencer, one address). Each setup is driven by each ``--client`` in
turn, ``--clients`` at a time, each on a connection of
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
load. On PostgreSQL the database's work is in other processes: ``db CPU ms/call`` is the cluster's
(the postmaster and its backends, read at the same moments), beside the server's; on SQLite it is
inside the server's figure (``-``). ``EvaluateHand`` does almost no work of its own, so its figure
is the fixed cost of one RPC through the server's stack (interceptors, the RPC log line, metrics,
protobuf), and ``/EvaluateHand`` is a transition's CPU in units of the same client's (issue target:
at most 1.5). ``/(EvaluateHand+floor)`` adds ``bench_transition.py``'s durable floor, measured
after each serve at the sizes it stored: a transition cannot cost less than the RPC plus one
durable transaction of what it writes and one Ed25519 signature, so this is the ratio that can
approach 1. ``client CPU ms/call`` is what the client spends per call (a transition or an
``EvaluateHand``), ``/Python`` that against the Python client's in the same run: on a 2-core
machine the client's CPU comes out of what the server can use, so a cheap client lets the server
show its rate. ``calls/s vs 1`` is the scaling against one process (or replica) of the same
database: on a machine whose cores the client and the database share it cannot show what more cores
give, but the CPU per transition must not rise with the count (``CPU vs 1``: the server's CPU per
call, plus the database's on PostgreSQL, against the same figure with one). The kernel spreads the
client's connections over the processes by a hash of each (``SO_REUSEPORT``), so with few clients
some processes get more than others: the rate may show it, the CPU per call hardly. With a fixed
``--clients`` each of N processes has 1/N of the calls in flight, so fewer share each COMMIT and
each wake-up of its event loop, and the CPU per call rises for that alone (``EvaluateHand``'s too);
``--clients-per-process`` keeps the load per process the same (N times the clients), which is the
figure to project the capacity per core from. Latencies are of ``Act`` (rounds) and of
``EvaluateHand``, as the client measures them.

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
import statistics
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

COLUMNS = ("database", "processes", "client", "RPCs", "clients", "calls/s", "errors",
           "client CPU ms/call", "/Python", "server CPU ms/call", "db CPU ms/call",
           "/EvaluateHand", "/(EvaluateHand+floor)", "calls/s vs 1", "CPU vs 1", "p50 ms",
           "p99 ms")
SQLITE, POSTGRES = "sqlite", "postgres"
SUMMARY = ("database", "processes", "client", "runs", "transitions/s", "server CPU ms/transition",
           "db CPU ms/transition", "EvaluateHand ms/call", "/EvaluateHand", "CPU vs 1",
           "EvaluateHand CPU vs 1", "client CPU ms/call", "Act p99 ms")
ROUNDS, EVALUATE = "StartRound+Act", "EvaluateHand"


@dataclass(frozen=True)
class Measured:
    """One client's run of one workload: calls answered in the window and the CPU around them."""

    calls: int
    seconds: float
    client_cpu: float
    server_cpu: float
    database_cpu: float | None  # a database server's (PostgreSQL), None when in the server's
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
                    result.cpu.get("database"), result.quantile(0.5), result.quantile(0.99))


@dataclass(frozen=True)
class Target:
    """A running serve to drive: its port, its pid, a database server's pid (PostgreSQL:
    the postmaster, whose children are its backends) and a tag for run ids."""

    port: int
    pid: int
    database_pid: int | None
    tag: str
    clients: int


def python_runs(target: Target, args: argparse.Namespace) -> dict[str, Measured]:
    made = channels(target.port, target.clients)
    try:
        n, s, w = target.clients, args.seconds, args.warmup
        pids = (target.pid, target.database_pid)
        played = drive(n, Clock(w, s), Players(made, f"py{target.tag}").worker, *pids)
        evaluated = drive(n, Clock(w, s), stateless_worker(made), *pids)
    finally:
        for channel in made:
            channel.close()
    return {ROUNDS: from_python(played, played.calls + played.starts),
            EVALUATE: from_python(evaluated, evaluated.calls)}


def go_run(binary: Path, target: Target, workload: str, args: argparse.Namespace, *,
           run_id: str) -> Measured:
    """One run of the loadgen; the server's (and database's) CPU read as it marks its
    window's ends."""
    argv = go_loadgen.argv(binary, f"127.0.0.1:{target.port}", [
        "-workload", workload, "-clients", str(target.clients), "-seconds", str(args.seconds),
        "-warmup", str(args.warmup), "-run-id", run_id, *args.go_arg])
    marks: list[tuple[float, float]] = []
    database = target.database_pid
    result: dict[str, Any] = {}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stdout:
            event = json.loads(line)
            if event["event"] in ("measuring", "measured"):
                marks.append((cpu_seconds(target.pid),
                              cpu_seconds(database) if database is not None else 0.0))
            elif event["event"] == "result":
                result = event
        stderr = proc.stderr.read()
    # status 1: some calls failed, which the result counts; anything else is the loadgen's own
    if proc.returncode not in (0, 1) or not result or len(marks) != 2:
        raise RuntimeError(f"loadgen {workload} failed ({proc.returncode}):\n{stderr}")
    latency = result["methods"].get("Act" if workload == "rounds" else "EvaluateHand", {})
    return Measured(result["calls"], result["seconds"], result["cpu_seconds"],
                    marks[1][0] - marks[0][0],
                    marks[1][1] - marks[0][1] if database is not None else None,
                    latency.get("p50_ms", 0.0) / 1000,
                    latency.get("p99_ms", 0.0) / 1000, result["errors"],
                    result["errors_by_kind"], result["error_samples"], result["cores"],
                    result["procs"])


def go_runs(binary: Path, target: Target, args: argparse.Namespace) -> dict[str, Measured]:
    return {ROUNDS: go_run(binary, target, "rounds", args, run_id=f"go{target.tag}"),
            EVALUATE: go_run(binary, target, "evaluate", args, run_id=f"go{target.tag}e")}


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


@dataclass(frozen=True)
class Setup:
    """One serve to measure: its database and its process (replica) count."""

    database: str  # SQLITE or POSTGRES
    processes: int

    def __str__(self) -> str:
        return f"{self.database} {self.processes}"


def total_cpu(m: Measured) -> float:
    """The server's CPU per call plus the database server's (PostgreSQL)."""
    return m.per_call(m.server_cpu + (m.database_cpu or 0.0))


def rows(setup: Setup, clients: int, runs: dict[str, dict[str, Measured]],
         base: dict[tuple[str, str, str], tuple[float, float]], durable: float | None
         ) -> list[list[str]]:
    """The rows of one setup: per client, its transitions and EvaluateHand. ``base`` keeps
    one process's rate and total CPU per call for each database (filled when ``processes`` is
    1); ``durable`` is the durable floor's CPU seconds per transition (SQLite only)."""
    table = []
    for client, measured in runs.items():
        floor = measured[EVALUATE].per_call(measured[EVALUATE].server_cpu)
        for name, m in measured.items():
            python = runs.get("python", {}).get(name)
            client_cpu, server_cpu = m.per_call(m.client_cpu), m.per_call(m.server_cpu)
            rate = m.calls / m.seconds if m.seconds else 0.0
            key = (setup.database, client, name)
            if setup.processes == 1:
                base[key] = (rate, total_cpu(m))
            one = base.get(key)
            database = (f"{m.per_call(m.database_cpu) * 1000:.2f}"
                        if m.database_cpu is not None else "-")
            figures = [f"{client_cpu * 1000:.3f}",
                       ratio(client_cpu, python.per_call(python.client_cpu) if python else None),
                       f"{server_cpu * 1000:.2f}", database, ratio(server_cpu, floor),
                       ratio(server_cpu, floor + durable)
                       if name == ROUNDS and durable is not None else "-",
                       ratio(rate, one[0] if one else None),
                       ratio(total_cpu(m), one[1] if one else None),
                       f"{m.p50 * 1000:.2f}", f"{m.p99 * 1000:.2f}"]
            table.append([setup.database, str(setup.processes), client, name, str(clients),
                          f"{rate:.0f}", str(m.errors),
                          *(figures if m.calls else ["-"] * len(figures))])
    return table


class Databases:
    """Where each setup's serve keeps its data: a fresh SQLite file in ``root``, or a fresh
    database of one throwaway PostgreSQL cluster (started on first use, removed by close)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pg: Any = None
        self.made = 0

    def env(self, setup: Setup) -> tuple[Path, dict[str, str], int | None]:
        """The data directory, the serve's environment and the database server's pid."""
        self.made += 1
        data = self.root / f"data-{self.made}-{setup.database}-{setup.processes}"
        if setup.database == SQLITE:
            return data, {}, None
        if self.pg is None:
            from support.pg_server import started_server  # noqa: PLC0415 (PostgreSQL only)

            self.pg = started_server()
        url = self.pg.url(self.pg.create_database())
        postmaster = int((self.pg.data / "postmaster.pid").read_text().split()[0])
        return data, {"FAIRSHOE_DATABASE_URL": url}, postmaster

    def close(self) -> None:
        if self.pg is not None:
            self.pg.remove()


def measure(databases: Databases, setup: Setup, args: argparse.Namespace, binary: Path | None
            ) -> tuple[dict[str, dict[str, Measured]], float | None]:
    """Every client's runs against one setup's `serve --processes N`, and (SQLite) the durable
    floor's CPU seconds per transition at the sizes that serve stored."""
    data, env, database_pid = databases.env(setup)
    env.update(e.split("=", 1) for e in args.server_env)
    server = start_fairshoe(data, env, setup.processes)
    tag = f"{setup.database[0]}{setup.processes}-{databases.made}"
    target = Target(server.port, server.proc.pid, database_pid, tag, clients(args, setup))
    runs: dict[str, dict[str, Measured]] = {}
    try:
        for client in args.client:
            if client == "python":
                runs[client] = python_runs(target, args)
            else:
                assert binary is not None
                runs[client] = go_runs(binary, target, args)
    finally:
        server.stop()
    if setup.database != SQLITE:
        return runs, None
    durable = durable_floor(data / "fairshoe.db", 400)
    return runs, durable.cpu / durable.calls


def warnings(setup: Setup, runs: dict[str, dict[str, Measured]]) -> list[str]:
    """A line per run whose client saw failed calls (how many of which, and the first messages),
    and per run whose client was near its threads' limit (then it, not the server, set the
    rate)."""
    lines = []
    for client, measured in runs.items():
        for name, m in measured.items():
            where = f"{setup.database}, processes {setup.processes}, {client} {name}"
            if m.errors:
                lines.append(f"{where}: {m.errors} failed calls {json.dumps(m.error_kinds)}; "
                             f"first: {'; '.join(m.error_samples)}")
            if m.threads and m.cores > 0.8 * m.threads:
                lines.append(f"{where}: the loadgen used {m.cores:.2f} cores of its "
                             f"-procs {m.threads}: raise it (--go-arg=-procs=N)")
    return lines


def summary(measured: dict[tuple[Setup, str], list[dict[str, Measured]]]) -> list[list[str]]:
    """Per setup and client, the medians over ``--repeat`` runs: transitions/s, the server's
    (and database's) CPU per transition, EvaluateHand's, the median of each run's
    ``/EvaluateHand``, and the total CPU per transition (and EvaluateHand's) against one
    process's of the same database."""
    def med(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    table, one = [], {}  # one: a process's CPU per transition and EvaluateHand, per database
    for (setup, client), runs in measured.items():
        moves = [r[ROUNDS] for r in runs if r[ROUNDS].calls and r[EVALUATE].calls]
        stateless = [r[EVALUATE] for r in runs if r[ROUNDS].calls and r[EVALUATE].calls]
        if not moves:
            continue
        total = med([total_cpu(m) for m in moves])
        evaluate = med([total_cpu(m) for m in stateless])
        if setup.processes == 1:
            one[(setup.database, client)] = (total, evaluate)
        base = one.get((setup.database, client))
        database = [m.per_call(m.database_cpu) for m in moves if m.database_cpu is not None]
        ratios = [m.per_call(m.server_cpu) / e.per_call(e.server_cpu)
                  for m, e in zip(moves, stateless, strict=True)]
        table.append([
            setup.database, str(setup.processes), client, str(len(moves)),
            f"{med([m.calls / m.seconds for m in moves]):.0f}",
            f"{med([m.per_call(m.server_cpu) for m in moves]) * 1000:.2f}",
            f"{med(database) * 1000:.2f}" if database else "-",
            f"{med([m.per_call(m.server_cpu) for m in stateless]) * 1000:.2f}",
            f"{med(ratios):.2f}",
            ratio(total, base[0] if base else None), ratio(evaluate, base[1] if base else None),
            f"{med([m.per_call(m.client_cpu) for m in moves]) * 1000:.3f}",
            f"{med([m.p99 for m in moves]) * 1000:.1f}"])
    return table


def clients(args: argparse.Namespace, setup: Setup) -> int:
    """The clients driving ``setup``: ``--clients``, times its processes with
    ``--clients-per-process``."""
    return args.clients * (setup.processes if args.clients_per_process else 1)


def counts(text: str) -> list[int]:
    return sorted(int(c) for c in text.split(",") if c.strip())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4,
                        help="client threads or goroutines, each on a connection of its own "
                             "(default 4)")
    parser.add_argument("--clients-per-process", action="store_true",
                        help="--clients for each serving process (N processes: N times as many "
                             "clients): the same load per process, where a fixed number of "
                             "clients leaves each of N processes 1/N of the concurrent calls to "
                             "share a COMMIT or a wake-up")
    parser.add_argument("--processes", default="1",
                        help="comma-separated `serve --processes` counts to measure in turn on "
                             "SQLite (default 1; e.g. 1,2; empty for none)")
    parser.add_argument("--replicas", default="",
                        help="comma-separated replica counts to measure in turn on PostgreSQL "
                             "(`serve --processes N` on one fresh database; default none; "
                             "e.g. 1,2,3)")
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
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure every setup this many times, in turn (then the medians "
                             "are printed too)")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args(argv)
    args.client = args.client.split(",")
    if not args.client or set(args.client) - {"python", "go"}:
        parser.error("--client: python, go or both")
    setups = ([Setup(SQLITE, n) for n in counts(args.processes)]
              + [Setup(POSTGRES, n) for n in counts(args.replicas)])
    if not setups:
        parser.error("nothing to measure: give --processes or --replicas")
    binary = go_loadgen.build() if "go" in args.client else None
    root = Path(tempfile.mkdtemp(prefix="bench-rpc-cpu-"))
    databases = Databases(root)
    try:
        measured: dict[tuple[Setup, str], list[dict[str, Measured]]] = {}
        for repeat in range(args.repeat):
            base: dict[tuple[str, str, str], tuple[float, float]] = {}
            table, failures = [], []
            before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            for setup in setups:
                runs, durable = measure(databases, setup, args, binary)
                table += rows(setup, clients(args, setup), runs, base, durable)
                failures += warnings(setup, runs)
                for client, run in runs.items():
                    measured.setdefault((setup, client), []).append(run)
            report(args, repeat, before, table, failures)
        if args.repeat > 1:
            print(f"medians of {args.repeat} runs:")
            print_table(SUMMARY, summary(measured))
    finally:
        databases.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def report(args: argparse.Namespace, repeat: int, before: str, table: list[list[str]],
           failures: list[str]) -> None:
    """One run's table, with the machine's load before and after it."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"run {repeat + 1} of {args.repeat}: fairshoe serve (SQLite WAL, synchronous=FULL; "
          f"PostgreSQL fsync=on, synchronous_commit=on, on the same machine), {args.seconds:g} s "
          f"after {args.warmup:g} s warm-up; {os.cpu_count()} CPUs, load average {before} "
          f"before, {load} after; server CPU from /proc over the serve's process tree, db CPU "
          f"over PostgreSQL's; client CPU: the Python client's process from /proc, the Go "
          f"loadgen's getrusage; calls: transitions (StartRound or Act) or EvaluateHand; "
          f"latencies of Act or EvaluateHand")
    print_table(COLUMNS, table)
    for line in failures:
        print(line)


if __name__ == "__main__":
    main()
