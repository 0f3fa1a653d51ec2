"""The gRPC server: GameService, standard health checking and reflection, Prometheus metrics.

Errors are part of the API: a bad request is INVALID_ARGUMENT naming the field, an unknown game
NOT_FOUND. Every RPC is counted and timed by method and status code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import Counter, Histogram

from game_math.games import game_rules
from game_math.rules import GAME_IDS
from rng_service.api.abort import answer
from rng_service.api.math_service import MathService
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.record_services import add_record_services
from rng_service.api.round_messages import has_typed_fields, replay_round
from rng_service.cli.game import ScriptError, play_script
from rng_service.cli.main import CommandError
from rng_service.crypto.keys import KeyStore
from rng_service.rng.selftest import SelfTestFailed, run_self_test
from rng_service.service.ports import Storage

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


def build_server(config: ServerConfig, *, storage: Storage | None = None,
                 key_store: KeyStore | None = None) -> tuple[grpc.Server, int]:
    """A started server and the port it bound (0 in the address picks a free one). With
    ``storage``, also AuditService and RngService (keys: ``key_store``, default the configured
    store)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=config.workers),
                         interceptors=[MetricsInterceptor()])
    game_pb2_grpc.add_GameServiceServicer_to_server(GameService(), server)
    math_pb2_grpc.add_MathServiceServicer_to_server(MathService(), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names: tuple[str, ...] = (
        game_pb2.DESCRIPTOR.services_by_name["GameService"].full_name,
        math_pb2.DESCRIPTOR.services_by_name["MathService"].full_name,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
    )
    if storage is not None:
        names += tuple(add_record_services(server, storage, key_store or KeyStore()))
    reflection.enable_server_reflection(names, server)
    if config.tls_cert and config.tls_key:
        with open(config.tls_cert, "rb") as c, open(config.tls_key, "rb") as k:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        port = server.add_secure_port(config.address, creds)
    else:
        port = server.add_insecure_port(config.address)
    server.start()
    # a server whose RNG fails its known answers must not look ready to a load balancer
    status = health_pb2.HealthCheckResponse.SERVING
    try:
        run_self_test()
    except SelfTestFailed as exc:
        log.error("rng_self_test_failed", reason=str(exc))
        status = health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ("", names[0]):
        health_servicer.set(name, status)
    return server, port
