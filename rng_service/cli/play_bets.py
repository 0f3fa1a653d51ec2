"""Bets and stake levels of `fairshoe play` checked against the game's rules before anything is
sent: the rules come from GameService.GetRules and are read by game_math's own rules reader, so
the limits, hand counts, chips and stake multiples are the ones the server applies.

A refusal is one line in currency units naming the value and what the game accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from game_math.rules import Rules, StakeLevel
from rng_service.cli.play_render import money as money_in


class BetRefused(ValueError):
    """Bets the game's rules refuse; the message names the value and the valid range."""


def _or_list(items: Sequence[Any]) -> str:
    """``1, 3 or 5``."""
    words = [str(x) for x in items]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _check_stake(what: str, stake: int, limits: tuple[int, int], level: StakeLevel,
                 multiple: int, *, places: int) -> None:
    low, high = limits

    def money(minor: int) -> str:
        return money_in(minor, places)

    if not low <= stake <= high:
        raise BetRefused(f"{what} {money(stake)} is outside the limits {money(low)} to "
                         f"{money(high)} (level {level.name})")
    if level.chips and stake % min(level.chips):
        raise BetRefused(f"{what} {money(stake)} is not made of chips: bets are multiples of "
                         f"{money(min(level.chips))} (level {level.name})")
    if stake % multiple:
        raise BetRefused(f"{what} {money(stake)} must be a multiple of {money(multiple)} "
                         "so that every payout is whole")


def check_bets(rules: Rules, level_name: str, hands: Sequence[Any],
               side_bets: Sequence[Any], places: int = 2) -> None:
    """Refuse (:class:`BetRefused`) what the server would refuse of these bets at this level:
    the number of hands, each bet's limits, chips and multiple, each side bet's limits and
    scope. ``hands`` are ``HandBet`` messages, ``side_bets`` the round's ``SideBetStake``s;
    amounts are said with the currency's ``places`` decimals."""
    level = rules.level(level_name or None)
    count = len(hands)
    if count not in rules.hands.counts:
        raise BetRefused(f"{count} hands bet: {rules.name} plays {_or_list(rules.hands.counts)} "
                         "hands")
    low = level.min_bet * (rules.hands.multi_hand_min_multiple if count > 1 else 1)
    what = "bet" if count == 1 or low == level.min_bet else f"with {count} hands, each bet"
    for hand in hands:
        _check_stake(what, int(hand.bet_minor), (low, level.max_bet), level,
                     rules.bet_multiple, places=places)
        for side in hand.side_bets:
            _check_side_bet(rules, level, side, ("hand", count), places)
    for side in side_bets:
        _check_side_bet(rules, level, side, ("round", count), places)


def _check_side_bet(rules: Rules, level: StakeLevel, side: Any, where: tuple[str, int],
                    places: int) -> None:
    scope, count = where
    bet = rules.side_bet(side.name)
    if bet is None:
        offered = ", ".join(b.name for b in rules.side_bets) or "none"
        raise BetRefused(f"{rules.game} has no side bet {side.name!r} (side bets: {offered})")
    if bet.scope != scope:
        how = f"on a hand: AMOUNT,{bet.name}=AMOUNT" if bet.scope == "hand" else \
            f"once per round: {bet.name}=AMOUNT"
        raise BetRefused(f"side bet {bet.name} is placed {how}")
    _check_stake(f"side bet {bet.name}", int(side.stake_minor),
                 (level.side_bet_min, level.side_bet_max), level, bet.stake_multiple, places=places)
    if scope == "round" and count < max(rules.hands.counts):
        raise BetRefused(f"side bet {bet.name} needs a bet on every hand "
                         f"({max(rules.hands.counts)} hands)")


# ----- stake levels ----------------------------------------------------------------------------


def _units(minor: int, places: int) -> str:
    """Minor units as the shortest currency-units text: 500 -> "5", 250 -> "2.5" (2 places)."""
    return _number(Decimal(minor).scaleb(-places))


def _number(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _spellings(level: StakeLevel, places: int) -> set[str]:
    """What a player may type for ``level``: its name, and its bet limits as the game documents
    write them (``5-1,500``, ``1-200``, ``5.00-1,000.00``)."""
    return {_normal(level.name),
            f"{_units(level.min_bet, places)}-{_units(level.max_bet, places)}"}


def _normal(text: str) -> str:
    """A typed level without case, spaces or thousands separators, its amounts as numbers
    (``5.00-1,000.00`` -> ``5-1000``)."""
    parts = text.lower().replace(",", "").replace(" ", "").split("-")
    try:
        return "-".join(_number(Decimal(p)) for p in parts)
    except InvalidOperation:
        return "-".join(parts)


def level_named(rules: Rules, typed: str, places: int = 2) -> str | None:
    """The name of the stake level ``typed`` means (its name, or its limits), else None.
    Empty is the game's default level."""
    if not typed.strip():
        return rules.default_level
    wanted = _normal(typed)
    for level in rules.levels:
        if wanted in _spellings(level, places):
            return level.name
    return None


def levels_hint(rules: Rules, places: int = 2) -> str:
    """The game's levels with their limits, for a refusal: ``table 5.00-1,000.00``."""
    return " / ".join(f"{lv.name} {money_in(lv.min_bet, places)}-{money_in(lv.max_bet, places)}"
                      for lv in rules.levels)


def unknown_level(rules: Rules, typed: str, places: int = 2) -> str:
    """The line refusing ``typed`` as a level of ``rules``' game, naming the valid ones."""
    first = rules.levels[0]
    example = f"{_units(first.min_bet, places)}-{_units(first.max_bet, places)}"
    return (f"{typed!r} is not a stake level of {rules.game}: choose {levels_hint(rules, places)} "
            f"(a name or its limits, e.g. {example})")
