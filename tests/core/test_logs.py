"""The log lines' timestamp (``core/logs.utc_text``) reads as structlog's ``TimeStamper(fmt="iso",
utc=True)`` writes it, whatever second it falls in and however its text is cached; each line
(structlog's own, through ``_Line``, and standard logging's) is one JSON object with its level,
time and the fixed fields."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from rng_service.core.logs import utc_text

pytestmark = pytest.mark.processes  # a line's configuration is the process's: one of its own


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


_LINES = """
import io, sys
sink = io.StringIO()
real, sys.stderr = sys.stderr, sink
from rng_service.core.logs import configure_logging
configure_logging("INFO", {"process": 2})
sys.stderr = real
import logging, structlog
log = structlog.get_logger("t")
log.info("a", n=1)
log.warn("b")
log.debug("hidden")
try:
    1 / 0
except ZeroDivisionError:
    log.exception("c", what=object.__new__(type("Odd", (), {"__repr__": lambda s: "<odd>"})))
log.error("d", big=2**70)
logging.getLogger("std").warning("e %s", "x")
print(sink.getvalue(), end="")
"""


def test_each_line_is_json_with_its_level_time_and_fixed_fields() -> None:
    out = subprocess.run([sys.executable, "-c", _LINES], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    lines = [json.loads(line) for line in out]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("a", "info"), ("b", "warning"), ("c", "error"), ("d", "error"), ("e x", "warning")]
    assert all(line["process"] == 2 and line["timestamp"].endswith("Z") for line in lines)
    assert lines[0]["n"] == 1 and lines[3]["big"] == 2**70  # past orjson's 64 bits: json's
    assert lines[2]["what"] == "<odd>" and "ZeroDivisionError" in lines[2]["exception"]
    assert "exc_info" not in lines[2] and lines[4]["logger"] == "std"
