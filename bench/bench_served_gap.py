"""Where a round transition's server CPU over gRPC goes, part by part, against the stateless
``EvaluateHand``'s, every part measured in the same run.

    .venv/bin/python bench/bench_served_gap.py [--clients 8] [--seconds 8] [--rounds 300]
                                               [--repeat 3] [--server-env NAME=VALUE]

``bench_rpc_cpu.py`` gives a transition's server CPU over gRPC (``served``) and
``EvaluateHand``'s; ``bench_transition.py`` gives the use case's CPU in process. Taken from
different runs the three do not add up: on this shared machine the CPU a fixed piece of work
costs moves by up to 2x from one hour to the next (the other tenants' load, the host), so a
"gap" between figures of different runs is mostly that. Here each repeat measures, one after the
other (the order alternates between repeats):

* **served**: a real ``fairshoe serve --processes 1`` (SQLite, ``synchronous=FULL``, logs to a
  file, metrics on; as ``bench_rpc_cpu.py`` starts it), driven by the Go loadgen: ``--clients``
  players of complete rounds, then as many ``EvaluateHand`` loops, then one player alone (no
  group commit, no concurrency); the serve's CPU from ``/proc`` per answered call;
* **in process**, on one thread of this process (its CPU time) and a SQLite file of its own, the
  same rounds through the served path's layers one at a time:

  - ``use case``: ``RoundService`` as ``bench_transition.py`` wires it (a fixed key, no metrics);
  - ``live wiring``: ``RoundService`` as ``LiveServices.open`` wires it for the server: storage
    timed for the metrics, the Prometheus observer, the key store's active key, wallet clients;
  - ``messages``: that through ``RoundApi``: the request decoded from its bytes and checked, the
    answer's ``RoundView`` message built and encoded;
  - ``chain``: that through the server's interceptor (authorization, metrics, the JSON log line
    written to a file, as the serve writes it);
  - and ``EvaluateHand`` through the same chain (request decoded, answer encoded).

The parts of a served transition are then: the use case, the live wiring, the messages, the
chain, and the **transport**: gRPC's own work (its threads, its core, the polling) for a unary
call, taken as ``EvaluateHand`` served minus ``EvaluateHand`` through the chain in process.
``unaccounted`` is the served transition minus all of those: what only concurrent transitions on
a served process pay (the writer's lock and the group commit's hand-offs between threads, GIL
convoys) less what they save (a shared COMMIT: one fsync and fewer WAL pages per transition),
so it is also printed for one client alone. ``/EvaluateHand`` is each part in units of the
served ``EvaluateHand`` (issue 16's goal: the whole transition at most 1.5).

``--count`` counts instead of timing (what the machine's load cannot move): the user-space
instructions of each part, under ``valgrind --tool=callgrind``. Each in-process layer and
``EvaluateHand`` through the chain runs in a child of its own (``count_layers.py``, seeded: every
layer plays the very same rounds), twice (``--count-rounds`` and 10 rounds), the difference
divided by the transitions between them; the serve runs under callgrind too, its counters
zeroed and dumped (``callgrind_control``) at the Go loadgen's window marks. The kernel's work
(the COMMIT's WAL writes and fsync, the sockets, the futexes) is not counted. Under callgrind
the serve runs some 50 times slower, so its batches of concurrent transitions differ from a
real run's; the counts per call are still its own.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import bench_service
import grpc
from bench_interceptor import Context, Details, cpu_per_call
from bench_interceptor import _unary as evaluate_calls
from bench_rpc_cpu import Target, go_run
from bench_service import ENV, FAIRSHOE, Process, start_fairshoe
from bench_transition import BET, GAMES
from tables import print_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import go_loadgen

from game_math.round import Action, ActionKind, HandBet
from rng_service.api import round_api
from rng_service.api.interceptors import ServiceInterceptor
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.round_api import RoundApi
from rng_service.core.logs import configure_logging
from rng_service.crypto.keys import SigningKey
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.ports import DEFAULT_OPERATOR, Mode
from rng_service.service.rounds import RoundService
from rng_service.service.views import RoundView
from rng_service.service.wallet import WalletService

USE_CASE, WIRING, MESSAGES, CHAIN = "use case", "live wiring", "messages", "chain"
LAYERS = (USE_CASE, WIRING, MESSAGES, CHAIN)
ROUND_METHOD = "/fairshoe.round.v1.RoundService/"


# ----- in process ------------------------------------------------------------------------------


def decide(hand_totals: dict[int, int], hand: int, decision: int) -> rt.PlayerAction:
    """The loadgen's strategy: decline insurance and even money; hit below 12, else stand."""
    action = rt.PlayerAction()
    if decision == rt.DECISION_INSURANCE:
        action.insurance.amount_minor = 0
    elif decision == rt.DECISION_EVEN_MONEY:
        action.even_money.accept = False
    elif hand_totals.get(hand, 21) < 12:
        action.hit.SetInParent()
    else:
        action.stand.SetInParent()
    return action


