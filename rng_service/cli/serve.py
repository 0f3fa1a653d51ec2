"""`fairshoe serve`: run the gRPC service with metrics and JSON logs.

Embedded defaults: SQLite at ``--database`` (``FAIRSHOE_DATABASE``, default
``<FAIRSHOE_DATA_DIR>/fairshoe.db``), the seed vault's key and a signing key under the data
directory's ``keys/`` (dev keys made on a first run outside production). ``--database`` (or
``FAIRSHOE_DATABASE_URL``) may instead be a ``postgresql://user@host:port/db`` URL: several
replicas then share that database, each with at most one connection per worker thread.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rng_service.service.shoes import ShoeSource


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` command and its options to ``subparsers``."""
    serve = subparsers.add_parser("serve", help="run the gRPC service")
    serve.add_argument("--address", default=os.environ.get("FAIRSHOE_ADDRESS", "127.0.0.1:50051"),
                       help="host:port to listen on (port 0: any free port, logged)")
    serve.add_argument("--database", default=None, metavar="PATH_OR_URL",
                       help="a SQLite database file or a postgresql:// URL (default: "
                            "$FAIRSHOE_DATABASE_URL, else $FAIRSHOE_DATABASE, else "
                            "<data dir>/fairshoe.db)")
    serve.add_argument("--metrics-port", type=int,
                       default=int(os.environ.get("FAIRSHOE_METRICS_PORT", "9464")),
                       help="Prometheus /metrics port (0 disables)")
    serve.add_argument("--metrics-address",
                       default=os.environ.get("FAIRSHOE_METRICS_ADDRESS", "127.0.0.1"))
    serve.add_argument("--tls-cert", default=os.environ.get("FAIRSHOE_TLS_CERT"))
    serve.add_argument("--tls-key", default=os.environ.get("FAIRSHOE_TLS_KEY"))
    serve.add_argument("--log-level", default=os.environ.get("FAIRSHOE_LOG_LEVEL", "INFO"))
    serve.add_argument("--workers", type=int,
                       default=int(os.environ.get("FAIRSHOE_WORKERS", "32")),
                       help="threads serving calls (default 32; on PostgreSQL as many pool "
                            "connections, plus one for health checks): on SQLite concurrent "
                            "writes share one COMMIT, so more threads make larger groups")
    serve.set_defaults(func=run)


def run(args: argparse.Namespace, *, shoe_source: ShoeSource | None = None) -> int:
    """Serve until SIGINT or SIGTERM. ``shoe_source`` is for tests only (stacked shoes, which the
    round service refuses unless FAIRSHOE_TEST_SHOES=1, itself refused in production)."""
    # grpc, protobuf, prometheus and structlog load here, not while the command line is parsed
    from prometheus_client import start_http_server

    from rng_service.api.metrics import start_metrics
    from rng_service.api.server import LiveServices, ServerConfig, build_server, log
    from rng_service.cli.main import CommandError
    from rng_service.core.config import ConfigError
    from rng_service.core.errors import Unavailable
    from rng_service.core.logs import configure_logging
    from rng_service.crypto.keys import KeyStoreError

    configure_logging(args.log_level)
    if args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    config = ServerConfig(address=args.address, tls_cert=args.tls_cert, tls_key=args.tls_key,
                          workers=args.workers)
    try:
        live = LiveServices.open(args.database, shoe_source=shoe_source,
                                 pool_size=config.pool_size)
    except (ConfigError, KeyStoreError, Unavailable) as exc:  # what to fix; never key material
        raise CommandError(str(exc)) from None
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_address)
    try:
        server, port = build_server(config, live)
    except BaseException:
        live.close()
        raise
    # storage sizes at each scrape (both backends count them: SQLite by rowid, PostgreSQL exactly)
    sizes = getattr(live.storage, "sizes", None)
    refresher = start_metrics(sizes) if args.metrics_port else None
    log.info("serving", address=args.address, port=port, tls=bool(args.tls_cert),
             metrics_port=args.metrics_port, database=live.storage.describe(),
             workers=config.workers)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("stopping")
    server.stop(grace=5).wait()
    if refresher is not None:
        refresher.stop()
    live.close()
    return 0
