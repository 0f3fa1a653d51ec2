"""Live rounds over gRPC: complete rounds per second and ``Act`` latency against a bare echo.

    .venv/bin/python bench/bench_service.py [--clients 1,4,16,64] [--seconds 5] [--warmup 1]

Two server processes run side by side for the whole run:

* the real one, ``fairshoe serve`` with full durability (SQLite in WAL mode with
  ``synchronous=FULL``, so every acknowledged transition is fsynced) on a temporary data
  directory, OS-seeded shoes, its logs and metrics on as in production (logs to a file);
* a bare ``grpc.aio`` echo server (a generic unary handler that returns the request's bytes), in
  its own process as well, started by this script with ``--serve-echo``.

For each client count the same client code drives both, one after the other: that many threads,
each with a sync stub on one shared channel, calling in a closed loop for ``--seconds`` after a
``--warmup`` (not counted). Against the echo each call sends the bytes of a typical
``ActRequest``. Against the real server each thread is a player (real money, deposited once)
playing complete rounds in turn of all four games: ``StartRound``, then ``Act`` until the round
is settled (stand on 12 or more, else hit; insurance and even money declined). ``Act/s`` counts
acknowledged ``Act`` calls per second, ``rounds/s`` finished rounds; latencies are of ``Act``
calls only, as the client measures them (the whole call).

Targets at 16 clients: ``Act`` throughput at least half the echo's RPC rate, and ``Act`` p99
within twice the echo's p99 in the same run (``Act/echo`` and ``p99 ratio`` columns).

A second table shows where the machine's CPU goes in each run, read from ``/proc`` over the
measured window: the cores the server process and this client process use, and the server's
CPU per call (echo), per transition (``StartRound`` or ``Act``) and per call of the real
server's cheapest RPC, ``MathService.EvaluateHand`` (no storage: the fixed cost of its gRPC
stack, run third with the same client). Last, one line per client count turns the target into a
CPU budget: the transitions per second ``Act`` at half the echo's rate means (with
``StartRound`` in the run's proportion), the cores the client would need at that rate (its CPU
per transition measured), and so the most server CPU per transition the other cores allow,
beside the measured figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from tables import print_table

from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc

FAIRSHOE = str(Path(sys.executable).with_name("fairshoe"))
ECHO_METHOD = "/bench.Echo/Echo"
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
BETS = {"snap": 1000, "double-deck": 1000, "double-exposure": 1000, "multi-hand": 1000}
START_TIMEOUT = 120.0
CALL_TIMEOUT = 30.0
COLUMNS = ("clients", "echo RPC/s", "echo p50 ms", "echo p99 ms", "Act/s", "Act p50 ms",
           "Act p99 ms", "rounds/s", "Act/echo", "p99 ratio")
CPU_COLUMNS = ("clients", "echo: server cores", "client cores", "server CPU ms/call",
               "fairshoe: transitions/s", "server cores", "client cores",
               "server CPU ms/transition", "EvaluateHand RPC/s", "/echo",
               "server CPU ms/call")
# byte code cached, as for an installed server (see bench_cli.py)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
STAND = rt.PlayerAction(stand=rt.PlayerAction.Stand())
HIT = rt.PlayerAction(hit=rt.PlayerAction.Hit())


# ----- the echo server (this script, run with --serve-echo) ------------------------------------


async def _serve_echo() -> None:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(json.dumps({"event": "serving", "port": port}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1)


# ----- server processes ------------------------------------------------------------------------


class Process:
    """A server process whose port is read from its ``serving`` JSON log line."""

    def __init__(self, argv: Sequence[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(list(argv), stdout=out, stderr=out, env=env,
                                         cwd=log.parent)
        self.port = self._port()

    def _port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if '"serving"' in line:
                    return int(json.loads(line)["port"])
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.proc.args!r} exited:\n{self.log.read_text()}")
            time.sleep(0.02)
        raise TimeoutError(f"no serving line from {self.proc.args!r}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_fairshoe(data: Path, extra_env: dict[str, str], processes: int = 1) -> Process:
    env = {k: v for k, v in ENV.items() if not k.startswith("FAIRSHOE_")}
    env.update({"FAIRSHOE_DATA_DIR": str(data), "PYTHONUNBUFFERED": "1"}, **extra_env)
    data.mkdir(parents=True, exist_ok=True)
    return Process([FAIRSHOE, "serve", "--address", "127.0.0.1:0", "--metrics-port", "0",
                    "--processes", str(processes)],
                   data / "server.log", env)


def start_echo(data: Path) -> Process:
    data.mkdir(parents=True, exist_ok=True)
    return Process([sys.executable, __file__, "--serve-echo"], data / "echo.log", ENV)


def wait_ready(channel: grpc.Channel) -> None:
    grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT)


# ----- the client (the same for both servers) --------------------------------------------------


@dataclass
class Tally:
    """What one client thread saw while the clock ran."""

    latencies: list[float] = field(default_factory=list)  # of the measured calls, seconds
    rounds: int = 0
    starts: int = 0  # StartRound calls begun in the measured window


@dataclass(frozen=True)
class Result:
    calls: int
    rounds: int
    seconds: float
    latencies: list[float]
    starts: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds in the window, by process

    @property
    def rate(self) -> float:
        return self.calls / self.seconds

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Clock:
    """Shared by the client threads: counting starts after the warm-up, stops at the end."""

    def __init__(self, warmup: float, seconds: float) -> None:
        self.begin = time.perf_counter() + warmup
        self.end = self.begin + seconds

    def running(self) -> bool:
        return time.perf_counter() < self.end

    def counts(self, started: float) -> bool:
        return started >= self.begin


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time so far of process ``pid`` (all its threads) and of its live
    descendants: `serve --processes N` serves from child processes. A child that exited is
    counted in its parent's ``cutime``/``cstime`` once reaped, which this adds too."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:  # exited meanwhile
        return 0.0
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK") + sum(cpu_seconds(child) for child in _children(pid))


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children.extend(int(c) for c in (task / "children").read_text().split())
        except FileNotFoundError:
            continue
    return children


class CpuWindow:
    """The CPU seconds each watched process spends inside the clock's measured window (read
    at its start and end by a thread of its own, so no client thread pays for it): ``readers``
    name the processes and read their CPU so far."""

    def __init__(self, clock: Clock, readers: dict[str, Callable[[], float]]) -> None:
        self.used: dict[str, float] = {}
        self._thread = threading.Thread(target=self._watch, args=(clock, readers), daemon=True)
        self._thread.start()

    def _watch(self, clock: Clock, readers: dict[str, Callable[[], float]]) -> None:
        time.sleep(max(0.0, clock.begin - time.perf_counter()))
        first = {name: read() for name, read in readers.items()}
        time.sleep(max(0.0, clock.end - time.perf_counter()))
        self.used = {name: read() - first[name] for name, read in readers.items()}

    def result(self) -> dict[str, float]:
        self._thread.join()
        return self.used


def drive(clients: int, clock: Clock, worker: Callable[[int, Clock, Tally], None],
          server_pid: int | None = None, database_pid: int | None = None) -> Result:
    """``clients`` threads running ``worker`` until the clock stops; the CPU this client
    process (and the server, and a database server, given their pids) spend meanwhile. The
    client's is this process's own, all its threads (``time.process_time``): not its
    children's, for the servers it started are its children."""
    readers: dict[str, Callable[[], float]] = {"client": time.process_time}
    if server_pid is not None:
        readers["server"] = lambda: cpu_seconds(server_pid)
    if database_pid is not None:
        readers["database"] = lambda: cpu_seconds(database_pid)
    window = CpuWindow(clock, readers)
    tallies = [Tally() for _ in range(clients)]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            worker(i, clock, tallies[i])
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    latencies = [x for t in tallies for x in t.latencies]
    return Result(len(latencies), sum(t.rounds for t in tallies), clock.end - clock.begin,
                  latencies, sum(t.starts for t in tallies), window.result())


