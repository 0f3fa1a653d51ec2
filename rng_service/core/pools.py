"""Waiting on a ``multiprocessing`` pool's work without hanging when one of its workers dies.

A :class:`multiprocessing.pool.Pool` replaces a worker that ended (killed by the kernel's
out-of-memory killer, a signal, an ``os._exit``) but loses the task that worker held: its
``AsyncResult`` never becomes ready and ``imap``'s iterator never yields it, so a plain
``get()`` or ``next()`` waits for ever. The audit, ``collect rounds`` and ``simulate`` wait
here instead, looking every :data:`LOOK_SECONDS` whether one of the processes the pool forked
has ended, and raise :class:`WorkerDied` naming it: the run cannot be complete, and says so.

The other way round, a worker must not outlive its parent: killed (SIGKILL included), the
parent leaves its workers orphaned, and a pool's worker would play on the tasks already queued
to it (writing a collection's round files after the parent's death: hundreds were seen) and a
long task to its end. The three tools make their pools here (:func:`worker_pool`); each worker
watches the process that forked it (:func:`_watch_parent`) and ends as soon as that process
does, and their tasks call :func:`stop_if_orphaned` before each piece of work they commit, so
none is begun after the parent's death whatever the watcher's thread is doing.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.pool import TERMINATE, AsyncResult, IMapIterator, Pool
from multiprocessing.process import BaseProcess
from typing import Any, Final, TypeVar

from rng_service.core.errors import Unavailable

R = TypeVar("R")

#: how often a wait looks whether a worker has died
LOOK_SECONDS: Final = 0.5
#: how often a worker looks whether its parent has died, where it cannot be told (no pidfd)
PARENT_LOOK_SECONDS: Final = 0.1
#: a worker's exit status when it ends because its parent did (nobody is left to read it)
ORPHANED_EXIT: Final = 75

#: the pid of the process that forked this worker; None outside a pool's workers
_parent: int | None = None


def worker_pool(processes: int, initializer: Callable[..., object],
                initargs: tuple[Any, ...]) -> Pool:
    """A pool of ``processes`` workers, each running ``initializer(*initargs)`` as it starts,
    that end when this process does, however it ends (SIGKILL included).

    Forked where the platform can fork (the workers inherit what the initializer needs, unpickled),
    else spawned: either way this process is the workers' parent, which :func:`_watch_parent`
    relies on (a forkserver's would not be).
    """
    ctx = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    return _Pool(processes, _start_watched, (os.getpid(), initializer, initargs), context=ctx)


class _Pool(Pool):
    """A :class:`~multiprocessing.pool.Pool` whose ``terminate`` cannot be hung by a worker that
    died holding one of its queues' locks.

    A worker waits for its next task reading the task queue's pipe with the queue's read lock
    held, and writes a result holding the result queue's write lock: killed there, it holds that
    lock for ever (no other worker takes a task again, and the pool's own ``terminate``, which
    takes the read lock to drain the queue, waits for ever; seen: an idle worker killed, the
    audit's WorkerDied raised, then its pool's end hung). Once one of its workers has died the
    pool is ended the hard way: no replacement forked, every worker killed and joined, then no
    process left alive can hold those locks, and they are freed before the usual end; and the
    result queue is closed, so that the pool's result thread, which may wait for the rest of a
    result a killed worker was writing, stops.
    """

    def __init__(self, processes: int, initializer: Callable[..., object],
                 initargs: tuple[Any, ...], context: Any) -> None:
        #: every worker forked, those that replaced a dead one too (the pool's own list drops
        #: a dead worker as it replaces it)
        self.every: list[BaseProcess] = []
        self.Process = self._noted  # type: ignore[assignment]
        super().__init__(processes, initializer, initargs, context=context)

    def _get_sentinels(self) -> list[Any]:
        # What the pool's worker-handler thread waits on beside the workers' own sentinels (a
        # worker's end is what it acts on): the pool's change notifier, not the result queue's
        # pipe as well, which the standard pool adds. That pipe is readable from a result's
        # first byte until the result thread has read its last, and the handler, woken by it,
        # looks at every worker and waits again, spinning all that time beside the thread that
        # reads: thousands of times an audit (2.4 a double-exposure record), in the one process
        # whose share does not spread over the workers. The pool of threads waits so too.
        return [self._change_notifier._reader]  # type: ignore[attr-defined]

    def _noted(self, ctx: Any, *args: Any, **kwds: Any) -> BaseProcess:
        process: BaseProcess = ctx.Process(*args, **kwds)
        self.every.append(process)
        return process

    def terminate(self) -> None:
        if self._state != TERMINATE and any(p.exitcode is not None  # type: ignore[attr-defined]
                                            for p in self.every):
            handler = self._worker_handler  # type: ignore[attr-defined]
            handler._state = TERMINATE  # forks no replacement from now on
            self._change_notifier.put(None)  # type: ignore[attr-defined]
            handler.join()
            for process in self.every:
                process.kill()
                process.join()
            outqueue = self._outqueue  # type: ignore[attr-defined]
            for lock in (self._inqueue._rlock, outqueue._wlock):  # type: ignore[attr-defined]
                if lock is not None:
                    lock.acquire(False)  # held by a dead worker, or now by this process
                    lock.release()
            # a worker killed as it wrote a result left part of one in the result queue's pipe,
            # and the pool's result thread waits for the rest: every other writer dead, this
            # process closes its end, that thread reads the pipe's end and stops (the usual
            # end's sentinels to it go nowhere)
            outqueue._writer.close()
            outqueue.put = _dropped
            self._cache.clear()  # type: ignore[attr-defined]  # what was awaited will not come
        super().terminate()


def _dropped(_: object) -> None:
    """A closed queue's ``put``."""


def stop_if_orphaned() -> None:
    """Ends this worker at once if the process that forked it has died (its parent is then
    another); does nothing outside a pool's workers. One system call (a fifth of a microsecond):
    a task calls it before each piece of work it commits that costs far more (a batch, a chunk
    of rounds, a collection's file), never for each card or record checked."""
    if _parent is not None and os.getppid() != _parent:
        os._exit(ORPHANED_EXIT)


def _start_watched(parent: int, initializer: Callable[..., object],
                   initargs: tuple[Any, ...]) -> None:
    global _parent  # noqa: PLW0603  (one parent per worker process)
    _parent = parent
    _watch_parent(parent)
    initializer(*initargs)


def _watch_parent(parent: int) -> None:
    """Ends this worker as soon as ``parent`` has died, from a thread of its own: a worker busy
    in a long task, or idle, ends all the same.

    Not ``PR_SET_PDEATHSIG``: its signal comes when the *thread* that forked the worker ends, and
    a pool forks a worker that replaces a dead one from its worker-handler thread, which ends as
    the pool is terminated. Such a worker is killed then, possibly holding the lock of the pool's
    task queue (an idle worker waits on the queue holding it), and the pool's ``terminate``,
    which takes that lock, waits for ever (seen: the tests of this module hung, the workers
    defunct). Linux tells a process's end through a pidfd, at once; elsewhere the thread looks at
    ``getppid`` every :data:`PARENT_LOOK_SECONDS`.
    """
    pidfd: int | None = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(parent)
        except OSError:  # an old kernel, or the parent already gone (then getppid says so)
            pidfd = None
    stop_if_orphaned()  # the parent may have died before the watch began: it is ours if alive
    threading.Thread(target=_await_parent, args=(parent, pidfd), name="parent-watch",
                     daemon=True).start()


def _await_parent(parent: int, pidfd: int | None) -> None:
    if pidfd is not None:
        select.select([pidfd], [], [])  # readable once the process has ended
    else:
        while os.getppid() == parent:
            time.sleep(PARENT_LOOK_SECONDS)
    os._exit(ORPHANED_EXIT)


class WorkerDied(Unavailable):
    """A worker process ended while its results were awaited; the work it held is lost (the run
    cannot finish now: run it again)."""


def forked(pool: Pool) -> tuple[BaseProcess, ...]:
    """The processes ``pool`` has forked so far, taken right after it is made.

    A snapshot, not the pool's own list: the pool drops a dead worker from that list as it
    replaces it, so the list may no longer hold the one that died when the wait looks, nor one
    that died before this was called (perhaps holding the task queue's lock: see
    :class:`_Pool`); a pool of :func:`worker_pool` notes every worker it forks, and those are
    given. Pools here never retire workers (no ``maxtasksperchild``), so any end of one is a
    death. Another pool keeps its processes in ``_pool``, which the standard library does not
    document; without it the wait degrades to a plain wait.
    """
    if isinstance(pool, _Pool):
        return tuple(pool.every)
    return tuple(getattr(pool, "_pool", ()))


def result_of(result: AsyncResult[R], processes: Sequence[BaseProcess], what: str) -> R:
    """``result``'s value once ready; :class:`WorkerDied` if one of ``processes`` ended first.

    ``what`` names the run in the message ("the audit", "the simulation")."""
    while not result.ready():
        result.wait(LOOK_SECONDS)
        if not result.ready():
            _raise_if_died(processes, what)
    return result.get()


def unordered(results: IMapIterator[R], processes: Sequence[BaseProcess],
              what: str) -> Iterator[R]:
    """The items of an ``imap``/``imap_unordered`` iterator, raising :class:`WorkerDied` rather
    than waiting for ever for an item a dead worker held (``what`` as for :func:`result_of`)."""
    while True:
        try:
            yield results.next(LOOK_SECONDS)
        except StopIteration:
            return
        except multiprocessing.TimeoutError:
            _raise_if_died(processes, what)


def _raise_if_died(processes: Sequence[BaseProcess], what: str) -> None:
    dead = next((p for p in processes if p.exitcode is not None), None)
    if dead is None:
        return
    code = dead.exitcode or 0
    how = f"exit status {code}" if code >= 0 else f"killed by {_signal_name(-code)}"
    raise WorkerDied(f"a worker process of {what} ({dead.pid}) ended ({how}) before its work "
                     f"was done: {what} is incomplete; run it again")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
