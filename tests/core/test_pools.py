"""Waiting on a pool's work when a worker dies: a clear WorkerDied, never a wait for ever; and
the other way round, a pool's workers end when their parent dies, SIGKILL included, whether
idle, busy, or forked by the pool to replace a dead one (the real tools too: ``collect rounds``
writes no file once its workers are gone, and they go).

Each wait runs in a thread joined with a bound far past its own time: without the check it
would wait for ever, and the test must fail rather than hang (a hang guard, not a timing); the
workers' end is waited for by polling /proc, with a liveness bound (tests/support/orphans.py)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import os
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.live_server import FAIRSHOE
from support.orphans import alive, children, stopped, wait_gone
from support.waits import wait_until

from rng_service.core.pools import WorkerDied, forked, result_of, unordered, worker_pool
from rng_service.records.schema import ROUNDS_SUBDIR

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


def _dies_writing_its_result(_: int) -> int:
    """Ends as a worker killed while it wrote its result would: the result queue's lock taken,
    part of a message (its length, then fewer bytes) in the pipe."""
    outqueue = multiprocessing.current_process()._args[1]  # type: ignore[attr-defined]
    outqueue._wlock.acquire()
    outqueue._writer._send(struct.pack("!i", 1000) + b"part of a result")
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


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


def _nothing() -> None:
    pass


def _pool() -> Any:
    # the tools' pools: a worker killed here is replaced by a worker forked from the pool's own
    # thread, which its end must not kill (PR_SET_PDEATHSIG would, and terminate then hangs)
    return worker_pool(2, _nothing, ())


def test_results_come_as_a_plain_wait_would_give_them() -> None:
    with _pool() as pool:
        processes = forked(pool)
        assert len(processes) == 2
        assert [result_of(pool.apply_async(_twice, (i,)), processes, "the test")
                for i in range(5)] == [0, 2, 4, 6, 8]
        assert sorted(unordered(pool.imap_unordered(_twice, range(20)), processes,
                                "the test")) == [2 * i for i in range(20)]


def _megabytes(item: int) -> bytes:
    return bytes([item]) * (2 << 20)


def test_the_pools_handler_does_not_spin_while_results_are_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker-handler thread wakes for a worker's end or a change of the pool, not for every
    result in the result queue's pipe (the standard pool's handler looks at its workers again
    and again while a large result is read: hundreds of times for these)."""
    looks = []
    maintain = multiprocessing.pool.Pool._maintain_pool

    def counted(*args: Any, **kwargs: Any) -> None:
        looks.append(1)
        maintain(*args, **kwargs)

    monkeypatch.setattr(multiprocessing.pool.Pool, "_maintain_pool", staticmethod(counted))
    with _pool() as pool:
        processes = forked(pool)
        results = [pool.apply_async(_megabytes, (i,)) for i in range(40)]
        assert [result_of(r, processes, "the test")[:1] for r in results] == [
            bytes([i]) for i in range(40)]
    assert len(looks) <= 10, len(looks)  # at the start, and when the results' cache empties


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


def _wchan(pid: int) -> str:
    """What the process's main thread waits in (the kernel's name for it), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/task/{pid}/wchan").read_text()
    except OSError:
        return ""


def test_an_idle_workers_death_is_reported_and_its_pool_ends() -> None:
    """A worker that held no task may still hold the pool's: an idle worker waits for the next
    task reading the task queue's pipe with its lock held, and killed there it keeps the lock
    for ever (no other worker takes a task again, the replacement included). So any worker's
    end is reported (WorkerDied), not only a busy one's: waiting on would wait for ever. And
    the pool still ends (``terminate``, as the tools' ``with`` does: the standard pool's takes
    that lock, and waited for ever)."""
    pool = worker_pool(3, _nothing, ())
    processes = forked(pool)
    wait_until(lambda: sum("pipe" in _wchan(p.pid) for p in processes) == 1,
               "an idle worker reading the task queue")
    reader = next(p for p in processes if "pipe" in _wchan(p.pid))
    os.kill(reader.pid, signal.SIGKILL)
    wait_until(lambda: reader.exitcode is not None, "the reader's end")
    assert not pool._inqueue._rlock.acquire(False)  # type: ignore[attr-defined]
    done, raised = _bounded(
        lambda: result_of(pool.apply_async(_twice, (21,)), processes, "the test"))
    assert not done and len(raised) == 1 and isinstance(raised[0], WorkerDied)
    assert "killed by SIGKILL" in str(raised[0])
    ended, failed = _bounded(lambda: (pool.terminate(), pool.join()))
    assert ended and not failed
    assert all(not p.is_alive() for p in pool._pool)  # type: ignore[attr-defined]


def test_a_worker_dead_before_the_snapshot_is_among_the_processes_watched() -> None:
    """A worker killed as the pool is made, before ``forked`` is called (the audit's workers
    can be killed that early): the pool has dropped it from its own list and forked another,
    but it may have died holding the task queue's lock (here: the reader, killed), so no task
    is taken again. ``forked`` still names it: the wait reports it, never waits for ever."""
    pool = worker_pool(3, _nothing, ())
    first = tuple(pool._pool)  # type: ignore[attr-defined]
    wait_until(lambda: sum("pipe" in _wchan(p.pid) for p in first) == 1,
               "an idle worker reading the task queue")
    reader = next(p for p in first if "pipe" in _wchan(p.pid))
    os.kill(reader.pid, signal.SIGKILL)
    wait_until(lambda: reader not in pool._pool and len(pool._pool) == 3,  # type: ignore[attr-defined]
               "the reader replaced")
    processes = forked(pool)
    assert reader in processes
    done, raised = _bounded(
        lambda: result_of(pool.apply_async(_twice, (21,)), processes, "the test"))
    assert not done and len(raised) == 1 and isinstance(raised[0], WorkerDied)
    assert f"({reader.pid}) ended (killed by SIGKILL)" in str(raised[0])
    ended, failed = _bounded(lambda: (pool.terminate(), pool.join()))
    assert ended and not failed


def test_a_worker_killed_writing_its_result_is_reported_and_its_pool_ends() -> None:
    """A busy worker killed while it wrote its result (seen: audit verify --workers 3, a worker
    SIGKILLed mid-write) leaves the result queue's lock taken and part of a message in its
    pipe: WorkerDied, and the pool still ends (the pool's result thread waited for the rest of
    that message, and its end for the thread, for ever)."""
    pool = worker_pool(2, _nothing, ())
    processes = forked(pool)
    done, raised = _bounded(lambda: result_of(pool.apply_async(_dies_writing_its_result, (1,)),
                                              processes, "the test"))
    assert not done and len(raised) == 1 and isinstance(raised[0], WorkerDied)
    ended, failed = _bounded(lambda: (pool.terminate(), pool.join()))
    assert ended and not failed


#: a parent that makes the tools' pool, readies it as the test asks, prints its workers' pids and
#: waits to be killed
_PARENT = """
import os, signal, sys, time
from rng_service.core.pools import worker_pool