def echo_worker(channel: grpc.Channel, payload: bytes) -> Callable[[int, Clock, Tally], None]:
    call = channel.unary_unary(ECHO_METHOD)

    def worker(_: int, clock: Clock, tally: Tally) -> None:
        while clock.running():
            started = time.perf_counter()
            call(payload, timeout=CALL_TIMEOUT)
            if clock.counts(started):
                tally.latencies.append(time.perf_counter() - started)

    return worker


class Players:
    """The real server's client side: one player per thread, funded once."""

    def __init__(self, channel: grpc.Channel | Sequence[grpc.Channel], run_id: str) -> None:
        # player i on channel i mod n: with one connection each, `serve --processes N`'s
        # kernel spreads them over its processes
        channels = [channel] if isinstance(channel, grpc.Channel) else list(channel)
        self.stubs = [(round_pb2_grpc.RoundServiceStub(c), wallet_pb2_grpc.WalletServiceStub(c))
                      for c in channels]
        self.run_id = run_id
        self.ids = 0
        self.lock = threading.Lock()

    def rid(self) -> str:
        with self.lock:
            self.ids += 1
            return f"{self.run_id}-{self.ids}"

    def fund(self, player: str, wallet: wallet_pb2_grpc.WalletServiceStub) -> None:
        account = wallet_pb2.Account(player_id=player, currency="EUR", mode=common_pb2.MODE_REAL)
        wallet.Deposit(wallet_pb2.DepositRequest(account=account, amount_minor=10**9,
                                                      request_id=self.rid()),
                            timeout=CALL_TIMEOUT)

    def worker(self, i: int, clock: Clock, tally: Tally) -> None:
        player = f"{self.run_id}-p{i}"
        rounds, wallet = self.stubs[i % len(self.stubs)]
        self.fund(player, wallet)
        turn = i
        while clock.running():
            game = GAMES[turn % len(GAMES)]
            turn += 1
            if clock.counts(time.perf_counter()):
                tally.starts += 1
            view = rounds.StartRound(round_pb2.StartRoundRequest(
                player_id=player, game=game, mode=common_pb2.MODE_REAL, currency="EUR",
                hands=[rt.HandBet(bet_minor=BETS[game])], request_id=self.rid()),
                timeout=CALL_TIMEOUT).round
            while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
                request = round_pb2.ActRequest(player_id=player, round_id=view.round_id,
                                               hand_id=view.turn.hand_id, action=decide(view),
                                               expected_version=view.version,
                                               request_id=self.rid())
                started = time.perf_counter()
                view = rounds.Act(request, timeout=CALL_TIMEOUT).round
                if clock.counts(started):
                    tally.latencies.append(time.perf_counter() - started)
            if clock.counts(time.perf_counter()) and clock.running():
                tally.rounds += 1


