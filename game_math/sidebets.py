"""Side-bet evaluators: pure functions of the cards and a paytable.

Each evaluator lists every paytable line the cards qualify for; a bet pays only its best line
(the largest payout among the qualifying lines its paytable carries), which is how the seeds'
"only the highest win pays" reads for standard and custom paytables alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Final

from game_math.cards import RANK_OF, RED_SUITS, SUIT_OF, Card
from game_math.rules import SideBet, SideBetKind


def snap_lines(cards: Sequence[Card]) -> list[str]:
    """Snap on (hand 1 card 1, hand 1 card 2, hand 2 card 1, hand 2 card 2, dealer up card).

    A "pair" here is two identical cards: same rank and same suit (possible with two decks).
    """
    if len(cards) != 5:
        raise ValueError(f"snap is judged on 5 cards, got {len(cards)}")
    h1 = cards[0] == cards[1]
    h2 = cards[2] == cards[3]
    lines = []
    if h1 and h2:
        lines.append("matching_pair_both_hands")
    if h1 or h2:
        lines.append("pair_in_any_hand")
    if len(set(cards)) < 5:
        lines.append("matching_pair_anywhere")
    return lines


def perfect_pairs_lines(cards: Sequence[Card]) -> list[str]:
    """Perfect Pairs on a hand's first two cards: same rank (face, not value) by suit and colour."""
    if len(cards) != 2:
        raise ValueError(f"perfect pairs is judged on 2 cards, got {len(cards)}")
    a, b = cards
    if RANK_OF[a] != RANK_OF[b]:
        return []
    if SUIT_OF[a] == SUIT_OF[b]:
        return ["perfect_pair"]
    if (SUIT_OF[a] in RED_SUITS) == (SUIT_OF[b] in RED_SUITS):
        return ["coloured_pair"]
    return ["mixed_pair"]


def _is_straight(ranks: Sequence[int]) -> bool:
    lo, mid, hi = sorted(ranks)
    if lo + 1 == mid and mid + 1 == hi:
        return True
    return (lo, mid, hi) == (1, 12, 13)  # Q-K-A: the ace plays high as well as low


def twenty_one_plus_three_lines(cards: Sequence[Card]) -> list[str]:
    """21+3 on the hand's two cards and the dealer's up card, as a three-card poker hand."""
    if len(cards) != 3:
        raise ValueError(f"21+3 is judged on 3 cards, got {len(cards)}")
    ranks = [RANK_OF[c] for c in cards]
    flush = SUIT_OF[cards[0]] == SUIT_OF[cards[1]] == SUIT_OF[cards[2]]
    trips = ranks[0] == ranks[1] == ranks[2]
    straight = not trips and _is_straight(ranks)
    lines = []
    if trips and flush:
        lines.append("suited_trips")
    if straight and flush:
        lines.append("straight_flush")
    if trips:
        lines.append("three_of_a_kind")
    if straight:
        lines.append("straight")
    if flush:
        lines.append("flush")
    return lines


_EVALUATORS = {
    SideBetKind.SNAP: snap_lines,
    SideBetKind.PERFECT_PAIRS: perfect_pairs_lines,
    SideBetKind.TWENTY_ONE_PLUS_THREE: twenty_one_plus_three_lines,
}


def qualifying_lines(kind: SideBetKind, cards: Sequence[Card]) -> list[str]:
    """Every paytable line ``cards`` qualify for in a side bet of ``kind``, best first.

    >>> from game_math.cards import parse_cards
    >>> qualifying_lines(SideBetKind.TWENTY_ONE_PLUS_THREE, parse_cards(["7H", "8H", "9H"]))
    ['straight_flush', 'straight', 'flush']
    >>> qualifying_lines(SideBetKind.PERFECT_PAIRS, parse_cards(["TD", "TH"]))
    ['coloured_pair']
    """
    return _EVALUATORS[kind](cards)


#: what a bet returns when no line of its paytable qualifies
_NOTHING: Final = Fraction(0)


def side_bet_result(bet: SideBet, cards: Sequence[Card]) -> tuple[str | None, Fraction]:
    """The paying line (or None) and what it returns per unit staked, stake included: the
    qualifying line of the bet's paytable that returns the most (of equal returns, the first
    ``qualifying_lines`` lists), read off the paytable ranked once per side bet."""
    qualifying = qualifying_lines(bet.kind, cards)
    if qualifying:  # most deals qualify for nothing
        for line, returns in bet.ranked_payouts:
            if line in qualifying:
                return line, returns
    return None, _NOTHING
