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
from functools import cached_property
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


#: a composition as one integer, five bits per value (no count in a shoe's hand reaches 32)
_RADIX = np.array([32**v for v in range(NV)], dtype=np.int64)


@dataclass(frozen=True)
class HandSpace:
    """Every composition of one or more cards with hard total <= 21 that the shoe can supply."""

    counts: IntArray  # (H, 10)
    total: IntArray  # best total
    soft: BoolArray
    ncards: IntArray
    child: IntArray  # (H, 10): index of comp + value, -1 when that busts
    levels: tuple[IntArray, ...]  # levels[n]: indices of the hands of n cards
    keys: IntArray  # every hand's key (``_RADIX``: ``ca_core.ROW_RADIX``, the same digits)
    sorted_keys: IntArray  # the keys sorted ..
    key_order: IntArray  # .. and the hands in that order

    @property
    def size(self) -> int:
        """The number of hands in the space."""
        return len(self.counts)

    # the tuples and their dictionary are made on first use: the full analysis looks up a few
    # hands only (``find``), and some 2,800 tuples cost a cold analysis about 2 ms
    @cached_property
    def comps(self) -> tuple[Comp, ...]:
        """Each hand's composition, by index."""
        return tuple(map(tuple, self.counts.tolist()))

    @cached_property
    def index(self) -> dict[Comp, int]:
        """Each composition's index."""
        return {c: i for i, c in enumerate(self.comps)}

    def find(self, comp: Comp) -> int:
        """The index of the composition ``comp`` (KeyError if it is not in the space)."""
        key = int(np.array(comp, dtype=np.int64) @ _RADIX)
        at = int(np.searchsorted(self.sorted_keys, key))
        if at == len(self.sorted_keys) or self.sorted_keys[at] != key:
            raise KeyError(comp)
        return int(self.key_order[at])


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
    # card count, then the values ace .. ten in order, as one base-32 number with the aces'
    # digit the most significant after the count's (counts stay below 32, the card count below
    # 22): one argsort of distinct keys instead of a lexsort over eleven
    order = np.argsort(ncards * 32**NV + counts @ _RADIX[::-1])
    out: IntArray = counts[order]
    return out


def _build_space(limits: Comp) -> HandSpace:
    counts = _enumerate(limits)
    hard = counts @ np.arange(1, NV + 1)
    soft = (counts[:, ACE] > 0) & (hard <= 11)  # as ``best_total``: an ace counts 11
    # a composition's key in base 32; a child's key adds one digit
    keys = counts @ _RADIX
    order = np.argsort(keys)
    wanted = keys[:, None] + _RADIX[None, :]  # (H, 10)
    pos = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
    child = np.where(keys[order][pos] == wanted, order[pos], -1)
    ncards = counts.sum(axis=1)
    levels = tuple(np.flatnonzero(ncards == n) for n in range(int(ncards.max()) + 2))
    return HandSpace(
        counts=counts, total=hard + 10 * soft, soft=soft, ncards=ncards, child=child,
        levels=levels, keys=keys, sorted_keys=keys[order], key_order=order,
    )
