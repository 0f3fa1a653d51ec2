"""How the audit's checks fail: a check that failed (:class:`AuditFailure`, raised by :func:`fail`,
by the typed reader :class:`Doc` and by :func:`exact_members`), a record that cannot be checked yet
(:class:`Unrevealed`), and a path that cannot be audited at all (:class:`AuditInputError`).

Every check module raises these; the auditor (:mod:`rng_service.audit.verifier`) turns them into
findings, so nothing raised by a bad record escapes the audit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from rng_service.core.errors import IntegrityFailure, NotFound
from rng_service.core.json_input import JsonObject


class AuditFailure(IntegrityFailure):
    """A check that failed: ``field`` names where, the message says how."""

    reason_code = "AUDIT_CHECK_FAILED"

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message, field=field)
        # the messages continue the field as a sentence ("rules_digest does not match ...")
        self.args = (f"{field} {message}" if field else message,)
        self.message = message


class AuditInputError(NotFound):
    """A path that does not exist or cannot be read."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


def fail(field: str | None, message: str) -> NoReturn:
    """Fail the check: raise :class:`AuditFailure` on ``field``."""
    raise AuditFailure(field, message)


class Doc(JsonObject):
    """The one typed JSON reader (:mod:`rng_service.core.json_input`), failing a record: a
    missing member or a wrong type is an :class:`AuditFailure` naming the member's path."""

    error = AuditFailure


class Unrevealed(Exception):
    """The round's shoe has not been revealed (yet); ``in_play``: its commitment is known, so the
    shoe is still in play rather than its reveal missing."""

    def __init__(self, message: str, *, in_play: bool = False) -> None:
        super().__init__(message)
        self.in_play = in_play


def exact_members(payload: Mapping[str, Any], members: frozenset[str], what: str) -> None:
    """Fail on the first member of ``payload`` (sorted) that a ``what`` does not have."""
    extra = sorted(set(payload) - members)
    if extra:
        fail(extra[0], f"is not a member of a {what}")