def spin(_):
    while True:  # holds the interpreter: the watch must end the worker all the same
        pass

def die(_):
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    pool = worker_pool(2, os.getpid, ())
    first = [p.pid for p in pool._pool]
    if sys.argv[1] == "busy":
        for _ in range(2):
            pool.apply_async(spin, (0,))
    if sys.argv[1] == "replaced":  # a worker forked by the pool's worker-handler thread
        pool.apply_async(die, (0,))
        while not (len(pool._pool) == 2 and set(p.pid for p in pool._pool) - set(first)):
            time.sleep(0.01)
    time.sleep(0.5)
    print(" ".join(str(p.pid) for p in pool._pool), flush=True)
    time.sleep(3600)
"""


@pytest.mark.processes
@pytest.mark.parametrize("state", ["idle", "busy", "replaced"])
def test_a_pools_workers_end_when_their_parent_is_killed(tmp_path: Path, state: str) -> None:
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    proc = subprocess.Popen([sys.executable, str(script), state], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        pids = {int(pid) for pid in proc.stdout.readline().split()}
        workers = children(proc.pid)
        assert len(pids) == 2 and {pid for pid, _ in workers} == pids, (pids, workers)
        assert all(alive(w) for w in workers)
    finally:
        proc.kill()
        proc.wait()
    wait_gone(workers, f"the {state} workers of a SIGKILLed parent")


def _files(directory: Path) -> set[str]:
    return {str(path) for path in directory.rglob("*") if path.is_file()}


@pytest.mark.processes
def test_the_tools_workers_end_with_their_killed_parent_and_write_no_more(
        tmp_path: Path) -> None:
    out = tmp_path / "lab"
    collect = subprocess.Popen(
        [str(FAIRSHOE), "collect", "rounds", "--game", "double-exposure", "--rounds", "200000",
         "--workers", "2", "--out", str(out), "--key-store", str(tmp_path / "keys")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: collect.poll() is not None or (
            (out / ROUNDS_SUBDIR).is_dir() and len(os.listdir(out / ROUNDS_SUBDIR)) >= 300),
            "collect writing rounds", timeout=120)
        assert collect.poll() is None, "collect ended before it was killed"
        workers = children(collect.pid)
        for pid, _ in workers:  # held still, to count what they write after their parent's end
            os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: all(stopped(w) for w in workers), "the workers stopped")
        at_kill = _files(out)
    finally:
        collect.kill()
        collect.wait()
        for pid, _ in workers:
            os.kill(pid, signal.SIGCONT)
    assert len(workers) == 2, workers
    wait_gone(workers, "the workers of a SIGKILLed collect rounds")
    written = _files(out)
    # a worker begins no file once its parent is gone: at most the one it had in hand each
    # (left unchecked, they would play on the batches queued to them: hundreds of files)
    assert len(written - at_kill) <= len(workers), sorted(written - at_kill)

    simulate = subprocess.Popen(
        [str(FAIRSHOE), "simulate", "double-exposure", "--rounds", "1000000000", "--workers",
         "2", "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: simulate.poll() is not None or len(children(simulate.pid)) == 2,
                   "simulate's workers started", timeout=120)
        assert simulate.poll() is None, "simulate ended before it was killed"
        workers = children(simulate.pid)
    finally:
        simulate.kill()
        simulate.wait()
    wait_gone(workers, "the workers of a SIGKILLed simulate")
    # and all the while, nothing more came to the killed collection
    assert _files(out) == written
