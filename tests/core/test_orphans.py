"""The tests' /proc reader of a process's children, against a process whose threads come and
go while it is read: a thread that ends between the listing of its process's threads and the
read of its children file is a thread with no children, not an error (CI once failed there)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest
from support.orphans import children

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
        with contextlib.suppress(ProcessLookupError):  # while its parent lives its pid is still its own
            os.kill(child, signal.SIGKILL)
        churn.kill()
        churn.wait()
