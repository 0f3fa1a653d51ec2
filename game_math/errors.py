"""Typed errors of the engine. Each names what is wrong; none leaves a round changed.

They have the shape of ``rng_service.core.errors.FairshoeError`` (a ``field`` or a ``reason``, and
the message without the field as ``detail``) without this package depending on the service;
``rng_service.core.errors.kind_of`` classifies them.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import ClassVar, Final

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


class GameMathError(Exception):
    """Base of every error raised by ``game_math``.

    ``field`` names the offending part of the input (a dotted path such as ``hands[1].bet``),
    ``reason`` is a stable UPPER_SNAKE code a client can switch on; ``detail`` is the message
    without the field; ``metadata`` the values the message is made of (``stake_minor``,
    ``hand_id``), as text, for a client that says it in its own words and units.
    """

    reason_code: ClassVar[str | None] = None

    def __init__(self, message: str, *, field: str | None = None, reason: str | None = None,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.detail = message
        self.field = field
        self.reason = reason if reason is not None else self.reason_code
        self.metadata: dict[str, str] = {k: str(v) for k, v in (metadata or {}).items()}


class RulesError(GameMathError):
    """A rules file or rules object that cannot be played; ``key`` names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message, field=key)
        self.key = key


class BetError(GameMathError):
    """Bets that cannot start a round; ``field`` names the offending bet (e.g. ``hands[1].bet``)."""

    field: str

    def __init__(self, field: str, message: str, *,
                 metadata: Mapping[str, object] | None = None) -> None:
        super().__init__(message, field=field, metadata=metadata)


class IllegalAction(GameMathError):
    """An action the round refuses in its current state; the message says why."""

    reason_code = "ACTION_REFUSED"


class ShoeExhausted(GameMathError):
    """The shoe ran out of cards: a game fault that voids the round (the one class for this, used
    by the engine and by ``rng_service.rng.shoe``)."""

    reason_code = "SHOE_EXHAUSTED"
