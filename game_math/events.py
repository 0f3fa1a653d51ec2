"""What happened in a round: one frozen record per kind of event (``CardDealt``, ...).

``Round`` appends them as it deals, takes decisions and settles. ``to_dict`` is the JSON of the
replay output's ``events``: its members and their order are a published format, so each record
writes its own.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, TypeAlias, TypeVar

from game_math.actions import ActionKind
from game_math.cards import CODE_OF, Card
from game_math.rules import Alert
from game_math.table import Outcome

__all__ = [
    "DEALER", "AlertRaised", "CardDealt", "DealerPeeked", "DecisionMade", "Event", "EventKind",
    "HandSplit", "HoleCardRevealed", "RoundVoided", "WagerSettled",
]

DEALER = -1  # the ``hand`` of a dealer card event


class EventKind(StrEnum):
    """The ``kind`` of each event record, as its JSON names it."""

    CARD = "card"
    REVEAL = "reveal"
    DECISION = "decision"
    SPLIT = "split"
    PEEK = "peek"
    SETTLE = "settle"
    ALERT = "alert"
    VOID = "void"


_T = TypeVar("_T")


def _quick_init(cls: type[_T]) -> type[_T]:
    """Gives a frozen, slotted dataclass an ``__init__`` that fills its slots directly.

    The generated frozen ``__init__`` sets each field through ``object.__setattr__``; setting the
    slots through their descriptors leaves everything else (frozen instances, equality,
    ``replace``, the signature) as ``dataclass`` made it, and is kept because it is worth it:
    ``bench/bench_engine_tricks.py`` measures an event made this way and by ``dataclass``'s own
    ``__init__`` beside a one-hand round, and found it about twice as quick, 5-7 % of the round
    (docs/performance.md, 3 December 2026). Remove it when that bench says it no longer pays.
    """
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]  # a dataclass, by use
    params = ", ".join(
        name if f.default is MISSING else f"{name}=_default_{name}"
        for name, f in zip(names, fields(cls), strict=True)  # type: ignore[arg-type]
    )
    scope: dict[str, Any] = {f"_set_{name}": getattr(cls, name).__set__ for name in names}
    scope.update({f"_default_{f.name}": f.default for f in fields(cls)})  # type: ignore[arg-type]
    body = "".join(f"\n    _set_{name}(self, {name})" for name in names)
    exec(f"def __init__(self, {params}):{body}", scope)  # as dataclasses itself builds __init__
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _hand_json(hand: int) -> int | str:
    return "dealer" if hand == DEALER else hand


@_quick_init
@dataclass(frozen=True, slots=True)
class CardDealt:
    """A card to a hand, or to the dealer (``hand == DEALER``); ``card`` None: a hole card whose
    identity the public view hides until it is revealed."""

    kind: ClassVar[EventKind] = EventKind.CARD
    hand: int
    card: Card | None
    face_up: bool

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        out: dict[str, Any] = {"kind": "card", "hand": _hand_json(self.hand)}
        if self.card is not None:
            out["card"] = CODE_OF[self.card]
        out["face_up"] = self.face_up
        return out


@_quick_init
@dataclass(frozen=True, slots=True)
class HoleCardRevealed:
    """The dealer's hole card is turned face up."""

    kind: ClassVar[EventKind] = EventKind.REVEAL
    card: Card
    hand: ClassVar[int] = DEALER
    face_up: ClassVar[bool] = True

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        return {"kind": "reveal", "hand": "dealer", "card": CODE_OF[self.card], "face_up": True}


@_quick_init
@dataclass(frozen=True, slots=True)
class DecisionMade:
    """A player's decision on ``hand``: its stake (double, split, insurance) and, for even money,
    whether it was accepted."""

    kind: ClassVar[EventKind] = EventKind.DECISION
    hand: int
    action: ActionKind
    amount: int | None = None
    accept: bool | None = None

    @property
    def note(self) -> str | None:
        """``accept`` or ``decline`` for an even-money decision, else None."""
        return None if self.accept is None else ("accept" if self.accept else "decline")

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        out: dict[str, Any] = {"kind": "decision", "hand": self.hand, "action": str(self.action)}
        if self.amount is not None:
            out["amount"] = self.amount
        if self.accept is not None:
            out["note"] = self.note
        return out


@_quick_init
@dataclass(frozen=True, slots=True)
class HandSplit:
    """``hand`` was split: its second card starts ``new_hand``, staked ``amount``."""

    kind: ClassVar[EventKind] = EventKind.SPLIT
    hand: int
    new_hand: int
    amount: int

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        return {"kind": "split", "hand": self.hand, "amount": self.amount,
                "note": f"new hand {self.new_hand}"}


@_quick_init
@dataclass(frozen=True, slots=True)
class DealerPeeked:
    """The dealer checked the hole card for blackjack."""

    kind: ClassVar[EventKind] = EventKind.PEEK
    blackjack: bool
    hand: ClassVar[int] = DEALER

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        return {"kind": "peek", "hand": "dealer",
                "outcome": "blackjack" if self.blackjack else "none"}


@_quick_init
@dataclass(frozen=True, slots=True)
class WagerSettled:
    """Wager ``wager`` (on ``hand``, or None for a round side bet) returned ``returned``;
    ``line`` is the paying side-bet line, if any."""

    kind: ClassVar[EventKind] = EventKind.SETTLE
    hand: int | None
    wager: int
    outcome: Outcome
    returned: int
    line: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        out: dict[str, Any] = {"kind": "settle"}
        if self.hand is not None:
            out["hand"] = self.hand
        out.update(wager=self.wager, outcome=str(self.outcome), returned=self.returned)
        if self.line is not None:
            out["note"] = self.line
        return out


@_quick_init
@dataclass(frozen=True, slots=True)
class AlertRaised:
    """An advisory on a decision just taken (it never blocks)."""

    kind: ClassVar[EventKind] = EventKind.ALERT
    hand: int
    action: ActionKind
    alert: Alert

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        return {"kind": "alert", "hand": self.hand, "action": str(self.action),
                "note": str(self.alert)}


@_quick_init
@dataclass(frozen=True, slots=True)
class RoundVoided:
    """A game fault voided the round: every stake is returned."""

    kind: ClassVar[EventKind] = EventKind.VOID
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON object."""
        return {"kind": "void", "note": self.reason}


#: every event record of a round
Event: TypeAlias = (CardDealt | HoleCardRevealed | DecisionMade | HandSplit | DealerPeeked
                    | WagerSettled | AlertRaised | RoundVoided)
