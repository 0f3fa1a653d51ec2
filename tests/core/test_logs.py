"""The log lines' timestamp (``core/logs.utc_text``) reads as structlog's ``TimeStamper(fmt="iso",
utc=True)`` writes it, whatever second it falls in and however its text is cached."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from rng_service.core.logs import utc_text


def _structlogs(nanoseconds: int) -> str:
    # TimeStamper: datetime.now(tz=UTC).isoformat().replace("+00:00", "Z"), the clock floored
    # to the microsecond
    whole, nanos = divmod(nanoseconds, 1_000_000_000)
    instant = datetime.fromtimestamp(whole, UTC).replace(microsecond=nanos // 1000)
    return instant.isoformat().replace("+00:00", "Z")


def test_every_instant_reads_as_structlogs_timestamp() -> None:
    rng = random.Random(16)
    base = 1_796_631_013 * 1_000_000_000
    instants = [base, base + 999, base + 1000, base + 999_999_999, base + 1_000_000_000,
                0, 253_402_300_799_999_999_999]  # the epoch, the last instant of year 9999
    instants += [rng.randrange(0, 4_102_444_800 * 1_000_000_000) for _ in range(2000)]
    instants += [base + rng.randrange(0, 3 * 10**9) for _ in range(2000)]  # a cached second
    for nanoseconds in instants:
        assert utc_text(nanoseconds) == _structlogs(nanoseconds), nanoseconds
