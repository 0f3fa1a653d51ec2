"""`fairshoe simulate` as a script sees it: its progress bar is for a terminal (issue 20, "Clients
and CLI" 7)."""

from __future__ import annotations

import subprocess

import pytest
from support.live_server import FAIRSHOE

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)


def test_no_progress_bar_when_stderr_is_not_a_terminal() -> None:
    done = subprocess.run([str(FAIRSHOE), "simulate", "snap", "--rounds", "200", "--workers", "1",
                           "--seed-hex", "00" * 48], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "%|" not in done.stderr, repr(done.stderr)
    assert "rounds" in done.stdout
