"""A real `fairshoe serve` process's life: it starts only where it alone listens, drains on
SIGTERM (health NOT_SERVING at once, watches ended, new calls refused, calls in flight finished,
exit 0) and logs nothing but JSON lines, one per RPC, never a secret.

Findings of the operator's issue "Operating and trying Fairshoe" (Lifecycle).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from support.live_server import CALL_TIMEOUT, FAIRSHOE, Client, ServerProcess
from support.waits import wait_until

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _serve(tmp_path: Path, *options: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`fairshoe serve` with ``options`` on its own data directory, expected to fail quickly."""
    probe = ServerProcess(tmp_path / "second", stacked=False)
    probe.data_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([str(FAIRSHOE), "serve", *options], env=probe.env, cwd=probe.data_dir,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line of ``text`` as a JSON object (fails on the first that is not)."""
    parsed = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}\n--- whole output ---\n{text}")
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed


def _one_error(result: subprocess.CompletedProcess[str], *words: str) -> dict[str, Any]:
    """The run failed with status 2 and exactly one error line (JSON), naming ``words``."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = _json_lines(result.stderr)
    errors = [line for line in lines if line.get("level") == "error"]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0]["error"], errors[0]
    return errors[0]


@pytest.fixture()
def first(tmp_path: Path) -> Any:
    server = ServerProcess(tmp_path / "first", stacked=False).start()
    yield server
    assert server.stop() == 0, server.log()


# -- 1. only one server per port ------------------------------------------------------------------


def _left_behind(tmp_path: Path) -> list[str]:
    """What a failed `_serve` wrote into its data directory (a database, keys): nothing."""
    root = tmp_path / "second"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_second_server_on_a_taken_port_exits_2(first: ServerProcess, tmp_path: Path) -> None:
    result = _serve(tmp_path, "--address", f"127.0.0.1:{first.port}", "--metrics-port", "0")
    _one_error(result, f"127.0.0.1:{first.port}")
    assert first.health() == SERVING  # and the first keeps every connection
    assert _left_behind(tmp_path) == []  # the port is bound before any file is made


