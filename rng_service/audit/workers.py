"""The audit's processes (:func:`ordered_map`): files read and shoes' rounds checked by
``workers`` forked processes, their results handed back in the order the work was given, so that
what the audit prints is the same, line for line, whatever the number of workers.

The processes are forked when the work is handed out: each starts with the auditor as it is then
(for the rounds: the reveals, commitments and rule sets read in pass 1, the trusted keys), so
nothing of it is sent to them; only the work (paths, the rounds' claims) goes out, and the
results come back.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: the task a worker process runs, set in it as it starts (:func:`_start`)
_task: Callable[[Any], Any] | None = None


def _start(task: Callable[[Any], Any]) -> None:
    # forked: the task (the auditor's bound method) is inherited, never pickled
    global _task  # noqa: PLW0603  (one task per worker process)
    _task = task


def _run(item: Any) -> Any:
    assert _task is not None, "set as the process started"
    return _task(item)


@contextlib.contextmanager
def ordered_map(task: Callable[[T], R], items: Iterable[T], workers: int, *,
                chunk: int = 1) -> Iterator[Iterator[R]]:
    """``task`` of each of ``items``, in their order. With one worker (or where processes cannot
    be forked) the results are made here, as they are taken; else ``workers`` forked processes
    start on them at once, ``chunk`` items at a time, while this process goes on with its own
    work until it takes them (each result as soon as it and every one before it are ready)."""
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield map(task, items)
        return
    with multiprocessing.get_context("fork").Pool(workers, _start, (task,)) as pool:
        yield pool.imap(_run, items, chunksize=chunk)
