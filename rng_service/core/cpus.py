"""How many cores this process may use: the default of every ``--workers``/``--processes``."""

from __future__ import annotations

import os


def available_cores() -> int:
    """The cores this process may run on (its affinity: a container's or taskset's limit, not
    the machine's count), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
