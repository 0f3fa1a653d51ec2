"""One error tree for everything in ``rng_service``: each error says what kind of failure it is.

Every error the service or a command raises on purpose derives from :class:`FairshoeError` and
belongs to exactly one *kind*; the kind alone decides how a boundary reports it (the gRPC layer
maps kinds to status codes in one table, the CLI prints one line and exits 2). An error carries
the ``field`` it names (a dotted path into the request, e.g. ``hands[1].bet``) or a ``reason``
(a short UPPER_SNAKE code such as ``INSUFFICIENT_FUNDS`` that a client can switch on), never a
secret: messages are built from what the caller sent and what the service may publish. Its
``metadata`` holds the values a client needs to say the same thing in its own words and units
(``stake_minor``, ``balance_minor``, ``hand_id``): the gRPC layer sends them in the
``google.rpc.ErrorInfo``, so no client has to parse a message.

>>> err = InvalidInput("hands[0].bet", "must be a positive integer, got -5")
>>> str(err)
'hands[0].bet: must be a positive integer, got -5'
>>> err.kind, err.field
(<ErrorKind.INVALID_INPUT: 'invalid_input'>, 'hands[0].bet')
>>> isinstance(IllegalState("round is finished", reason="ROUND_FINISHED"), FairshoeError)
True

``game_math`` keeps its own root (:class:`game_math.errors.GameMathError`) with the same shape, so
the pure engine does not depend on this package; :func:`kind_of` classifies both trees.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import ClassVar, Self

# quote() lives in game_math (the bottom layer) so the engine's messages bound client text too;
# it is re-exported here as the service's one way to echo client text
from game_math.errors import MAX_ECHO_CHARS, GameMathError, IllegalAction, ShoeExhausted, quote

__all__ = [
    "MAX_ECHO_CHARS", "Conflict", "ErrorFamily", "ErrorKind", "FairshoeError", "IllegalState",
    "IntegrityFailure", "InvalidInput", "NotFound", "PermissionDenied", "Unavailable", "kind_of",
    "quote",
]


class ErrorKind(StrEnum):
    """What went wrong, independent of the transport that reports it."""

    INVALID_INPUT = "invalid_input"  # the request itself is malformed or out of range
    NOT_FOUND = "not_found"  # it names something that does not exist (for this caller)
    ILLEGAL_STATE = "illegal_state"  # well-formed, but not allowed in the current state
    CONFLICT = "conflict"  # lost a race or saw a stale version: retry with fresh state
    INTEGRITY = "integrity"  # stored or signed data failed a check: never the client's fault
    UNAVAILABLE = "unavailable"  # a dependency (RNG self-test, database) is not usable now
    PERMISSION_DENIED = "permission_denied"  # the caller's identity may not do this


class FairshoeError(Exception):
    """Base of every deliberate error in ``rng_service``."""

    kind: ClassVar[ErrorKind] = ErrorKind.INVALID_INPUT
    #: the ``reason`` when the raiser gives none; a subclass names its own stable code
    reason_code: ClassVar[str | None] = None

    def __init__(self, message: str, *, field: str | None = None, reason: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.detail = message
        self.field = field
        self.reason = reason if reason is not None else self.reason_code
        self.metadata: dict[str, str] = {k: str(v) for k, v in (metadata or {}).items()}

    def under(self, parent: str) -> Self:
        """This error with its field moved under ``parent``, the request field that wrapped the
        data checked (``shoe[2]`` under ``script_json`` is ``script_json.shoe[2]``); returns self.

        >>> str(InvalidInput("shoe[2]", "bad card").under("script_json"))
        'script_json.shoe[2]: bad card'
        """
        self.field = f"{parent}.{self.field}" if self.field else parent
        self.args = (f"{self.field}: {self.detail}",)
        return self


class InvalidInput(FairshoeError):
    """Malformed or out-of-range input; ``field`` names the offending part."""

    kind = ErrorKind.INVALID_INPUT

    def __init__(self, field: str | None, message: str, *, reason: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(message, field=field, reason=reason, metadata=metadata)


class NotFound(FairshoeError):
    """The named thing does not exist (or is not visible to the caller)."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, field: str | None, message: str, *, reason: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(message, field=field, reason=reason, metadata=metadata)


class IllegalState(FairshoeError):
    """Well-formed but refused in the current state; ``reason`` is a stable code for clients."""

    kind = ErrorKind.ILLEGAL_STATE

    reason_code = "ILLEGAL_STATE"

    def __init__(self, message: str, *, reason: str | None = None, field: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(message, field=field, reason=reason, metadata=metadata)


class Conflict(FairshoeError):
    """A concurrent change won, or the caller's version is stale: fetch and retry."""

    kind = ErrorKind.CONFLICT

    reason_code = "CONFLICT"

    def __init__(self, message: str, *, reason: str | None = None, field: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(message, field=field, reason=reason, metadata=metadata)


class IntegrityFailure(FairshoeError):
    """Data failed a cryptographic or consistency check (a signature, a commitment, a log)."""

    kind = ErrorKind.INTEGRITY

    reason_code = "INTEGRITY"

    def __init__(self, message: str, *, reason: str | None = None, field: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(message, field=field, reason=reason, metadata=metadata)


class Unavailable(FairshoeError):
    """A dependency cannot serve now (RNG self-test failed, database unreachable)."""

    kind = ErrorKind.UNAVAILABLE

    reason_code = "UNAVAILABLE"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message, reason=reason)


class PermissionDenied(FairshoeError):
    """The authenticated caller may not make this call (an auditor writing, an operator naming
    another operator), or its certificate names no identity the service knows."""

    kind = ErrorKind.PERMISSION_DENIED

    reason_code = "PERMISSION_DENIED"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message, reason=reason)


class ErrorFamily(FairshoeError):
    """Base of one module's errors when they differ in kind (``ShoeError``, ``DrbgError``...).

    A member derives from its family and from its kind class, e.g.
    ``class ShoeFinished(ShoeError, IllegalState)``, so ``except ShoeError`` and the kind-based
    boundaries both work; every member takes the message first, as the family always did.
    """

    def __init__(self, message: str, *, field: str | None = None, reason: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        FairshoeError.__init__(self, message, field=field, reason=reason, metadata=metadata)


def kind_of(exc: BaseException) -> ErrorKind | None:
    """The kind of a Fairshoe or game-math error, None for anything else (a bug).

    >>> from game_math.errors import IllegalAction
    >>> kind_of(IllegalAction("cannot split"))
    <ErrorKind.ILLEGAL_STATE: 'illegal_state'>
    >>> kind_of(KeyError("x")) is None
    True
    """
    if isinstance(exc, FairshoeError):
        return exc.kind
    # game_math is below this package and keeps its own root: classified here, in one place
    if isinstance(exc, IllegalAction | ShoeExhausted):
        return ErrorKind.ILLEGAL_STATE
    if isinstance(exc, GameMathError):
        return ErrorKind.INVALID_INPUT
    return None
