"""`fairshoe serve`: run the gRPC service with metrics and JSON logs.

Embedded defaults: SQLite at ``--database`` (``FAIRSHOE_DATABASE``, default
``<FAIRSHOE_DATA_DIR>/fairshoe.db``), the seed vault's key and a signing key under the data
directory's ``keys/`` (dev keys made on a first run outside production). ``--database`` (or
``FAIRSHOE_DATABASE_URL``) may instead be a ``postgresql://user@host:port/db`` URL: several
replicas then share that database, each with at most one connection per worker thread.

``--tiles-port`` (off by default) serves the logs of the operators ``--tiles-logs`` and
``--tiles-entries`` name as C2SP tlog-tiles over HTTP (:mod:`rng_service.api.tiles_http`), and
the player's verifier page beside them (``--tiles-rounds``: whose rounds it may look up by id): off
unless asked, because over gRPC an operator's log is its own and its auditors', and publishing it
is the operator's decision, not a side effect of an upgrade.

Only one server listens on a port: a second one on a port in use (gRPC's or the metrics') fails
with one error line and exit status 2. Every line on stderr is JSON, start-up failures included;
gRPC's C core writes plain text lines of its own, so they are off (``GRPC_VERBOSITY=NONE``) unless
the environment sets ``GRPC_VERBOSITY``.

SIGINT or SIGTERM drains: health turns NOT_SERVING at once and open health watches end, new calls
are refused, calls in flight finish (for at most ``--grace-seconds``, then they are cancelled:
a call whose handler is still running then is abandoned, its transaction uncommitted), and the
process exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING, Any

from rng_service.core.cpus import available_cores

if TYPE_CHECKING:
    from pathlib import Path

    from rng_service.service.shoes import ShoeSource

#: the shortest period between the RNG self-test's re-runs (0 turns them off)
MIN_SELF_TEST_SECONDS = 0.1
#: how often the main thread wakes to run signal handlers while it waits for SIGTERM
SIGNAL_POLL_SECONDS = 0.2
#: ``--metrics-port any`` / ``--tiles-port any``: a port the OS picks, logged once bound (0 is
#: already "off" for both)
ANY_PORT = -1


class Stop:
    """The flag SIGTERM and SIGINT set. Not a ``threading.Event``: its ``set`` takes the lock
    that the main thread holds inside ``Event.wait``, and a handler runs on the main thread,
    so a signal landing there would deadlock the process before it drains (seen: a serve's
    worker that never logged ``stopping``). A plain attribute takes no lock."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """Stop (from a signal handler too)."""
        self._set = True

    def is_set(self) -> bool:
        """Whether a stop was asked for."""
        return self._set

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds (less once set); whether a stop was asked for."""
        deadline = time.monotonic() + timeout
        while not self._set and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return self._set


