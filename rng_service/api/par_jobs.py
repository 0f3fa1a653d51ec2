"""PAR analyses in child processes: bounded, shared per caller, stopped once nobody waits.

An analysis of a rule set never seen before takes seconds of pure-Python CPU. Run on a server
thread it holds the GIL against live play, and it ran to the end even when its caller had long
gone (issue 20: 40 callers with 10 s deadlines kept the server busy for 75 s). Here each runs in
a child process of its own (``spawn``: no fork of a process with gRPC's threads), at a lower
scheduling priority than the server, and:

* at most ``processes`` run at once; a request for another rule set past that is
  :class:`Busy` (RESOURCE_EXHAUSTED), never queued behind them;
* one caller (:func:`~rng_service.api.caller.caller_of`) waits on at most ``per_caller`` at
  once, and starts at most ``quota`` in any ``quota_seconds``;
* callers asking for the same rules digest share one analysis; once every one of them has gone
  (deadline or cancellation) the child is killed, and its process replaced at the next use;
* idle children are kept warm (the analysis and numpy loaded) for the next rule set.

The answers themselves are cached by rules digest in ``math_service.ParCache``, above this.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Final

from game_math.rules import Rules

#: how often a waiting caller is checked for having gone, and a child for its answer (seconds)
POLL_SECONDS: Final = 0.05
#: a child runs at this niceness above the server's: live play is scheduled first
CHILD_NICENESS: Final = 10

#: what a child computes: a rule set's ``fairshoe.par/v1`` document (picklable: module level)
Analysis = Callable[[Rules], dict[str, Any]]


class Busy(Exception):
    """No analysis can start for this caller now (the server's or the caller's limit)."""


class CallerGone(Exception):
    """The caller stopped waiting (deadline or cancellation) before the answer."""


class AnalysisFailed(Exception):
    """The analysis raised, or its process died; the message names the error's type only."""

    def __init__(self, message: str, *, invalid: bool = False) -> None:
        super().__init__(message)
        #: a game_math error about the rules (INVALID_ARGUMENT), not a bug
        self.invalid = invalid


def par_document(rules: Rules) -> dict[str, Any]:
    """The default analysis: the PAR sheet of ``rules`` as its JSON document."""
    from game_math.analysis.par import par_sheet  # noqa: PLC0415 - loaded in the child only

    return par_sheet(rules).to_dict()


def _child(conn: Connection, analysis: Analysis) -> None:
    """A child's loop: rules in, ("ok", document) or ("error", invalid, message) out; ends when
    the server closes the pipe (or dies)."""
    from game_math.errors import GameMathError  # noqa: PLC0415

    with contextlib.suppress(OSError):  # a platform without nice: the server's priority
        os.nice(CHILD_NICENESS)
    while True:
        try:
            rules = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(("ok", analysis(rules)))
        except GameMathError as exc:
            conn.send(("error", True, str(exc)))
        except Exception as exc:  # a bug: the server logs INTERNAL
            conn.send(("error", False, type(exc).__name__))


class _Worker:
    """One child process and the server's end of its pipe."""

    def __init__(self, analysis: Analysis) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_end = ctx.Pipe()
        self.process = ctx.Process(target=_child, args=(child_end, analysis), daemon=True,
                                   name="fairshoe-par")
        self.process.start()
        child_end.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()


@dataclass
class _Job:
    digest: str
    waiters: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    abandoned: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: AnalysisFailed | None = None


