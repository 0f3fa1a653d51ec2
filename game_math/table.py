"""What a round has on the table: its hands, its wagers, and how each ended (``Outcome``).

``Round`` alone changes them; their ``to_dict`` is the JSON of the replay output's and the round
record's ``hands`` and ``wagers``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from game_math.cards import VALUE_OF, Card, card_codes

__all__ = ["DOUBLE_WAGER", "INSURANCE_WAGER", "MAIN", "SPLIT_WAGER", "Hand", "Outcome", "Wager"]


class Outcome(StrEnum):
    """How a hand or a wager ended (``BLACKJACK`` and ``BUST`` are hand outcomes only)."""

    WIN = "win"
    LOSE = "lose"
    PUSH = "push"
    BLACKJACK = "blackjack"
    BUST = "bust"
    EVEN_MONEY = "even_money"
    VOID = "void"


#: wager kinds of the engine's own wagers (side-bet wagers are named after their bet)
MAIN, SPLIT_WAGER, DOUBLE_WAGER, INSURANCE_WAGER = "main", "split", "double", "insurance"


class Wager:
    """One stake on the table and what it returned (``returned`` None while unsettled)."""

    __slots__ = ("hand", "id", "kind", "line", "outcome", "returned", "staked")

    def __init__(self, wager_id: int, kind: str, hand: int | None, staked: int) -> None:
        self.id = wager_id
        self.kind = kind  # main | split | double | insurance | <side bet name>
        self.hand = hand
        self.staked = staked
        self.returned: int | None = None
        self.outcome: Outcome | None = None
        self.line: str | None = None  # the paying side-bet line

    def to_dict(self) -> dict[str, Any]:
        """The wager as the replay output and the round record write it."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "staked": self.staked}
        if self.hand is not None:
            out["hand"] = self.hand
        out["returned"] = self.returned
        out["outcome"] = None if self.outcome is None else str(self.outcome)
        if self.line is not None:
            out["line"] = self.line
        return out


class Hand:
    """A player hand. ``hard`` counts aces as 1; ``soft`` totals are derived."""

    __slots__ = (
        "bet", "cards", "done", "double_wager", "from_split", "hard", "has_ace", "id",
        "main_wager", "natural", "outcome", "seat", "split_aces",
    )

    def __init__(self, hand_id: int, seat: int, bet: int, main_wager: int) -> None:
        self.id = hand_id
        self.seat = seat
        self.bet = bet
        self.cards: list[Card] = []
        self.hard = 0
        self.has_ace = False
        self.main_wager = main_wager
        self.double_wager: int | None = None
        self.from_split = False
        self.split_aces = False
        self.natural = False
        self.done = False
        self.outcome: Outcome | None = None

    def add(self, card: Card) -> None:
        """Gives the hand ``card``."""
        self.cards.append(card)
        v = VALUE_OF[card]
        self.hard += v
        if v == 1:
            self.has_ace = True

    @property
    def total(self) -> int:
        """The best total, an ace counted as 11 where that does not bust."""
        if self.has_ace and self.hard <= 11:
            return self.hard + 10
        return self.hard

    @property
    def soft(self) -> bool:
        """Whether ``total`` counts an ace as 11."""
        return self.has_ace and self.hard <= 11

    def to_dict(self) -> dict[str, Any]:
        """The hand as the replay output and the round record write it."""
        return {
            "id": self.id, "seat": self.seat, "cards": card_codes(self.cards),
            "total": self.total, "soft": self.soft, "blackjack": self.natural,
            "from_split": self.from_split,
            "outcome": None if self.outcome is None else str(self.outcome),
        }
