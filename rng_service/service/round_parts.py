"""What the round use cases share between their modules: the bets and a StartRound as checked,
a live round within a transaction, dealing, and the stored answer's decoding (``rounds.py`` and
``round_seamless.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from game_math.cards import Card
from game_math.errors import BetError
from game_math.round import HandBet, Round
from game_math.rules import Rules
from rng_service.core.errors import IllegalState, InvalidInput
from rng_service.core.frozen import quick_init
from rng_service.rng.shoe import Shoe
from rng_service.service import validate
from rng_service.service.ports import AccountKey, RoundRow, ShoeRow, UnitOfWork
from rng_service.service.views import RoundView, from_json


@quick_init
@dataclass(frozen=True)
class Bets:
    """A round's bets as checked: the stake level, the hands' bets, the round's side bets."""

    level: str | None
    hands: list[HandBet]
    side_bets: dict[str, int]


@quick_init
@dataclass(frozen=True)
class StartRequest:
    """A StartRound as checked: whose money, which game, which bets, under which request."""

    account: AccountKey
    rules: Rules
    bets: Bets
    request_id: str
    params: Mapping[str, Any]


@dataclass
class Live:
    """A stored round brought back to life within a transaction (or one being dealt)."""

    row: RoundRow
    shoe_row: ShoeRow
    shoe: Shoe
    rnd: Round
    #: what the round's ledger entries hold, when known without reading them (see
    #: ``ledger.post_round_money``): {} for a round being dealt, or from the live cache
    posted: dict[int, tuple[int, int]] | None = None
    #: False for a shoe created in this transaction: its row is inserted by ``_commit``, once,
    #: in the state the round leaves it
    shoe_stored: bool = True
    #: a seamless round void before its deal, whose debits are being rolled back: its end
    #: credits nothing (the rollbacks return the stakes)
    rolled_back: bool = False
    #: taken from the live cache without reading the round's row: not yet confirmed to be the
    #: stored round (``RoundService._commit`` confirms it by the round's write, first)
    unconfirmed: bool = False


def decode_round(data: bytes) -> RoundView:
    """A round view stored as an idempotent answer."""
    return from_json(RoundView, data)


def deal(rules: Rules, cards: Sequence[Card], bets: Bets, start: int, balance: int | None,
         *, void: str | None = None) -> Round:
    """A round dealt from ``cards`` at ``start`` (with ``void``, its bets placed and nothing
    dealt: void at once); bets the rules refuse are INVALID_BET, naming the request's field
    (:func:`.validate.bet_field`)."""
    try:
        return Round(rules, cards, bets.hands, bets.side_bets, start=start, level=bets.level,
                     balance=balance, void=void)
    except BetError as exc:
        raise InvalidInput(validate.bet_field(exc, hands=bets.hands, side_bets=bets.side_bets),
                           exc.detail, reason="INVALID_BET", metadata=exc.metadata) from None


def no_open_round(uow: UnitOfWork, operator: str, player: str, rules: Rules) -> None:
    """Refuse a new round while the player has one of this game open."""
    current = uow.open_round(operator, player, rules.game)
    if current is not None:
        raise IllegalState(f"round {current.round_id} of {rules.game} is still open; finish "
                           "it first", reason="ROUND_IN_PROGRESS")