class ParJobs:
    """Runs analyses in child processes under the limits of the module docstring."""

    def __init__(self, processes: int = 1, *, per_caller: int = 1, quota: int = 12,
                 quota_seconds: float = 60.0, analysis: Analysis = par_document) -> None:
        self.processes = processes
        self.per_caller = per_caller
        self.quota = quota
        self.quota_seconds = quota_seconds
        self._analysis = analysis
        self._lock = threading.Lock()
        self._running: dict[str, _Job] = {}
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        #: slots held: a job holds one from its start until its child is idle again or dead
        #: (an abandoned or failed job's child is still running while it is being killed)
        self._active = 0
        self._waiting: dict[str, int] = {}  # caller -> analyses it waits on
        self._started: dict[str, deque[float]] = {}  # caller -> when its recent ones started
        #: analyses started (a cached or shared answer starts none)
        self.started = 0

    def analyse(self, rules: Rules, caller: str, alive: Callable[[], bool]) -> dict[str, Any]:
        """The document of ``rules``, computed in a child (or shared with the callers already
        waiting for the same digest) while ``alive()`` says the caller still waits."""
        job = self._join(rules, caller)
        try:
            while not job.done.wait(POLL_SECONDS):
                if not alive():
                    raise CallerGone("the caller has gone")
        finally:
            self._leave(job, caller)
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def worker_pids(self) -> list[int]:
        """The children held now: idle ones alive, and busy ones until they are released with
        their slot (a killed child stays listed until its slot is free, so an empty list means
        every slot is free; for tests and operators)."""
        with self._lock:
            idle = [w for w in self._idle if w.process.is_alive()]
            workers = [*idle, *self._busy]
        return [w.process.pid for w in workers if w.process.pid]

    def close(self) -> None:
        """Kill every idle child (busy ones end with their jobs' callers)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()

    # --- internals -------------------------------------------------------------------------

    def _join(self, rules: Rules, caller: str) -> _Job:
        digest = rules.digest()
        with self._lock:
            waiting = self._waiting.get(caller, 0)
            if waiting >= self.per_caller:
                raise Busy(f"this caller already waits on {waiting} analyses of new rules, the "
                           "most one caller may: retry once it has its answer")
            job = self._running.get(digest)
            if job is None:
                if self._active >= self.processes:
                    raise Busy(f"{self._active} analyses of new rules are running, the "
                               "most this server runs at once: retry later (answers are cached "
                               "once computed)")
                self._spend_quota(caller)
                job = _Job(digest)
                self._running[digest] = job
                self._active += 1
                self.started += 1
                threading.Thread(target=self._drive, args=(job, rules), daemon=True,
                                 name="fairshoe-par-driver").start()
            job.waiters += 1
            self._waiting[caller] = waiting + 1
            return job

    def _spend_quota(self, caller: str) -> None:
        now = time.monotonic()
        recent = self._started.setdefault(caller, deque())
        while recent and recent[0] <= now - self.quota_seconds:
            recent.popleft()
        if len(recent) >= self.quota:
            raise Busy(f"this caller started {len(recent)} analyses of new rules in the last "
                       f"{self.quota_seconds:g} s, its quota: retry in "
                       f"{recent[0] + self.quota_seconds - now:.0f} s")
        recent.append(now)

    def _leave(self, job: _Job, caller: str) -> None:
        with self._lock:
            left = self._waiting[caller] - 1
            if left:
                self._waiting[caller] = left
            else:
                del self._waiting[caller]
            job.waiters -= 1
            if job.waiters == 0 and not job.done.is_set():
                job.abandoned.set()  # nobody waits: the driver kills its child
                del self._running[job.digest]  # the next caller starts afresh (a new slot)

    def _drive(self, job: _Job, rules: Rules) -> None:
        """Run ``job`` on a child until it answers or every caller has gone."""
        try:
            worker = self._take_worker()
        except OSError as exc:  # out of processes or memory: answer now, free the slot
            with self._lock:
                job.error = AnalysisFailed("the analysis process could not be started "
                                           f"({type(exc).__name__})")
                if self._running.get(job.digest) is job:
                    del self._running[job.digest]
                self._active -= 1
                job.done.set()
            return
        try:
            worker.conn.send(rules)
            while not worker.conn.poll(POLL_SECONDS):
                if job.abandoned.is_set() or not worker.process.is_alive():
                    break
            else:
                answer = worker.conn.recv()
                if answer[0] == "ok":
                    job.result = answer[1]
                else:
                    job.error = AnalysisFailed(answer[2], invalid=answer[1])
        except (EOFError, OSError) as exc:
            job.error = AnalysisFailed(f"the analysis process died ({type(exc).__name__})")
        finally:
            answered = job.result is not None or job.error is not None
            if not answered and not job.abandoned.is_set():
                job.error = AnalysisFailed("the analysis process died")
            with self._lock:
                if job.result is not None or (job.error is not None and job.error.invalid):
                    self._busy.discard(worker)
                    self._idle.append(worker)  # a child that answered stays warm
                    worker = None  # type: ignore[assignment]
                    self._active -= 1
                if self._running.get(job.digest) is job:  # not a new job for the digest
                    del self._running[job.digest]
                job.done.set()  # under the lock: a caller leaving now sees it done, not running
            if worker is not None:
                worker.kill()
                with self._lock:  # busy, its slot held, until it is dead
                    self._busy.discard(worker)
                    self._active -= 1

    def _take_worker(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    self._busy.add(worker)
                    return worker
        worker = _Worker(self._analysis)
        with self._lock:
            self._busy.add(worker)
        return worker
