"""The tests' /proc readers of processes, against processes that end while they are read: a
thread that ends between the listing of its process's threads and the read of its children file
is a thread with no children, not an error (CI once failed there); a process reaped between the
open of its stat file and its read is a process that no longer runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.orphans import alive, children, running

pytestmark = pytest.mark.processes

#: a process that starts and ends short-lived threads without pause, and forks one child
_CHURN = """
import os, sys, threading, time
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
print(pid, flush=True)
while True:
    ts = [threading.Thread(target=lambda: None) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
"""


def test_children_reads_a_process_whose_threads_end_while_it_is_read() -> None:
    churn = subprocess.Popen([sys.executable, "-c", _CHURN], stdout=subprocess.PIPE, text=True)
    try:
        assert churn.stdout is not None
        child = int(churn.stdout.readline())
    except BaseException:
        churn.kill()
        churn.wait()
        raise
    try:
        for _ in range(3000):
            assert [pid for pid, _ in children(churn.pid)] == [child]
    finally:
        # while its parent lives its pid is still its own
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        churn.kill()
        churn.wait()


def test_a_process_reaped_between_the_open_and_the_read_of_its_stat_is_not_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The read of /proc/<pid>/stat of a process reaped after the open fails ESRCH
    (ProcessLookupError), not ENOENT: a test polling a worker as it exits met it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stat = Path(f"/proc/{proc.pid}/stat")
    start = stat.read_text().rsplit(")", 1)[1].split()[19]
    assert running(proc.pid) and alive((proc.pid, start))
    opened = Path.open

    def reaped_once_open(path: Path, *args: Any, **kwargs: Any) -> Any:
        file = opened(path, *args, **kwargs)
        if path == stat and proc.returncode is None:
            proc.kill()  # the process ends, and is reaped, while the file is open
            proc.wait()
        return file

    monkeypatch.setattr(Path, "open", reaped_once_open)
    try:
        assert not running(proc.pid)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
