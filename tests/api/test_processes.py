"""`fairshoe serve --processes 2`: real processes behind one address, on one SQLite file or
as two replicas on PostgreSQL.

* Concurrent play from many channels (spread over both workers, each connection counted in
  /proc): the ledger balances, the log verifies complete against a checkpoint
  (``fairshoe audit export`` + ``verify``), and the one metrics endpoint's series add up to
  every call the clients made, whichever worker served it.
* SIGTERM: the parent forwards it, both workers refuse new calls, a call held inside its
  handler in one worker is waited for, and the parent exits 0 once both have drained.
* The port: a second `fairshoe serve`, of one process or of two, or any socket that does not
  ask to share it, cannot bind it; each fails with one error line naming the address.
* Worker start-up failures fail the serve with exit 2 and one error line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from prometheus_client.parser import text_string_to_metric_families
from support.live_server import (
    FAIRSHOE,
    Client,
    ServerProcess,
    audit_with_checkpoint,
    ledger_is_balanced,
    simple_action,
)
from support.orphans import children, running, wait_gone
from support.waits import wait_until
from support.worker_channels import channels_on_each_worker, close_channels, own_channel

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
PLAYERS = 8
ROUNDS = 5


# --- the workers ------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def two(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A `serve --processes 2` on SQLite (the processes share the file) or PostgreSQL (each
    process a replica)."""
    url = str(request.getfixturevalue("pg_url")) if request.param == "postgresql" else None
    server = ServerProcess(tmp_path / "data", stacked=False, processes=2, database_url=url,
                           metrics_port="any").start()
    yield server
    status = server.stop()
    log = server.log()
    assert status == 0, log[-4000:]
    assert "Traceback" not in log, log[-4000:]


# --- play on both, one ledger, one log, one metrics endpoint ----------------------------------


