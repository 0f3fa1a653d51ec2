"""The audit's processes (:func:`ordered_map`): files read and shoes' rounds checked by
``workers`` forked processes, their results handed back in the order the work was given, so that
what the audit prints is the same, line for line, whatever the number of workers.

The processes are forked when the work is handed out: each starts with the auditor as it is then
(for the rounds: the commitments and rule sets read in pass 1, the reveals that failed, the
trusted keys), so nothing of it is sent to them; only the work goes out (paths; a shoe's rounds'
claims and its reveal, which the scratch store holds) and the results come back, as compact as
they can be pickled: the audit's own process unpickles every one of them, in series.

The work is handed out as it is taken, at most ``ahead`` chunks beyond the results taken so far:
the audit streams through a collection, so neither the work nor the results ever pile up whole
(a ``Pool.imap`` would read the whole walk ahead of the checks).
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.pool import AsyncResult, Pool
from typing import Any, Final, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: chunks handed out per worker beyond the results taken, unless told otherwise
CHUNKS_AHEAD: Final = 4

#: the task a worker process runs, set in it as it starts (:func:`_start`)
_task: Callable[[Any], Any] | None = None


def _start(task: Callable[[Any], Any]) -> None:
    # forked: the task (the auditor's bound method) is inherited, never pickled
    global _task  # noqa: PLW0603  (one task per worker process)
    _task = task


def _run(items: list[Any]) -> list[Any]:
    assert _task is not None, "set as the process started"
    return [_task(item) for item in items]


class _Ahead(Generic[T, R]):
    """The results of a pool's workers in the order of ``items``, at most ``ahead`` chunks
    handed out beyond the one being taken (the first of them handed out at once, so the workers
    start while the caller does its own work)."""

    def __init__(self, pool: Pool, items: Iterable[T], chunk: int, ahead: int) -> None:
        self._pool = pool
        self._items = iter(items)
        self._chunk = chunk
        self._out: deque[AsyncResult[list[R]]] = deque()
        self._done: Iterator[R] = iter(())
        for _ in range(ahead):
            if not self._hand_out():
                break

    def _hand_out(self) -> bool:
        chunk = list(itertools.islice(self._items, self._chunk))
        if not chunk:
            return False
        self._out.append(self._pool.apply_async(_run, (chunk,)))
        return True

    def __iter__(self) -> Iterator[R]:
        return self

    def __next__(self) -> R:
        while True:
            result = next(self._done, self)
            if result is not self:
                return result  # type: ignore[return-value]
            if not self._out:
                raise StopIteration
            self._done = iter(self._out.popleft().get())
            self._hand_out()


@contextlib.contextmanager
def ordered_map(task: Callable[[T], R], items: Iterable[T], workers: int, *,
                chunk: int = 1, ahead: int = 0) -> Iterator[Iterator[R]]:
    """``task`` of each of ``items``, in their order. With one worker (or where processes cannot
    be forked) the results are made here, as they are taken; else ``workers`` forked processes
    start on them at once, ``chunk`` items at a time, while this process goes on with its own
    work until it takes them (each result as soon as it and every one before it are ready).
    ``items`` are read only as far as ``ahead`` chunks (default ``CHUNKS_AHEAD`` per worker)
    beyond the results taken."""
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield map(task, items)
        return
    with multiprocessing.get_context("fork").Pool(workers, _start, (task,)) as pool:
        yield _Ahead(pool, items, chunk, ahead or workers * CHUNKS_AHEAD)
