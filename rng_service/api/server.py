"""The gRPC server: GameService, MathService, and with live services RoundService and
WalletService; standard health checking and reflection; Prometheus metrics.

Errors are part of the API: a bad request is INVALID_ARGUMENT naming the field, an unknown game
NOT_FOUND. Every RPC is counted and timed by method and status code.

Assembly (:func:`build_server`): the live services (:class:`LiveServices`, on SQLite by default)
are opened, open rounds that need no input are finished and missing reveals written
(``RoundService.recover``) before the server accepts a call, and health reports SERVING only
after that and the RNG's known-answer self-test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import Counter, Histogram

from game_math.games import game_rules
from game_math.rules import GAME_IDS
from rng_service.api.abort import InterimErrorInterceptor, answer
from rng_service.api.math_service import MathService
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from rng_service.api.round_api import RoundApi
from rng_service.api.round_messages import has_typed_fields, replay_round
from rng_service.api.wallet_api import WalletApi
from rng_service.cli.game import ScriptError, play_script
from rng_service.cli.main import CommandError
from rng_service.core import config as settings
from rng_service.crypto.keys import KeyStore, KeyStoreError, SigningKey
from rng_service.rng.seed_vault import SeedVault
from rng_service.rng.selftest import SelfTestFailed, run_self_test
from rng_service.service.rounds import RoundService
from rng_service.service.shoes import ShoeSource
from rng_service.service.wallet import WalletService
from rng_service.storage.sqlite import SqliteStorage

log = structlog.get_logger("fairshoe.server")

RPCS = Counter("fairshoe_grpc_requests_total", "gRPC requests handled", ["method", "code"])
LATENCY = Histogram("fairshoe_grpc_request_seconds", "gRPC request latency", ["method"])


class GameService(game_pb2_grpc.GameServiceServicer):  # type: ignore[misc]
    def ListGames(self, request: Any, context: grpc.ServicerContext) -> Any:
        games = []
        for gid in GAME_IDS:
            rules = game_rules(gid)
            games.append(game_pb2.Game(id=gid, name=rules.name, decks=rules.decks,
                                       rules_digest=rules.digest()))
        return game_pb2.ListGamesResponse(games=games)

    def GetRules(self, request: Any, context: grpc.ServicerContext) -> Any:
        if not request.game:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "game: required")
        try:
            rules = game_rules(request.game)
        except KeyError:
            known = ", ".join(GAME_IDS)
            context.abort(grpc.StatusCode.NOT_FOUND, f"game: no game {request.game!r} ({known})")
        return game_pb2.GetRulesResponse(game=rules.game, rules_toml=rules.to_toml(),
                                         rules_digest=rules.digest())

    def ReplayRound(self, request: Any, context: grpc.ServicerContext) -> Any:
        if not request.script_json:  # the typed request
            return answer(context, replay_round, request)
        if has_typed_fields(request):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "script_json: deprecated; send it alone or use the typed fields")
        try:
            script = json.loads(request.script_json)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, huge ints, deep nesting
            reason = str(exc) if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"script_json: not JSON: {reason}")
        if isinstance(script, dict) and "rules" in script:
            # a server never opens files named by a client
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "script_json.rules: not accepted")
        try:
            rnd = play_script(script)
        except ScriptError as exc:
            where = f"script_json.{exc.field}" if exc.field else "script_json"
            context.abort(_SCRIPT_CODES[exc.kind], f"{where}: {exc.detail}")
        except CommandError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"script_json: {exc}")
        return game_pb2.ReplayRoundResponse(result_json=json.dumps(rnd.summary()))


_SCRIPT_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "precondition": grpc.StatusCode.FAILED_PRECONDITION,
}


class MetricsInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Counts and times every unary RPC by method and final status code."""

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method
        inner = handler.unary_unary

        def wrapped(request: Any, context: grpc.ServicerContext) -> Any:
            started = time.perf_counter()
            code = "OK"
            try:
                return inner(request, context)
            except Exception:
                status = context.code() if hasattr(context, "code") else None
                code = status.name if status is not None else "UNKNOWN"
                raise
            finally:
                LATENCY.labels(method).observe(time.perf_counter() - started)
                RPCS.labels(method, code).inc()
                log.info("rpc", method=method, code=code,
                         ms=round((time.perf_counter() - started) * 1000, 3))

        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


