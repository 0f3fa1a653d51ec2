"""Uniformity tests of the shuffle, run on the production code path.

**Card by position** (shoes of D decks, c = 52·D positions, 52 card faces, K shuffles). Under a
uniform shuffle each face is at each position with probability D/c = 1/52, so every cell of the
52 x c table of counts expects E = K/52. Each shuffle fills the table with fixed margins (every
position holds one card, every face appears D times), so the cells of one shuffle are negatively
correlated: the covariance of a shuffle's indicator table is c/(52(c-1)) · (I - J/52) ⊗ (I - J/c).
Pearson's X² = Σ (O - E)²/E is therefore asymptotically c/(c-1) times a chi-square with
(52 - 1)(c - 1) degrees of freedom, and the test uses X²·(c-1)/c against that distribution:

    2 decks: 104 positions, df = 51 · 103 = 5253
    6 decks: 312 positions, df = 51 · 311 = 15861

(Using X² uncorrected would inflate it by 1 % and, at these df, shift P-values visibly low.)

**All orders of a 5-card deck**: each shuffle is one of 120 orders, each with probability 1/120;
Pearson's chi-square over the 120 counts, E = K/120, has 119 degrees of freedom.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from rng_service.rng.sampling import DrbgRandom
from rng_service.rng.shoe import new_server_seed, shoe_cards, shoe_drbg

#: A shuffle fails when its P-value is below this.
SHUFFLE_ALPHA = 0.001
FACES = 52
SMALL_DECK = 5

Deal = Callable[[int], Sequence[int]]
Shuffler = Callable[[MutableSequence[int]], None]


@dataclass(frozen=True)
class ShuffleTestResult:
    """One chi-square test of the shuffle: counts per cell against their expected count."""
    name: str
    shuffles: int
    cells: int
    expected_count: float
    statistic: float
    df: int
    p_value: float
    min_count: int
    max_count: int

    @property
    def passed(self) -> bool:
        """Whether the P-value is at least :data:`SHUFFLE_ALPHA`."""
        return self.p_value >= SHUFFLE_ALPHA


def card_position_counts(deal: Deal, decks: int, shuffles: int,
                         on_shuffle: Callable[[], object] | None = None,
                         batch: int = 4096) -> np.ndarray:
    """counts[face, position] over ``shuffles`` shoes from ``deal(decks)``."""
    positions = FACES * decks
    counts = np.zeros(FACES * positions, dtype=np.int64)
    offsets = np.arange(positions)
    done = 0
    while done < shuffles:
        size = min(batch, shuffles - done)
        shoes = np.empty((size, positions), dtype=np.int64)
        for row in range(size):
            cards = deal(decks)
            if len(cards) != positions:
                raise ValueError(f"a {decks}-deck shoe must have {positions} cards, "
                                 f"got {len(cards)}")
            shoes[row] = cards
            if on_shuffle:
                on_shuffle()
        counts += np.bincount((shoes * positions + offsets).ravel(), minlength=counts.size)
        done += size
    return counts.reshape(FACES, positions)


def card_position_test(deal: Deal, decks: int, shuffles: int,
                       on_shuffle: Callable[[], object] | None = None) -> ShuffleTestResult:
    """Chi-square of card face by position over ``shuffles`` shoes of ``decks`` decks."""
    counts = card_position_counts(deal, decks, shuffles, on_shuffle)
    positions = FACES * decks
    expected = shuffles / FACES
    pearson = float(np.sum((counts - expected) ** 2) / expected)
    corrected = pearson * (positions - 1) / positions
    df = (FACES - 1) * (positions - 1)
    return ShuffleTestResult(
        name=f"card x position, {decks} decks", shuffles=shuffles, cells=counts.size,
        expected_count=expected, statistic=corrected, df=df,
        p_value=float(chi2.sf(corrected, df)),
        min_count=int(counts.min()), max_count=int(counts.max()))


_ORDER_INDEX = {order: i for i, order in enumerate(itertools.permutations(range(SMALL_DECK)))}


def order_counts(shuffle: Shuffler, shuffles: int,
                 on_shuffle: Callable[[], object] | None = None) -> np.ndarray:
    """How often each order of a small deck comes out of ``shuffles`` shuffles."""
    counts = np.zeros(len(_ORDER_INDEX), dtype=np.int64)
    for _ in range(shuffles):
        deck = list(range(SMALL_DECK))
        shuffle(deck)
        counts[_ORDER_INDEX[tuple(deck)]] += 1
        if on_shuffle:
            on_shuffle()
    return counts


def five_card_orders_test(shuffle: Shuffler, shuffles: int,
                          on_shuffle: Callable[[], object] | None = None) -> ShuffleTestResult:
    """Chi-square of the 120 orders of a 5-card deck over ``shuffles`` shuffles."""
    counts = order_counts(shuffle, shuffles, on_shuffle)
    expected = shuffles / len(counts)
    statistic = float(np.sum((counts - expected) ** 2) / expected)
    df = len(counts) - 1
    return ShuffleTestResult(
        name="orders of a 5-card deck", shuffles=shuffles, cells=len(counts),
        expected_count=expected, statistic=statistic, df=df,
        p_value=float(chi2.sf(statistic, df)),
        min_count=int(counts.min()), max_count=int(counts.max()))


# --------------------------------------------------------------------------------------------------
# The production path


def production_deal(decks: int) -> Sequence[int]:
    """A shoe exactly as the service makes one: fresh OS seed -> HMAC_DRBG -> Fisher–Yates."""
    return shoe_cards(new_server_seed(), b"", decks)


def production_shuffle(items: MutableSequence[int]) -> None:
    """The production Fisher–Yates over a shoe's DRBG with a fresh OS seed (as for one deck)."""
    DrbgRandom(shoe_drbg(new_server_seed(), b"", 1)).shuffle(items)


def run_shuffle_tests(shuffles: int, deal: Deal = production_deal,
                      shuffle: Shuffler = production_shuffle,
                      on_shuffle: Callable[[], object] | None = None) -> list[ShuffleTestResult]:
    """Card-by-position for 2 and 6 decks and the 5-card orders, ``shuffles`` shuffles each."""
    return [
        card_position_test(deal, 2, shuffles, on_shuffle),
        card_position_test(deal, 6, shuffles, on_shuffle),
        five_card_orders_test(shuffle, shuffles, on_shuffle),
    ]
