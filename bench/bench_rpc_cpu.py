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
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
from bench_service import (
    BETS,
    CALL_TIMEOUT,
    GAMES,
    Players,
    Process,
    decide,
    start_fairshoe,
    wait_ready,
)
from tables import print_table

from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

COLUMNS = ("RPCs", "clients", "calls", "calls/s", "server CPU s", "server CPU ms/call")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of proc(5)


class Window:
    """The measured window, shared by the client threads: calls count between its start and
    end; the server's CPU is read at both."""

    def __init__(self, pid: int, warmup: float, seconds: float) -> None:
        self.pid, self.warmup, self.seconds = pid, warmup, seconds
        self.open = self.stopped = False
        self.calls = 0
        self.lock = threading.Lock()

    def count(self) -> None:
        if self.open:
            with self.lock:
                self.calls += 1

    def run(self) -> tuple[int, float]:
        """Wait out the warm-up, measure for the window: (calls, server CPU seconds)."""
        time.sleep(self.warmup)
        before, self.open = cpu_seconds(self.pid), True
        time.sleep(self.seconds)
        self.open = False
        after = cpu_seconds(self.pid)
        self.stopped = True
        return self.calls, after - before


def measure(pid: int, clients: int, warmup: float, seconds: float,
            worker: Callable[[int, Window], None]) -> tuple[int, float]:
    window = Window(pid, warmup, seconds)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            worker(i, window)
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    result = window.run()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return result


def transitions(players: Players) -> Callable[[int, Window], None]:
    def worker(i: int, window: Window) -> None:
        player = f"{players.run_id}-p{i}"
        players.fund(player)
        turn = i
        while not window.stopped:
            game = GAMES[turn % len(GAMES)]
            turn += 1
            view = players.rounds.StartRound(round_pb2.StartRoundRequest(
                player_id=player, game=game, mode=common_pb2.MODE_REAL, currency="EUR",
                hands=[rt.HandBet(bet_minor=BETS[game])], request_id=players.rid()),
                timeout=CALL_TIMEOUT).round
            window.count()
            while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
                request = round_pb2.ActRequest(player_id=player, round_id=view.round_id,
                                               hand_id=view.turn.hand_id, action=decide(view),
                                               expected_version=view.version,
                                               request_id=players.rid())
                view = players.rounds.Act(request, timeout=CALL_TIMEOUT).round
                window.count()

    return worker


def evaluations(channel: grpc.Channel) -> Callable[[int, Window], None]:
    stub = math_pb2_grpc.MathServiceStub(channel)
    request = math_pb2.EvaluateHandRequest(cards=["AS", "7D", "5C"])

    def worker(_: int, window: Window) -> None:
        while not window.stopped:
            stub.EvaluateHand(request, timeout=CALL_TIMEOUT)
            window.count()

    return worker


def row(name: str, clients: int, seconds: float, result: tuple[int, float]) -> list[str]:
    calls, cpu = result
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
        rows = [
            row("StartRound+Act", n, s, measure(pid, n, w, s, transitions(Players(channel, "c")))),
            row("EvaluateHand", n, s, measure(pid, n, w, s, evaluations(channel))),
        ]
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
