"""`fairshoe serve --processes N`: N serving processes behind one address, and their parent.

One Python process serves from one core (its threads share one interpreter lock). Past one
process, `fairshoe serve` becomes a parent that serves no call itself:

* it checks the options, claims the gRPC port (:mod:`rng_service.api.port_claim`: no other
  server binds it while this one runs, though N processes share it), binds the metrics and
  tiles ports, opens the database (migrating it and making a first run's dev key once, before
  any worker starts), then starts N workers: the same command line again, with ``--processes 1``
  and the parent's address, each listening on the port with ``SO_REUSEPORT`` (the kernel spreads
  new connections among them; a connection, and so a client channel, stays with one worker);
* it logs ``serving`` (with the port) once every worker serves; each worker logs
  ``worker_serving``, and every line a worker writes has its ``worker`` index;
* metrics: one endpoint, the parent's. Workers count in prometheus_client's multiprocess mode,
  in files under a fresh private directory (``PROMETHEUS_MULTIPROC_DIR``, removed at exit); the
  parent adds them up (:func:`rng_service.api.metrics.multiprocess_registry`) and adds what it
  computes once for all: the storage sizes at each scrape and the theoretical figures;
* tiles: the parent serves them (a read of the database, as a worker's would be);
* health: each worker answers for itself, on the same database and the same self-test, so they
  agree; on SIGTERM or SIGINT the parent forwards SIGTERM to every worker, each drains its own
  calls as a one-process serve does (``--grace-seconds``), and the parent exits once all have
  (status 0 if each drained cleanly);
* a worker that dies (a crash, the OOM killer's SIGKILL) is logged as an error and replaced at
  once: its calls in flight are lost as in any crash (nothing acknowledged is: an answer follows
  its COMMIT), its connections' clients reconnect to the others, and the others serve on. A
  replacement that cannot start (the database gone, say) fails the whole serve: the others
  drain and the parent exits 1, for the supervisor above (systemd, Kubernetes) to see. A worker
  whose parent dies drains and exits too (Linux).

The database is shared as by replicas: SQLite through its file locks (each process's
transactions share COMMITs among themselves; between processes ``BEGIN IMMEDIATE`` serialises
the writers, and the log's sequencer state is read and written inside each write transaction,
so no process relies on a tree size another has changed), PostgreSQL as one replica each.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rng_service.cli.serve import Stop

#: how often the parent looks at its workers and its stop flag
POLL_SECONDS = 0.2
#: past the grace period, how long the parent waits for a worker to exit before SIGKILL (a
#: worker abandons calls still running at the end of its grace, so it exits within moments)
STOP_MARGIN_SECONDS = 10.0


@dataclass
class _Worker:
    index: int
    proc: subprocess.Popen[bytes]
    ready_fd: int  # the read end of the pipe the worker writes to once it serves
    ready: bool = False
    replacement: bool = False


@dataclass
class _Parent:
    args: argparse.Namespace
    address: str
    metrics_dir: str
    log: Any
    live: Any
    tiles: Any
    workers: list[_Worker] = field(default_factory=list)

    # --- workers -------------------------------------------------------------------------------

    def command(self, index: int, ready_fd: int) -> list[str]:
        """The worker's command line: this process's own (the same entry point, so a test's
        stacked shoes too) with the worker's options last (the last of an option wins)."""
        return [sys.executable, *sys.orig_argv[1:],
                "--processes", "1", "--address", self.address, "--metrics-port", "0",
                "--tiles-port", "0", "--worker-index", str(index),
                "--worker-count", str(self.args.processes), "--worker-ready-fd", str(ready_fd),
                "--worker-parent", str(os.getpid())]

    def spawn(self, index: int, *, replacement: bool = False) -> _Worker:
        read, write = os.pipe()
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir}
        env.pop("FAIRSHOE_PROCESSES", None)
        try:
            proc = subprocess.Popen(self.command(index, write), env=env, pass_fds=(write,))
        except OSError:
            os.close(read)
            raise
        finally:
            os.close(write)
        worker = _Worker(index, proc, read, replacement=replacement)
        self.log.info("worker_started", worker=index, pid=proc.pid)
        return worker

    def check_ready(self, timeout: float) -> None:
        """Wait up to ``timeout`` for a starting worker to say it serves."""
        starting = {w.ready_fd: w for w in self.workers if not w.ready}
        if not starting:
            time.sleep(timeout)
            return
        readable, _, _ = select.select(list(starting), [], [], timeout)
        for fd in readable:
            worker = starting[fd]
            if os.read(fd, 1):  # b"" is the pipe closed by the worker's death: reaped next
                worker.ready = True
                os.close(fd)
                if worker.replacement:
                    self.log.info("worker_replaced", worker=worker.index, pid=worker.proc.pid)

    def reap(self) -> tuple[_Worker, int] | None:
        """The first worker found dead and its status, replaced if it had served."""
        for at, worker in enumerate(self.workers):
            status = worker.proc.poll()
            if status is None:
                continue
            self._forget(worker)
            if not worker.ready:
                return worker, status
            self.log.error("worker_died", worker=worker.index, pid=worker.proc.pid,
                           **_exit_fields(status))
            self.workers[at] = self.spawn(worker.index, replacement=True)
        return None

    def _forget(self, worker: _Worker) -> None:
        from rng_service.api.metrics import worker_exited

        if not worker.ready:
            with contextlib.suppress(OSError):
                os.close(worker.ready_fd)
        worker_exited(self.metrics_dir, worker.proc.pid)

    def stop_workers(self, grace: float) -> list[int]:
        """SIGTERM each worker, wait for them all to drain and exit; their exit statuses."""
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace + STOP_MARGIN_SECONDS
        statuses = []
        for worker in self.workers:
            try:
                status = worker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.log.error("worker_killed", worker=worker.index, pid=worker.proc.pid,
                               reason="still running past the grace period")
                worker.proc.kill()
                status = worker.proc.wait()
            self._forget(worker)
            statuses.append(status)
        return statuses

    # --- the serve -----------------------------------------------------------------------------

    def serve(self, stop: Stop) -> int:
        """Start the workers, supervise them until signalled, then drain them all."""
        began = time.monotonic()
        self.workers = [self.spawn(index) for index in range(self.args.processes)]
        failed: tuple[_Worker, int] | None = None
        while not stop.is_set() and not all(w.ready for w in self.workers):
            self.check_ready(POLL_SECONDS)
            failed = self.reap()
            if failed is not None:
                break
        if failed is not None:  # its own start_failed line says why
            worker, status = failed
            self.log.error("start_failed", error=f"worker {worker.index} exited before it "
                                                 f"served ({_describe(status)})")
            self.workers.remove(worker)
            self.stop_workers(0.0)
            return 2
        if not stop.is_set():
            self.log.info("serving", address=self.args.address, port=_port(self.address),
                          processes=len(self.workers),
                          pids=[w.proc.pid for w in self.workers],
                          metrics_port=self.args.metrics_port,
                          tiles_port=self.tiles.port if self.tiles is not None else 0,
                          database=self.live.storage.describe(),
                          start_seconds=round(time.monotonic() - began, 3))
        status = 0
        while not stop.is_set():
            self.check_ready(POLL_SECONDS)
            failed = self.reap()
            if failed is not None:
                worker, code = failed
                self.log.error("worker_failed_to_start", worker=worker.index,
                               pid=worker.proc.pid, **_exit_fields(code))
                self.workers.remove(worker)
                status = 1
                break
        began = time.monotonic()
        self.log.info("stopping", grace_seconds=self.args.grace_seconds,
                      reason="a worker could not be replaced" if status else "signal")
        statuses = self.stop_workers(self.args.grace_seconds)
        if any(statuses):
            status = 1
        self.log.info("stopped", seconds=round(time.monotonic() - began, 3),
                      worker_statuses=statuses)
        return status


