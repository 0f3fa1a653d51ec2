"""Typed errors of the engine. Each names what is wrong; none leaves a round changed."""

from __future__ import annotations


class GameMathError(Exception):
    """Base of every error raised by ``game_math``."""


class RulesError(GameMathError):
    """A rules file or rules object that cannot be played; ``key`` names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class BetError(GameMathError):
    """Bets that cannot start a round; ``field`` names the offending bet (e.g. ``hands[1].bet``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class IllegalAction(GameMathError):
    """An action the round refuses in its current state; the message says why."""


class ShoeExhausted(GameMathError):
    """The shoe ran out of cards: a game fault that voids the round."""
