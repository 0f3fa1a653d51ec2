"""Waiting on a pool's work when a worker dies: a clear WorkerDied, never a wait for ever.

Each wait runs in a thread joined with a bound far past its own time: without the check it
would wait for ever, and the test must fail rather than hang (a hang guard, not a timing)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from rng_service.core.pools import WorkerDied, forked, result_of, unordered

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="the pools fork their workers")


def _twice(item: int) -> int:
    return item * 2


def _dies_on_3(item: int) -> int:
    if item == 3:  # as the kernel's out-of-memory killer would end it
        os.kill(os.getpid(), signal.SIGKILL)
    return item * 2


def _exits_on_3(item: int) -> int:
    if item == 3:
        os._exit(7)
    return item * 2


def _bounded(run: Callable[[], Any]) -> tuple[list[Any], list[BaseException]]:
    done: list[Any] = []
    raised: list[BaseException] = []

    def go() -> None:
        try:
            done.append(run())
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(300)
    assert not thread.is_alive(), "the wait waits for ever for the dead worker's work"
    return done, raised


def _pool() -> Any:
    return multiprocessing.get_context("fork").Pool(2)


def test_results_come_as_a_plain_wait_would_give_them() -> None:
    with _pool() as pool:
        processes = forked(pool)
        assert len(processes) == 2
        assert [result_of(pool.apply_async(_twice, (i,)), processes, "the test")
                for i in range(5)] == [0, 2, 4, 6, 8]
        assert sorted(unordered(pool.imap_unordered(_twice, range(20)), processes,
                                "the test")) == [2 * i for i in range(20)]


def test_a_killed_worker_fails_the_wait_for_its_result_naming_the_signal() -> None:
    with _pool() as pool:
        processes = forked(pool)
        done, raised = _bounded(
            lambda: result_of(pool.apply_async(_dies_on_3, (3,)), processes, "the test"))
    assert not done and len(raised) == 1 and isinstance(raised[0], WorkerDied)
    assert "killed by SIGKILL" in str(raised[0])
    assert "the test is incomplete; run it again" in str(raised[0])


def test_a_worker_that_exits_fails_an_unordered_map_naming_its_status() -> None:
    with _pool() as pool:
        processes = forked(pool)
        items = unordered(pool.imap_unordered(_exits_on_3, range(8)), processes, "the test")
        done, raised = _bounded(lambda: list(items))
    assert not done and len(raised) == 1 and isinstance(raised[0], WorkerDied)
    assert "exit status 7" in str(raised[0])
