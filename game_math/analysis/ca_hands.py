"""Hands as card-value compositions: the index space the combinatorial analyser works over.

A composition is a tuple of 10 counts, one per blackjack value in the order A, 2, .., 9, T (all
ten-valued ranks share one value: their suits and ranks never matter to the main game). The
analyser enumerates every composition with a hard total of 21 or less once, numbers them, and
keeps for each its total, softness, card count and the index of each one-card extension, so the
expected-value recursions become array gathers instead of Python loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import mul

import numpy as np
import numpy.typing as npt

from game_math.cards import VALUE_OF, Card

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

NV = 10  # card values: index 0 = ace, 1..8 = two..nine, 9 = ten-valued
ACE = 0
TEN = 9
Comp = tuple[int, ...]


def value_index(card: Card) -> int:
    """Index 0..9 of a card's value (ace 0, ten-valued 9)."""
    return VALUE_OF[card] - 1


def composition(cards: Sequence[Card]) -> Comp:
    """The value counts (ace .. ten) of ``cards``."""
    counts = [0] * NV
    for c in cards:
        counts[value_index(c)] += 1
    return tuple(counts)


def shoe_counts(decks: int) -> Comp:
    """Value counts of a full shoe: four of each value per deck, sixteen tens."""
    return tuple([4 * decks] * 9 + [16 * decks])


#: the value each index counts for (ace as 1)
_VALUES = tuple(range(1, NV + 1))


def hard_total(comp: Sequence[int]) -> int:
    """The total of a composition with every ace counted as 1."""
    return sum(map(mul, comp, _VALUES))


def best_total(comp: Sequence[int]) -> tuple[int, bool]:
    """Best total and softness of a composition (an ace counts 11 while that keeps it <= 21)."""
    hard = hard_total(comp)
    if comp[ACE] and hard <= 11:
        return hard + 10, True
    return hard, False


def add(comp: Sequence[int], value: int, times: int = 1) -> Comp:
    """``comp`` with ``times`` more cards of value index ``value``."""
    out = list(comp)
    out[value] += times
    return tuple(out)


@dataclass(frozen=True)
class HandSpace:
    """Every composition of one or more cards with hard total <= 21 that the shoe can supply."""

    comps: tuple[Comp, ...]
    index: dict[Comp, int]
    counts: IntArray  # (H, 10)
    total: IntArray  # best total
    soft: BoolArray
    ncards: IntArray
    child: IntArray  # (H, 10): index of comp + value, -1 when that busts
    levels: tuple[IntArray, ...]  # levels[n]: indices of the hands of n cards

    @property
    def size(self) -> int:
        """The number of hands in the space."""
        return len(self.comps)


_SPACES: dict[Comp, HandSpace] = {}


def hand_space(limits: Comp) -> HandSpace:
    """The hand space for a shoe whose value counts are ``limits`` (cached per shoe)."""
    space = _SPACES.get(limits)
    if space is None:
        space = _SPACES[limits] = _build_space(limits)
    return space


def _enumerate(limits: Comp) -> IntArray:
    """(H, 10): every composition of one or more cards within ``limits`` and hard total <= 21,
    ordered by card count, then as tuples compare. Built a value at a time with array
    operations (a Python recursion over the ~2,800 hands cost most of a cold start's space)."""
    counts = np.zeros((1, 0), dtype=np.int64)
    hard = np.zeros(1, dtype=np.int64)
    for i in range(NV):
        ks = np.arange(limits[i] + 1, dtype=np.int64)
        fits = hard[:, None] + ks[None, :] * (i + 1) <= 21  # (rows, k): room for k more
        row, k = np.nonzero(fits)
        counts = np.concatenate([counts[row], ks[k][:, None]], axis=1)
        hard = hard[row] + ks[k] * (i + 1)
    counts = counts[hard > 0]
    ncards = counts.sum(axis=1)
    # lexsort's last key is the primary one: card count, then the values ace .. ten in order
    order = np.lexsort((*counts.T[::-1], ncards))
    out: IntArray = counts[order]
    return out


def _build_space(limits: Comp) -> HandSpace:
    counts = _enumerate(limits)
    comps = tuple(map(tuple, counts.tolist()))
    index = {c: i for i, c in enumerate(comps)}
    hard = counts @ np.arange(1, NV + 1)
    soft = (counts[:, ACE] > 0) & (hard <= 11)  # as ``best_total``: an ace counts 11
    # a composition's key in base 32 (no count reaches 32); a child's key adds one digit
    radix = np.array([32**v for v in range(NV)], dtype=np.int64)
    keys = counts @ radix
    order = np.argsort(keys)
    wanted = keys[:, None] + radix[None, :]  # (H, 10)
    pos = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
    child = np.where(keys[order][pos] == wanted, order[pos], -1)
    ncards = counts.sum(axis=1)
    levels = tuple(np.flatnonzero(ncards == n) for n in range(int(ncards.max()) + 2))
    return HandSpace(
        comps=tuple(comps), index=index, counts=counts,
        total=hard + 10 * soft, soft=soft,
        ncards=ncards, child=child, levels=levels,
    )
