"""Health that follows the database: NOT_SERVING while it cannot answer, SERVING again when it
does, without a restart.

A replica whose database is unreachable must not look ready to a load balancer: every call it
took would end UNAVAILABLE. :class:`DatabaseHealth` pings the storage (``SELECT 1``) about once
a second on a daemon thread and sets the standard health status of the whole server (``""``) and
of each service that reads or writes the database. A service that needs no database (the
stateless GameService) keeps its status. It stops by itself once the storage is closed.

The RNG's known-answer self-test decides first: a server whose self-test failed stays
NOT_SERVING whatever the database says.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import structlog
from grpc_health.v1 import health, health_pb2

from rng_service.core.errors import Unavailable
from rng_service.service.ports import Storage

log = structlog.get_logger("fairshoe.server")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

PING_INTERVAL_S = 1.0
PING_TIMEOUT_S = 1.0


class DatabaseHealth:
    """Pings ``storage`` every ``interval`` seconds and keeps ``names`` (the server's ``""``
    and the database's services) SERVING only while it answers and ``rng_ok``."""

    def __init__(self, servicer: health.HealthServicer, storage: Storage, names: Sequence[str],
                 *, rng_ok: bool = True, interval: float = PING_INTERVAL_S,
                 timeout: float = PING_TIMEOUT_S) -> None:
        self._servicer = servicer
        self._storage = storage
        self._names = tuple(names)
        self._rng_ok = rng_ok
        self._interval = interval
        self._timeout = timeout
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fairshoe-db-health", daemon=True)
        self.reachable: bool | None = None  # None until the first ping

    def start(self) -> DatabaseHealth:
        """Ping once now (the status is right before the first call), then in the background."""
        self.check()
        if not self._stopped.is_set():
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop pinging and wait (up to 5 s) for the background thread, unless called from it."""
        self._stopped.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            self.check()

    def check(self) -> bool:
        """One ping; sets the statuses when reachability changed. Returns whether it answered."""
        try:
            self._storage.ping(timeout=self._timeout)
        except Unavailable as exc:
            if exc.reason == "DATABASE_CLOSED":  # the server is shutting down: stop pinging
                self._stopped.set()
                return False
            self._set(False, str(exc))
            return False
        except Exception as exc:  # whatever else a ping raises, the database is not usable
            self._set(False, f"{type(exc).__name__}: {exc}")
            return False
        self._set(True)
        return True

    def _set(self, reachable: bool, why: str = "") -> None:
        if reachable == self.reachable:
            return
        first = self.reachable is None
        self.reachable = reachable
        status = SERVING if reachable and self._rng_ok else NOT_SERVING
        for name in self._names:
            self._servicer.set(name, status)
        if not reachable:
            log.error("database_unreachable", reason=why, storage=self._storage.describe())
        elif not first:
            log.warning("database_reachable_again", storage=self._storage.describe())
