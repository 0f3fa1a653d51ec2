"""The log's background sequencer: a thread that integrates a storage's queued leaves.

PostgreSQL's transactions queue their log leaves instead of sequencing them
(:mod:`rng_service.storage.sql.log`). Every writable PostgreSQL storage, so every replica, runs
one :class:`LogSequencer`; they take each operator's sequencer row with ``SKIP LOCKED``, so one
integrates at a time and the others pass, and a replica that dies leaves the work to the rest.

The merge delay: a leaf committed while any replica runs is in the log within
:data:`MERGE_INTERVAL_S` plus two passes: the pass under way, which may have taken the queue
just before the leaf's COMMIT (and another replica's sequencer skips the log while that one
holds it), and the next. A pass drains the whole queue, batch after batch (a batch is at most
:data:`~rng_service.storage.sql.log.MERGE_BATCH` leaves, one transaction), so a long queue does
not add an interval per batch; on a quiet database a pass takes milliseconds, and
``bench/bench_replicas.py`` measures the delay under load. Nothing waits for it: a read that
needs the log complete (a checkpoint, a record's inclusion proof) integrates the queue itself
first, and a read-only storage waits for a replica's sequencer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

import structlog

from rng_service.core.errors import FairshoeError

#: how often each replica's sequencer looks at the queue
MERGE_INTERVAL_S: Final = 0.05

log = structlog.get_logger("fairshoe.storage")


class LogSequencer(threading.Thread):
    """Calls ``integrate`` (which merges what it can without waiting for a lock, and returns how
    many leaves it merged) every ``interval`` seconds until :meth:`stop`."""

    def __init__(self, integrate: Callable[[], int], interval: float = MERGE_INTERVAL_S) -> None:
        super().__init__(name="fairshoe-log-sequencer", daemon=True)
        self._integrate = integrate
        self._interval = interval
        self._stopped = threading.Event()
        self._failing = False  # logged once per outage, not every interval

    def run(self) -> None:
        """A pass every ``interval`` until stopped."""
        while not self._stopped.wait(self._interval):
            self.run_once()

    def run_once(self) -> int:
        """One pass: merges what it can (the whole queue, batch after batch, unless another
        replica's sequencer holds the log); how many leaves. A database that does not answer,
        or a bug, is logged once per outage and retried next pass (0)."""
        try:
            merged = self._integrate()
        except FairshoeError as exc:  # the database down or busy: the next pass retries
            if not self._failing:
                log.warning("log_sequencer_failed", error=str(exc),
                            reason=getattr(exc, "reason", None))
            self._failing = True
            return 0
        except Exception:  # a bug must not end the thread: the queue would only grow
            if not self._failing:
                log.exception("log_sequencer_failed")
            self._failing = True
            return 0
        if self._failing:
            log.info("log_sequencer_recovered")
        self._failing = False
        return merged

    def stop(self) -> None:
        """Stop after the pass under way, if any."""
        self._stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
