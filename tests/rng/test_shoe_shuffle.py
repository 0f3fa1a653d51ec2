"""The shoe's shuffle in C (``_hmac_drbg.Shuffle``: the DRBG and Fisher-Yates in one object)
against the reference it replaces (HmacDrbg and DrbgRandom, pure Python), and its refusals."""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.shoe_kat import KAT_CLIENT_SEED, KAT_SEED

from game_math.cards import ordered_shoe
from rng_service.rng import shoe
from rng_service.rng._hmac_drbg import Shuffle
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.sampling import DrbgRandom
from rng_service.rng.shoe import (
    MAX_CLIENT_SEED_BYTES,
    MAX_DECKS,
    InvalidShoeInput,
    LazyShoe,
    drbg_inputs,
    shoe_cards,
    shoe_personalization,
)


def pure_python_shoe(seed: bytes, client_seed: bytes, decks: int) -> list[int]:
    """The shoe by the pure-Python DRBG core and the pure-Python shuffle steps."""
    cards = ordered_shoe(decks)
    source = DrbgRandom(HmacDrbg(*drbg_inputs(seed, client_seed, decks), reference=True))
    source._steps_python(cards, 0, len(cards) - 1)
    return cards


def test_the_c_shuffle_is_built_and_is_what_shoes_use() -> None:
    # a build without it would silently lose the audit's and the simulator's speed
    assert shoe._CShuffle is Shuffle
    assert LazyShoe(KAT_SEED, b"", 2)._shuffle is not None
    assert LazyShoe(KAT_SEED, b"", 2, reference=True)._shuffle is None


@settings(max_examples=150, deadline=None)
@given(
    seed=st.binary(min_size=48, max_size=48),
    client_seed=st.binary(max_size=MAX_CLIENT_SEED_BYTES),
    decks=st.integers(1, MAX_DECKS),
)
def test_the_c_shuffle_gives_the_reference_shoe(seed: bytes, client_seed: bytes,
                                                decks: int) -> None:
    expected = pure_python_shoe(seed, client_seed, decks)
    assert shoe_cards(seed, client_seed, decks) == expected
    assert shoe_cards(seed, client_seed, decks, reference=True) == expected


@settings(max_examples=100, deadline=None)
@given(
    seed=st.binary(min_size=48, max_size=48),
    client_seed=st.binary(max_size=40),
    decks=st.integers(1, MAX_DECKS),
    data=st.data(),
)
def test_the_c_shuffle_split_anyhow_gives_the_reference_shoe(
    seed: bytes, client_seed: bytes, decks: int, data: st.DataObject
) -> None:
    # the stream's requests are computed as it reaches them and closed only when the next is
    # needed: any split of the steps must still read the bytes of whole generate(128) requests
    expected = pure_python_shoe(seed, client_seed, decks)
    n = len(expected)
    stops = sorted(data.draw(st.lists(st.integers(0, n - 1), max_size=12), label="stops"))
    cards = ordered_shoe(decks)
    shuffle = Shuffle(seed + shoe_personalization(client_seed, decks), n)
    for stop in [*stops, n - 1]:
        shuffle.steps(cards, stop)
        assert shuffle.done == stop
        assert cards[:stop] == expected[:stop]
    assert cards == expected
    lazy, reference = LazyShoe(seed, client_seed, decks), LazyShoe(seed, client_seed, decks,
                                                                   reference=True)
    reads = data.draw(st.lists(st.integers(-n, n - 1), max_size=8), label="reads")
    assert [lazy[i] for i in reads] == [reference[i] for i in reads] == [expected[i] for i in reads]
    assert list(lazy) == list(reference) == expected


@pytest.mark.parametrize("decks", [1, 2, 6, 8, 16])
def test_many_fresh_shoes_agree_with_the_reference(decks: int) -> None:
    for _ in range(40):
        seed, client_seed = os.urandom(48), os.urandom(decks * 3)
        lazy = LazyShoe(seed, client_seed, decks)
        assert lazy[0:12] == pure_python_shoe(seed, client_seed, decks)[:12]
        assert shoe_cards(seed, client_seed, decks) == pure_python_shoe(seed, client_seed, decks)


def test_a_shuffle_refuses_steps_outside_it_or_another_list() -> None:
    material = KAT_SEED + shoe_personalization(KAT_CLIENT_SEED, 1)
    cards = ordered_shoe(1)
    shuffle = Shuffle(material, 52)
    shuffle.steps(cards, 10)
    before = list(cards)
    for items, stop in ((cards, 9), (cards, 52), (cards[:51], 20), ([*cards, 0], 20)):
        with pytest.raises(ValueError, match="steps"):
            shuffle.steps(items, stop)
    with pytest.raises(TypeError):
        shuffle.steps(tuple(cards), 20)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        shuffle.steps(cards)  # type: ignore[call-arg]
    assert cards == before and shuffle.done == 10  # a refused call changed nothing
    shuffle.steps(cards, 51)
    assert cards == pure_python_shoe(KAT_SEED, KAT_CLIENT_SEED, 1)


@pytest.mark.parametrize("size", [0, -1, 2**16 + 1])
def test_a_shuffle_refuses_sizes_without_one_or_two_byte_draws(size: int) -> None:
    with pytest.raises(ValueError, match="size"):
        Shuffle(KAT_SEED, size)


def test_a_shuffle_is_not_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(Shuffle(KAT_SEED, 52))


@pytest.mark.parametrize("reference", [False, True])
@pytest.mark.parametrize(
    ("seed", "client_seed", "decks"),
    [(bytes(47), b"", 1), (bytes(48), b"", 0), (bytes(48), b"", 17),
     (bytes(48), bytes(MAX_CLIENT_SEED_BYTES + 1), 1)],
)
def test_both_paths_refuse_the_same_inputs(seed: bytes, client_seed: bytes, decks: int,
                                           reference: bool) -> None:
    with pytest.raises(InvalidShoeInput):
        shoe_cards(seed, client_seed, decks, reference=reference)
    with pytest.raises(InvalidShoeInput):
        LazyShoe(seed, client_seed, decks, reference=reference)