def decide(view: rt.RoundView) -> rt.PlayerAction:
    """Decline insurance and even money; hit below 12, else stand."""
    if view.turn.decision == rt.DECISION_INSURANCE:
        return rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=0))
    if view.turn.decision == rt.DECISION_EVEN_MONEY:
        return rt.PlayerAction(even_money=rt.PlayerAction.EvenMoney(accept=False))
    hand = next(h for h in view.hands if h.hand_id == view.turn.hand_id)
    return HIT if hand.total < 12 else STAND


def stateless_worker(channel: grpc.Channel | Sequence[grpc.Channel]
                     ) -> Callable[[int, Clock, Tally], None]:
    """The real server's cheapest call, ``MathService.EvaluateHand`` (no storage, no state): the
    fixed cost of its gRPC stack (interceptors, rpc log line, metrics, protobuf). Thread i
    calls on channel i mod n."""
    channels = [channel] if isinstance(channel, grpc.Channel) else list(channel)
    stubs = [math_pb2_grpc.MathServiceStub(c) for c in channels]
    request = math_pb2.EvaluateHandRequest(cards=["AS", "TD"])

    def worker(i: int, clock: Clock, tally: Tally) -> None:
        stub = stubs[i % len(stubs)]
        while clock.running():
            started = time.perf_counter()
            stub.EvaluateHand(request, timeout=CALL_TIMEOUT)
            if clock.counts(started):
                tally.latencies.append(time.perf_counter() - started)

    return worker


def typical_act_request() -> bytes:
    return round_pb2.ActRequest(player_id="bench-p0", round_id="0" * 32, hand_id=0,
                                action=STAND, expected_version=3,
                                request_id="bench-123456").SerializeToString()


# ----- main ------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def row(clients: int, echo: Result, act: Result) -> list[str]:
    return [str(clients), f"{echo.rate:.0f}", ms(echo.quantile(0.5)), ms(echo.quantile(0.99)),
            f"{act.rate:.0f}", ms(act.quantile(0.5)), ms(act.quantile(0.99)),
            f"{act.rounds / act.seconds:.1f}", f"{act.rate / echo.rate:.2f}",
            f"{act.quantile(0.99) / echo.quantile(0.99):.1f}"]