def engine_action(view: RoundView) -> Action:
    """The same strategy on the service's view."""
    if view.decision == "insurance":
        return Action(ActionKind.INSURANCE, 0)
    if view.decision == "even_money":
        return Action(ActionKind.EVEN_MONEY, accept=False)
    total = next(h.total for h in view.hands if h.hand_id == view.turn_hand)
    return Action(ActionKind.HIT if total < 12 else ActionKind.STAND)


def _given(handler: grpc.RpcMethodHandler, _details: object) -> grpc.RpcMethodHandler:
    return handler


def served_handlers(api: RoundApi) -> dict[str, grpc.RpcMethodHandler]:
    """StartRound's and Act's handlers of ``api`` as the server registers them
    (``round_api.method_handlers``; in a tree from before it, the generated code's)."""
    made = getattr(round_api, "method_handlers", None)
    if made is not None:
        return made(api)  # type: ignore[no-any-return]
    return {name: grpc.unary_unary_rpc_method_handler(getattr(api, name), request.FromString,
                                                      response.SerializeToString)
            for name, request, response in (
                ("StartRound", round_pb2.StartRoundRequest, round_pb2.StartRoundResponse),
                ("Act", round_pb2.ActRequest, round_pb2.ActResponse))}


class Layers:
    """The served path's layers on one SQLite file in ``root``, each able to play rounds."""

    def __init__(self, root: Path) -> None:
        from rng_service.api.server import LiveServices  # noqa: PLC0415 (after the env is set)

        self.live = LiveServices.open(str(root / "fairshoe.db"))
        self.plain = RoundService(self.live.storage, vault=SeedVault(secrets.token_bytes(32)),
                                  signer=SigningKey.generate())
        self.interceptor = ServiceInterceptor(max_streams=64, probe_streams=8)
        self.run = secrets.token_hex(4)
        self.ids = iter(range(10**9))
        wallet = WalletService(self.live.storage)
        self.players = {layer: f"gap-{self.run}-{i}" for i, layer in enumerate(LAYERS)}
        for player in self.players.values():  # one each: a layer's shoes are its own
            wallet.deposit(DEFAULT_OPERATOR, player, "EUR", 10**12, request_id=f"f-{player}")
        served = served_handlers(RoundApi(self.live.rounds))
        self.handlers: dict[tuple[bool, str], grpc.RpcMethodHandler] = {}
        for chained in (False, True):
            for name in ("StartRound", "Act"):
                handler = served[name]
                if chained:
                    handler = self.interceptor.intercept_service(
                        partial(_given, handler), Details(ROUND_METHOD + name))
                self.handlers[(chained, name)] = handler

    def request_id(self) -> str:
        return f"{self.run}-{next(self.ids)}"

    def play(self, layer: str, rounds: int) -> tuple[float, int]:
        """CPU seconds (this thread's) and transitions of ``rounds`` rounds through ``layer``."""
        if layer in (USE_CASE, WIRING):
            return self._play_service(self.plain if layer == USE_CASE else self.live.rounds,
                                      self.players[layer], rounds)
        return self._play_api(layer == CHAIN, self.players[layer], rounds)

    def _play_service(self, service: RoundService, player: str, rounds: int
                      ) -> tuple[float, int]:
        cpu, calls = 0.0, 0
        for i in range(rounds):
            started = time.thread_time()
            view = service.start_round(DEFAULT_OPERATOR, player, GAMES[i % len(GAMES)],
                                       mode=Mode.REAL, currency="EUR", hands=[HandBet(BET)],
                                       request_id=self.request_id())
            cpu, calls = cpu + time.thread_time() - started, calls + 1
            while view.status == "awaiting":
                action = engine_action(view)
                started = time.thread_time()
                view = service.act(DEFAULT_OPERATOR, view.round_id, action,
                                   hand_id=view.turn_hand, expected_version=view.version,
                                   request_id=self.request_id(), player=player)
                cpu, calls = cpu + time.thread_time() - started, calls + 1
        return cpu, calls

    def _play_api(self, chained: bool, player: str, rounds: int) -> tuple[float, int]:
        start, act = self.handlers[(chained, "StartRound")], self.handlers[(chained, "Act")]
        cpu, calls = 0.0, 0
        for i in range(rounds):
            data = round_pb2.StartRoundRequest(
                player_id=player, game=GAMES[i % len(GAMES)], mode=common_pb2.MODE_REAL,
                currency="EUR", hands=[rt.HandBet(bet_minor=BET)],
                request_id=self.request_id()).SerializeToString()
            started = time.thread_time()
            answer = start.response_serializer(
                start.unary_unary(start.request_deserializer(data), Context()))
            cpu, calls = cpu + time.thread_time() - started, calls + 1
            view = round_pb2.StartRoundResponse.FromString(answer).round
            while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
                totals = {h.hand_id: h.total for h in view.hands}
                data = round_pb2.ActRequest(
                    player_id=player, round_id=view.round_id, hand_id=view.turn.hand_id,
                    action=decide(totals, view.turn.hand_id, view.turn.decision),
                    expected_version=view.version,
                    request_id=self.request_id()).SerializeToString()
                started = time.thread_time()
                answer = act.response_serializer(
                    act.unary_unary(act.request_deserializer(data), Context()))
                cpu, calls = cpu + time.thread_time() - started, calls + 1
                view = round_pb2.ActResponse.FromString(answer).round
        return cpu, calls

    def evaluate(self, calls: int) -> float:
        """CPU seconds per ``EvaluateHand`` through the chain (the best of 3 runs)."""
        _bare, chained = evaluate_calls(self.interceptor, ["AS", "TD"])
        chained()
        return cpu_per_call(chained, calls, 3)

    def close(self) -> None:
        self.live.close()