@dataclass(frozen=True)
class ServerConfig:
    address: str = "127.0.0.1:50051"
    tls_cert: str | None = None
    tls_key: str | None = None
    workers: int = 8


@dataclass(frozen=True)
class LiveServices:
    """The stateful use cases a server serves, on one database."""

    storage: SqliteStorage
    rounds: RoundService
    wallet: WalletService

    @classmethod
    def open(cls, database: Path | str | None = None, *,
             shoe_source: ShoeSource | None = None) -> LiveServices:
        """The services on the SQLite file ``database`` (default: the configured one), with the
        configured seed vault, the key store's signing key (a dev key is made on a first run
        outside production) and OS-seeded shoes unless ``shoe_source`` (tests) says otherwise."""
        storage = SqliteStorage(database if database is not None else settings.database_path())
        try:
            rounds = RoundService(storage, vault=SeedVault.from_config(),
                                  signer=signing_key(), shoe_source=shoe_source)
        except BaseException:
            storage.close()
            raise
        return cls(storage, rounds, WalletService(storage))

    def close(self) -> None:
        self.storage.close()


def signing_key(store: KeyStore | None = None) -> SigningKey:
    """The key store's active signing key. Outside production a first run creates one (a dev
    key) and logs its id, never the key; production refuses to start without one."""
    keys = store if store is not None else KeyStore()
    if keys.active_key_id() is None:
        if settings.is_production():
            raise settings.ConfigError(f"no active signing key in {keys.root}; create one with "
                                       "`fairshoe keys create` and publish its public key")
        try:
            info = keys.create()
        except KeyStoreError:  # a concurrent starter created it first
            pass
        else:
            log.warning("dev_signing_key_created", key_id=info.key_id, key_store=str(keys.root))
    return keys.load_signing_key()


def build_server(config: ServerConfig, live: LiveServices | None = None
                 ) -> tuple[grpc.Server, int]:
    """A started server and the port it bound (0 in the address picks a free one). With
    ``live``, RoundService and WalletService too, after recovering their open rounds."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=config.workers),
                         interceptors=[MetricsInterceptor(), InterimErrorInterceptor()])
    game_pb2_grpc.add_GameServiceServicer_to_server(GameService(), server)
    math_pb2_grpc.add_MathServiceServicer_to_server(
        MathService(live.rounds if live is not None else None), server)
    services = [game_pb2.DESCRIPTOR.services_by_name["GameService"].full_name,
                math_pb2.DESCRIPTOR.services_by_name["MathService"].full_name]
    if live is not None:
        round_pb2_grpc.add_RoundServiceServicer_to_server(RoundApi(live.rounds), server)
        wallet_pb2_grpc.add_WalletServiceServicer_to_server(WalletApi(live.wallet), server)
        services += [round_pb2.DESCRIPTOR.services_by_name["RoundService"].full_name,
                     wallet_pb2.DESCRIPTOR.services_by_name["WalletService"].full_name]
        recovered = live.rounds.recover()  # before any call: nothing races the recovery
        log.info("recovered", completed_rounds=len(recovered.completed_rounds),
                 revealed_shoes=len(recovered.revealed_shoes))
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
    reflection.enable_server_reflection((*services, health_name, reflection.SERVICE_NAME), server)
    port = _bind(server, config)
    server.start()
    _report_health(health_servicer, services)
    return server, port


def _bind(server: grpc.Server, config: ServerConfig) -> int:
    if config.tls_cert and config.tls_key:
        with open(config.tls_cert, "rb") as c, open(config.tls_key, "rb") as k:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        return int(server.add_secure_port(config.address, creds))
    return int(server.add_insecure_port(config.address))


def _report_health(health_servicer: health.HealthServicer, services: list[str]) -> None:
    """SERVING for the server and each service, unless the RNG fails its known answers: a
    server that must not deal must not look ready to a load balancer."""
    status = health_pb2.HealthCheckResponse.SERVING
    try:
        run_self_test()
    except SelfTestFailed as exc:
        log.error("rng_self_test_failed", reason=str(exc))
        status = health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ("", *services):
        health_servicer.set(name, status)
