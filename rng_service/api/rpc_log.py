"""The logging step of every call: one JSON line when it ends, ``rpc``, naming its method, the
status code the client receives, its latency, whom it acted for (operator, auditor), the round
and request it was about, and for a failure its kind and field, or for a bug its exception.
Identifiers only: never a seed, a key or a card."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from operator import attrgetter
from typing import Any

import structlog

from rng_service.api.errors import MAX_FIELD_BYTES, printable
from rng_service.api.rpc_call import Call
from rng_service.core.logs import write_line

#: request fields an RPC's log line names (identifiers only: never a seed, key or card)
LOGGED_IDS = ("round_id", "request_id")


def ids_of(request: Any) -> dict[str, str]:
    """The round and request ids a request message carries, printable and bounded."""
    found = {}
    kind: type = type(request)  # hashable, as the cache needs (mypy doubts type[Any] is)
    for name in _id_fields(kind):
        value = getattr(request, name)
        if value:
            found[name] = _shown(value)
    return found


@cache  # a server's request types: a small fixed set
def _id_fields(message_type: type) -> tuple[str, ...]:
    """Which of :data:`LOGGED_IDS` messages of ``message_type`` carry as string fields."""
    descriptor = getattr(message_type, "DESCRIPTOR", None)
    fields = getattr(descriptor, "fields_by_name", {})
    return tuple(name for name in LOGGED_IDS
                 if (field := fields.get(name)) is not None and field.type == field.TYPE_STRING)


def answered_round(response: Any) -> str | None:
    """The round a response is about when its request named none (StartRound answers the new
    round's view): ``round.round_id`` of the answer, printable and bounded."""
    kind: type = type(response)  # hashable, as the cache needs (mypy doubts type[Any] is)
    read = _round_of(kind)
    if read is None:
        return None
    round_id = read(response)
    return _shown(round_id) if isinstance(round_id, str) and round_id else None


@cache  # a server's answer types: a small fixed set
def _round_of(message_type: type) -> Callable[[Any], Any] | None:
    """What reads the round's id of answers of ``message_type``, if they carry a ``round``
    message with a ``round_id`` (asked once per type: getattr on a message without the field
    raises and catches); an answer handed to gRPC already encoded says so itself
    (``NAMES_A_ROUND``) and carries the id as its own ``round_id``
    (``round_messages.EncodedAnswer``)."""
    if getattr(message_type, "NAMES_A_ROUND", False):
        return attrgetter("round_id")
    fields = getattr(getattr(message_type, "DESCRIPTOR", None), "fields_by_name", {})
    view = fields.get("round")
    named = view is not None and view.message_type is not None \
        and "round_id" in view.message_type.fields_by_name
    return attrgetter("round.round_id") if named else None


def _shown(value: str) -> str:
    """``value`` as :func:`printable` shows it in a line (bounded to ``MAX_FIELD_BYTES``): as it
    is when it is printable ASCII that short (every id a client sends as it should), without
    a call; any other through ``printable``."""
    if len(value) <= MAX_FIELD_BYTES and value.isascii() and value.isprintable():
        return value
    return printable(value, MAX_FIELD_BYTES)


class RpcLog:
    """Writes each call's line to ``logger`` (default: structlog's ``fairshoe.server``; under
    ``configure_logging``'s configuration the same bytes through ``core.logs.write_line``,
    without structlog's bound logger)."""

    __slots__ = ("_direct", "_log")

    def __init__(self, logger: Any = None) -> None:
        self._direct = logger is None  # the logger a test hands in gets every line
        self._log = logger if logger is not None else structlog.get_logger("fairshoe.server")

    def write(self, call: Call, code: str, seconds: float, fields: dict[str, Any],
              answer: Any = None) -> None:
        """The line of ``call``, ended with ``code`` after ``seconds``: ``fields`` (a failure's
        ``kind`` and ``field``, or ``error`` and ``exc_info``) first, then whom it acted for and
        the ids its first request carried; a call whose request named no round names the round
        of its ``answer`` (StartRound's new round). At error level for INTERNAL (a bug), info
        otherwise."""
        level = "error" if code == "INTERNAL" else "info"
        line: dict[str, Any] = {}  # a dict of its own, under ``fields``: no setdefault a field
        if call.operator is not None:
            line["operator"] = call.operator
        if call.auditor is not None:
            line["auditor"] = call.auditor
        request = call.request
        if request is not None:  # ids_of's, inline: every call's line comes here
            kind: type = type(request)
            for name in _id_fields(kind):
                value = getattr(request, name)
                if value:
                    line[name] = (value if len(value) <= MAX_FIELD_BYTES and value.isascii()
                                  and value.isprintable() else printable(value, MAX_FIELD_BYTES))
        # a request that named no round: the round of its answer (StartRound's new one)
        if answer is not None and "round_id" not in line and (round_id := answered_round(answer)):
            line["round_id"] = round_id
        if fields:  # a failure's kind and field, or a bug's error: over what the call names
            line.update(fields)
        line["method"] = call.method
        line["code"] = code
        line["latency_ms"] = round(seconds * 1000, 3)
        if not (self._direct and write_line(level, "rpc", line)):
            getattr(self._log, level)("rpc", **line)
