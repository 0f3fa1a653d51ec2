"""What a player puts into a round: the bets that open it and the actions that play it.

Both are written to and read from JSON the same way everywhere (replay scripts, round records,
saved rounds): ``HandBet.to_json``/``HandBet.from_json`` and ``Action.to_json``/
``action_from_json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from game_math.errors import BetError, quote

__all__ = ["ACTIONS", "PLAY_ACTIONS", "Action", "ActionKind", "HandBet", "action_from_json"]


class ActionKind(StrEnum):
    """What a player may do: the four play actions and the two insurance decisions."""

    HIT = "hit"
    STAND = "stand"
    DOUBLE = "double"
    SPLIT = "split"
    INSURANCE = "insurance"
    EVEN_MONEY = "even_money"


ACTIONS = tuple(ActionKind)
PLAY_ACTIONS = (ActionKind.HIT, ActionKind.STAND, ActionKind.DOUBLE, ActionKind.SPLIT)
_ACTION_OF: dict[str, ActionKind] = {str(a): a for a in ActionKind}
#: an action without an amount or accept is written as its bare name
_BARE_ACTIONS = frozenset({ActionKind.HIT, ActionKind.STAND, ActionKind.SPLIT})


@dataclass(frozen=True)
class HandBet:
    """The initial bet on one hand, with that hand's side bets (name -> stake).

    Written to and read from JSON (replay scripts, round records, saved rounds) as
    ``{"bet": N, "side_bets": {name: stake}}``:

    >>> HandBet.from_json({"bet": 1000, "side_bets": {"perfect_pairs": 100}}, "hands[0]")
    HandBet(bet=1000, side_bets={'perfect_pairs': 100})
    >>> HandBet(500).to_json()
    {'bet': 500, 'side_bets': {}}
    >>> HandBet.from_json({"bet": "ten"}, "hands[1]")
    Traceback (most recent call last):
    ...
    game_math.errors.BetError: hands[1].bet: must be an integer (minor units), got 'ten'
    """

    bet: int
    side_bets: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"bet": ..., "side_bets": {...}}``, what ``from_json`` reads back."""
        return {"bet": self.bet, "side_bets": dict(self.side_bets)}

    @classmethod
    def from_json(cls, item: Any, where: str) -> HandBet:
        """The bet ``item`` describes (``side_bets`` may be left out); BetError naming the part
        of ``where`` (e.g. ``hands[0]``) at fault. Stakes are checked by ``Round``, not here."""
        if not isinstance(item, Mapping) or set(item) - {"bet", "side_bets"}:
            raise BetError(where, 'must be {"bet": N, "side_bets": {...}}')
        bet = item.get("bet")
        side = item.get("side_bets", {})
        if not isinstance(bet, int) or isinstance(bet, bool):
            raise BetError(f"{where}.bet", f"must be an integer (minor units), got {quote(bet)}")
        if not isinstance(side, Mapping):
            raise BetError(f"{where}.side_bets", "must be an object of name: stake")
        return cls(bet, dict(side))


@dataclass(frozen=True)
class Action:
    """A player decision. ``amount``: double or insurance stake; ``accept``: even money."""

    kind: ActionKind
    amount: int | None = None
    accept: bool | None = None

    def __post_init__(self) -> None:
        # a kind given by name is stored as its ActionKind; an unknown one is kept for ``act``
        # to refuse (IllegalAction), as it refuses any other action it cannot take
        kind = _ACTION_OF.get(self.kind)
        if kind is not None and type(self.kind) is not ActionKind:
            object.__setattr__(self, "kind", kind)

    def to_json(self) -> Any:
        """The action as a replay script writes it; ``action_from_json`` reads it back.

        >>> Action(ActionKind.HIT).to_json(), Action(ActionKind.DOUBLE, 500).to_json()
        ('hit', {'action': 'double', 'amount': 500})
        """
        if self.kind in _BARE_ACTIONS and self.amount is None:
            return str(self.kind)
        out: dict[str, Any] = {"action": str(self.kind)}
        if self.amount is not None:
            out["amount"] = self.amount
        if self.accept is not None:
            out["accept"] = self.accept
        return out


#: each action as its bare name reads, made once: an ``Action`` is frozen, so the rounds that read
#: "hit" share one (making it was about half of reading it, and the audit and a stored round's
#: restore read every action of every round)
_ACTION_NAMED: dict[str, Action] = {str(kind): Action(kind) for kind in ActionKind}


def action_from_json(item: Any) -> Action:
    """``"hit"`` or ``{"action": "double", "amount": 1000}`` -> Action; ValueError if malformed.

    >>> action_from_json({"action": "double", "amount": 1000})
    Action(kind=<ActionKind.DOUBLE: 'double'>, amount=1000, accept=None)
    >>> action_from_json("surrender")
    Traceback (most recent call last):
    ...
    ValueError: unknown action 'surrender' (known: hit, stand, double, split, insurance, even_money)
    """
    if isinstance(item, str):
        named = _ACTION_NAMED.get(item)
        if named is not None:
            return named
        kind: Any = item
        amount: Any = None
        accept: Any = None
    elif isinstance(item, Mapping):
        unknown = set(item) - {"action", "amount", "accept"}
        if unknown:
            raise ValueError(f"unknown key {quote(sorted(unknown)[0])} in action {quote(item)}")
        kind, amount, accept = item.get("action"), item.get("amount"), item.get("accept")
    else:
        raise ValueError(f"an action is a string or an object, got {quote(item)}")
    if not isinstance(kind, str) or kind not in ACTIONS:
        raise ValueError(f"unknown action {quote(kind)} (known: {', '.join(ACTIONS)})")
    if amount is not None and (not isinstance(amount, int) or isinstance(amount, bool)
                               or amount < 0):
        raise ValueError(f"amount must be a non-negative integer, got {quote(amount)}")
    if accept is not None and not isinstance(accept, bool):
        raise ValueError(f"accept must be true or false, got {quote(accept)}")
    return Action(_ACTION_OF[kind], amount, accept)
