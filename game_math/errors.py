"""The root of every deliberate error in Fairshoe, and the engine's own errors.

:class:`FairshoeError` is the one root of both packages: it lives here, in the bottom layer, so
the pure engine's errors derive from it without ``game_math`` depending on the service.
``rng_service.core.errors`` re-exports it with the service's kind classes. Every error belongs to
exactly one :class:`ErrorKind`, which alone decides how a boundary reports it; it carries the
``field`` it names (a dotted path such as ``hands[1].bet``) or a ``reason`` (a stable
UPPER_SNAKE code), and the message without the field as ``detail``.

>>> err = BetError("hands[1].bet", "must be at least 100")
>>> isinstance(err, FairshoeError), err.kind, err.field
(True, <ErrorKind.INVALID_INPUT: 'invalid_input'>, 'hands[1].bet')
>>> IllegalAction("cannot split").kind
<ErrorKind.ILLEGAL_STATE: 'illegal_state'>
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from enum import StrEnum
from typing import ClassVar, Final, Self

# Client text echoed in a message is quoted and cut to this many characters: an error must stay
# short whatever the client sent (gRPC metadata is limited to 16 KiB in all).
MAX_ECHO_CHARS: Final = 80

# reprlib bounds both depth and width, so a deeply nested or huge client value is shown in bounded
# time and stack (builtin repr recurses once per level and overflows on deep JSON)
_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = _REPR.maxset = 4
_REPR.maxstring = _REPR.maxlong = _REPR.maxother = 40


def quote(text: object, limit: int = MAX_ECHO_CHARS) -> str:
    """Client text or a client value for an error message: repr-quoted (no raw control characters
    or surrogates), nested values shown a few levels deep, cut to about ``limit`` characters.

    >>> quote("abc")
    "'abc'"
    >>> quote("x" * 200, limit=10)
    "'xxxxxxxxxx'... (200 chars)"
    >>> quote("a\\ud800b")
    "'a\\\\ud800b'"
    >>> quote([[[[[1]]]]])
    '[[[[...]]]]'
    """
    if isinstance(text, str) and len(text) > limit:
        return f"{text[:limit]!r}... ({len(text)} chars)"
    try:
        shown = repr(text) if isinstance(text, str) else _REPR.repr(text)
    except (ValueError, RecursionError):  # an int too long to print (Python caps at 4300 digits)
        shown = f"<{type(text).__name__}>"
    return shown if len(shown) <= limit + 2 else shown[: limit + 2] + "..."


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
    """Base of every deliberate error in Fairshoe (``game_math`` and ``rng_service``).

    ``field`` names the offending part of the input (a dotted path such as ``hands[1].bet``),
    ``reason`` is a stable UPPER_SNAKE code a client can switch on; ``detail`` is the message
    without the field; ``metadata`` the values the message is made of (``stake_minor``,
    ``hand_id``), as text, for a client that says it in its own words and units.
    """

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
        """
        self.field = f"{parent}.{self.field}" if self.field else parent
        self.args = (f"{self.field}: {self.detail}",)
        return self


class GameMathError(FairshoeError):
    """Base of every error raised by ``game_math``: input the engine cannot play (its kind),
    unless a subclass says otherwise."""


class RulesError(GameMathError):
    """A rules file or rules object that cannot be played; ``key`` names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message, field=key)
        self.key = key


class BetError(GameMathError):
    """Bets that cannot start a round; ``field`` names the offending bet as a replay script
    writes it (e.g. ``hands[1].bet``, ``side_bets.snap``).

    ``hand`` and ``side_bet`` say which bet that is apart from any one way of writing it: the
    hand's index (None: a bet of the round) and the side bet's name (None: the hand's own
    bet); both None for the bets as a whole (``hands``, ``level``, ``balance``). A caller that
    names its bets otherwise (the API's ``hands[1].bet_minor``) names the field from these,
    rather than by rewriting ``field``.

    >>> err = BetError("hands[1].side_bets.snap", "too small", hand=1, side_bet="snap")
    >>> err.field, err.hand, err.side_bet
    ('hands[1].side_bets.snap', 1, 'snap')
    """

    field: str

    def __init__(self, field: str, message: str, *,
                 metadata: Mapping[str, object] | None = None, hand: int | None = None,
                 side_bet: str | None = None) -> None:
        super().__init__(message, field=field, metadata=metadata)
        self.hand = hand
        self.side_bet = side_bet


class IllegalAction(GameMathError):
    """An action the round refuses in its current state; the message says why."""

    kind = ErrorKind.ILLEGAL_STATE
    reason_code = "ACTION_REFUSED"


class ShoeExhausted(GameMathError):
    """The shoe ran out of cards: a game fault that voids the round (the one class for this, used
    by the engine and by ``rng_service.rng.shoe``)."""

    kind = ErrorKind.ILLEGAL_STATE
    reason_code = "SHOE_EXHAUSTED"
