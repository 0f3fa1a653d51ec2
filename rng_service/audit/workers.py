"""The audit's processes (:class:`Workers`): files read and shoes' rounds checked by ``workers``
forked processes, their results handed back in the order the work was given, so that what the
audit prints is the same, line for line, whatever the number of workers.

The processes are forked once, before pass 1, and serve both passes: each starts with the
auditor as it is then (the trusted keys, the options, the state given as ``--since``), and its
tasks are the auditor's own methods, named when the processes start (never pickled). What pass 1
teaches the auditor that pass 2 needs (the rule sets read, a shoe's reveal and commitment) goes
out with the work, which is otherwise only what the task needs (paths; a shoe's rounds as pass 1
read them); the results come back as compact as they can be pickled: the audit's own process
unpickles every one of them, in series.

The work is handed out as it is taken, at most ``ahead`` chunks beyond the results taken so far:
the audit streams through a collection, so neither the work nor the results ever pile up whole
(a ``Pool.imap`` would read the whole walk ahead of the checks).
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from multiprocessing.pool import AsyncResult, Pool
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, Final, Generic, TypeVar

from rng_service.core.pools import WorkerDied, forked, result_of, stop_if_orphaned, worker_pool

__all__ = ["CHUNKS_AHEAD", "WorkerDied", "Workers", "ordered_map"]

T = TypeVar("T")
R = TypeVar("R")

#: chunks handed out per worker beyond the results taken, unless told otherwise
CHUNKS_AHEAD: Final = 4

#: the tasks a worker process runs, by name, set in it as it starts (:func:`_start`)
_tasks: Mapping[str, Callable[[Any], Any]] = {}


def _start(tasks: Mapping[str, Callable[[Any], Any]],
           started: Callable[[], object] | None) -> None:
    # forked: the tasks (the auditor's bound methods) are inherited, never pickled
    global _tasks  # noqa: PLW0603  (one set of tasks per worker process)
    _tasks = tasks
    if started is not None:
        started()


def _run(name: str, items: list[Any]) -> list[Any]:
    stop_if_orphaned()  # no chunk checked for an audit whose process has died
    task = _tasks[name]
    return [task(item) for item in items]


class _Ahead(Generic[T, R]):
    """The results of a pool's workers in the order of ``items``, at most ``ahead`` chunks
    handed out beyond the one being taken (the first of them handed out at once, so the workers
    start while the caller does its own work)."""

    def __init__(self, pool: Pool, name: str, items: Iterable[T], chunk: int,
                 ahead: int, *, processes: Sequence[BaseProcess] = ()) -> None:
        self._pool = pool
        self._processes = processes
        self._name = name
        self._items = iter(items)
        self._chunk = chunk
        self._out: deque[AsyncResult[list[R]]] = deque()
        for _ in range(ahead):
            if not self._hand_out():
                break

    def _hand_out(self) -> bool:
        chunk = list(itertools.islice(self._items, self._chunk))
        if not chunk:
            return False
        self._out.append(self._pool.apply_async(_run, (self._name, chunk)))
        return True

    def __iter__(self) -> Iterator[R]:
        # a generator: a result is an item of a list handed on (a method's call for each one
        # would be the audit's own process's, for every file read)
        while self._out:
            done = self._taken(self._out.popleft())
            self._hand_out()
            yield from done

    def _taken(self, result: AsyncResult[list[R]]) -> list[R]:
        """``result``'s list once ready; WorkerDied if a worker died before it was (the pool
        would replace it but lose the chunk it held)."""
        return result_of(result, self._processes, "the audit")


class Workers:
    """``workers`` processes forked once (at ``with``), for any number of :meth:`ordered` maps of
    the ``tasks`` named here; ``started`` runs in each process as it starts. With one worker (or
    where processes cannot be forked) there are none: every task runs here, as its results are
    taken."""

    def __init__(self, workers: int, tasks: Mapping[str, Callable[[Any], Any]], *,
                 started: Callable[[], object] | None = None) -> None:
        self.workers = workers
        self._tasks = dict(tasks)
        self._started = started
        self._pool: Pool | None = None
        self._processes: tuple[BaseProcess, ...] = ()

    def __enter__(self) -> Workers:
        if self.workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            # the workers end with this process, however it ends (core/pools)
            self._pool = worker_pool(self.workers, _start, (self._tasks, self._started))
            self._processes = forked(self._pool)  # to notice one dying
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.terminate()  # as Pool's own __exit__: the work given is taken, or abandoned
            pool.join()

    @property
    def forked(self) -> bool:
        """Whether the tasks run in worker processes (else here)."""
        return self._pool is not None

    def ordered(self, name: str, items: Iterable[Any], *, chunk: int = 1,
                ahead: int = 0) -> Iterator[Any]:
        """The task ``name`` of each of ``items``, in their order: made by the workers, which
        start on them at once, ``chunk`` items at a time, while this process goes on with its
        own work until it takes them (each result as soon as it and every one before it are
        ready); or here, as they are taken. ``items`` are read only as far as ``ahead`` chunks
        (default ``CHUNKS_AHEAD`` per worker) beyond the results taken."""
        if self._pool is None:
            return map(self._tasks[name], items)
        return iter(_Ahead(self._pool, name, items, chunk,
                           ahead or self.workers * CHUNKS_AHEAD, processes=self._processes))


@contextlib.contextmanager
def ordered_map(task: Callable[[T], R], items: Iterable[T], workers: int, *,
                chunk: int = 1, ahead: int = 0) -> Iterator[Iterator[R]]:
    """``task`` of each of ``items``, in their order, by ``workers`` processes forked for this
    map alone (:class:`Workers`)."""
    with Workers(workers, {"task": task}) as pool:
        yield pool.ordered("task", items, chunk=chunk, ahead=ahead)
