"""A line written by ``core/logs.write_line`` (every call's ``rpc`` line, ``api/rpc_log.py``) is
byte for byte the line structlog writes for the same call under ``configure_logging``'s
configuration, at every level, with odd values, bound context variables and the fixed fields, at
any instant; and once that configuration is no longer the one in force (structlog reconfigured,
its processors swapped by ``capture_logs``), ``write_line`` writes nothing and says so, and the
call's line goes through structlog as before."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.processes  # structlog's configuration is the process's: one of its own

_SCRIPT = r'''
import io, json, math, sys, time
import structlog
from structlog.contextvars import bind_contextvars, clear_contextvars
from structlog.testing import capture_logs
from rng_service.api.rpc_call import Call
from rng_service.api.rpc_log import RpcLog
from rng_service.core.logs import configure_logging, write_line

sink = io.StringIO()
results = []


def configure(level, context=None):
    real, sys.stderr = sys.stderr, sink  # the configuration writes to the file it found
    configure_logging(level, context)
    sys.stderr = real


def written(action):
    """What ``action`` wrote to the sink, and what it returned."""
    start = len(sink.getvalue())
    answer = action()
    return sink.getvalue()[start:], answer


def pair(case, method, fields, nanoseconds):
    """The same line through structlog's logger and through write_line, at one instant."""
    time.time_ns = lambda: nanoseconds
    theirs, _ = written(lambda: getattr(structlog.get_logger("fairshoe.server"), method)(
        "rpc", **fields))
    ours, done = written(lambda: write_line(method, "rpc", dict(fields)))
    results.append({"case": case, "theirs": theirs, "ours": ours, "done": done})


class Shown:
    def __structlog__(self):
        return "shown ☃"


class Odd:
    def __repr__(self):
        return "<odd \x00 é>"


ODD = {
    "unicode": "é ☃ 😀 \u2028 \u202e \ud7ff", "controls": "a\x00b\n\t\x1b[31m\"\\",
    "big": 2**70, "small": -(2**63), "float": 0.1, "huge": 1e300, "nan": math.nan,
    "inf": -math.inf, "none": None, "flag": True, "bytes": b"\xff\x00", "tuple": (1, "2"),
    "nested": {"b": [1, {"z": None}], "a": "é"}, "shown": Shown(), "odd": Odd(),
    "set": frozenset(), "operator": "op-a", "round_id": "r\\n" + "x" * 100,
}
INSTANTS = [1_796_631_013_000_000_000, 1_796_631_013_000_000_999, 1_796_631_013_123_456_789,
            0, 253_402_300_799_999_999_999]
configure("INFO", {"worker": 3})
for i, instant in enumerate(INSTANTS):
    pair(f"plain {i}", "info", {"method": "/fairshoe.round.v1.RoundService/Act", "code": "OK",
                                "latency_ms": 1.234}, instant)
for name, value in ODD.items():
    pair(f"odd {name}", "info", {"value": value, "code": "OK"}, INSTANTS[2])
pair("every odd value", "info", ODD, INSTANTS[2])
for method in ("debug", "info", "warning", "error", "critical"):
    pair(f"level {method} at INFO", method, {"code": "X"}, INSTANTS[2])
try:
    {}["missing"]
except KeyError as exc:
    pair("a bug, in its except block", "error", {"error": "KeyError", "exc_info": exc},
         INSTANTS[2])
    failed = exc
pair("a bug, after it", "error", {"error": "KeyError", "exc_info": failed}, INSTANTS[2])
bind_contextvars(tenant="t-1", worker=9, code="bound")  # the line's own fields win
pair("context variables", "info", {"code": "OK"}, INSTANTS[2])
clear_contextvars()

configure("WARNING")
for method in ("debug", "info", "warning", "error", "critical"):
    pair(f"level {method} at WARNING", method, {"code": "X"}, INSTANTS[3])

# a call's own line: the default RpcLog against one handed structlog's logger
configure("INFO", {"worker": 1})
call = Call("/fairshoe.round.v1.RoundService/Act", None)
call.operator = "op-é"
time.time_ns = lambda: INSTANTS[2]
for code in ("OK", "INTERNAL"):
    fields = {"kind": "INVALID", "field": "hand_id"} if code == "OK" else {"error": "E"}
    theirs, _ = written(lambda: RpcLog(structlog.get_logger("fairshoe.server")).write(
        call, code, 0.0123456, dict(fields)))
    ours, _ = written(lambda: RpcLog().write(call, code, 0.0123456, dict(fields)))
    results.append({"case": f"RpcLog {code}", "theirs": theirs, "ours": ours, "done": True})

