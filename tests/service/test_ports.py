"""``utc_now`` writes the stored timestamps' one form (RFC 3339 UTC, always six fractional
digits, ``Z``): exactly what ``strftime("%Y-%m-%dT%H:%M:%S.%fZ")`` wrote before it, so stored
rows sort and compare as they always did."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from rng_service.service import ports

STORED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\Z")


class _Clock(datetime):
    """``datetime`` whose ``now`` is the instant the test sets."""

    instant = datetime(2026, 1, 1, tzinfo=UTC)

    @classmethod
    def now(cls, tz: object = None) -> datetime:  # type: ignore[override]
        assert tz is UTC
        return cls.instant


@pytest.mark.parametrize("instant", [
    datetime(2026, 1, 2, 3, 4, 5, 0, tzinfo=UTC),  # no microseconds: still six digits
    datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(2027, 6, 15, 12, 0, 0, 7, tzinfo=UTC),
    datetime(2100, 2, 28, 0, 0, 0, 120_000, tzinfo=UTC),
])
def test_utc_now_is_the_strftime_form(instant: datetime, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    monkeypatch.setattr(_Clock, "instant", instant)
    monkeypatch.setattr(ports, "datetime", _Clock)
    assert ports.utc_now() == instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_utc_now_is_now_in_the_stored_form() -> None:
    before = datetime.now(UTC)
    text = ports.utc_now()
    after = datetime.now(UTC)
    assert STORED.match(text), text
    assert before - timedelta(microseconds=1) <= datetime.fromisoformat(text) <= after