def per_call_ms(result: Result, calls: float) -> str:
    return f"{result.cpu['server'] * 1000 / calls:.2f}" if calls else "-"


def cores(result: Result, process: str) -> str:
    return f"{result.cpu[process] / result.seconds:.2f}"


def cpu_row(clients: int, echo: Result, act: Result, stateless: Result) -> list[str]:
    transitions = act.calls + act.starts
    return [str(clients), cores(echo, "server"), cores(echo, "client"),
            per_call_ms(echo, echo.calls), f"{transitions / act.seconds:.0f}",
            cores(act, "server"), cores(act, "client"), per_call_ms(act, transitions),
            f"{stateless.rate:.0f}", f"{stateless.rate / echo.rate:.2f}",
            per_call_ms(stateless, stateless.calls)]


def budget(clients: int, echo: Result, act: Result) -> str:
    """What the target asks of the server's CPU in this run: ``Act`` at half the echo's rate
    (with StartRounds in this run's proportion), on the cores the client leaves at that rate."""
    transitions = act.calls + act.starts
    if not act.calls or not transitions:
        return ""
    needed = 0.5 * echo.rate * transitions / act.calls  # transitions per second
    client = act.cpu["client"] / transitions * needed  # cores the client needs at that rate
    spare = (os.cpu_count() or 1) - client
    have = act.cpu["server"] / transitions * 1000
    return (f"{clients} clients: the target needs {needed:.0f} transitions/s ({0.5 * echo.rate:.0f}"
            f" Act/s); the client would use {client:.2f} cores, leaving {spare:.2f} to the "
            f"server: at most {spare / needed * 1000:.2f} ms of server CPU per transition "
            f"(measured: {have:.2f} ms)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default="1,4,16,64",
                        help="comma-separated client counts (default 1,4,16,64)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="uncounted seconds first")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for fairshoe serve (e.g. "
                             "FAIRSHOE_WORKERS=8, FAIRSHOE_LOG_LEVEL=WARNING); repeatable")
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_echo:
        asyncio.run(_serve_echo())
        return
    counts = [int(c) for c in args.clients.split(",")]
    root = Path(tempfile.mkdtemp(prefix="bench-service-"))
    real = echo = None
    try:
        extra = dict(item.split("=", 1) for item in args.server_env)
        real, echo = start_fairshoe(root / "data", extra), start_echo(root / "echo")
        options: Any = [("grpc.max_concurrent_streams", 1000)]
        real_channel = grpc.insecure_channel(f"127.0.0.1:{real.port}", options=options)
        echo_channel = grpc.insecure_channel(f"127.0.0.1:{echo.port}", options=options)
        for channel in (real_channel, echo_channel):
            wait_ready(channel)
        payload = typical_act_request()
        rows, cpu_rows, budgets = [], [], []
        for n in counts:
            echoed = drive(n, Clock(args.warmup, args.seconds),
                           echo_worker(echo_channel, payload), echo.proc.pid)
            players = Players(real_channel, f"c{n}")
            acted = drive(n, Clock(args.warmup, args.seconds), players.worker, real.proc.pid)
            stateless = drive(n, Clock(args.warmup, args.seconds),
                              stateless_worker(real_channel), real.proc.pid)
            rows.append(row(n, echoed, acted))
            cpu_rows.append(cpu_row(n, echoed, acted, stateless))
            budgets.append(budget(n, echoed, acted))
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.seconds:g} s per run after {args.warmup:g} s warm-up; Python "
              f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}; "
              "fairshoe serve (SQLite WAL, synchronous=FULL) vs a grpc.aio echo, each in its "
              "own process")
        print_table(COLUMNS, rows)
        print("\nWhere the CPU goes (cores: CPU seconds per second of the window; a transition is "
              "a StartRound or an Act):")
        print_table(CPU_COLUMNS, cpu_rows)
        print()
        for line in budgets:
            print(line)
    finally:
        for proc in (real, echo):
            if proc is not None:
                proc.stop()
        if args.keep:
            print(f"data kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
