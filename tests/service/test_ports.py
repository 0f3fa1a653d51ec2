"""``utc_now`` writes the stored timestamps' one form (RFC 3339 UTC, always six fractional
digits, ``Z``): exactly what ``datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")`` wrote before
it, so stored rows sort and compare as they always did."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from rng_service.service.ports import utc_now, utc_stamp

STORED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\Z")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ns_of(instant: datetime, extra_ns: int = 0) -> int:
    return (instant - EPOCH) // timedelta(microseconds=1) * 1000 + extra_ns


@pytest.mark.parametrize("instant", [
    datetime(2026, 1, 2, 3, 4, 5, 0, tzinfo=UTC),  # no microseconds: still six digits
    datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(2027, 6, 15, 12, 0, 0, 7, tzinfo=UTC),
    datetime(2100, 2, 28, 0, 0, 0, 120_000, tzinfo=UTC),
    datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),
])
@pytest.mark.parametrize("extra_ns", [0, 999])  # below a microsecond: truncated
def test_a_stamp_is_the_strftime_form(instant: datetime, extra_ns: int) -> None:
    assert utc_stamp(ns_of(instant, extra_ns)) == instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_stamps_across_seconds_each_name_their_own_second() -> None:
    # the date and time of day are kept per second: crossing seconds, days and years (and going
    # back, as a clock may) each stamp still has its own
    start = datetime(2026, 12, 31, 23, 59, 58, 999_999, tzinfo=UTC)
    for step in [0, 1, 2, 1_000_000, 1, -3_000_000, 86_400_000_000, 3]:
        start += timedelta(microseconds=step)
        assert utc_stamp(ns_of(start)) == start.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_utc_now_is_now_in_the_stored_form() -> None:
    before = datetime.now(UTC)
    text = utc_now()
    after = datetime.now(UTC)
    assert STORED.match(text), text
    assert before <= datetime.fromisoformat(text) <= after
