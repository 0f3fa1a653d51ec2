"""Health follows the RNG self-test after start-up, in a real `fairshoe serve` process.

The server re-runs the self-test every ``--self-test-seconds``; the test makes a run fail by
damaging the known answers it reads, a copy handed over by tests/support/stacked_serve.py with
``FAIRSHOE_TEST_KNOWN_ANSWERS`` (installed code accepts that only with
``FAIRSHOE_TEST_SELF_TEST=1``, which production refuses). From the failing run on, health is
NOT_SERVING for the server and each service, dealing is refused (a new round, a card in a round
already open, an RNG draw), the metric says 0, and all of it stays so when the answers are whole
again: a failed certified RNG waits for a restart, and an open round goes on after it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from support.live_server import HIT, STAND, ServerProcess

from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.rng import selftest

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("", "fairshoe.round.v1.RoundService", "fairshoe.wallet.v1.WalletService",
            "fairshoe.audit.v1.AuditService", "fairshoe.rng.v1.RngService",
            "fairshoe.game.v1.GameService", "fairshoe.math.v1.MathService")


def _gauge(server: ServerProcess) -> float:
    for line in server.scrape().splitlines():
        if line.startswith("fairshoe_rng_self_test_ok "):
            return float(line.split()[1])
    raise AssertionError("no fairshoe_rng_self_test_ok in the scrape")


def _hooked(tmp_path: Path, **env: str) -> tuple[ServerProcess, Path]:
    answers = tmp_path / "known_answers.json"
    shutil.copy(selftest.KNOWN_ANSWERS_FILE, answers)
    server = ServerProcess(tmp_path / "data", metrics_port="any",
                           args=["--self-test-seconds", "0.2"],
                           env={"FAIRSHOE_TEST_SELF_TEST": "1",
                                "FAIRSHOE_TEST_KNOWN_ANSWERS": str(answers), **env})
    return server, answers


def test_a_failing_self_test_turns_every_service_not_serving_until_restart(
        tmp_path: Path) -> None:
    server, answers = _hooked(tmp_path)
    server.start()
    try:
        assert {name: server.health(name) for name in SERVICES} == dict.fromkeys(SERVICES,
                                                                                  SERVING)
        assert _gauge(server) == 1
        client = server.client()
        client.deposit("ann", 100_000)
        view = client.play_out("ann", client.start("ann", "double-exposure", [1000]))
        # a cut-card shoe: still open for the player's next round
        assert server.sql("SELECT status FROM shoes WHERE shoe_id = ?", view.shoe.shoe_id) != [
            ("revealed",)]
        # a round awaiting the player's decision when the RNG fails (2+3 against T)
        client.deposit("bea", 10_000)
        server.stack(["2S", "TD", "3H", "7C", "4D", "5S"])
        waiting = client.start("bea", "double-deck", [1000])
        assert waiting.status == rt.ROUND_STATUS_AWAITING_PLAYER
        whole = answers.read_text()
        data = json.loads(whole)
        data["shoes"]["six_decks_sha256"] = "0" * 64
        answers.write_text(json.dumps(data))
        for name in SERVICES:
            server.wait_health(NOT_SERVING, 10, service=name)
        assert _gauge(server) == 0
        client.deposit("ann", 10_000)  # the wallet needs no RNG
        for game in ("snap", "double-exposure"):  # a new shoe, and the next round of an open one
            with pytest.raises(grpc.RpcError) as err:
                client.start("ann", game, [1000])
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE, game
            status = rpc_status.from_call(err.value)
            assert status is not None and b"RNG_SELF_TEST_FAILED" in status.SerializeToString()
        # nor is any card dealt in a round already open (a hit, or the dealer's turn after a
        # stand), nor an RNG draw made: the round waits, stakes held, for the restart
        refused = {
            "hit": lambda: client.act("bea", waiting, HIT),
            "stand": lambda: client.act("bea", waiting, STAND),
            "draw": lambda: rng_pb2_grpc.RngServiceStub(server.channel).Shuffle(
                rng_pb2.ShuffleRequest(n=52, request_id="after-failure")),
        }
        for what, call in refused.items():
            with pytest.raises(grpc.RpcError) as err:
                call()
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE, what
            status = rpc_status.from_call(err.value)
            assert status is not None and b"RNG_SELF_TEST_FAILED" in status.SerializeToString()
        assert client.get("bea", waiting.round_id).version == waiting.version
        answers.write_text(whole)  # whole again: the server stays out of service
        time.sleep(1.0)  # five re-run periods
        assert {name: server.health(name) for name in SERVICES} == dict.fromkeys(SERVICES,
                                                                                  NOT_SERVING)
        assert _gauge(server) == 0
    finally:
        assert server.stop() == 0, server.log()
    events = [json.loads(line).get("event") for line in server.log().splitlines()
              if line.startswith("{")]
    assert "rng_self_test_failed" in events and "rng_not_serving_until_restart" in events
    server.start()  # a restart runs the self-test afresh
    try:
        assert server.health("") == SERVING
        view = server.client().act("bea", waiting, HIT)  # and the round goes on
        assert [c.code for c in view.hands[0].cards] == ["2S", "3H", "4D"]
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.parametrize(("env", "message"), [
    ({"FAIRSHOE_ENV": "production"}, "FAIRSHOE_TEST_SELF_TEST=1 is refused"),
    ({"FAIRSHOE_TEST_SELF_TEST": ""}, "test known answers need FAIRSHOE_TEST_SELF_TEST=1"),
])
def test_the_hook_is_refused_in_production_and_without_its_switch(
        tmp_path: Path, env: dict[str, str], message: str) -> None:
    server, _answers = _hooked(tmp_path, **env)
    server.data_dir.mkdir(parents=True)
    done = subprocess.run(server.command(), env=server.env, cwd=server.data_dir,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [line["event"] for line in lines] == ["start_failed"], done.stderr
    assert message in lines[0]["error"]
