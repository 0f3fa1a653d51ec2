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

The root and the kinds are defined in :mod:`game_math.errors`, the bottom layer, so the engine's
errors (``GameMathError`` and its subclasses) are Fairshoe errors too; this module re-exports them
beside the kind classes the service raises.
"""

from __future__ import annotations

from collections.abc import Mapping

# the root, the kinds and quote() live in game_math (the bottom layer) so the engine's errors are
# Fairshoe errors and its messages bound client text too; re-exported here for the service
from game_math.errors import MAX_ECHO_CHARS, ErrorKind, FairshoeError, quote

__all__ = [
    "MAX_ECHO_CHARS", "Conflict", "ErrorFamily", "ErrorKind", "FairshoeError", "IllegalState",
    "IntegrityFailure", "InvalidInput", "NotFound", "PermissionDenied", "Unavailable", "kind_of",
    "quote",
]


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
    """The kind of a Fairshoe error (the engine's included), None for anything else (a bug).

    >>> from game_math.errors import IllegalAction
    >>> kind_of(IllegalAction("cannot split"))
    <ErrorKind.ILLEGAL_STATE: 'illegal_state'>
    >>> kind_of(KeyError("x")) is None
    True
    """
    return exc.kind if isinstance(exc, FairshoeError) else None
