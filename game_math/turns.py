"""What a round awaits: its ``Phase``, the ``Turn`` (whose decision, of which kind) and the
``LegalAction`` list with the stakes each action takes."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from game_math.actions import ActionKind
from game_math.rules import Alert

__all__ = ["Decision", "LegalAction", "Phase", "Turn", "describe_stakes"]


class Phase(StrEnum):
    """Where a round stands: awaiting insurance decisions, in play, or over."""

    INSURANCE = "insurance"
    PLAY = "play"
    FINISHED = "finished"
    VOID = "void"


class Decision(StrEnum):
    """The decision a ``Turn`` awaits: insurance, even money, or a play action."""

    INSURANCE = "insurance"
    EVEN_MONEY = "even_money"
    PLAY = "play"


#: the action stakes a legal action lists
_STAKED_ACTIONS = frozenset({ActionKind.DOUBLE, ActionKind.SPLIT, ActionKind.INSURANCE})


class LegalAction(NamedTuple):
    """An action the round accepts now, with the extra stake it needs.

    For double and insurance, any amount in ``[min_stake, max_stake]`` is accepted when
    ``any_amount``; otherwise only the listed ``amounts``. ``alert`` is the advisory the action
    would raise (it never blocks).
    """

    action: ActionKind
    hand: int
    min_stake: int = 0
    max_stake: int = 0
    any_amount: bool = False
    amounts: tuple[int, ...] = ()
    alert: Alert | None = None

    def to_dict(self) -> dict[str, Any]:
        """The action as ``legal_actions`` JSON lists it, with the stakes it takes."""
        out: dict[str, Any] = {"action": str(self.action), "hand": self.hand}
        if self.action in _STAKED_ACTIONS:
            if self.any_amount:
                out["min_stake"], out["max_stake"] = self.min_stake, self.max_stake
            else:
                out["stakes"] = list(self.amounts)
        if self.alert:
            out["alert"] = str(self.alert)
        return out


class Turn(NamedTuple):
    """What the round awaits: its phase, and in play or insurance the hand and the decision."""

    phase: Phase
    hand: int | None  # the hand whose decision is awaited
    decision: Decision | None


def describe_stakes(la: LegalAction) -> str:
    """The stakes ``la`` takes, as an illegal action's message names them.

    >>> describe_stakes(LegalAction(ActionKind.DOUBLE, 0, 1, 500, any_amount=True))
    'between 1 and 500'
    >>> describe_stakes(LegalAction(ActionKind.INSURANCE, 0, 0, 500, amounts=(0, 500)))
    '0 or 500'
    """
    if la.any_amount:
        return f"between {la.min_stake} and {la.max_stake}"
    return " or ".join(str(a) for a in la.amounts)


def stakes_metadata(la: LegalAction, amount: object) -> dict[str, object]:
    """An illegal stake's error metadata: the hand, the action, the amount asked and the stakes
    ``la`` takes (``min_stake_minor``/``max_stake_minor``, or ``stakes_minor`` as "0,500").

    >>> stakes_metadata(LegalAction(ActionKind.INSURANCE, 0, 0, 500, amounts=(0, 500)), 7)
    {'hand_id': 0, 'action': 'insurance', 'amount_minor': 7, 'stakes_minor': '0,500'}
    """
    out: dict[str, object] = {"hand_id": la.hand, "action": str(la.action),
                              "amount_minor": amount}
    if la.any_amount:
        out["min_stake_minor"], out["max_stake_minor"] = la.min_stake, la.max_stake
    else:
        out["stakes_minor"] = ",".join(str(a) for a in la.amounts)
    return out
