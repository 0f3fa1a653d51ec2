"""Which play actions the rules allow on a hand, written once.

Each function takes the rules and the facts of a hand and returns None when the rules allow the
action, or the reason they do not. The engine (``game_math.round``) offers and refuses actions
with them, adding only what is not a rule (the player's balance), and the exact analysis
(``game_math.analysis``) decides where a strategy may double with them, so the two cannot
disagree about the rules.

>>> from game_math.games import game_rules
>>> rules = game_rules("multi-hand")  # doubles on 9, 10 and 11 only, hard totals only
>>> why_no_double(rules, total=11, soft=False) is None
True
>>> why_no_double(rules, total=12, soft=False)
'double needs a total of 9-11, hand has 12'
>>> why_no_double(rules, total=10, soft=True)
'no double on a soft hand'
>>> why_no_split(rules, equal_values=True, hands_from_bet=4, split_aces=False)
'at most 4 hands from one bet'
"""

from __future__ import annotations

from game_math.rules import DoubleOn, Rules

#: the refusal of any further card to a split ace where split aces take one card
SPLIT_ACES_ONE_CARD = "split aces receive exactly one card"


def why_no_hit(rules: Rules, *, split_aces: bool) -> str | None:
    """None if a hand may take a card; only split aces that take one card may not."""
    if split_aces and rules.split.split_aces_one_card:
        return SPLIT_ACES_ONE_CARD
    return None


def why_no_double(
    rules: Rules,
    *,
    total: int,
    soft: bool,
    two_cards: bool = True,
    from_split: bool = False,
    split_aces: bool = False,
) -> str | None:
    """None if a hand of ``total`` (``soft``: an ace counted as 11) may double, else why not.

    ``two_cards``: the hand holds exactly its first two cards; ``from_split``: it came from a
    split, of aces when ``split_aces``. A two-card 21 stands by itself, so never doubles.
    """
    rule = rules.double
    if split_aces and rules.split.split_aces_one_card:
        return SPLIT_ACES_ONE_CARD
    if not two_cards:
        return "double is only on the first two cards"
    if from_split and not rule.after_split:
        return "no double after a split"
    if soft and not rule.soft:
        return "no double on a soft hand"
    if total >= 21:
        return "a hand of 21 stands"
    if (rule.on is DoubleOn.NINE_TO_ELEVEN and not 9 <= total <= 11) or (
        rule.on is DoubleOn.TEN_OR_ELEVEN and total not in (10, 11)
    ):
        return f"double needs a total of {rule.on}, hand has {total}"
    return None


def double_allowed(rules: Rules, total: int, soft: bool, after_split: bool) -> bool:
    """Whether a two-card hand may double: ``why_no_double`` as a yes or no (the analysis's
    form; ``after_split`` is ``from_split``, of a pair other than aces that take one card)."""
    return why_no_double(rules, total=total, soft=soft, from_split=after_split) is None


def why_no_split(
    rules: Rules, *, equal_values: bool, hands_from_bet: int, split_aces: bool
) -> str | None:
    """None if a two-card hand may split, else why not.

    ``equal_values``: the hand is two cards of one value; ``hands_from_bet``: the hands its initial
    bet has become so far; ``split_aces``: it is itself a split ace (so a pair of aces again).
    """
    if not equal_values:
        return "split needs two cards of equal value"
    if hands_from_bet >= rules.split.max_hands:
        return f"at most {rules.split.max_hands} hands from one bet"
    if split_aces and not rules.split.resplit_aces:
        return "split aces may not be split again"
    return None