# reconfigured: write_line declines, and the default RpcLog's line goes through structlog
log = RpcLog()
log.write(call, "OK", 0.001, {})  # its structlog logger, if it ever binds, binds now
with capture_logs() as captured:
    ours, done = written(lambda: write_line("info", "rpc", {}))
    results.append({"case": "capture_logs", "ours": ours, "done": done})
    log.write(call, "OK", 0.001, {})
results.append({"case": "captured", "lines": [
    {k: v for k, v in line.items() if k != "latency_ms"} for line in captured]})
ours, done = written(lambda: write_line("info", "rpc", {}))
results.append({"case": "capture_logs left", "ours": ours, "done": done})
structlog.configure(processors=[structlog.processors.JSONRenderer()])
ours, done = written(lambda: write_line("info", "rpc", {}))
results.append({"case": "processors replaced", "ours": ours, "done": done})
configure("INFO")
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
ours, done = written(lambda: write_line("error", "rpc", {}))
results.append({"case": "level replaced", "ours": ours, "done": done})
structlog.reset_defaults()
ours, done = written(lambda: write_line("info", "rpc", {}))
results.append({"case": "reset", "ours": ours, "done": done})
configure("ERROR")
ours, done = written(lambda: write_line("error", "again", {}))
results.append({"case": "configured again", "ours": ours, "done": done})
print(json.dumps(results))
'''


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         check=True).stdout
    return {result["case"]: result for result in json.loads(out)}


def test_every_line_is_structlogs_byte_for_byte(results: dict[str, dict[str, Any]]) -> None:
    compared = [result for result in results.values() if "theirs" in result]
    assert len(compared) == 39
    for result in compared:
        assert result["ours"] == result["theirs"], result["case"]
        assert result["done"] is True, result["case"]


def test_the_lines_are_what_the_configuration_says(results: dict[str, dict[str, Any]]) -> None:
    # the comparison above is only as good as structlog's lines: they are there, as configured
    plain = json.loads(results["plain 0"]["ours"])
    assert plain == {"event": "rpc", "level": "info", "timestamp": "2026-12-07T08:10:13Z",
                     "worker": 3, "method": "/fairshoe.round.v1.RoundService/Act",
                     "code": "OK", "latency_ms": 1.234}
    assert json.loads(results["plain 2"]["ours"])["timestamp"] == "2026-12-07T08:10:13.123456Z"
    assert json.loads(results["plain 4"]["ours"])["timestamp"] == "9999-12-31T23:59:59.999999Z"
    assert results["odd unicode"]["ours"].endswith("}\n")
    assert json.loads(results["odd big"]["ours"])["value"] == 2**70  # json's, past orjson's
    assert json.loads(results["odd shown"]["ours"])["value"] == "shown ☃"
    bound = json.loads(results["context variables"]["ours"])
    assert (bound["tenant"], bound["worker"], bound["code"]) == ("t-1", 9, "OK")
    bug = json.loads(results["a bug, after it"]["ours"])
    assert "KeyError: 'missing'" in bug["exception"] and "exc_info" not in bug
    for least, shown in (("INFO", ["info", "warning", "error", "critical"]),
                         ("WARNING", ["warning", "error", "critical"])):
        assert [method for method in ("debug", "info", "warning", "error", "critical")
                if results[f"level {method} at {least}"]["ours"]] == shown, least
    line = json.loads(results["RpcLog OK"]["ours"])
    assert (line["operator"], line["kind"], line["worker"], line["level"]) == (
        "op-é", "INVALID", 1, "info")
    assert json.loads(results["RpcLog INTERNAL"]["ours"])["level"] == "error"


def test_another_configuration_in_force_is_left_to_structlog(
        results: dict[str, dict[str, Any]]) -> None:
    for case in ("capture_logs", "processors replaced", "level replaced", "reset"):
        assert (results[case]["ours"], results[case]["done"]) == ("", False), case
    assert results["captured"]["lines"] == [{
        "event": "rpc", "log_level": "info", "method": "/fairshoe.round.v1.RoundService/Act",
        "code": "OK", "operator": "op-é"}]
    assert results["capture_logs left"]["done"] is True
    assert results["capture_logs left"]["ours"] != ""
    again = results["configured again"]
    assert again["done"] is True and json.loads(again["ours"])["event"] == "again"
