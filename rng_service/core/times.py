"""RFC 3339 times as records and key files write them, read strictly.

>>> parse_rfc3339("2024-05-01T12:00:00.123Z")
datetime.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=datetime.timezone.utc)
>>> parse_rfc3339("2024-05-01T14:00:00+02:00") == parse_rfc3339("2024-05-01T12:00:00Z")
True
>>> [parse_rfc3339(t) for t in ("2024-05-01 12:00:00Z", "2024-02-30T00:00:00Z", "yesterday")]
[None, None, None]
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

__all__ = ["parse_rfc3339", "utc_now", "utc_now_reference", "utc_stamp", "utc_stamp_reference"]

#: RFC 3339 section 5.6 date-time, a zone required, at most nanoseconds
#: how far in the future a signed time may lie before an audit calls it a lie (clocks differ)
CLOCK_SKEW: Final = timedelta(minutes=5)
_RFC3339: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))")


#: the shape the service writes its times in (``2024-05-01T12:00:00.123Z``, ASCII digits):
#: read by ``datetime.fromisoformat`` in C, which gives this shape the value the general path
#: gives it (tests/core/test_times.py compares them), at a fifth of its cost; an audit reads
#: two times a round record
_MILLIS_Z: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


def parse_rfc3339(text: str) -> datetime | None:
    """``text`` as an aware UTC datetime (fractions past microseconds dropped), or None if it is
    not an RFC 3339 date-time with a zone, or names no real time (February 30th, hour 24, a
    time that in UTC falls before year 1 or after 9999)."""
    if _MILLIS_Z.fullmatch(text):
        try:
            return datetime.fromisoformat(text)
        except ValueError:  # out of range: a month 13, February 30th
            return None
    return _parse_general(text)


def _parse_general(text: str) -> datetime | None:
    """:func:`parse_rfc3339` of any RFC 3339 date-time (the reference for its fast path)."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zulu, sign, zh, zm = match.groups()
    try:
        zone = UTC if zulu else timezone(
            (1 if sign == "+" else -1) * timedelta(hours=int(zh), minutes=int(zm)))
        when = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                        int((fraction or "0")[:6].ljust(6, "0")), tzinfo=zone)
    except ValueError:  # out of range: a month 13, a zone of 24 hours or more
        return None
    try:
        return when.astimezone(UTC)
    except OverflowError:  # in UTC before year 1 or after 9999: no time a datetime holds
        return None


# --- the stored timestamps' form --------------------------------------------------------------


def utc_now_reference() -> str:
    """:func:`utc_stamp_reference` of the time now (``time.time_ns``)."""
    return utc_stamp_reference(time.time_ns())


#: the second last stamped and its text (``YYYY-MM-DDTHH:MM:SS``), replaced as a whole
_second: list[tuple[int, str]] = [(0, "1970-01-01T00:00:00")]


def utc_stamp_reference(ns: int) -> str:
    """The stored form of ``ns`` nanoseconds since the epoch (microseconds truncated, as
    ``datetime.now`` truncates them): the text ``datetime.strftime("%Y-%m-%dT%H:%M:%S.%fZ")``
    writes (tests/service/test_ports.py). The date and time of day are formatted once per
    second. The reference of the C :func:`utc_stamp` (tests/core/test_times.py)."""
    seconds, micros = divmod(ns // 1000, 1_000_000)
    known = _second[0]  # one read: another thread may replace it meanwhile
    if known[0] != seconds:
        known = (seconds, datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
        _second[0] = known
    return f"{known[1]}.{micros:06d}Z"


utc_now: Callable[[], str]
_built_stamp: Callable[[int], str] | None
try:  # in C (_stamp.c): a few hundred instructions a stamp, not some 6,000; six a transition
    from rng_service.core._stamp import now as utc_now
    from rng_service.core._stamp import stamp as _built_stamp
except ImportError:  # a build without the extension
    utc_now, _built_stamp = utc_now_reference, None


def utc_stamp(ns: int) -> str:
    """:func:`utc_stamp_reference`'s text, in C where built; an ``ns`` past 64 bits (before
    1677, after 2262) or not an int is the reference's."""
    if _built_stamp is not None:
        try:
            return _built_stamp(ns)
        except (OverflowError, TypeError):
            pass
    return utc_stamp_reference(ns)