@contextlib.contextmanager
def logging_to(path: Path) -> Iterator[None]:
    """The service's JSON log lines written to ``path`` (as the serve writes its log file)."""
    with path.open("w") as sink, contextlib.redirect_stderr(sink):
        configure_logging("INFO")
        yield


# ----- served ----------------------------------------------------------------------------------


@dataclass
class Served:
    transition: float  # server CPU seconds per transition, --clients players
    evaluate: float  # per EvaluateHand
    alone: float  # per transition, one player


def served(binary: Path, root: Path, args: argparse.Namespace, tag: str) -> Served:
    data = root / f"serve-{tag}"
    env = dict(e.split("=", 1) for e in args.server_env)
    server = start_fairshoe(data, env, 1)
    try:
        target = Target(server.port, server.proc.pid, None, tag, args.clients)
        rounds = go_run(binary, target, "rounds", args, run_id=f"gap{tag}")
        evaluate = go_run(binary, target, "evaluate", args, run_id=f"gap{tag}e")
        one = Target(server.port, server.proc.pid, None, tag, 1)
        alone = go_run(binary, one, "rounds", args, run_id=f"gap{tag}a")
    finally:
        server.stop()
    for m in (rounds, evaluate, alone):
        if m.errors or not m.calls:
            raise RuntimeError(f"the loadgen saw {m.errors} errors: {m.error_kinds}")
    return Served(rounds.per_call(rounds.server_cpu), evaluate.per_call(evaluate.server_cpu),
                  alone.per_call(alone.server_cpu))


# ----- counted ---------------------------------------------------------------------------------

SHORT = 10  # rounds (or x50 calls) of the run whose count is subtracted: start-up, warm-up


