"""The log lines' timestamp (``core/logs.utc_text``) reads as structlog's ``TimeStamper(fmt="iso",
utc=True)`` writes it, whatever second it falls in and however its text is cached; each line
(structlog's own, through ``_Line``, and standard logging's) is one JSON object with its level,
time and the fixed fields."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog

from rng_service.core import logs
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


_SECRETS = """
import io, sys, logging
sink = io.StringIO()
real, sys.stderr = sys.stderr, sink
from rng_service.core.logs import configure_logging
configure_logging("INFO")
sys.stderr = real
import structlog
from rng_service.rng.shoe import DrbgInputs
from rng_service.service.ports import Mode, ShoeRow, ShoeStatus
row = ShoeRow("o", "s-1", "p", "classic", "d" * 64, 6, None, "c" * 64, b"SECRET-SEALED",
              b"SECRET-CLIENT", 0, 0, ShoeStatus("committed"), 1, "t", "t", Mode("REAL"))
inputs = DrbgInputs(b"SECRET-ENTROPY", b"SECRET-NONCE", b"personal")
log = structlog.get_logger("t")
log.info("row", row=row)  # orjson's path
log.info("row_big", row=row, big=2**70)  # json's (past orjson's 64 bits)
log.info("inputs", inputs=[inputs])
log.info("inputs_big", inputs={"nested": (inputs,)}, big=2**70)
log.info("keys", counts={1: "one", "two": 2})  # keys json cannot sort
print(sink.getvalue(), end="")
"""


def test_what_a_value_hides_from_its_repr_never_reaches_a_line() -> None:
    """A secret is kept out of lines by its holder's ``repr`` (a dataclass's ``field(repr=False)``,
    a class's own ``__repr__``): a line shows such a value as its ``repr`` on either path of the
    renderer, not field by field (orjson writes a dataclass's fields, json a NamedTuple's items);
    and a value json cannot sort the keys of still gets its line rather than raising."""
    out = subprocess.run([sys.executable, "-c", _SECRETS], capture_output=True, text=True,
                         check=True).stdout
    assert "SECRET" not in out, out
    lines = {line["event"]: line for line in map(json.loads, out.splitlines())}
    assert lines["row"]["row"] == lines["row_big"]["row"]
    assert lines["row"]["row"].startswith("ShoeRow(operator='o', shoe_id='s-1'")
    assert lines["inputs"]["inputs"] == ["<DrbgInputs, personalization_string 8 bytes>"]
    assert lines["inputs_big"]["inputs"] == {"nested": lines["inputs"]["inputs"]}
    assert lines["keys"]["counts"] == {"1": "one", "two": 2}


def _unfused(fixed: dict[str, Any]) -> list[Any]:
    """The processors ``_Line`` does the work of, one after another, as structlog runs them."""
    return [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
            logs.add_timestamp, lambda _logger, _name, event: {**fixed, **event},
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=logs.render_json,
                                              default=logs.unrenderable)]


@dataclass
class _Hidden:
    shown: int
    hidden: bytes = field(repr=False)


class _Own:
    def __structlog__(self) -> dict[str, int]:
        return {"own": 1}


def test_a_fused_line_is_the_unfused_processors_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_Line`` writes byte for byte what the processors it fuses write, whatever the method
    and the values: the context's and the fixed fields under the line's own, exceptions in each
    form ``exc_info`` takes, values orjson refuses (past 64 bits, a lone surrogate, int keys,
    nesting past its depth) and those it has no form for, very large text."""
    monkeypatch.setattr(logs.time, "time_ns", lambda: 1_796_631_013_123_456_789)
    try:
        raise ValueError("boom \u00e9")
    except ValueError as caught:
        exc = caught
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    events: list[dict[str, Any]] = [
        {"event": "a"}, {"event": "b", "n": 2**70, "m": -(2**64)}, {"event": "c", "s": "\ud800"},
        {"event": "d", "b": b"\xff", "set": {1}, "hidden": _Hidden(1, b"x"), "own": _Own()},
        {"event": "e", "nested": {"x": [1, (2, 3), {"y": None}]}, "f": math.nan, "g": -0.0},
        {"event": "f", "exc_info": exc}, {"event": "g", "exc_info": True},
        {"event": "h", "exc_info": False}, {"event": "i", "exc_info": (ValueError, exc, None)},
        {"event": "j", "level": "mine", "timestamp": "mine", "process": 3, "request_id": "r-2"},
        {"event": "k" * 100_000, "u": "\u2603" * 1000}, {"event": "l", "deep": deep},
        {"event": "m", "keys": {1: 2, 3: 4}, "mixed": {1: 2, "3": 4}}, {"event": "n", "t": True}]
    fixed: dict[str, Any] = {"process": 2, "level": "fixed", "timestamp": "fixed"}
    structlog.contextvars.bind_contextvars(request_id="r-1", event="context", level="context")
    try:
        for method in ("info", "warn", "warning", "exception", "error", "debug", "critical"):
            for event in events:
                unfused: Any = dict(event)
                for step in _unfused(fixed):
                    unfused = step(None, method, unfused)
                assert logs._Line(fixed)(None, method, dict(event)) == unfused, (method, event)
                assert logs._Line(None)(None, method, dict(event)) == _unfused_bare(method, event)
    finally:
        structlog.contextvars.clear_contextvars()


def _unfused_bare(method: str, event: dict[str, Any]) -> Any:
    out: Any = dict(event)
    for step in _unfused({}):
        out = step(None, method, out)
    return out
