"""JSON logs through structlog: one object per line on stderr, ready for a log shipper.

Standard ``logging`` records (gRPC's own, a library's, the seed vault's) go through the same
processors (structlog's ``ProcessorFormatter``), so every line a server writes parses as JSON.
The line every call writes takes a shorter way to the same bytes (:func:`write_line`) while this
configuration is the one in force.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import orjson
import structlog
from structlog.typing import EventDict


def utc_text(nanoseconds: int) -> str:
    """The instant ``nanoseconds`` after the epoch as structlog's ``TimeStamper(fmt="iso",
    utc=True)`` writes it (``datetime.isoformat``, ``Z`` for ``+00:00``): to the microsecond,
    the fraction left out when it is zero. The text of the whole second is made once a second.

    >>> utc_text(1_796_631_013_123_456_789), utc_text(1_796_631_013_000_000_999)
    ('2026-12-07T08:10:13.123456Z', '2026-12-07T08:10:13Z')
    """
    global _second  # noqa: PLW0603 - one tuple, replaced whole: threads see the old or the new
    whole, nanos = divmod(nanoseconds, 1_000_000_000)
    known = _second
    if known[0] != whole:
        known = _second = (whole, datetime.fromtimestamp(whole, UTC).isoformat()[:19])
    micros = nanos // 1000  # floored, as datetime.now reads the clock
    # the six digits as str() of 1xxxxxx writes them: a format spec (06d) costs five times that
    return f"{known[1]}.{str(micros + 1_000_000)[1:]}Z" if micros else f"{known[1]}Z"


_second: tuple[int, str] = (-1, "")  # the whole second utc_text wrote last, and its text


def add_timestamp(_logger: Any, _name: str, event: EventDict) -> EventDict:
    """``timestamp``: now (:func:`utc_text`)."""
    event["timestamp"] = utc_text(time.time_ns())
    return event


def _processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        add_timestamp,
    ]


class _Line:
    """What structlog does to each of its own lines (every call's ``rpc`` line among them), in
    one processor rather than six: the context variables merged, ``level`` and ``timestamp``
    added, the ``fixed`` fields under the line's own, an exception formatted, the JSON rendered.
    The same steps as :func:`_processors` and the formatter's for standard logging's records."""

    __slots__ = ("_fixed",)

    def __init__(self, fixed: Mapping[str, Any] | None) -> None:
        self._fixed = dict(fixed) if fixed else None

    def __call__(self, logger: Any, name: str, event: EventDict) -> str:
        event = structlog.contextvars.merge_contextvars(logger, name, event)
        # add_log_level's name of the level: the method's but for its two aliases
        event["level"] = _ALIASES.get(name, name)
        event["timestamp"] = utc_text(time.time_ns())
        if self._fixed is not None:
            event = {**self._fixed, **event}
        if "exc_info" in event:  # format_exc_info does nothing to a line without one
            event = structlog.processors.format_exc_info(logger, name, event)
        try:  # render_json's, inline: every line of a served call comes here
            return orjson.dumps(event, default=unrenderable, option=_ORJSON).decode()
        except TypeError:
            return _json_line(event, unrenderable)


#: the logging methods add_log_level names by another level (structlog's map_method_name)
_ALIASES: Final = {"warn": "warning", "exception": "error"}


def unrenderable(value: Any) -> Any:
    """What a line shows of a value JSON has no form for: its ``__structlog__()``, else its
    ``repr`` (as structlog's ``JSONRenderer``)."""
    try:
        return value.__structlog__()
    except AttributeError:
        return repr(value)


def render_json(event: Mapping[str, Any], default: Callable[[Any], Any] | None = None,
                **_: Any) -> str:
    """One log line's JSON, keys sorted: orjson (a third of the cost of ``json`` on a line a
    call writes), or ``json`` for what orjson refuses (an integer past 64 bits)."""
    try:
        return orjson.dumps(event, default=default, option=_ORJSON).decode()
    except TypeError:
        return _json_line(event, default)


#: keys sorted; a dataclass through the default (its ``repr``, as json shows it), not field by
#: field: a holder's ``repr`` is what keeps a secret out of lines (``field(repr=False)``: a
#: shoe row's sealed seed, a round row's state)
_ORJSON: Final = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def _json_line(event: Mapping[str, Any], default: Callable[[Any], Any] | None) -> str:
    """The line by ``json``, for what orjson refuses: a NamedTuple shown by ``default`` (json
    writes a tuple's subclass as a list of its items, past the ``__repr__`` that hides them);
    keys json cannot sort (an int's and a str's in one dict) left in their order rather than
    the line raising at its caller."""
    shown = _hide_tuples(event, default or repr)
    try:
        return json.dumps(shown, default=default, sort_keys=True)
    except TypeError:
        return json.dumps(shown, default=default)


def _hide_tuples(value: Any, show: Callable[[Any], Any]) -> Any:
    """``value`` with each tuple's subclass in its dicts, lists and tuples replaced by
    ``show(it)``."""
    if isinstance(value, dict):
        return {key: _hide_tuples(item, show) for key, item in value.items()}
    if isinstance(value, list) or type(value) is tuple:
        return [_hide_tuples(item, show) for item in value]
    return show(value) if isinstance(value, tuple) else value


def configure_logging(level: str = "INFO", context: Mapping[str, Any] | None = None) -> None:
    """JSON lines on stderr at ``level`` (structlog, standard logging routed the same way),
    each with the fields of ``context`` (which process of several wrote it, say)."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    shared = _processors()
    if context:
        fixed = dict(context)
        shared.append(lambda _logger, _name, event: {**fixed, **event})
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=render_json, default=unrenderable),
        ],
    ))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    logging.captureWarnings(True)  # warnings.warn(...) too, as JSON
    global _installed  # noqa: PLW0603 - replaced whole, as structlog's own configuration is
    line = _Line(context)
    installed = _Installed([line], line, structlog.make_filtering_bound_logger(numeric),
                           structlog.WriteLoggerFactory(file=sys.stderr), numeric)
    structlog.configure(
        processors=installed.processors,
        wrapper_class=installed.wrapper_class,
        logger_factory=installed.logger_factory,  # one write a line
        cache_logger_on_first_use=True,
    )
    _installed = installed


class _Installed:
    """What :func:`configure_logging` handed structlog (the very objects, compared by identity
    with what is in force), and the file's writer :func:`write_line` writes through: a
    ``WriteLogger`` of the same factory (the same file, the same lock per file as structlog's
    own loggers take, so lines of several threads never interleave)."""

    __slots__ = ("least", "line", "logger_factory", "processors", "render", "wrapper_class",
                 "writer")

    def __init__(self, processors: list[Any], line: _Line, wrapper_class: Any,
                 logger_factory: structlog.WriteLoggerFactory, least: int) -> None:
        self.processors = processors
        self.line = line
        self.wrapper_class = wrapper_class
        self.logger_factory = logger_factory
        self.least = least
        self.writer = logger_factory()
        # the processor's method, bound: calling the instance goes through its type's __call__
        # slot, some 700 instructions more a line
        self.render = line.__call__


_installed: _Installed | None = None  # configure_logging's last configuration

#: the level of each method of structlog's filtering bound logger, by the name its processors see
_LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                  "error": logging.ERROR, "critical": logging.CRITICAL}


def write_line(method_name: str, event: str, fields: EventDict) -> bool:
    """Write ``event`` with ``fields`` as structlog writes
    ``structlog.get_logger().<method_name>(event, **fields)`` under :func:`configure_logging`'s
    configuration, byte for byte: nothing below its level, else the fields through the same
    processor (:class:`_Line`) to the same file, one write and flush under the file's lock.
    Returns False, writing nothing, when that configuration is not the one in force (never
    installed, or reconfigured since): the caller goes through structlog then.

    The line every call writes (``api/rpc_log.py``) comes here: structlog's bound logger would
    spend eight Python calls on it, copying the fields three times, before the processor runs.
    Unlike a logger cached on first use, it follows the configuration in force at each line.
    ``method_name`` is a level's name (``info``, ``error``...), as structlog passes it to
    processors. A line written takes ``fields`` over (its processor adds to the very dict), where
    structlog would copy them: the caller hands in a dict of its own."""
    installed = _installed
    if installed is None:
        return False
    # still in force: not reconfigured since (a test's structlog.configure, another
    # configure_logging), nor its processors changed in place (capture_logs swaps the list's
    # contents); checked here rather than in a method of _Installed: one Python call less a line
    config = structlog.get_config()
    processors = installed.processors
    if (config["processors"] is not processors or len(processors) != 1
            or processors[0] is not installed.line
            or config["wrapper_class"] is not installed.wrapper_class
            or config["logger_factory"] is not installed.logger_factory):
        return False
    if _LEVELS[method_name] >= installed.least:
        fields["event"] = event
        installed.writer.msg(installed.render(installed.writer, method_name, fields))
    return True
