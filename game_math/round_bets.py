"""A round's bets checked against its rules before anything is dealt: the stake level, the hand
count, each stake's limits, chips and multiple, the side bets offered and where they are placed,
and the balance covering the initial stake. Each refusal is a ``BetError`` naming the bet (its
path, hand and side bet). :class:`game_math.round.Round` runs these checks when it is made and
when it is funded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from game_math.actions import HandBet
from game_math.errors import BetError, quote
from game_math.rules import Rules, StakeLevel


class Spot(NamedTuple):
    """Which bet a check is about: a hand's own bet (``side_bet`` None), a hand's side bet, or
    a side bet of the round (``hand`` None); its BetError carries both as well as the path."""

    hand: int | None
    side_bet: str | None = None

    def error(self, message: str, *, metadata: Mapping[str, object] | None = None) -> BetError:
        """The BetError ``message`` for this bet, with its path (``hands[1].bet``,
        ``hands[0].side_bets.pairs``, ``side_bets.21+3``)."""
        hand, name = self
        path = "" if hand is None else f"hands[{hand}]"
        if name is None:
            path += ".bet"
        else:
            path += f".side_bets.{name}" if path else f"side_bets.{name}"
        return BetError(path, message, metadata=metadata, hand=hand, side_bet=name)


def initial_stake(hand_bets: Sequence[HandBet], round_side_bets: Mapping[str, int]) -> int:
    """The stake of the initial bets and side bets together."""
    total = sum(hb.bet + sum(hb.side_bets.values()) for hb in hand_bets)
    return total + sum(round_side_bets.values())


def check_bets(rules: Rules, level_name: str | None, hand_bets: Sequence[HandBet],
               round_side_bets: Mapping[str, int], balance: int | None) -> StakeLevel:
    """The stake level the bets are placed at, once every bet is within ``rules``; BetError
    for the first that is not (and for a ``balance`` that does not cover them)."""
    try:
        lvl = rules.level(level_name)
    except KeyError as exc:
        raise BetError("level", str(exc.args[0])) from None
    n = len(hand_bets)
    if n not in rules.hands.counts:
        allowed = ", ".join(str(c) for c in rules.hands.counts)
        raise BetError("hands", f"{n} hands bet; {rules.game} plays {allowed}",
                       metadata={"hands": n, "hand_counts": allowed})
    multiple = rules.bet_multiple
    min_bet = lvl.min_bet * (rules.hands.multi_hand_min_multiple if n > 1 else 1)
    max_bet, chip = lvl.max_bet, min(lvl.chips) if lvl.chips else 0
    for i, hb in enumerate(hand_bets):
        bet = hb.bet
        # a stake check_stake passes needs no call (nor its spot built): the same
        # conditions, read first; anything else goes to it for its error
        if not (type(bet) is int and min_bet <= bet <= max_bet
                and not (chip and bet % chip) and not bet % multiple):
            check_stake(Spot(i), bet, (min_bet, max_bet), lvl, multiple)
        if n > 1 and hb.bet < min_bet:
            raise Spot(i).error(f"playing {n} hands needs each bet >= {min_bet}",
                                metadata={"stake_minor": hb.bet, "min_minor": min_bet,
                                          "hands": n})
        for name, stake in hb.side_bets.items():
            check_side_bet(rules, Spot(i, name), "hand", stake, lvl)
    for name, stake in round_side_bets.items():
        check_side_bet(rules, Spot(None, name), "round", stake, lvl)
        if n < max(rules.hands.counts):
            raise Spot(None, name).error("needs a bet on every hand")
    if balance is not None:
        check_balance(balance, initial_stake(hand_bets, round_side_bets))
    return lvl


def check_balance(balance: object, stake: int) -> None:
    """BetError unless ``balance`` is a non-negative integer covering ``stake``, the initial
    stake."""
    if not isinstance(balance, int) or isinstance(balance, bool) or balance < 0:
        message = f"must be a non-negative integer (minor units), got {quote(balance)}"
        raise BetError("balance", message)
    if stake > balance:
        raise BetError("hands", f"total stake {stake} exceeds the balance {balance}",
                       metadata={"stake_minor": stake, "balance_minor": balance})


def check_stake(spot: Spot, stake: int, limits: tuple[int, int], lvl: StakeLevel,
                multiple: int) -> None:
    """BetError unless ``stake`` is an integer within ``limits``, made of the level's chips
    and a multiple of ``multiple`` (so every payout is whole)."""
    lo, hi = limits
    if not isinstance(stake, int) or isinstance(stake, bool):
        raise spot.error(f"must be an integer number of minor units, got {quote(stake)}")
    if stake < lo or stake > hi:
        raise spot.error(f"{quote(stake)} is outside the limits {lo}..{hi} ({lvl.name})",
                         metadata={"stake_minor": stake, "min_minor": lo, "max_minor": hi,
                                   "level": lvl.name})
    if lvl.chips and stake % min(lvl.chips):
        raise spot.error(f"{quote(stake)} is not made of chips (smallest {min(lvl.chips)})",
                         metadata={"stake_minor": stake, "chip_minor": min(lvl.chips)})
    if stake % multiple:
        message = f"{quote(stake)} must be a multiple of {multiple} so payouts are whole"
        raise spot.error(message, metadata={"stake_minor": stake,
                                            "multiple_minor": multiple})


def check_side_bet(rules: Rules, spot: Spot, scope: str, stake: int, lvl: StakeLevel) -> None:
    """BetError unless ``rules`` offer the side bet ``spot`` names, placed in ``scope`` ("hand"
    or "round"), and ``stake`` is within the level's side-bet limits."""
    name = spot.side_bet
    assert name is not None  # a side bet's spot names it
    bet = rules.side_bet(name)
    if bet is None:
        offered = ", ".join(b.name for b in rules.side_bets) or "none"
        raise spot.error(f"{rules.game} offers no side bet {quote(name)} (offered: {offered})")
    if bet.scope != scope:
        where = "per hand" if bet.scope == "hand" else "once per round"
        raise spot.error(f"{name} is placed {where}")
    check_stake(spot, stake, (lvl.side_bet_min, lvl.side_bet_max), lvl, bet.stake_multiple)
