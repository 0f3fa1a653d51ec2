"""Waiting for a state another thread or process reaches, instead of sleeping and assuming it:
a test then checks what it claims however slow the machine is."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Until ``condition()`` holds (polled); an assertion error naming ``what`` if it still does
    not after ``timeout`` seconds (a bound only a hung thread reaches, however loaded the
    machine)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not reached in {timeout} s: {what}"
        time.sleep(0.005)
