"""The standard gRPC server series (grpc_server_*), in process over real gRPC: counted for unary
and server-streaming RPCs at the status the client receives (OK, a code the handler set, a
request that does not decode, a stream the client cancelled), codes spelt as in Go."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY
from support.record_helpers import Dealer
from support.waits import wait_until

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.server import ServerConfig, build_server
from rng_service.crypto.keys import KeyStore
from rng_service.rng.seed_vault import SeedVault
from rng_service.storage.sqlite import SqliteStorage

HEALTH = "grpc.health.v1.Health"
GAMES = "fairshoe.game.v1.GameService"
AUDIT = "fairshoe.audit.v1.AuditService"


@dataclass(frozen=True)
class Series:
    """One method's label values: read its counters and histogram count."""

    grpc_type: str
    service: str
    method: str

    def labels(self) -> dict[str, str]:
        return {"grpc_type": self.grpc_type, "grpc_service": self.service,
                "grpc_method": self.method}

    def value(self, name: str, **extra: str) -> float:
        return REGISTRY.get_sample_value(name, {**self.labels(), **extra}) or 0.0

    def snapshot(self, code: str) -> tuple[float, ...]:
        return (self.value("grpc_server_started_total"),
                self.value("grpc_server_handled_total", grpc_code=code),
                self.value("grpc_server_msg_received_total"),
                self.value("grpc_server_msg_sent_total"),
                self.value("grpc_server_handling_seconds_count"))


def delta(series: Series, code: str, call: Callable[[], object]) -> tuple[float, ...]:
    before = series.snapshot(code)
    call()
    return tuple(a - b for a, b in zip(series.snapshot(code), before, strict=True))


def wait_for(condition: Callable[[], bool]) -> None:
    # polled, bounded only against a hung server (10 s once: a loaded machine can outlast it)
    wait_until(condition, "the server's count")


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[grpc.Channel]:
    root: Path = tmp_path_factory.mktemp("grpc-metrics")
    store = KeyStore(root / "keys")
    store.create()
    storage = SqliteStorage(root / "fairshoe.db")
    Dealer(storage, store.load_signing_key(), SeedVault(secrets.token_bytes(32))).play("snap")
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=4), storage=storage,
                                key_store=store)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield ch
    server.stop(grace=None)
    storage.close()


def test_a_unary_call_is_started_handled_received_sent_and_timed(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    got = delta(Series("unary", GAMES, "ListGames"), "OK",
                lambda: stub.ListGames(game_pb2.ListGamesRequest(), timeout=10))
    assert got == (1, 1, 1, 1, 1)


def test_a_code_the_handler_sets_is_counted_at_it(channel: grpc.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)

    def unknown() -> None:
        with pytest.raises(grpc.RpcError) as err:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        assert err.value.code() is grpc.StatusCode.NOT_FOUND

    series = Series("unary", HEALTH, "Check")
    ok_before = series.value("grpc_server_handled_total", grpc_code="OK")
    # started, NOT_FOUND, received; nothing sent (the client gets no message), timed
    assert delta(series, "NotFound", unknown) == (1, 1, 1, 0, 1)
    assert series.value("grpc_server_handled_total", grpc_code="OK") == ok_before


def test_a_request_that_does_not_decode_is_invalid_argument(channel: grpc.Channel) -> None:
    call = channel.unary_unary(f"/{GAMES}/GetRules", request_serializer=None,
                               response_deserializer=None)

    def undecodable() -> None:
        with pytest.raises(grpc.RpcError) as err:
            call(b"\x0a\x10{}", timeout=10)  # field 1 says 16 bytes follow, 2 do
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT

    assert delta(Series("unary", GAMES, "GetRules"), "InvalidArgument", undecodable) == (
        1, 1, 1, 0, 1)


def test_a_server_stream_counts_each_message_sent(channel: grpc.Channel) -> None:
    stub = audit_pb2_grpc.AuditServiceStub(channel)
    items: list[object] = []
    got = delta(Series("server_stream", AUDIT, "ExportRecords"), "OK",
                lambda: items.extend(stub.ExportRecords(audit_pb2.ExportRecordsRequest(),
                                                        timeout=30)))
    assert len(items) >= 2  # the round's record and its shoe's reveal
    assert got == (1, 1, 1, len(items), 1)


def test_a_stream_the_client_cancels_is_cancelled(channel: grpc.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    series = Series("server_stream", HEALTH, "Watch")
    before = series.snapshot("Canceled")
    stream = stub.Watch(health_pb2.HealthCheckRequest(service=""))
    first = next(stream)
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    stream.cancel()
    wait_for(lambda: series.value("grpc_server_handled_total", grpc_code="Canceled")
             == before[1] + 1)
    after = series.snapshot("Canceled")
    assert (after[0] - before[0], after[2] - before[2], after[3] - before[3],
            after[4] - before[4]) == (1, 1, 1, 1)
    assert series.value("grpc_server_handled_total", grpc_code="OK") == 0


def test_concurrent_calls_are_each_counted_once(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    series = Series("unary", GAMES, "ListGames")
    before = series.snapshot("OK")

    def calls() -> None:
        for _ in range(10):
            stub.ListGames(game_pb2.ListGamesRequest(), timeout=10)

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = series.snapshot("OK")
    assert tuple(a - b for a, b in zip(after, before, strict=True)) == (40,) * 5
