"""The suite's hypothesis profile (tests/support/hypothesis_profiles.py): a run's verdict depends
on the code, not on the draw nor on the machine's load."""

from __future__ import annotations

import os
import time

from hypothesis import given
from hypothesis import strategies as st
from support.hypothesis_profiles import PROFILE_ENV


def test_an_example_held_up_past_hypothesiss_deadline_is_no_failure() -> None:
    """A loaded machine may deschedule the test for longer than hypothesis's default 200 ms
    deadline; the quick replay then made hypothesis report "Unreliable test timings"."""
    calls: list[int] = []

    @given(st.integers())
    def slow_once(n: int) -> None:
        calls.append(n)
        if len(calls) == 1:
            time.sleep(0.3)  # the scheduler holding the worker, once

    slow_once()
    assert len(calls) > 1


def test_every_run_draws_the_same_examples_unless_exploring() -> None:
    def drawn() -> list[str]:
        seen: list[str] = []

        @given(st.text())
        def record(text: str) -> None:
            seen.append(text)

        record()
        return seen

    first = drawn()
    assert len(set(first)) > 10
    assert (drawn() == first) is (os.environ.get(PROFILE_ENV, "ci") == "ci")