def test_a_port_another_program_holds_exits_2(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = _serve(tmp_path, "--address", f"127.0.0.1:{port}", "--metrics-port", "0")
    _one_error(result, str(port))
    assert _left_behind(tmp_path) == []


def test_a_taken_metrics_port_exits_2(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = _serve(tmp_path, "--address", "127.0.0.1:0", "--metrics-port", str(port))
    _one_error(result, str(port))
    # not var/fairshoe.db and new dev keys first, then the failure on the port
    assert _left_behind(tmp_path) == []


def test_a_bad_grace_period_exits_2(tmp_path: Path) -> None:
    result = _serve(tmp_path, "--address", "127.0.0.1:0", "--metrics-port", "0",
                    "--grace-seconds", "-1")
    _one_error(result, "--grace-seconds")


@pytest.mark.parametrize("seconds", ["-1", "0.001", "nan"])
def test_a_self_test_period_that_would_starve_calls_exits_2(tmp_path: Path, seconds: str) -> None:
    result = _serve(tmp_path, "--address", "127.0.0.1:0", "--metrics-port", "0",
                    "--self-test-seconds", seconds)
    _one_error(result, "--self-test-seconds")


# -- 2. SIGTERM drains ----------------------------------------------------------------------------


def _watch(channel: grpc.Channel, seen: list[tuple[float, int]], ended: list[Any]) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        for response in stub.Watch(health_pb2.HealthCheckRequest(service="")):
            seen.append((time.monotonic(), response.status))
        ended.append((time.monotonic(), grpc.StatusCode.OK))
    except grpc.RpcError as exc:
        ended.append((time.monotonic(), exc.code()))


def _play(server: ServerProcess, player: str, stop: threading.Event,
          codes: list[grpc.StatusCode], played: list[int]) -> None:
    """Rounds until the server refuses a call: each call's failure code is kept."""
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    client = Client(channel)
    try:
        client.deposit(player, 10_000_000)
        while not stop.is_set():
            view = client.start(player, "snap", [1000])
            client.play_out(player, view)
            played.append(1)
    except grpc.RpcError as exc:
        codes.append(exc.code())
    finally:
        channel.close()


def test_sigterm_drains_in_flight_calls_and_ends_watches(tmp_path: Path) -> None:
    grace = 30.0
    server = ServerProcess(tmp_path / "drain", stacked=False,
                           args=["--grace-seconds", str(grace)]).start()
    assert server.proc is not None and server.channel is not None
    seen: list[tuple[float, int]] = []
    ended: list[Any] = []
    watcher = threading.Thread(target=_watch, args=(server.channel, seen, ended))
    watcher.start()
    stop = threading.Event()
    codes: list[grpc.StatusCode] = []
    played: list[int] = []
    players = [threading.Thread(target=_play, args=(server, f"drain-{i}", stop, codes, played))
               for i in range(6)]
    for thread in players:
        thread.start()
    deadline = time.monotonic() + 60
    while len(played) < 30 and time.monotonic() < deadline and all(
            t.is_alive() for t in players):
        time.sleep(0.01)
    assert len(played) >= 30, (codes, server.log())
    assert seen and seen[-1][1] == SERVING
    sent = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    status = server.proc.wait(timeout=grace + 30)
    exited = time.monotonic()
    stop.set()
    for thread in players:
        thread.join(timeout=30)
    watcher.join(timeout=30)
    log = server.log()
    assert status == 0, log
    # nothing held it for the grace (an order, not a timing: a loaded machine drains slowly)
    assert exited - sent < grace, (exited - sent, log)
    # health turned NOT_SERVING at once and the watch ended (not cancelled at the grace's end)
    assert [s for _, s in seen][-1] == NOT_SERVING, (seen, log)
    assert ended and ended[0][1] == grpc.StatusCode.OK, (ended, log)
    assert ended[0][0] - sent < grace, (ended[0][0] - sent, log)
    # calls in flight finished; later ones were refused, never cancelled
    assert grpc.StatusCode.CANCELLED not in codes, (codes, log)
    assert set(codes) <= {grpc.StatusCode.UNAVAILABLE}, (codes, log)
    server._close_channel()


def test_sigterm_lets_a_call_in_flight_finish_refuses_new_ones_and_exits_0(
        tmp_path: Path) -> None:
    """Deterministic: the StartRound is held inside its handler (a new shoe waits for the
    test, tests/support/stacked_serve.py) when SIGTERM arrives, and released only after the test
    has seen the drain from outside."""
    grace = 30.0
    server = ServerProcess(tmp_path / "held", args=["--grace-seconds", str(grace)]).start()
    assert server.proc is not None and server.channel is not None
    client = server.client()
    client.deposit("held", 100_000)
    server.hold_new_shoes()
    answered: list[Any] = []

    def start() -> None:
        try:
            answered.append(client.start("held", "snap", [1000], request_id="held-start"))
        except grpc.RpcError as exc:
            answered.append(exc.code())

    caller = threading.Thread(target=start)
    caller.start()
    server.wait_held()  # the call is inside its handler, waiting for its shoe
    sent = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    server.wait_health(NOT_SERVING, CALL_TIMEOUT, service="")
    with pytest.raises(grpc.RpcError) as refused:
        client.deposit("held", 1)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    # a health watch opened while draining learns NOT_SERVING and ends: it holds nothing up
    watch = health_pb2_grpc.HealthStub(server.channel).Watch(
        health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT)
    assert [response.status for response in watch] == [NOT_SERVING]
    time.sleep(0.5)
    assert server.proc.poll() is None and not answered  # the held call keeps the process up
    server.release_shoes()
    caller.join(timeout=30)
    status = server.proc.wait(timeout=grace)
    exited = time.monotonic()
    server._close_channel()
    log = server.log()
    assert status == 0, log
    assert exited - sent < grace, log  # not held for the grace period once the call was done
    assert len(answered) == 1 and isinstance(answered[0], rt.RoundView), (answered, log)
    lines = _json_lines(log)
    start_line = [line for line in lines if line.get("request_id") == "held-start"]
    assert [line["code"] for line in start_line] == ["OK"], start_line
    assert server.sql("SELECT COUNT(*) FROM rounds WHERE round_id = ?",
                      answered[0].round_id) == [(1,)]


def test_a_call_still_running_at_the_end_of_the_grace_is_abandoned_and_the_process_exits_0(
        tmp_path: Path) -> None:
    """The held StartRound is never released: the process used to log ``stopped`` at the end of
    the grace, close the database under the call and then wait for it (Python joins the worker
    threads at exit), which then failed INTERNAL on the closed database."""
    grace = 2.0
    server = ServerProcess(tmp_path / "stuck", args=["--grace-seconds", str(grace)]).start()
    assert server.proc is not None
    client = server.client()
    client.deposit("stuck", 100_000)
    server.hold_new_shoes()
    answered: list[Any] = []

    def start() -> None:
        try:
            answered.append(client.start("stuck", "snap", [1000], request_id="stuck-start"))
        except grpc.RpcError as exc:
            answered.append(exc.code())

    caller = threading.Thread(target=start)
    caller.start()
    server.wait_held()
    sent = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        status = server.proc.wait(timeout=grace + 15)
    finally:
        server.release_shoes()
    exited = time.monotonic()
    caller.join(timeout=30)
    server._close_channel()
    log = server.log()
    assert status == 0, log
    # it gave the call its grace (the wait above ending before the shoes were released shows
    # it did not wait for the call after it)
    assert exited - sent >= grace, (exited - sent, log)
    assert answered and answered[0] in (grpc.StatusCode.UNAVAILABLE,
                                         grpc.StatusCode.CANCELLED), answered
    lines = _json_lines(log)
    assert not [line for line in lines if line.get("level") == "error"], log
    stopped = [line for line in lines if line.get("event") == "stopped"]
    assert len(stopped) == 1 and stopped[0]["abandoned_calls"] == 1, stopped
    # nothing of the abandoned call was committed: its round does not exist
    assert server.sql("SELECT COUNT(*) FROM rounds") == [(0,)]
    assert server.sql("SELECT COUNT(*) FROM idempotency WHERE request_id = 'stuck-start'") == [
        (0,)]


def test_sigterm_with_nothing_in_flight_exits_at_once(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "idle", stacked=False,
                           args=["--grace-seconds", "60"]).start()
    assert server.proc is not None
    sent = time.monotonic()
    assert server.stop() == 0, server.log()
    # far below the 60 s grace: it did not wait for it (a loaded machine's stop takes seconds)
    assert time.monotonic() - sent < 30, server.log()


# -- 3. streams a client holds open --------------------------------------------------------------


def _reflection_requests(until: threading.Event) -> Iterator[Any]:
    """One request, then a request stream kept open until ``until`` is set."""
    yield reflection_pb2.ServerReflectionRequest(list_services="")
    until.wait()


def _hold_streams(server: ServerProcess, count: int, until: threading.Event
                  ) -> tuple[list[Any], list[Any]]:
    """``count`` health watches and reflection streams, held open by the client (each read on a
    thread of its own); returns the calls and, per call, the code it ended with."""
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    ended: list[Any] = []
    calls: list[Any] = []
    for i in range(count):
        if i % 2:
            call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        else:
            call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                _reflection_requests(until))
        calls.append(call)
        threading.Thread(target=_drain_call, args=(call, ended), daemon=True).start()
    return calls, ended


def _drain_call(call: Any, ended: list[Any]) -> None:
    try:
        for _ in call:
            pass
        ended.append(grpc.StatusCode.OK)
    except grpc.RpcError as exc:
        ended.append(exc.code())


def test_streams_held_open_cannot_take_every_worker(tmp_path: Path) -> None:
    """Each streaming call holds one of the server's worker threads while open: a peer (any,
    health and reflection need no tenant) that held as many as there are workers used to leave
    none for anyone else's calls. Health watches and reflection have threads of their own now,
    a few per peer: the streams past them are RESOURCE_EXHAUSTED."""
    workers = 4
    server = ServerProcess(tmp_path / "streams", stacked=False,
                           args=["--workers", str(workers)]).start()
    until = threading.Event()
    try:
        calls, ended = _hold_streams(server, workers * 2, until)
        # a bound on a hung server only: a loaded machine took over 10 s to refuse them all
        wait_until(lambda: len(ended) >= workers * 2 - workers // 2, "the extra streams refused")
        client = server.client()
        client.deposit("busy", 100, timeout=CALL_TIMEOUT)  # a worker is free for everyone else
        assert server.health() == SERVING
        assert ended.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == workers * 2 - workers // 2, ended
        for call in calls:
            call.cancel()
        # a slot freed is a slot again: once the server has ended the cancelled streams, which
        # it does on its own threads after the client's cancel (a full run saw one still open)
        deadline = time.monotonic() + 10
        while True:
            calls, ended = _hold_streams(server, 1, until)
            time.sleep(0.5)
            if ended == [] or time.monotonic() > deadline:
                break
        assert ended == [], ended
        calls[0].cancel()
    finally:
        until.set()
        assert server.stop() == 0, server.log()


def _watches(channel: grpc.Channel, count: int) -> tuple[list[Any], list[Any]]:
    """``count`` health watches on ``channel``, each read on a thread of its own."""
    calls, ended = [], []
    for _ in range(count):
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        calls.append(call)
        threading.Thread(target=_drain_call, args=(call, ended), daemon=True).start()
    return calls, ended


def test_held_health_watches_leave_exports_their_streams(tmp_path: Path) -> None:
    """Health watches held open (workers/2 of them filled every stream slot) made every tenant's
    ExportRecords RESOURCE_EXHAUSTED: watches have slots (and threads) of their own now, and
    any one peer holds only a few of them."""
    workers = 4
    server = ServerProcess(tmp_path / "watches", stacked=False,
                           args=["--workers", str(workers)]).start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        calls, ended = _watches(channel, workers * 2)
        wait_until(lambda: bool(ended), "a watch past the slots refused")
        time.sleep(0.5)  # the watches that are admitted stay open
        assert ended and set(ended) == {grpc.StatusCode.RESOURCE_EXHAUSTED}, ended
        held = len(calls) - len(ended)
        assert held >= 1, ended
        client = server.client()
        client.deposit("exporter", 100, timeout=CALL_TIMEOUT)
        items = list(audit_pb2_grpc.AuditServiceStub(server.channel).ExportRecords(
            audit_pb2.ExportRecordsRequest(), timeout=CALL_TIMEOUT))
        assert items is not None  # the export was served, not RESOURCE_EXHAUSTED
        assert server.health() == SERVING
        for call in calls:
            call.cancel()
    finally:
        channel.close()
        assert server.stop() == 0, server.log()


# -- 4. JSON logs ---------------------------------------------------------------------------------


def test_every_log_line_is_json_and_each_rpc_has_its_line(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "logs", stacked=False).start()
    client = server.client()
    deposit_id = "req-log-deposit"
    start_id = "req-log-start"
    client.deposit("log-player", 100_000, request_id=deposit_id)
    view = client.start("log-player", "snap", [1000], request_id=start_id)
    round_id = view.round_id
    client.play_out("log-player", view)
    missing = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(grpc.RpcError) as error:
        client.rounds.GetRound(round_pb2.GetRoundRequest(player_id="log-player",
                                                         round_id=missing))
    failed_code = error.value.code().name
    assert server.stop() == 0, server.log()
    lines = _json_lines(server.log())
    rpcs = [line for line in lines if line.get("event") == "rpc"]
    assert rpcs, lines
    for line in rpcs:
        assert {"method", "code", "latency_ms"} <= line.keys(), line
        if line["method"].startswith("/fairshoe."):  # health and reflection act for no operator
            assert line["operator"], line
        assert isinstance(line["latency_ms"], float | int)
    by_request = {line.get("request_id"): line for line in rpcs}
    assert by_request[deposit_id]["method"].endswith("WalletService/Deposit")
    assert by_request[deposit_id]["code"] == "OK"
    assert by_request[start_id]["method"].endswith("RoundService/StartRound")
    assert by_request[start_id]["round_id"] == round_id  # the answer names the new round
    # a round that ends at the deal (a blackjack: these cards are random) has no Act
    acts = [line for line in rpcs if line["method"].endswith("RoundService/Act")]
    assert all(line["round_id"] == round_id for line in acts), acts
    failed = [line for line in rpcs if line.get("round_id") == missing]
    assert [line["code"] for line in failed] == [failed_code], failed
    # never a seed, a key or an unrevealed card: no such field, no key material in the text
    text = server.log()
    for line in lines:
        for name in line:
            assert not any(word in name for word in ("seed", "secret", "private", "cards")), line
    for key_file in (server.data_dir / "keys").rglob("*"):
        if key_file.is_file() and key_file.stat().st_size and key_file.suffix not in (".toml", ".pub"):  # noqa: E501 (secrets only)
            material = key_file.read_bytes()
            assert material.hex() not in text, key_file
            for part in material.decode(errors="ignore").split():
                assert len(part) < 24 or part not in text, key_file


def test_stdlib_logging_such_as_grpcs_is_json_too() -> None:
    code = ("import logging\n"
            "from rng_service.core.logs import configure_logging\n"
            "configure_logging('INFO')\n"
            "try:\n    raise ValueError('boom')\n"
            "except ValueError:\n"
            "    logging.getLogger('grpc._server').exception('Exception calling application')\n"
            "logging.getLogger('grpc._cython').warning('plain %s', 'warning')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = _json_lines(result.stderr)
    assert [line["event"] for line in lines] == ["Exception calling application",
                                                 "plain warning"], lines
    assert lines[0]["logger"] == "grpc._server" and lines[0]["level"] == "error"
    assert "ValueError: boom" in lines[0]["exception"]
    assert lines[1]["level"] == "warning"


def _tgkill(pid: int, tid: int, sig: int) -> None:
    """Send ``sig`` to one thread ``tid`` of process ``pid`` (Linux's tgkill system call)."""
    libc = ctypes.CDLL(None, use_errno=True)
    sys_tgkill = 234  # x86-64
    if libc.syscall(sys_tgkill, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="tgkill's number is x86-64's")
def test_sigterm_delivered_to_another_thread_still_drains(tmp_path: Path) -> None:
    """The kernel hands a process's signal to any thread that does not block it; CPython then
    only flags the main thread. A main thread blocked in an untimed wait never ran the handler:
    the server ignored SIGTERM (found by a CI run, where a gRPC thread took it)."""
    server = ServerProcess(tmp_path / "thread", stacked=False).start()
    assert server.proc is not None
    pid = server.proc.pid
    others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    assert others, "the server runs threads beside its main thread"
    _tgkill(pid, others[0], signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0, server.log()
    assert any(line.get("event") == "stopped" for line in _json_lines(server.log()))
