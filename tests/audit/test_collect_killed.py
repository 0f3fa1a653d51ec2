"""`fairshoe collect rounds` killed with SIGKILL mid-collection, then audited.

A collection's files are written without a sync each and made durable together before its log
(rng_service/records/durable.py): a killed collection must hold no log and no checkpoint (its
completeness is then not claimed), and the only failures its audit may find are files cut short
by the kill, never a round or reveal that checks wrong. Its worker processes end with it
(rng_service/core/pools.py); the audit starts once none is left alive, so it reads a collection
no process still writes (it would otherwise report the files being written as gaps).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.cli_helpers import run
from support.live_server import FAIRSHOE
from support.orphans import children, wait_gone

from rng_service.records.schema import LOG_SUBDIR, ROUNDS_SUBDIR

pytestmark = pytest.mark.processes  # it starts `fairshoe collect` (tests/support/tiers.py)


def test_a_killed_collection_claims_nothing_and_checks_right(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, store, checkpoint = tmp_path / "lab", tmp_path / "keys", tmp_path / "checkpoint"
    proc = subprocess.Popen(
        [str(FAIRSHOE), "collect", "rounds", "--game", "double-exposure", "--rounds", "200000",
         "--out", str(out), "--key-store", str(store), "--checkpoint-out", str(checkpoint)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[tuple[int, str]] = []
    try:
        rounds = out / ROUNDS_SUBDIR
        deadline = time.monotonic() + 120
        while not (rounds.is_dir() and sum(1 for _ in os.scandir(rounds)) >= 300):
            assert proc.poll() is None, "collect ended before it was killed"
            assert time.monotonic() < deadline, "collect wrote no rounds in 120 s"
            time.sleep(0.05)
        workers = children(proc.pid)  # its pool's workers (none with one core)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    wait_gone(workers, "the workers of the killed collection")
    assert not (out / LOG_SUBDIR).exists() and not checkpoint.exists()

    assert run(["keys", "export", "--dir", str(store), "--out", str(tmp_path / "t.json")]) == 0
    capsys.readouterr()
    code = run(["audit", "verify", "--keys", str(tmp_path / "t.json"), str(out)])
    lines = capsys.readouterr().out.splitlines()
    fails = [line for line in lines if line.startswith("FAIL ")]
    # a file the kill cut short is malformed; anything else failing would be a wrong record
    assert all(line.startswith("FAIL file ") and "malformed envelope" in line
               for line in fails), fails
    assert code == (1 if fails else 0), lines[-3:]
    assert "completeness not judged" in lines[-1], lines[-1]
    counted = [re.match(r"(\d+) rounds: (\d+) OK, 0 FAIL", line) for line in lines]
    assert any(m and int(m.group(2)) >= 250 for m in counted), lines[-4:]
