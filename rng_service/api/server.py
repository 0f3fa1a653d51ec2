"""The gRPC server's assembly: GameService, standard health checking and reflection, behind the
interceptor that reports errors by kind and counts every RPC (``api/interceptors.py``).

Errors are part of the API: their kinds map to status codes in one table (``api/errors.py``).
"""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rng_service.api.game_service import GameService
from rng_service.api.interceptors import LATENCY, RPCS, ServiceInterceptor
from rng_service.api.math_service import MathService
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.record_services import add_record_services
from rng_service.crypto.keys import KeyStore
from rng_service.rng.selftest import SelfTestFailed, run_self_test
from rng_service.service.ports import Storage

__all__ = ["LATENCY", "RPCS", "GameService", "ServerConfig", "build_server"]

log = structlog.get_logger("fairshoe.server")


@dataclass(frozen=True)
class ServerConfig:
    """Where and how the server listens."""

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
                         interceptors=[ServiceInterceptor()])
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
