"""The suite's hypothesis settings, loaded by ``tests/conftest.py`` before any test module builds
its own ``settings(...)`` (which then inherit what they do not set).

``ci`` (the default): every run draws the same examples (``derandomize``), so a run on a clean
clone passes or fails on the code, not on the draw; and no example is failed for its wall-clock
time (no ``deadline``, no ``too_slow`` health check): on a loaded 2-core machine running two
xdist workers and their servers an example is descheduled for longer than hypothesis's 200 ms,
and the replay, run quickly, then reports "Unreliable test timings" (a flake, not a finding).
No test passes or fails on how fast it ran.

``explore`` (``FAIRSHOE_HYPOTHESIS=explore``): fresh random examples each run (1000 where a test
sets no number of its own), for hunting the rare inputs the fixed draw never reaches; a failure
prints its ``@reproduce_failure`` blob, and the input found belongs in the test as an
``@example``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_ENV = "FAIRSHOE_HYPOTHESIS"

_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

settings.register_profile("ci", derandomize=True, database=None, **_UNTIMED)  # type: ignore[arg-type]
settings.register_profile("explore", max_examples=1000, print_blob=True, **_UNTIMED)  # type: ignore[arg-type]


def load() -> str:
    """Load the profile ``FAIRSHOE_HYPOTHESIS`` names (``ci`` unless set); its name."""
    name = os.environ.get(PROFILE_ENV, "ci")
    settings.load_profile(name)
    return name
