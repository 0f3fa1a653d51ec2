"""The time checks (:class:`Times`): a record's times are RFC 3339 and no later than the audit's
clock (:data:`~rng_service.core.times.CLOCK_SKEW` allowed), a round's ``started_at`` is no later
than its ``finished_at`` and no earlier than the finish of the round before it in its shoe, and the
signing key's validity period (:class:`~rng_service.audit.options.AuditOptions` ``validity``)
covers the record's time. A round's are the named checks ``round.times`` (:class:`RoundTimes`)
and ``round.key-period`` (:class:`RoundKeyPeriod`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Final

from rng_service.audit.checks import Check
from rng_service.audit.failures import fail
from rng_service.audit.files import show
from rng_service.audit.options import AuditOptions
from rng_service.audit.round_checks import Pending, RoundCase
from rng_service.core.json_input import JsonObject
from rng_service.core.text import token
from rng_service.core.times import CLOCK_SKEW, parse_rfc3339
from rng_service.crypto.keys import ALWAYS_VALID

#: the longest RFC 3339 time (nine digits of fraction and a numeric zone) has 35 characters
_LONGEST_TIME: Final = 35
_remembered = lru_cache(maxsize=1024)(parse_rfc3339)


def _parse_time(text: str) -> datetime | None:
    """parse_rfc3339, a pure function, remembered: a round's ``finished_at`` is read by two
    checks and again as the next round's previous finish. The cache holds 1,024 times of at
    most 35 characters (a longer text is no time, and is not kept), so memory stays flat."""
    return _remembered(text) if len(text) <= _LONGEST_TIME else None


class Times:
    """The time checks: RFC 3339 format, order, not in the future, and within the signing key's
    validity period."""

    def __init__(self, options: AuditOptions) -> None:
        self.now = options.now or datetime.now(UTC)
        self.validity = options.validity
        #: the latest time a record may hold (the clock and its skew), worked out once
        self._latest = self.now + CLOCK_SKEW

    def read(self, doc: JsonObject, name: str) -> datetime:
        """The time ``name`` of ``doc``: an RFC 3339 time, not in the future."""
        text = doc.get_str(name)
        when = _parse_time(text)
        if when is None:
            fail(name, f"{show(text)} is not an RFC 3339 time (e.g. 2024-05-01T12:00:00.000Z)")
        if when > self._latest:
            fail(name, f"{show(text)} is in the future (the audit's clock: "
                  f"{self.now.isoformat(timespec='seconds')})")
        return when

    def check_round(self, doc: JsonObject, previous: Pending | None) -> datetime:
        """``started_at`` no later than ``finished_at``, and no earlier than the finish of the
        round before it in its shoe: a shoe deals its rounds one after another. Returns
        ``finished_at``, read (for :meth:`signed_at`)."""
        started, finished = self.read(doc, "started_at"), self.read(doc, "finished_at")
        if finished < started:
            fail("finished_at", f"{show(doc.get_str('finished_at'))} is before started_at "
                  f"{show(doc.get_str('started_at'))}")
        before = _parse_time(previous.finished_at) if previous is not None else None
        if previous is not None and before is not None and started < before:
            fail("started_at", f"{show(doc.get_str('started_at'))} is before the shoe's "
                  f"previous round {token(previous.round_id)} finished "
                  f"({show(previous.finished_at)}): a shoe deals its rounds one at a time")
        return finished

    def signed_within(self, kid: str, doc: JsonObject, name: str) -> None:
        """The key ``kid`` was valid at the record's time ``name`` (it signs when it is made)."""
        self.signed_at(kid, doc, name, self.read(doc, name))

    def signed_at(self, kid: str, doc: JsonObject, name: str, when: datetime) -> None:
        """:meth:`signed_within`, the time ``name`` read already (``when``, by :meth:`read`)."""
        validity = self.validity.get(kid, ALWAYS_VALID)
        if validity.valid_from is None and validity.valid_until is None:
            return  # a key valid at any time: no need to take the time to the second in UTC
        if not validity.covers(when):
            fail("signature.key_id", f"{kid} signed a record dated {show(doc.get_str(name))} "
                  f"({name}), but that key is {validity.describe()}")


class RoundTimes(Check[RoundCase]):
    """9. ``started_at`` and ``finished_at`` are RFC 3339, in that order, not in the future, and
    the round starts no earlier than the round before it in its shoe finished."""

    name = "round.times"

    def __init__(self, times: Times) -> None:
        self.times = times

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.finished = self.times.check_round(subject.doc, subject.place.previous)


class RoundKeyPeriod(Check[RoundCase]):
    """10. The signing key's validity period covers ``finished_at`` (``signature.key_id``)."""

    name = "round.key-period"

    def __init__(self, times: Times) -> None:
        self.times = times

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it. The time
        is the one ``round.times`` read, which runs first (else it is read here)."""
        finished = subject.finished
        if finished is None:
            self.times.signed_within(subject.kid, subject.doc, "finished_at")
        else:
            self.times.signed_at(subject.kid, subject.doc, "finished_at", finished)
