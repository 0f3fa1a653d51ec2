"""The automatic player: basic strategy, exactly as the analyser defines it for the rules in play.

``basic_strategy_action(round)`` returns the action basic strategy takes at the round's current
decision. The decisions are ``analyse_main_game(rules).basic`` (the lookup tables whose play the
analyser's basic return assumes), so rounds played by this player and simulated over many shoes
should return what the analysis says. The analysis runs once per rule set (cached by the rules
digest, so equal rules built twice share it); a decision then costs a few table reads.

How a decision becomes an engine action:

* insurance and even money are always declined (basic strategy never insures);
* a pair is split when the table says so and the engine allows it, else played by its total;
* a total the table doubles is doubled (for the full stake the engine allows: doubling for less
  never beats a full double when doubling is right) where the engine allows it, else hit or stand
  by the table's hit decision; where hitting is not allowed (split aces awaiting a resplit) the
  hand stands.
"""

from __future__ import annotations

from game_math.analysis.main_game import BasicStrategy, analyse_main_game
from game_math.cards import Card
from game_math.round import Action, ActionKind, Decision, Phase, Round
from game_math.rules import DealerCards, Rules

DECLINE_INSURANCE = Action(ActionKind.INSURANCE, amount=0)
DECLINE_EVEN_MONEY = Action(ActionKind.EVEN_MONEY, accept=False)

_BY_RULES: dict[Rules, BasicStrategy] = {}
_BY_DIGEST: dict[str, BasicStrategy] = {}
#: the rules asked for last and their strategy: a player asks at every decision with the same
#: rules object, and hashing the nested frozen rules for the dict cost about 40 µs a decision
_last: tuple[Rules, BasicStrategy] | None = None


def basic_strategy(rules: Rules) -> BasicStrategy:
    """The analyser's basic strategy for ``rules``, analysed once per rules digest."""
    global _last  # noqa: PLW0603  (a one-entry cache in front of the dicts)
    last = _last
    if last is not None and last[0] is rules:
        return last[1]
    strategy = _BY_RULES.get(rules)  # a dict hit costs a hash; the digest costs ~70 µs
    if strategy is None:
        digest = rules.digest()
        strategy = _BY_DIGEST.get(digest)
        if strategy is None:
            strategy = _BY_DIGEST[digest] = analyse_main_game(rules).basic
        _BY_RULES[rules] = strategy
    _last = (rules, strategy)
    return strategy


def visible_dealer_cards(rnd: Round) -> list[Card]:
    """The dealer's cards a player sees while deciding."""
    if rnd.rules.dealer.cards is DealerCards.BOTH_EXPOSED:
        return rnd.dealer[:2]
    return rnd.dealer[:1]


def basic_strategy_action(rnd: Round) -> Action:
    """What basic strategy does at ``rnd``'s current decision; ValueError if none is awaited."""
    turn = rnd.turn
    if turn.phase is Phase.INSURANCE:
        return DECLINE_EVEN_MONEY if turn.decision is Decision.EVEN_MONEY else DECLINE_INSURANCE
    if turn.phase is not Phase.PLAY or turn.hand is None:
        raise ValueError(f"the round is {turn.phase}: no decision is awaited")
    legal = {la.action: la for la in rnd.legal_actions()}
    kind = ActionKind(basic_strategy(rnd.rules).action(
        rnd.hand(turn.hand).cards, visible_dealer_cards(rnd), legal))
    if kind is ActionKind.DOUBLE:
        return Action(kind, legal[kind].max_stake)
    return Action(kind)
