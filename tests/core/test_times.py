"""RFC 3339 times read strictly: the fast path for the service's own shape gives what the
general path gives, out-of-range fields included."""

from __future__ import annotations

from datetime import UTC

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rng_service.core import times
from rng_service.core.times import (
    _parse_general,
    parse_rfc3339,
    utc_now,
    utc_now_reference,
    utc_stamp,
    utc_stamp_reference,
)

#: fields around and beyond their ranges (month 13, February 30th, hour 24, second 60, year 0)
_fields = st.tuples(st.sampled_from([0, 1, 1970, 2024, 2026, 9999]) | st.integers(0, 9999),
                    st.integers(0, 99), st.integers(0, 99), st.integers(0, 99),
                    st.integers(0, 99), st.integers(0, 99), st.integers(0, 999))


@settings(max_examples=2000, deadline=None)
@given(_fields)
@example((2024, 2, 29, 23, 59, 59, 999))
@example((2023, 2, 29, 0, 0, 0, 0))
@example((2024, 5, 1, 24, 0, 0, 0))
@example((0, 1, 1, 0, 0, 0, 0))
def test_the_services_shape_reads_as_the_general_path_reads_it(
        fields: tuple[int, int, int, int, int, int, int]) -> None:
    year, month, day, hour, minute, second, millis = fields
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"
    fast, general = parse_rfc3339(text), _parse_general(text)
    assert fast == general
    if fast is not None and general is not None:
        assert fast.tzinfo is general.tzinfo is UTC
        assert (fast.year, fast.microsecond) == (year, millis * 1000)


def test_other_shapes_take_the_general_path() -> None:
    # lower-case separators, other fractions, offsets and non-ASCII digits are RFC 3339's too
    # (\d matches any decimal digit), and a space is not: each reads as the general path reads it
    for text in ("2024-05-01t12:00:00.123z", "2024-05-01T12:00:00Z", "2024-05-01T12:00:00.5Z",
                 "2024-05-01T14:00:00.123+02:00", "2024-05-01T12:00:00.123456789Z",
                 "٢٠٢٤-05-01T12:00:00.123Z", "2024-05-01 12:00:00.123Z", "2024-05-01T12:00:00.123"):
        assert parse_rfc3339(text) == _parse_general(text), text
    assert parse_rfc3339("2024-05-01 12:00:00.123Z") is None
    offset = parse_rfc3339("2024-05-01T14:00:00.123+02:00")
    assert offset == parse_rfc3339("2024-05-01T12:00:00.123Z")


def test_a_time_whose_utc_falls_outside_the_calendar_names_no_time() -> None:
    """Year 1 just past midnight east of UTC, or 9999's last second west of it: the fields are
    in range, but the time in UTC is before year 1 or after 9999, which a datetime cannot hold.
    Read as no time (as February 30th is), never an OverflowError: a record holding one is a
    failing record, not an audit that stops with a traceback."""
    for text in ("0001-01-01T00:00:00+01:00", "0001-01-01T00:59:59.5+01:00",
                 "9999-12-31T23:59:59-00:01", "9999-12-31T23:00:00.123-05:00"):
        assert parse_rfc3339(text) is None, text
    assert parse_rfc3339("0001-01-01T01:00:00+01:00") == parse_rfc3339("0001-01-01T00:00:00Z")
    assert parse_rfc3339("9999-12-31T23:59:59+00:00") is not None


# --- the stored timestamps' form: the C stamp against its Python reference ----------------------

_INT64 = 2**63


def test_the_stamp_is_built_in_c() -> None:
    # a build that lost the extension would pass the comparisons below by comparing the
    # reference with itself
    assert times._built_stamp is not None
    assert type(times.utc_now) is type(len) and type(times._built_stamp) is type(len)


@settings(max_examples=3000, deadline=None)
@given(st.integers(-_INT64, _INT64 - 1)
       | st.integers(0, 4_102_444_800 * 10**9)  # 1970 to 2100, where the service's clocks are
       | st.integers(-86_400 * 10**9, 86_400 * 10**9))  # about the epoch: negative floors
@example(0)
@example(-1)
@example(-1000)
@example(-1001)
@example(_INT64 - 1)
@example(-_INT64)
@example(951_782_400 * 10**9 - 1)  # 2000-02-28T23:59:59.999999999: a leap century's day
@example(951_868_800 * 10**9)  # 2000-03-01
@example(4_107_456_000 * 10**9)  # 2100-03-01, not a leap year
def test_the_c_stamp_is_the_references(ns: int) -> None:
    assert utc_stamp(ns) == times._built_stamp(ns) == utc_stamp_reference(ns)  # type: ignore[misc]


@pytest.mark.parametrize("ns", [-_INT64 - 1, _INT64, -62_135_596_800 * 10**9,
                                253_402_300_799 * 10**9 + 999_999_999, True])
def test_past_64_bits_the_stamp_is_the_references(ns: int) -> None:
    assert utc_stamp(ns) == utc_stamp_reference(ns)


def test_the_c_clock_is_the_references() -> None:
    before = utc_now_reference()
    now = utc_now()
    after = utc_now_reference()
    assert before <= now <= after
    assert len(now) == 27 and now.endswith("Z")
