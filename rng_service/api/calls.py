"""What every live servicer needs from a call: whose it is, whether it still has time, and the
request fields it shares with the others (modes, ids, page tokens), checked under the names the
protos give them.

Each check raises :class:`~rng_service.core.errors.InvalidInput` naming the request's field as
the proto names it (``account.player_id``, ``hands[1].bet_minor``). A request is checked once,
at this edge: with these, and with :mod:`rng_service.service.validate`'s checks of ids and
amounts called under the proto's names. The use cases take the values as checked, and name the
proto's fields in what they alone check (a bet over the game's limits: ``hands[0].bet_minor``),
so no error is renamed on its way out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

import grpc
from google.protobuf import timestamp_pb2

from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.core.errors import InvalidInput
from rng_service.service.ports import Mode

#: player ids, request ids (fairshoe.common.v1), currencies and references
MAX_ID_CHARS: Final = 128
#: page tokens the service writes are well under this
MAX_PAGE_TOKEN_CHARS: Final = 512
#: a write starts only with more than this much of the caller's deadline left (seconds): gRPC
#: sends deadlines rounded up to the millisecond, so a call already expired at the client can
#: arrive with a sliver left, and no write (an fsync'd commit) finishes in a few milliseconds
MIN_WRITE_SECONDS: Final = 0.005

#: how many checked values each table of :func:`kept` holds before it is emptied
MAX_KEPT: Final = 4096

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MODES: Final[dict[int, Mode]] = {common_pb2.MODE_DEMO: Mode.DEMO,
                                   common_pb2.MODE_REAL: Mode.REAL}
_MODE_ENUM: Final[dict[Mode, common_pb2.Mode]] = {Mode.DEMO: common_pb2.MODE_DEMO,
                                                  Mode.REAL: common_pb2.MODE_REAL}


def require_time(context: grpc.ServicerContext) -> None:
    """Refuse to start a write whose caller's deadline has passed (or all but passed): the
    caller has stopped waiting, so the request changes nothing (it retries with its request
    id). A write started in time may still outlive the deadline; its retry then answers it."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= MIN_WRITE_SECONDS:
        context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                      "the deadline passed before the request started; nothing was changed")


_Checked = TypeVar("_Checked")


def kept(table: dict[Any, _Checked], key: Any, check: Callable[..., _Checked]) -> _Checked:
    """What ``check`` makes of ``key`` (of the values of a tuple ``key``, in order), kept in
    ``table`` by ``key`` once it let them through: the caller finds a value met before with
    ``table.get(key)`` and calls this only for one met anew. A check is a function of the
    values alone (the same values, the same result or error), so a kept result is the one it
    would give again; a value it refuses raises here and is never kept. ``table`` is emptied
    once it holds :data:`MAX_KEPT` values, so it never grows without bound (threads read and
    write it under the GIL: at worst two check the same value)."""
    if len(table) >= MAX_KEPT:
        table.clear()
    out = table[key] = check(*key) if type(key) is tuple else check(key)
    return out


def text(field: str, value: str, *, most: int = MAX_ID_CHARS, required: bool = True) -> str:
    """A string field: present if ``required``, at most ``most`` characters."""
    if required and not value:
        raise InvalidInput(field, "required")
    if len(value) > most:
        raise InvalidInput(field, f"at most {most} characters, got {len(value)}")
    return value


def mode(field: str, value: int) -> Mode:
    """A required ``fairshoe.common.v1.Mode``: MODE_DEMO or MODE_REAL."""
    found = _MODES.get(value)
    if found is None:
        what = "required" if value == common_pb2.MODE_UNSPECIFIED else f"unknown mode {value}"
        raise InvalidInput(field, f"{what}: MODE_DEMO or MODE_REAL")
    return found


def optional_mode(field: str, value: int) -> Mode | None:
    """A ``fairshoe.common.v1.Mode`` where MODE_UNSPECIFIED means either (None)."""
    return None if value == common_pb2.MODE_UNSPECIFIED else mode(field, value)


def mode_enum(value: str) -> common_pb2.Mode:
    """A service mode (``DEMO``/``REAL``) as the proto enum."""
    return _MODE_ENUM[Mode(value)]


def page_token(field: str, value: str) -> str:
    """An optional page token: at most :data:`MAX_PAGE_TOKEN_CHARS` characters (the service
    checks what it means).
    """
    return text(field, value, most=MAX_PAGE_TOKEN_CHARS, required=False)


def page_size(field: str, value: int, most: int) -> int:
    """A page size: 0 (the default) to ``most``."""
    if not 0 <= value <= most:
        raise InvalidInput(field, f"must be 0 to {most} (0: the default), got {value}")
    return value


def count(field: str, items: object, most: int) -> None:
    """A repeated field holds at most ``most`` items."""
    size = len(items)  # type: ignore[arg-type]
    if size > most:
        raise InvalidInput(field, f"at most {most} items, got {size}")


def set_timestamp(out: timestamp_pb2.Timestamp, text: str) -> None:
    """Set ``out`` to a stored RFC 3339 UTC time (``2026-01-02T03:04:05.123456Z``, as
    ``ports.utc_now`` writes it). ``datetime.fromisoformat`` reads that form in a few
    microseconds, where protobuf's ``FromJsonString`` runs ``strptime`` (tens, on every round
    view); any other form still goes through ``FromJsonString``."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.utcoffset() != timedelta(0):
        out.FromJsonString(text)
        return
    since = when - _EPOCH
    out.seconds = since.days * 86_400 + since.seconds
    out.nanos = since.microseconds * 1000
