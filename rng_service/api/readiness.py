"""Health that follows what the server depends on: the database (NOT_SERVING while it cannot
answer, SERVING again when it does, without a restart) and the RNG's known-answer self-test
(NOT_SERVING from its first failure until the process restarts).

A replica whose database is unreachable must not look ready to a load balancer: every call it
took would end UNAVAILABLE. :class:`DatabaseHealth` pings the storage (``SELECT 1``) about once
a second on a daemon thread. :class:`SelfTestWatch` runs the self-test at start-up and again
every ``--self-test-seconds`` (default 60). Both report to one :class:`Readiness`, which sets
the standard health status of the whole server (``""``) and of each service: every service is
NOT_SERVING while the self-test has failed; the services that read or write the database are
also NOT_SERVING while it does not answer. A service that needs no database (the stateless
GameService) keeps SERVING through an outage.

A self-test failure is final for the process: a certified RNG that computed a wrong known
answer has shown that what deals is not what was certified (corrupted code or data, a memory
fault, tampering), a later pass does not make the shoes dealt in between trustworthy, and a
status that flips back would send real-money play to it again without anyone looking. So the
watch stops re-running, health stays NOT_SERVING, the self-test gauge stays 0 and dealing stays
refused (``require_healthy_rng``) until someone has investigated and restarted the server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import structlog
from grpc_health.v1 import health, health_pb2

from rng_service.core.errors import Unavailable
from rng_service.service.ports import Storage

log = structlog.get_logger("fairshoe.server")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

PING_INTERVAL_S = 1.0
PING_TIMEOUT_S = 1.0
SELF_TEST_INTERVAL_S = 60.0


class Readiness:
    """The statuses health reports, from what the checks last found: ``names`` (``""`` and
    every service) all need the RNG; ``on_database`` of them need the database too."""

    def __init__(self, servicer: health.HealthServicer, names: Sequence[str],
                 on_database: Sequence[str] = ()) -> None:
        self._servicer = servicer
        self._names = tuple(dict.fromkeys(("", *names)))
        self._on_database = frozenset(on_database)
        self._lock = threading.Lock()  # two checks' threads: one decides at a time
        self.rng_ok = True
        self.database_ok = True

    def rng(self, ok: bool) -> None:
        """The self-test's last result."""
        with self._lock:
            self.rng_ok = ok
            self._publish()

    def database(self, ok: bool) -> None:
        """Whether the database answered the last ping."""
        with self._lock:
            self.database_ok = ok
            self._publish()

    def _publish(self) -> None:
        for name in self._names:
            ready = self.rng_ok and (self.database_ok or name not in self._on_database)
            self._servicer.set(name, SERVING if ready else NOT_SERVING)


class SelfTestWatch:
    """Runs the RNG self-test (``run``: True if it passed, e.g. ``metrics.record_self_test``,
    which also sets the gauges) now and then every ``interval`` seconds (0: only now), until it
    fails once: then :class:`Readiness` turns NOT_SERVING for good (see the module docstring)."""

    def __init__(self, readiness: Readiness, run: Callable[[], bool], *,
                 interval: float = SELF_TEST_INTERVAL_S) -> None:
        self._readiness = readiness
        self._run = run
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fairshoe-self-test",
                                        daemon=True)
        self.failed = False

    def start(self) -> SelfTestWatch:
        """Run once now (health is right before the first call), then in the background."""
        if self.check() and self._interval > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop re-running (the current run, about 5 ms, finishes)."""
        self._stopped.set()

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval) and self.check():
            pass

    def check(self) -> bool:
        """One run; a failure is final. Returns whether it passed."""
        passed = self._run()
        if not passed:
            self.failed = True
            self._stopped.set()
            log.error("rng_not_serving_until_restart",
                      reason="the RNG failed its known-answer self-test: health NOT_SERVING "
                             "and dealing refused until the server is restarted")
        self._readiness.rng(passed)
        return passed


class DatabaseHealth:
    """Pings ``storage`` every ``interval`` seconds and tells ``readiness`` whether it answers."""

    def __init__(self, readiness: Readiness, storage: Storage, *,
                 interval: float = PING_INTERVAL_S, timeout: float = PING_TIMEOUT_S) -> None:
        self._readiness = readiness
        self._storage = storage
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
        self._readiness.database(reachable)
        if not reachable:
            log.error("database_unreachable", reason=why, storage=self._storage.describe())
        elif not first:
            log.warning("database_reachable_again", storage=self._storage.describe())