def counted_child(layer: str, count: int) -> tuple[int, int]:
    """(instructions, transitions or calls) of one ``count_layers.py`` child under callgrind."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
           str(Path(__file__).with_name("count_layers.py")), layer, str(count)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False,
                         cwd=Path(__file__).parent)
    collected = re.search(r"Collected : (\d+)", out.stderr)
    done = re.search(r"COUNTED (\d+)", out.stdout)
    if out.returncode != 0 or collected is None or done is None:
        raise SystemExit(f"the counted run failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    return int(collected.group(1)), int(done.group(1))


def counted_layer(layer: str, rounds: int) -> float:
    """Instructions per transition (per call for ``evaluate``) of one layer, the short run's
    count subtracted."""
    scale = 50 if layer == "evaluate" else 1
    long, short = counted_child(layer, rounds * scale), counted_child(layer, SHORT * scale)
    return (long[0] - short[0]) / (long[1] - short[1])


def counted_served(binary: Path, root: Path, args: argparse.Namespace) -> dict[str, float]:
    """Instructions per call of the serve (under callgrind) for each loadgen workload."""
    data = root / "serve-counted"
    data.mkdir(parents=True)
    env = {k: v for k, v in ENV.items() if not k.startswith("FAIRSHOE_")}
    env.update({"FAIRSHOE_DATA_DIR": str(data), "PYTHONUNBUFFERED": "1"})
    env.update(e.split("=", 1) for e in args.server_env)
    out = root / "callgrind.out"
    bench_service.START_TIMEOUT = max(bench_service.START_TIMEOUT, 600.0)  # 50x slower start
    server = Process(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p",
                      FAIRSHOE, "serve", "--address", "127.0.0.1:0", "--metrics-port", "0",
                      "--processes", "1"], data / "server.log", env)
    pid = server.proc.pid
    per_call = {}
    try:
        for dump, workload in enumerate(("rounds", "evaluate"), start=1):
            calls = _counted_window(binary, server.port, pid, workload, args)
            path = Path(f"{out}.{pid}.{dump}")
            deadline = time.monotonic() + 60
            while not (path.exists() and "totals:" in path.read_text()):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no callgrind dump {path}")
                time.sleep(0.5)
            summary = re.search(r"^summary: (\d+)", path.read_text(), re.MULTILINE)
            assert summary is not None
            per_call[workload] = int(summary.group(1)) / calls
    finally:
        server.stop()
        for path in glob.glob(f"{out}.*"):
            os.unlink(path)
    return per_call


def _counted_window(binary: Path, port: int, pid: int, workload: str,
                    args: argparse.Namespace) -> int:
    """Run the loadgen, zeroing the serve's counters as its window opens and dumping them as
    it closes; the calls answered in the window."""
    argv = go_loadgen.argv(binary, f"127.0.0.1:{port}", [
        "-workload", workload, "-clients", str(args.clients), "-seconds",
        str(args.count_seconds), "-warmup", "10", "-run-id", f"count{workload}{time.time_ns()}"])
    result: dict[str, int] = {}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            if event["event"] == "measuring":
                subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                               capture_output=True)
            elif event["event"] == "measured":
                subprocess.run(["callgrind_control", "-d", workload, str(pid)], check=True,
                               capture_output=True)
            elif event["event"] == "result":
                result = event
    if not result.get("calls") or result.get("errors"):
        raise RuntimeError(f"the counted {workload} run failed: {result}")
    return result["calls"]


def count(binary: Path, root: Path, args: argparse.Namespace) -> None:
    """The counted table (``--count``)."""
    layers = {layer: counted_layer(layer, args.count_rounds) for layer in LAYERS}
    evaluate_chain = counted_layer("evaluate", args.count_rounds)
    serve = counted_served(binary, root, args)
    transport = serve["evaluate"] - evaluate_chain
    expected = layers[CHAIN] + transport
    rows = [
        ("use case (in process)", layers[USE_CASE]),
        ("+ live wiring", layers[WIRING] - layers[USE_CASE]),
        ("+ messages (RoundApi)", layers[MESSAGES] - layers[WIRING]),
        ("+ chain (interceptor)", layers[CHAIN] - layers[MESSAGES]),
        ("+ transport (EvaluateHand served - in process)", transport),
        ("= expected", expected),
        ("served, --clients players", serve["rounds"]),
        ("unaccounted (served - expected)", serve["rounds"] - expected),
        ("EvaluateHand served", serve["evaluate"]),
        ("EvaluateHand in process (chain)", evaluate_chain),
    ]
    print(f"user-space instructions under callgrind: in process {args.count_rounds} rounds less "
          f"{SHORT} per layer; served: {args.clients} clients (Go loadgen), {args.count_seconds:g} "
          f"s windows; the kernel's work not counted")
    print_table(("part", "M instructions/transition", "/EvaluateHand"),
                [[name, f"{value / 1e6:.3f}", f"{value / serve['evaluate']:.2f}"]
                 for name, value in rows])


# ----- the table -------------------------------------------------------------------------------


def parts(serve: Served, layers: dict[str, float], evaluate_chain: float
          ) -> list[tuple[str, float]]:
    """(part, CPU seconds per transition) of one repeat."""
    transport = serve.evaluate - evaluate_chain
    expected = layers[CHAIN] + transport
    return [
        ("use case (in process)", layers[USE_CASE]),
        ("+ live wiring", layers[WIRING] - layers[USE_CASE]),
        ("+ messages (RoundApi)", layers[MESSAGES] - layers[WIRING]),
        ("+ chain (interceptor)", layers[CHAIN] - layers[MESSAGES]),
        ("+ transport (EvaluateHand served - in process)", transport),
        ("= expected", expected),
        ("served, --clients players", serve.transition),
        ("unaccounted (served - expected)", serve.transition - expected),
        ("served, one player", serve.alone),
        ("unaccounted, one player", serve.alone - expected),
        ("EvaluateHand served", serve.evaluate),
        ("EvaluateHand in process (chain)", evaluate_chain),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0,
                        help="measured seconds of each served run")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=300,
                        help="rounds per in-process layer and repeat")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for fairshoe serve; repeatable")
    parser.add_argument("--count", action="store_true",
                        help="count user-space instructions under callgrind instead of timing")
    parser.add_argument("--count-rounds", type=int, default=40,
                        help="with --count: rounds per in-process layer (default 40)")
    parser.add_argument("--count-seconds", type=float, default=30.0,
                        help="with --count: measured seconds of each served window (default 30)")
    args = parser.parse_args()
    args.go_arg = []
    binary = go_loadgen.build()
    if args.count:
        root = Path(tempfile.mkdtemp(prefix="bench-served-gap-"))
        try:
            count(binary, root, args)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    root = Path(tempfile.mkdtemp(prefix="bench-served-gap-"))
    os.environ["FAIRSHOE_DATA_DIR"] = str(root / "in-process")  # LiveServices' keys and vault
    load_before = os.getloadavg()[0]
    runs: list[list[tuple[str, float]]] = []
    try:
        with logging_to(root / "in-process.log"):
            layers = Layers(root / "in-process")
            try:
                for layer in LAYERS:
                    layers.play(layer, 8)  # warm: imports, caches, per-method series
                for repeat in range(args.repeat):
                    if repeat % 2 == 0:  # alternated: a drift in the load hits both alike
                        in_proc, evaluate_chain = in_process(layers, args.rounds)
                        serve = served(binary, root, args, str(repeat))
                    else:
                        serve = served(binary, root, args, str(repeat))
                        in_proc, evaluate_chain = in_process(layers, args.rounds)
                    runs.append(parts(serve, in_proc, evaluate_chain))
            finally:
                layers.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(args, runs, load_before)


def in_process(layers: Layers, rounds: int) -> tuple[dict[str, float], float]:
    """CPU seconds per transition through each layer (its rounds played in thirds, the layers
    interleaved), and per EvaluateHand through the chain."""
    totals = {layer: [0.0, 0] for layer in LAYERS}
    for _ in range(3):
        for layer in LAYERS:
            cpu, calls = layers.play(layer, max(1, rounds // 3))
            totals[layer][0] += cpu
            totals[layer][1] += calls
    return {k: v[0] / v[1] for k, v in totals.items()}, layers.evaluate(5000)


def report(args: argparse.Namespace, runs: list[list[tuple[str, float]]], load_before: float
           ) -> None:
    evaluate = statistics.median(dict(r)["EvaluateHand served"] for r in runs)
    print(f"{args.repeat} repeats, {args.clients} clients (Go loadgen), {args.seconds:g} s "
          f"served runs, {args.rounds} in-process rounds per layer; SQLite, one serving "
          f"process; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    rows = []
    for i, (name, _) in enumerate(runs[0]):
        values = [r[i][1] for r in runs]
        median = statistics.median(values)
        rows.append([name, f"{median * 1e3:.3f}", f"{median / evaluate:.2f}",
                     ", ".join(f"{v * 1e3:.3f}" for v in values)])
    print_table(("part", "ms/transition (median)", "/EvaluateHand", "each repeat"), rows)


if __name__ == "__main__":
    main()