def _samples(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_play_from_many_channels_balances_verifies_and_the_metrics_add_up(
        two: ServerProcess, tmp_path: Path) -> None:
    assert len(two.worker_pids()) == 2
    spread = channels_on_each_worker(two)
    channels = [c for group in spread.values() for c in group]
    while len(channels) < PLAYERS:
        channels.append(own_channel(two))
    # each worker gets players: the players alternate between the workers' channels
    firsts = [group[0] for group in spread.values()]
    assigned = [firsts[i % len(firsts)] if i < len(firsts) else channels[i]
                for i in range(PLAYERS)]
    started = Counter[str]()
    acts = Counter[str]()
    errors: list[BaseException] = []

    def play(index: int) -> None:
        client, player = Client(assigned[index]), f"multi-{index}"
        try:
            client.deposit(player, 1_000_000)
            for n in range(ROUNDS):
                game = ("snap", "double-deck")[(index + n) % 2]
                view = client.start(player, game, [1000])
                started[game] += 1
                while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
                    view = client.act(player, view, simple_action(view))
                    acts[game] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=play, args=(i,)) for i in range(PLAYERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    close_channels(spread)
    assert not errors, errors
    rounds = sum(started.values())
    assert rounds == PLAYERS * ROUNDS

    # both workers served StartRounds (every RPC has its log line, with its worker)
    lines = [json.loads(line) for line in two.log().splitlines() if line.startswith("{")]
    serving = {line.get("worker") for line in lines
               if line.get("method", "").endswith("/StartRound")}
    assert serving == {0, 1}, serving

    ledger_is_balanced(two)
    assert two.sql("SELECT COUNT(*) FROM rounds WHERE status = 'open'") == [(0,)]
    summary = audit_with_checkpoint(two, two.data_dir / "keys", tmp_path)
    assert summary.startswith("audit PASS"), summary
    assert f"{rounds} rounds: {rounds} OK" in summary, summary
    (size,), = two.sql("SELECT size FROM log_state WHERE operator = 'default'")
    (leaves,), = two.sql("SELECT COUNT(*) FROM log_leaves WHERE operator = 'default'")
    (dense,), = two.sql("SELECT COUNT(DISTINCT leaf_index) FROM log_leaves WHERE operator = "
                        "'default' AND leaf_index < ?", size)
    assert size == leaves == dense  # no index twice, none skipped

    _metrics_add_up(two.scrape(), started, sum(acts.values()), two)


def _metrics_add_up(metrics: str, started: Counter[str], acts: int, two: ServerProcess) -> None:
    """The one endpoint's series count every call, whichever worker served it."""
    rounds = sum(started.values())
    method = {"grpc_service": "fairshoe.round.v1.RoundService"}
    assert _samples(metrics, "grpc_server_handled_total", grpc_method="StartRound",
                    grpc_code="OK", **method) == rounds
    assert _samples(metrics, "grpc_server_handled_total", grpc_method="Act",
                    grpc_code="OK", **method) == acts
    assert _samples(metrics, "grpc_server_handling_seconds_count", grpc_method="StartRound",
                    **method) == rounds
    for game, count in started.items():
        assert _samples(metrics, "fairshoe_rounds_started_total", game=game) == count
    assert _samples(metrics, "fairshoe_rounds_finished_total") == rounds
    # one series per gauge, not one per process; the sizes are the database's
    ok = [s for f in text_string_to_metric_families(metrics) for s in f.samples
          if s.name == "fairshoe_rng_self_test_ok"]
    assert [(s.labels, s.value) for s in ok] == [({}, 1.0)], ok
    (records,), = two.sql("SELECT COUNT(*) FROM records")
    assert _samples(metrics, "fairshoe_signed_records", kind="round") == records == rounds


# --- SIGTERM ------------------------------------------------------------------------------------


def test_sigterm_drains_both_workers_and_waits_for_a_call_held_in_one(tmp_path: Path) -> None:
    """A call is held inside its write transaction in one worker (on SQLite one transaction at
    a time holds the writer's turn, so one held call is all there can be); on SIGTERM both
    workers refuse new calls, the idle one exits, the busy one waits for its call, and the
    parent exits 0 once both have drained."""
    server = ServerProcess(tmp_path / "held", processes=2,
                           args=["--grace-seconds", "60"]).start()
    assert server.proc is not None
    spread = channels_on_each_worker(server)
    clients = {pid: Client(group[0]) for pid, group in spread.items()}
    busy, idle = list(clients)
    clients[busy].deposit("held", 100_000)
    server.hold_new_shoes()
    answered: list[Any] = []

    def start() -> None:
        try:
            answered.append(clients[busy].start("held", "snap", [1000], request_id="held"))
        except grpc.RpcError as exc:
            answered.append(exc.code())

    caller = threading.Thread(target=start)
    caller.start()
    while server.held_by() != {busy}:  # the call is inside its handler, in its transaction
        assert caller.is_alive(), answered
        threading.Event().wait(0.01)
    server.proc.send_signal(signal.SIGTERM)
    # each worker drains: new calls refused (a read: a write admitted before the SIGTERM
    # reached the busy worker would wait behind the held transaction)
    for client in clients.values():
        while True:
            try:
                client.balance("held")
            except grpc.RpcError as exc:
                assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc
                break
            threading.Event().wait(0.01)  # SIGTERM not forwarded yet
    # the idle worker exits; the held call keeps its own up
    wait_until(lambda: not running(idle), "the idle worker exits")
    assert server.proc.poll() is None and not answered
    assert running(busy)
    server.release_shoes()
    caller.join(timeout=60)
    status = server.proc.wait(timeout=60)
    close_channels(spread)
    log = server.log()
    assert status == 0, log
    assert [type(a) for a in answered] == [rt.RoundView], answered
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    stopped = [line for line in lines if line["event"] == "stopped"]
    assert sorted((line.get("worker", -1), line.get("abandoned_calls", 0))
                  for line in stopped) == [(-1, 0), (0, 0), (1, 0)], stopped
    assert [line["worker_statuses"] for line in stopped if "worker" not in line] == [[0, 0]]
    assert server.sql("SELECT COUNT(*) FROM rounds WHERE round_id = ?",
                      answered[0].round_id) == [(1,)]


# --- the port is the serve's alone -------------------------------------------------------------


def _second(server: ServerProcess, tmp_path: Path, *options: str
            ) -> subprocess.CompletedProcess[str]:
    probe = ServerProcess(tmp_path / "second", stacked=False)
    probe.data_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([str(FAIRSHOE), "serve", "--address", f"127.0.0.1:{server.port}",
                           "--metrics-port", "0", *options], env=probe.env, cwd=probe.data_dir,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_second_serve_on_the_port_fails_with_one_error_naming_it(
        two: ServerProcess, tmp_path: Path, processes: str) -> None:
    result = _second(two, tmp_path, "--processes", processes)
    assert result.returncode == 2, result.stderr
    errors = [json.loads(line) for line in result.stderr.splitlines()
              if line.startswith("{") and json.loads(line)["level"] == "error"]
    assert len(errors) == 1, result.stderr
    assert f"127.0.0.1:{two.port}" in errors[0]["error"] and "in use" in errors[0]["error"]
    assert not (tmp_path / "second" / "fairshoe.db").exists()  # refused before any file
    assert two.health() == health_pb2.HealthCheckResponse.SERVING


def test_no_socket_that_does_not_share_the_port_can_bind_it(two: ServerProcess) -> None:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0")):
        with socket.socket(family) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError, match="in use"):
                sock.bind((host, two.port))
    server = grpc.server(__import__("concurrent.futures").futures.ThreadPoolExecutor(1),
                         options=(("grpc.so_reuseport", 0),))
    try:
        with pytest.raises(RuntimeError):
            server.add_insecure_port(f"127.0.0.1:{two.port}")
    finally:
        server.stop(None)


def test_a_bad_option_fails_in_the_parent_before_any_worker_starts(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "bad", stacked=False, processes=2)
    server.data_dir.mkdir(parents=True)
    done = subprocess.run([*server.command(), "--workers", "0"], env=server.env,
                          cwd=server.data_dir, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2, done.stderr
    errors = [json.loads(line) for line in done.stderr.splitlines()
              if line.startswith("{") and json.loads(line)["level"] == "error"]
    assert len(errors) == 1 and "--workers" in errors[0]["error"], done.stderr


@pytest.mark.parametrize(("option", "env"), [("0", None), ("two", None), (None, "-1"),
                                             (None, "many")])
def test_a_count_of_processes_that_is_not_a_whole_number_of_at_least_1_is_refused(
        tmp_path: Path, option: str | None, env: str | None) -> None:
    server = ServerProcess(tmp_path / "count", stacked=False)
    server.data_dir.mkdir(parents=True)
    environ = {**server.env}
    environ.pop("FAIRSHOE_PROCESSES")
    if env is not None:
        environ["FAIRSHOE_PROCESSES"] = env
    done = subprocess.run([str(FAIRSHOE), "serve", "--address", "127.0.0.1:0",
                           *(["--processes", option] if option is not None else [])],
                          env=environ, cwd=server.data_dir, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "--processes" in done.stderr and repr(option if option is not None else env) in (
        done.stderr), done.stderr
    assert not (server.data_dir / "fairshoe.db").exists()


# --- a worker, or the parent, killed ------------------------------------------------------------


def _log_events(server: ServerProcess, event: str) -> list[dict[str, Any]]:
    return [line for line in (json.loads(raw) for raw in server.log().splitlines()
                              if raw.startswith("{")) if line.get("event") == event]


def test_a_worker_sigkilled_is_replaced_and_its_clients_play_on_from_the_others(
        tmp_path: Path) -> None:
    """SIGKILL one worker between calls: the parent logs it and starts another, which serves;
    a client whose connection it held reconnects (to either) and plays on with the same
    round, and nothing acknowledged is lost."""
    server = ServerProcess(tmp_path / "kill", stacked=False, processes=2).start()
    spread = channels_on_each_worker(server)
    victim = next(iter(spread))
    client = Client(spread[victim][0])
    client.deposit("survivor", 100_000)
    view = client.start("survivor", "double-deck", [1000])
    balance = client.balance("survivor")
    os.kill(victim, signal.SIGKILL)
    while not _log_events(server, "worker_replaced"):
        assert server.proc is not None and server.proc.poll() is None, server.log()
        threading.Event().wait(0.05)
    (died,) = _log_events(server, "worker_died")
    assert died["pid"] == victim and died["signal"] == "SIGKILL", died
    assert victim not in server.worker_pids() and len(server.worker_pids()) == 2
    # the same channel reconnects (gRPC retries the connection on its own) and plays on
    while True:
        try:
            assert client.balance("survivor") == balance
            break
        except grpc.RpcError as exc:  # the dead connection, noticed by this call
            assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc
    while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
        view = client.act("survivor", view, simple_action(view))
    assert view.status == rt.ROUND_STATUS_FINISHED
    close_channels(spread)
    assert server.stop() == 0, server.log()[-4000:]
    ledger_is_balanced(server)


def test_workers_whose_parent_is_sigkilled_drain_and_exit_and_free_the_port(
        tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "orphans", stacked=False, processes=2).start()
    assert server.proc is not None
    workers = children(server.proc.pid)  # told by pid and start time: init reaps them
    assert len(workers) == 2, workers
    server.kill()
    wait_gone(workers, "the killed parent's workers exit")
    # the port is free again: nothing holds it, not even a socket that never listened
    with socket.socket(socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", server.port))
    stopped = _log_events(server, "stopped")
    assert sorted(line.get("worker") for line in stopped) == [0, 1], stopped
