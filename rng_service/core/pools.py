"""Waiting on a ``multiprocessing`` pool's work without hanging when one of its workers dies.

A :class:`multiprocessing.pool.Pool` replaces a worker that ended (killed by the kernel's
out-of-memory killer, a signal, an ``os._exit``) but loses the task that worker held: its
``AsyncResult`` never becomes ready and ``imap``'s iterator never yields it, so a plain
``get()`` or ``next()`` waits for ever. The audit, ``collect rounds`` and ``simulate`` wait
here instead, looking every :data:`LOOK_SECONDS` whether one of the processes the pool forked
has ended, and raise :class:`WorkerDied` naming it: the run cannot be complete, and says so.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Iterator, Sequence
from multiprocessing.pool import AsyncResult, IMapIterator, Pool
from multiprocessing.process import BaseProcess
from typing import Final, TypeVar

from rng_service.core.errors import Unavailable

R = TypeVar("R")

#: how often a wait looks whether a worker has died
LOOK_SECONDS: Final = 0.5


class WorkerDied(Unavailable):
    """A worker process ended while its results were awaited; the work it held is lost (the run
    cannot finish now: run it again)."""


def forked(pool: Pool) -> tuple[BaseProcess, ...]:
    """The processes ``pool`` has forked so far, taken right after it is made.

    A snapshot, not the pool's own list: the pool drops a dead worker from that list as it
    replaces it, so the list may no longer hold the one that died when the wait looks. Pools
    here never retire workers (no ``maxtasksperchild``), so any end of one is a death. The pool
    keeps its processes in ``_pool``, which the standard library does not document; without it
    the wait degrades to a plain wait.
    """
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
