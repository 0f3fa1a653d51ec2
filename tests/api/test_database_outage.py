"""A server process whose PostgreSQL goes away and comes back: health follows the database
(NOT_SERVING for the server and every service that uses it once a ping fails, SERVING again
once it answers, no restart), calls meanwhile end UNAVAILABLE with the reason at once (without
waiting for a connection), never INTERNAL or a traceback, and nothing acknowledged is lost. A
database that cannot be reached at start is a one-line error."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from support.error_details import reason_of
from support.live_server import Client, ServerProcess, unused_port
from support.pg_server import PgServer

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2
from rng_service.storage.postgres import POOL_TIMEOUT_S

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
ON_DATABASE = ("", "fairshoe.round.v1.RoundService", "fairshoe.wallet.v1.WalletService",
               "fairshoe.math.v1.MathService", "fairshoe.audit.v1.AuditService",
               "fairshoe.rng.v1.RngService")


def unavailable(call: object, *args: object) -> None:
    """The call ends UNAVAILABLE with the reason, and fast: before the pool's timeout (5 s) could
    have passed, so it did not wait for a connection (it waits 0.5 s while the last ping
    failed; the margin is a loaded machine's)."""
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        call(*args)  # type: ignore[operator]
    assert time.monotonic() - started < POOL_TIMEOUT_S, "it waited for a connection"
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE, (err.value.code(),
                                                             err.value.details())
    assert reason_of(err.value) == "DATABASE_UNAVAILABLE", err.value.details()


def test_health_follows_the_database_and_calls_are_unavailable_meanwhile(
        tmp_path: Path, own_pg_server: PgServer) -> None:
    server = ServerProcess(tmp_path / "outage", database_url=own_pg_server.url("fairshoe"))
    server.start()
    try:
        client = server.client()
        client.deposit("ann", 10_000)
        assert all(server.health(name) == SERVING for name in ON_DATABASE)

        own_pg_server.stop()
        # bounds on a broken server, not timings (health follows within about a ping's
        # interval and timeout, 2 s, which a loaded machine stretches)
        server.wait_health(NOT_SERVING, 30, service="")
        assert all(server.health(name) == NOT_SERVING for name in ON_DATABASE)
        assert server.health("fairshoe.game.v1.GameService") == SERVING  # needs no database
        unavailable(client.deposit, "ann", 500)
        unavailable(client.balance, "ann")
        unavailable(client.start, "ann", "snap", [1000])
        assert server.channel is not None
        audit = audit_pb2_grpc.AuditServiceStub(server.channel)
        unavailable(audit.GetRoundRecord, audit_pb2.GetRoundRecordRequest(round_id="0" * 32))

        own_pg_server.start()
        server.wait_health(SERVING, 60, service="")
        assert all(server.health(name) == SERVING for name in ON_DATABASE)
        assert client.balance("ann") == 10_000  # nothing acknowledged lost, nothing half-done
        client.deposit("ann", 500)
        assert client.balance("ann") == 10_500
        history = client.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(
            account=Client.account("ann")))
        assert [t.amount_minor for t in history.transactions] == [500, 10_000]
    finally:
        assert server.stop() == 0
    log = server.log()
    assert '"database_unreachable"' in log and '"database_reachable_again"' in log
    assert "Traceback" not in log and '"INTERNAL"' not in log


def test_a_database_that_cannot_be_reached_at_start_is_a_one_line_error(tmp_path: Path) -> None:
    with unused_port() as port:  # nothing listens there
        url = f"postgresql://fairshoe@127.0.0.1:{port}/fairshoe?connect_timeout=2"
        server = ServerProcess(tmp_path / "nodb", database_url=url)
        with pytest.raises(RuntimeError, match="exited with 2") as err:
            server.start()
    assert "the database is unavailable" in str(err.value)
    assert "Traceback" not in server.log()