def listen_port(text: str) -> int:
    """A port option's value: a number, or ``any`` (:data:`ANY_PORT`). A port the OS picks at the
    bind is the only one nothing else can take between choosing it and listening on it."""
    if text.strip().lower() == "any":
        return ANY_PORT
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:  # and -1 would read as any
        raise argparse.ArgumentTypeError(f"a port is 0 (off) to 65535 or any, got {text!r}")
    return port


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` command and its options to ``subparsers``."""
    serve = subparsers.add_parser("serve", help="run the gRPC service")
    serve.add_argument("--address", default=os.environ.get("FAIRSHOE_ADDRESS", "127.0.0.1:50051"),
                       help="host:port to listen on (port 0: any free port, logged)")
    serve.add_argument("--database", default=None, metavar="PATH_OR_URL",
                       help="a SQLite database file or a postgresql:// URL (default: "
                            "$FAIRSHOE_DATABASE_URL, else $FAIRSHOE_DATABASE, else "
                            "<data dir>/fairshoe.db)")
    serve.add_argument("--metrics-port", type=listen_port,
                       default=os.environ.get("FAIRSHOE_METRICS_PORT", "9464"),
                       help="Prometheus /metrics port (0 disables; any: a free port, the one "
                            "bound logged as the serving line's metrics_port)")
    serve.add_argument("--metrics-address",
                       default=os.environ.get("FAIRSHOE_METRICS_ADDRESS", "127.0.0.1"))
    serve.add_argument("--tiles-port", type=listen_port,
                       default=os.environ.get("FAIRSHOE_TILES_PORT", "0"),
                       help="HTTP port serving the published logs as C2SP tlog-tiles (default "
                            "$FAIRSHOE_TILES_PORT, else 0: off; any: a free port, the one bound "
                            "logged as the serving line's tiles_port; a log is published only "
                            "when --tiles-logs or --tiles-entries names its operator)")
    serve.add_argument("--tiles-address",
                       default=os.environ.get("FAIRSHOE_TILES_ADDRESS", "127.0.0.1"),
                       help="address the tiles port listens on (default $FAIRSHOE_TILES_ADDRESS, "
                            "else 127.0.0.1: publish through a reverse proxy or say 0.0.0.0)")
    serve.add_argument("--tiles-logs", default=os.environ.get("FAIRSHOE_TILES_LOGS", ""),
                       metavar="OP[,OP]",
                       help="operators whose checkpoints and hash tiles --tiles-port publishes "
                            "(default $FAIRSHOE_TILES_LOGS)")
    serve.add_argument("--tiles-entries", default=os.environ.get("FAIRSHOE_TILES_ENTRIES", ""),
                       metavar="OP[,OP]",
                       help="operators whose entries (their signed records) it publishes too "
                            "(default $FAIRSHOE_TILES_ENTRIES)")
    serve.add_argument("--tiles-rounds", default=os.environ.get("FAIRSHOE_TILES_ROUNDS", ""),
                       metavar="OP[,OP]",
                       help="operators whose players may look up one round by its id (record, "
                            "shoe commitment, reveal once the shoe is finished, proofs) for the "
                            "verifier page at <log root>verify; implied by --tiles-entries "
                            "(default $FAIRSHOE_TILES_ROUNDS)")
    serve.add_argument("--tls-cert", default=os.environ.get("FAIRSHOE_TLS_CERT"),
                       help="PEM server certificate: serve TLS (default $FAIRSHOE_TLS_CERT)")
    serve.add_argument("--tls-key", default=os.environ.get("FAIRSHOE_TLS_KEY"),
                       help="its PEM private key (default $FAIRSHOE_TLS_KEY)")
    serve.add_argument("--tls-client-ca", default=os.environ.get("FAIRSHOE_TLS_CLIENT_CA"),
                       help="PEM CA of client certificates: mutual TLS, each certificate names "
                            "its operator (URI SAN fairshoe://operator/<id>) or auditor "
                            "(fairshoe://auditor/<name>); without it every call is operator "
                            "'default' (default $FAIRSHOE_TLS_CLIENT_CA)")
    serve.add_argument("--auditor-grants", default=os.environ.get("FAIRSHOE_AUDITOR_GRANTS", ""),
                       metavar="AUDITOR=OP[,OP];...",
                       help="which operators each auditor certificate may read (default "
                            "$FAIRSHOE_AUDITOR_GRANTS; needs --tls-client-ca)")
    serve.add_argument("--self-test-seconds", type=float,
                       default=float(os.environ.get("FAIRSHOE_SELF_TEST_SECONDS", "60")),
                       help="re-run the RNG self-test this often (default 60; 0: at start-up "
                            "only); a failure turns health NOT_SERVING until restart")
    serve.add_argument("--log-level", default=os.environ.get("FAIRSHOE_LOG_LEVEL", "INFO"))
    serve.add_argument("--workers", type=int,
                       default=int(os.environ.get("FAIRSHOE_WORKERS", "32")),
                       help="threads serving calls (default 32; on PostgreSQL as many pool "
                            "connections, plus one for health checks): on SQLite concurrent "
                            "writes share one COMMIT, so more threads make larger groups; at "
                            "most half serve exports at once (half of those per caller); "
                            "health watches and reflection have threads of their own")
    serve.add_argument("--processes", type=_processes, default=_default_processes(),
                       help="processes serving calls on the one address (default "
                            "$FAIRSHOE_PROCESSES, else the CPUs this process may use); past 1, "
                            "a parent claims the port, serves metrics and tiles, and restarts a "
                            "process that dies (docs/operations.md)")
    # a process of a `serve --processes N`, started by its parent (not for operators)
    serve.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--worker-count", type=int, default=1, help=argparse.SUPPRESS)
    serve.add_argument("--worker-ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--worker-parent", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--grace-seconds", type=float,
                       default=float(os.environ.get("FAIRSHOE_GRACE_SECONDS", "10")),
                       help="on SIGTERM or SIGINT, how long calls in flight may take to finish "
                            "before they are cancelled (default 10)")
    serve.set_defaults(func=run)


def _default_processes() -> str:
    """``$FAIRSHOE_PROCESSES`` (checked as the option is: argparse applies the type to a string
    default), else the CPUs this process may run on."""
    named = os.environ.get("FAIRSHOE_PROCESSES", "").strip()
    if named:
        return named
    return str(available_cores())


def _processes(text: str) -> int:
    """A count of serving processes: a whole number, at least 1."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of at least 1 (also $FAIRSHOE_PROCESSES), got {text!r}")
    return count


def run(args: argparse.Namespace, *, shoe_source: ShoeSource | None = None,
        known_answers: Path | None = None) -> int:
    """Serve until SIGINT or SIGTERM, then drain. ``shoe_source`` and ``known_answers`` are for
    tests only (stacked shoes, which the round service refuses unless FAIRSHOE_TEST_SHOES=1; a
    self-test against a file the test can damage, refused unless FAIRSHOE_TEST_SELF_TEST=1; both
    switches refused in production). A start that fails logs one JSON error line and returns 2."""
    # gRPC's C core logs plain text to stderr: off unless asked for (before grpc loads)
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    # grpc, protobuf, prometheus and structlog load here, not while the command line is parsed
    import structlog

    from rng_service.cli.main import CommandError
    from rng_service.core.errors import FairshoeError
    from rng_service.core.logs import configure_logging

    worker = args.worker_index is not None
    configure_logging(args.log_level, context={"worker": args.worker_index} if worker else None)
    log = structlog.get_logger("fairshoe.server")
    stop = Stop()  # before start-up: a SIGTERM while starting drains once up
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if worker:
        _stop_with_parent(args.worker_parent)
    elif args.processes != 1:
        from rng_service.cli.serve_processes import supervise

        return supervise(args, stop)
    try:
        started = _start(args, shoe_source, known_answers)
    except (CommandError, FairshoeError, OSError) as exc:  # what to fix; never key material
        log.error("start_failed", error=" ".join(str(exc).splitlines()))
        return 2
    if args.worker_ready_fd is not None:  # the parent counts its processes up
        os.write(args.worker_ready_fd, b"1")
        os.close(args.worker_ready_fd)
    return _serve_until_signalled(args, stop, started)


def _stop_with_parent(parent: int | None) -> None:
    """A worker drains when its parent dies (SIGKILLed, say) instead of serving on alone,
    unsupervised (Linux: PR_SET_PDEATHSIG; elsewhere it serves until signalled)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if parent is not None and os.getppid() != parent:  # it died before the call: no signal
        signal.raise_signal(signal.SIGTERM)  # will come, so drain now


def _config(args: argparse.Namespace, known_answers: Path | None) -> Any:
    """The server's configuration from the command line (CommandError saying what is wrong)."""
    from rng_service.api.caller import AuditorGrants
    from rng_service.api.server import ServerConfig
    from rng_service.cli.main import CommandError
    from rng_service.core.config import ConfigError
    from rng_service.rng.selftest import use_test_known_answers
    from rng_service.service.witnessing import configured_witnesses

    if args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    if not args.grace_seconds >= 0:  # NaN too
        raise CommandError(f"--grace-seconds must be at least 0, got {args.grace_seconds}")
    if not (args.self_test_seconds == 0 or args.self_test_seconds >= MIN_SELF_TEST_SECONDS):
        # a self-test takes milliseconds of CPU: re-run without pause it would starve the calls
        raise CommandError(f"--self-test-seconds must be 0 (start-up only) or at least "
                           f"{MIN_SELF_TEST_SECONDS}, got {args.self_test_seconds}")
    for option, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key),
                         ("--tls-client-ca", args.tls_client_ca)):
        if path and not os.access(path, os.R_OK):  # before any database or key is touched
            raise CommandError(f"cannot read {option} {path}")
    try:
        configured_witnesses()  # a malformed FAIRSHOE_WITNESSES fails the start, not a call
        if known_answers is not None:
            use_test_known_answers(known_answers)
        return ServerConfig(address=args.address, tls_cert=args.tls_cert, tls_key=args.tls_key,
                            tls_client_ca=args.tls_client_ca,
                            auditor_grants=AuditorGrants.parse(args.auditor_grants),
                            workers=args.workers, self_test_seconds=args.self_test_seconds,
                            shared_port=args.worker_index is not None,
                            processes=max(1, args.worker_count))
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def _publication(args: argparse.Namespace) -> Any:
    """What ``--tiles-port`` publishes (None when it is off), or CommandError saying what is
    wrong: a port without a published log would serve nothing, a list without a port nothing
    either, and both are a configuration mistake worth stopping for."""
    from rng_service.api.tiles_http import TilesPublication
    from rng_service.cli.main import CommandError
    from rng_service.core.errors import InvalidInput

    try:
        publication = TilesPublication.parse(args.tiles_logs, args.tiles_entries,
                                             args.tiles_rounds)
    except InvalidInput as exc:
        raise CommandError(str(exc)) from None
    if args.tiles_port and not publication.logs:
        raise CommandError("--tiles-port publishes nothing without --tiles-logs, "
                           "--tiles-entries or --tiles-rounds naming an operator")
    if publication.logs and not args.tiles_port:
        raise CommandError("--tiles-logs, --tiles-entries and --tiles-rounds need --tiles-port")
    return publication if args.tiles_port else None


def _start_tiles(args: argparse.Namespace, publication: Any, live: Any) -> Any:
    """The tlog-tiles server, started, once every published operator exists."""
    from rng_service.api.tiles_http import TilesServer, TilesSite
    from rng_service.cli.main import CommandError
    from rng_service.core import config as settings
    from rng_service.log import DEFAULT_ORIGIN
    from rng_service.service.audit import AuditService

    with live.storage.snapshot() as uow:
        missing = sorted(op for op in publication.logs if not uow.operator_exists(op))
    if missing:
        raise CommandError(f"cannot publish the log of {', '.join(missing)}: no such operator "
                           "(add it with `fairshoe operators add`)")
    site = TilesSite(AuditService(live.storage, live.keys), publication,
                     base_origin=settings.log_base_origin() or DEFAULT_ORIGIN)
    port = 0 if args.tiles_port == ANY_PORT else args.tiles_port  # 0: the OS's choice
    try:
        return TilesServer(site, args.tiles_address, port).start()
    except OSError as exc:
        raise CommandError(f"cannot serve tiles on {args.tiles_address}:{port or 'any'}: "
                           f"{exc.strerror or exc}") from None


def _tenancy(config: Any) -> dict[str, Any]:
    """What the ``serving`` line says about who the callers are."""
    if config.tls == "mutual":
        return {"tls": "mutual", "operators": "named by client certificates",
                "auditors": config.auditor_grants.describe()}
    return {"tls": config.tls, "operators": "default only: every call is operator 'default' "
            "(no client certificates without --tls-client-ca)"}


def _start(args: argparse.Namespace, shoe_source: ShoeSource | None,
           known_answers: Path | None) -> tuple[Any, ...]:
    from rng_service.api.admission import Drain
    from rng_service.api.metrics import start_metrics
    from rng_service.api.server import (
        BindFailed,
        DrainingHealth,
        LiveServices,
        bind_server,
        build_server,
        log,
    )
    from rng_service.api.tiles_http import TILES_CONCURRENCY
    from rng_service.cli.main import CommandError
    from rng_service.core.config import ConfigError
    from rng_service.core.errors import Unavailable
    from rng_service.crypto.keys import KeyStoreError
    from rng_service.service.reconcile import outbox_gauges

    config = _config(args, known_answers)
    # a worker's parent publishes the tiles (and checked the options)
    publication = _publication(args) if args.worker_index is None else None
    extra = TILES_CONCURRENCY if publication is not None else 0  # the tile reads' connections
    drain = Drain()  # closed on SIGTERM: new calls refused, the admitted ones waited for
    with contextlib.ExitStack() as undo:  # a failed start closes what it opened
        # both ports first: a start that fails on one must not have made a database or keys
        metrics_http = _serve_metrics(args)
        if metrics_http is not None:
            undo.callback(metrics_http.server_close)
            undo.callback(metrics_http.shutdown)
        try:
            bound = bind_server(config, drain=drain)
        except BindFailed as exc:
            raise CommandError(str(exc)) from None
        undo.callback(bound[0].stop, None)
        try:
            live = LiveServices.open(args.database, shoe_source=shoe_source,
                                     pool_size=config.pool_size + extra)
        except (ConfigError, KeyStoreError, Unavailable) as exc:  # what to fix; no key material
            raise CommandError(str(exc)) from None
        undo.callback(live.close)
        # the tiles port after the storage: which operators exist is the database's to say
        tiles = _start_tiles(args, publication, live) if publication is not None else None
        if tiles is not None:
            undo.callback(tiles.stop)
        health = DrainingHealth()
        server, port = build_server(config, live, health_servicer=health, bound=bound)
        undo.pop_all()  # started: the drain closes them
    # storage sizes at each scrape (both backends count them: SQLite by rowid, PostgreSQL exactly)
    sizes = getattr(live.storage, "sizes", None)
    storage = live.storage
    refresher = start_metrics(sizes, lambda: outbox_gauges(storage)) if (
        args.metrics_port) else None
    # a worker says it serves its share; the parent says "serving" once all of them do
    log.info("serving" if args.worker_index is None else "worker_serving",
             address=args.address, port=port, **_tenancy(config),
             metrics_port=args.metrics_port,
             tiles_port=tiles.port if tiles is not None else 0,
             **({"tiles": publication.describe()} if publication is not None else {}),
             database=live.storage.describe(),
             workers=config.workers, grace_seconds=args.grace_seconds,
             self_test_seconds=config.self_test_seconds)
    return live, health, server, refresher, tiles, drain


def _serve_metrics(args: argparse.Namespace, registry: Any = None) -> Any:
    """The Prometheus HTTP server on ``--metrics-port`` (None when 0), listening already, serving
    ``registry`` (default: this process's own); CommandError naming the address when it cannot
    bind. ``args.metrics_port`` becomes the port bound (``any``'s too), for the serving line."""
    from prometheus_client import start_http_server

    from rng_service.cli.main import CommandError

    if not args.metrics_port:
        return None
    port = 0 if args.metrics_port == ANY_PORT else args.metrics_port  # 0: the OS's choice
    try:
        httpd, _ = start_http_server(port, addr=args.metrics_address,
                                     **({"registry": registry} if registry is not None else {}))
    except OSError as exc:
        raise CommandError(f"cannot serve metrics on {args.metrics_address}:"
                           f"{port or 'any'}: {exc.strerror or exc}") from None
    args.metrics_port = int(httpd.server_address[1])
    return httpd


def _serve_until_signalled(args: argparse.Namespace, stop: Stop,
                           started: tuple[Any, ...]) -> int:
    import time

    live, health, server, refresher, tiles, drain = started
    from rng_service.api.server import log

    # woken now and then, not blocked for good: a signal the kernel hands to another thread
    # (a gRPC or worker thread) only flags CPython's main thread, which runs the handler when it
    # next executes bytecode, and an untimed wait would never return to do so
    while not stop.wait(SIGNAL_POLL_SECONDS):
        pass
    began = time.monotonic()
    log.info("stopping", grace_seconds=args.grace_seconds)
    health.enter_graceful_shutdown()  # NOT_SERVING everywhere, watches ended
    # refuse new calls (UNAVAILABLE, retryable) and let the admitted ones end before gRPC stops:
    # grpcio's stop(grace) would cancel calls it had queued but not yet started
    drain.begin()
    deadline = began + args.grace_seconds
    while True:
        idle = drain.wait_idle(max(0.0, deadline - time.monotonic()))
        # calls gRPC had already queued reach the gate within moments and are refused; only
        # a quiet moment with nothing admitted lets stop() cancel nothing
        time.sleep(max(0.0, min(0.2, deadline - time.monotonic())))
        if (idle and drain.wait_idle(0)) or time.monotonic() >= deadline:
            break
    left = max(0.0, deadline - time.monotonic())
    server.stop(grace=left).wait()  # cancels what is still running: its clients are told
    if refresher is not None:
        refresher.stop()
    if tiles is not None:
        tiles.stop()
    abandoned = drain.in_flight
    if abandoned:
        # a handler still running (blocked in the database, say) would keep the process up past
        # the grace: Python joins the worker threads at exit. Its transaction never commits
        # (the database rolls it back as after a crash), so exit now without closing the
        # database under it, which would only make it fail INTERNAL on the way.
        log.warning("stopped", seconds=round(time.monotonic() - began, 3),
                    abandoned_calls=abandoned)
        _exit_now()
    live.close()
    log.info("stopped", seconds=round(time.monotonic() - began, 3), abandoned_calls=0)
    return 0


def _exit_now() -> None:
    """Exit 0 at once, output flushed, without waiting for threads (no atexit handlers run)."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)
