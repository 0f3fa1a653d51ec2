"""The automatic player: basic strategy, as the exact analyser computes it for the rules in play.

``basic_strategy_action(round)`` returns the action basic strategy takes at the round's current
decision. The table is ``analyse_main_game(rules).strategy`` (total-dependent: one decision per
hard/soft total or pair and strategy column), compiled once per rule set into plain lookups, so a
decision costs a few dictionary reads; ``fairshoe collect rounds`` and the simulator call it for
every decision.

How a table cell becomes a legal action:

* insurance and even money are always declined (basic strategy never insures);
* a pair whose pair cell says split is split when the engine allows it; otherwise the hand is played
  by its total, as any other hand;
* a total cell saying double doubles (for the full amount: doubling for less never beats a full
  double when doubling is right) where the engine allows it, else takes the cell's fallback (hit or
  stand); a cell saying hit stands where hitting is not allowed (split aces awaiting a resplit).

The strategy column is the dealer's up card ("2".."9", "T", "A"), or with both dealer cards exposed
their total and softness ("H12", "S17"), exactly as the analyser names its columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from game_math.analysis.main_game import Action as TableAction
from game_math.analysis.main_game import Cell, StrategyTable, analyse_main_game
from game_math.cards import VALUE_OF, Card
from game_math.round import (
    DOUBLE,
    EVEN_MONEY,
    HIT,
    INSURANCE,
    INSURE,
    PLAY,
    SPLIT,
    STAND,
    Action,
    LegalAction,
    Round,
)
from game_math.rules import DealerCards, Rules

#: a compiled cell: (the table's action, its fallback when that action is not allowed)
Decision = tuple[str, str | None]

DECLINE_INSURANCE = Action(INSURE, amount=0)
DECLINE_EVEN_MONEY = Action(EVEN_MONEY, accept=False)

_VALUE_NAME = {1: "A", 10: "T"}


def value_name(card: Card) -> str:
    """The analyser's name of a card's value: "A", "2".."9", "T"."""
    value = VALUE_OF[card]
    return _VALUE_NAME.get(value, str(value))


def hand_total(cards: Sequence[Card]) -> tuple[int, bool]:
    """(best total, soft) of ``cards``."""
    hard = sum(VALUE_OF[c] for c in cards)
    if hard <= 11 and any(VALUE_OF[c] == 1 for c in cards):
        return hard + 10, True
    return hard, False


def dealer_column(rules: Rules, dealer_cards: Sequence[Card]) -> str:
    """The strategy column of the dealer's visible card(s)."""
    if rules.dealer.cards is DealerCards.BOTH_EXPOSED:
        total, soft = hand_total(dealer_cards[:2])
        return f"{'S' if soft else 'H'}{total}"
    return value_name(dealer_cards[0])


def _decision(cell: Cell) -> Decision:
    return str(cell.action), None if cell.otherwise is None else str(cell.otherwise)


@dataclass(frozen=True)
class BasicStrategy:
    """One rule set's basic-strategy table, compiled for lookups by column name."""

    hard: Mapping[str, Mapping[int, Decision]]  # column -> total -> decision
    soft: Mapping[str, Mapping[int, Decision]]
    split: Mapping[str, frozenset[str]]  # column -> pair values ("8", "A", ...) to split

    @classmethod
    def from_table(cls, table: StrategyTable) -> BasicStrategy:
        def by_column(rows: Mapping[int, tuple[Cell, ...]]) -> dict[str, dict[int, Decision]]:
            return {col: {t: _decision(cells[k]) for t, cells in rows.items()}
                    for k, col in enumerate(table.columns)}

        split = {
            col: frozenset(p for p, cells in table.pairs.items()
                           if cells[k].action is TableAction.SPLIT)
            for k, col in enumerate(table.columns)
        }
        return cls(by_column(table.hard), by_column(table.soft), split)

    def choose(self, column: str, cards: Sequence[Card],
               legal: Mapping[str, LegalAction]) -> Action:
        """The action for a hand of ``cards`` against ``column``, among the ``legal`` ones."""
        if SPLIT in legal and len(cards) == 2 and VALUE_OF[cards[0]] == VALUE_OF[cards[1]] \
                and value_name(cards[0]) in self.split[column]:
            return Action(SPLIT)
        total, soft = hand_total(cards)
        action, otherwise = (self.soft if soft else self.hard)[column][total]
        if action == DOUBLE:
            if DOUBLE in legal:
                return Action(DOUBLE, legal[DOUBLE].max_stake)
            action = otherwise or HIT
        if action == HIT and HIT in legal:
            return Action(HIT)
        return Action(STAND)


_BY_RULES: dict[Rules, BasicStrategy] = {}
_BY_DIGEST: dict[str, BasicStrategy] = {}


def basic_strategy(rules: Rules) -> BasicStrategy:
    """The compiled table for ``rules``; analysed once per rule set (keyed by the rules digest)."""
    strategy = _BY_RULES.get(rules)
    if strategy is None:
        digest = rules.digest()
        strategy = _BY_DIGEST.get(digest)
        if strategy is None:
            strategy = BasicStrategy.from_table(analyse_main_game(rules).strategy)
            _BY_DIGEST[digest] = strategy
        _BY_RULES[rules] = strategy
    return strategy


def visible_dealer_cards(rnd: Round) -> list[Card]:
    """The dealer's cards a player sees while deciding."""
    if rnd.rules.dealer.cards is DealerCards.BOTH_EXPOSED:
        return rnd.dealer[:2]
    return rnd.dealer[:1]


def basic_strategy_action(rnd: Round) -> Action:
    """What basic strategy does at ``rnd``'s current decision; ValueError if none is awaited."""
    turn = rnd.turn
    if turn.phase == INSURANCE:
        return DECLINE_EVEN_MONEY if turn.decision == EVEN_MONEY else DECLINE_INSURANCE
    if turn.phase != PLAY or turn.hand is None:
        raise ValueError(f"the round is {turn.phase}: no decision is awaited")
    legal = {la.action: la for la in rnd.legal_actions()}
    column = dealer_column(rnd.rules, visible_dealer_cards(rnd))
    return basic_strategy(rnd.rules).choose(column, rnd.hand(turn.hand).cards, legal)
