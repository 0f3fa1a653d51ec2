"""`fairshoe serve`: run the gRPC service with metrics and JSON logs."""

from __future__ import annotations

import argparse
import os
import signal
import threading


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = subparsers.add_parser("serve", help="run the gRPC service")
    serve.add_argument("--address", default=os.environ.get("FAIRSHOE_ADDRESS", "127.0.0.1:50051"))
    serve.add_argument("--metrics-port", type=int,
                       default=int(os.environ.get("FAIRSHOE_METRICS_PORT", "9464")),
                       help="Prometheus /metrics port (0 disables)")
    serve.add_argument("--metrics-address",
                       default=os.environ.get("FAIRSHOE_METRICS_ADDRESS", "127.0.0.1"))
    serve.add_argument("--tls-cert", default=os.environ.get("FAIRSHOE_TLS_CERT"))
    serve.add_argument("--tls-key", default=os.environ.get("FAIRSHOE_TLS_KEY"))
    serve.add_argument("--log-level", default=os.environ.get("FAIRSHOE_LOG_LEVEL", "INFO"))
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    # grpc, protobuf, prometheus and structlog load here, not while the command line is parsed
    from prometheus_client import start_http_server

    from rng_service.api.server import ServerConfig, build_server, log
    from rng_service.core.logs import configure_logging

    configure_logging(args.log_level)
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_address)
    config = ServerConfig(address=args.address, tls_cert=args.tls_cert, tls_key=args.tls_key)
    server, port = build_server(config)
    log.info("serving", address=args.address, port=port, tls=bool(args.tls_cert),
             metrics_port=args.metrics_port)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("stopping")
    server.stop(grace=5).wait()
    return 0
