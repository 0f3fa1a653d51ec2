"""Shuffle uniformity tests: the statistics, the production path, and a biased shuffle."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, MutableSequence, Sequence

import numpy as np
import pytest
from scipy.stats import chi2, kstest

from game_math.cards import ordered_shoe
from rng_service.lab.stats import shuffle_tests as st
from rng_service.rng.sampling import DrbgRandom
from rng_service.rng.shoe import shoe_cards, shoe_drbg


def _seeds(label: bytes) -> Iterator[bytes]:
    """Fixed 48-byte seeds, so CI runs are reproducible (the evidence runs use OS seeds)."""
    counter = 0
    while True:
        yield hashlib.sha384(label + counter.to_bytes(8, "big")).digest()
        counter += 1


def _production_deal(label: bytes) -> st.Deal:
    seeds = _seeds(label)

    def deal(decks: int) -> Sequence[int]:
        return shoe_cards(next(seeds), b"", decks)

    return deal


def _production_shuffle(label: bytes) -> st.Shuffler:
    seeds = _seeds(label)

    def shuffle(items: MutableSequence[int]) -> None:
        DrbgRandom(shoe_drbg(next(seeds), b"", 1)).shuffle(items)

    return shuffle


def _naive_shuffle(items: MutableSequence[int], rng: DrbgRandom) -> None:
    """The classic mistake: swap every position with one drawn from the whole deck."""
    n = len(items)
    for i in range(n):
        j = rng.randbelow(n)
        items[i], items[j] = items[j], items[i]


def test_a_single_shuffle_gives_exactly_the_degrees_of_freedom() -> None:
    # For K = 1 the table is the shoe's indicator matrix: Pearson's X^2 = 51c exactly, the mean of
    # X^2 for any K; scaled by (c-1)/c it is 51(c-1), the degrees of freedom.
    for decks in (1, 2, 6):
        result = st.card_position_test(_production_deal(b"single"), decks, 1)
        assert result.df == 51 * (52 * decks - 1)
        assert result.statistic == pytest.approx(result.df)
        assert result.expected_count == pytest.approx(1 / 52)


def test_corrected_statistic_is_chi_square_for_a_perfect_shuffle() -> None:
    # numpy's permutations as the perfect shuffle: 400 tables of 300 one-deck shuffles.
    rng = np.random.default_rng(2024)
    positions = 52

    def deal(decks: int) -> Sequence[int]:
        return list(rng.permutation(52 * decks) % 52)

    corrected, uncorrected = [], []
    for _ in range(400):
        result = st.card_position_test(deal, 1, 300)
        corrected.append(result.p_value)
        raw = result.statistic * positions / (positions - 1)
        uncorrected.append(chi2.sf(raw, result.df))
    assert kstest(corrected, "uniform").pvalue > 0.01
    # Without the (c-1)/c factor the P-values are visibly too small.
    assert kstest(uncorrected, "uniform").pvalue < 1e-6


def test_card_position_on_the_production_path() -> None:
    deal = _production_deal(b"ci card x position")
    for decks, shuffles in ((2, 4000), (6, 3000)):
        result = st.card_position_test(deal, decks, shuffles)
        assert result.cells == 52 * 52 * decks
        assert result.expected_count == pytest.approx(shuffles / 52)
        assert result.passed, result


def test_five_card_orders_on_the_production_path() -> None:
    result = st.five_card_orders_test(_production_shuffle(b"ci five cards"), 12_000)
    assert (result.cells, result.df, result.expected_count) == (120, 119, 100)
    assert result.min_count > 0
    assert result.passed, result


def test_a_biased_shuffle_is_detected_at_ci_size() -> None:
    seeds = _seeds(b"ci naive")

    def naive_deal(decks: int) -> Sequence[int]:
        cards = ordered_shoe(decks)
        _naive_shuffle(cards, DrbgRandom(shoe_drbg(next(seeds), b"", decks)))
        return cards

    def naive_shuffle(items: MutableSequence[int]) -> None:
        _naive_shuffle(items, DrbgRandom(shoe_drbg(next(seeds), b"", 1)))

    two_decks = st.card_position_test(naive_deal, 2, 4000)
    five_cards = st.five_card_orders_test(naive_shuffle, 12_000)
    assert not two_decks.passed
    assert two_decks.p_value < 1e-9
    assert not five_cards.passed
    assert five_cards.p_value < 1e-9


def test_production_sources_use_fresh_seeds() -> None:
    first, second = st.production_deal(2), st.production_deal(2)
    assert sorted(first) == sorted(second) == sorted(ordered_shoe(2))
    assert first != second
    deck = list(range(5))
    st.production_shuffle(deck)
    assert sorted(deck) == [0, 1, 2, 3, 4]


def test_run_shuffle_tests_runs_all_three() -> None:
    seen: list[int] = []
    results = st.run_shuffle_tests(200, _production_deal(b"all three"),
                                   _production_shuffle(b"all three"),
                                   on_shuffle=lambda: seen.append(1))
    assert [r.name for r in results] == [
        "card x position, 2 decks", "card x position, 6 decks", "orders of a 5-card deck"]
    assert len(seen) == 600


def test_a_short_shoe_is_refused() -> None:
    with pytest.raises(ValueError, match="104 cards"):
        st.card_position_test(lambda decks: [0] * 52, 2, 1)