def supervise(args: argparse.Namespace, stop: Stop) -> int:
    """Run the parent of ``args.processes`` workers until SIGTERM or SIGINT (``stop``), then
    drain them; 2 if the serve could not start (one JSON error line says why)."""
    import structlog

    from rng_service.cli.main import CommandError
    from rng_service.core.errors import FairshoeError

    log = structlog.get_logger("fairshoe.server")
    with contextlib.ExitStack() as opened:
        try:
            parent = _start(args, opened, log)
        except (CommandError, FairshoeError, OSError) as exc:  # what to fix; never key material
            log.error("start_failed", error=" ".join(str(exc).splitlines()))
            return 2
        return parent.serve(stop)
    return 2  # not reached (mypy: the ExitStack may swallow)


def _start(args: argparse.Namespace, opened: contextlib.ExitStack, log: Any) -> _Parent:
    """Everything the parent holds, opened in ``opened`` (closed, in reverse, at its exit)."""
    from rng_service.api.metrics import multiprocess_registry, start_metrics
    from rng_service.api.port_claim import PortClaim, PortTaken
    from rng_service.api.server import LiveServices
    from rng_service.api.tiles_http import TILES_CONCURRENCY
    from rng_service.cli.main import CommandError
    from rng_service.cli.serve import _config, _publication, _serve_metrics, _start_tiles
    from rng_service.core.config import ConfigError
    from rng_service.core.errors import Unavailable
    from rng_service.crypto.keys import KeyStoreError
    from rng_service.service.reconcile import outbox_gauges

    _config(args, None)  # each worker builds its own; checked here once, before anything opens
    publication = _publication(args)
    # private (0700), fresh for each serve: counts of an earlier serve never add in
    metrics_dir = tempfile.mkdtemp(prefix="fairshoe-metrics-")
    opened.callback(shutil.rmtree, metrics_dir, ignore_errors=True)
    registry = multiprocess_registry(metrics_dir) if args.metrics_port else None
    # both ports first: a start that fails on one must not have made a database or keys
    metrics_http = _serve_metrics(args, registry)
    if metrics_http is not None:
        opened.callback(metrics_http.server_close)
        opened.callback(metrics_http.shutdown)
    try:
        claim = PortClaim.take(args.address)
    except PortTaken as exc:
        raise CommandError(str(exc)) from None
    opened.callback(claim.release)
    extra = TILES_CONCURRENCY if publication is not None else 0
    try:  # one connection for the sizes' scrapes, and the tile reads'
        live = LiveServices.open(args.database, pool_size=1 + extra)
    except (ConfigError, KeyStoreError, Unavailable) as exc:
        raise CommandError(str(exc)) from None
    opened.callback(live.close)
    tiles = _start_tiles(args, publication, live) if publication is not None else None
    if tiles is not None:
        opened.callback(tiles.stop)
    if registry is not None:
        storage = live.storage
        refresher = start_metrics(getattr(storage, "sizes", None),
                                  lambda: outbox_gauges(storage), registry)
        opened.callback(refresher.stop)
    return _Parent(args, claim.address, metrics_dir, log, live, tiles)


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _describe(status: int) -> str:
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}"


def _exit_fields(status: int) -> dict[str, Any]:
    if status < 0:
        return {"signal": signal.Signals(-status).name}
    return {"exit_status": status}
