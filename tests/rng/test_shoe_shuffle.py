"""The shoe in C (``_hmac_drbg.Cards``, LazyShoe's base: the DRBG, the shuffle and the reads in
one object) against the reference it replaces (HmacDrbg and DrbgRandom, in pure Python, and
ReferenceLazyShoe), and its refusals."""

from __future__ import annotations

import gc
import os
import pickle
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.shoe_kat import KAT_CLIENT_SEED, KAT_SEED

from game_math.cards import ordered_shoe
from rng_service.rng._hmac_drbg import Cards
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.sampling import DrbgRandom
from rng_service.rng.shoe import (
    MAX_CLIENT_SEED_BYTES,
    MAX_DECKS,
    InvalidShoeInput,
    LazyShoe,
    ReferenceLazyShoe,
    drbg_inputs,
    seed_material,
    shoe_cards,
)


def pure_python_shoe(seed: bytes, client_seed: bytes, decks: int) -> list[int]:
    """The shoe by the pure-Python DRBG core and the pure-Python shuffle steps."""
    cards = ordered_shoe(decks)
    source = DrbgRandom(HmacDrbg(*drbg_inputs(seed, client_seed, decks), reference=True))
    source._steps_python(cards, 0, len(cards) - 1)
    return cards


def test_the_c_shoe_is_built_and_is_what_shoes_use() -> None:
    # a build without it would silently lose the audit's and the simulator's speed
    assert issubclass(LazyShoe, Cards)
    assert not issubclass(ReferenceLazyShoe, Cards)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.binary(min_size=48, max_size=48),
    client_seed=st.binary(max_size=MAX_CLIENT_SEED_BYTES),
    decks=st.integers(1, MAX_DECKS),
)
def test_the_c_shoe_gives_the_reference_shoe(seed: bytes, client_seed: bytes,
                                             decks: int) -> None:
    expected = pure_python_shoe(seed, client_seed, decks)
    assert seed_material(seed, client_seed, decks) == b"".join(
        drbg_inputs(seed, client_seed, decks))
    assert shoe_cards(seed, client_seed, decks) == expected
    assert shoe_cards(seed, client_seed, decks, reference=True) == expected


@settings(max_examples=100, deadline=None)
@given(
    seed=st.binary(min_size=48, max_size=48),
    client_seed=st.binary(max_size=40),
    decks=st.integers(1, MAX_DECKS),
    data=st.data(),
)
def test_the_c_shoe_read_anyhow_gives_the_reference_shoe(
    seed: bytes, client_seed: bytes, decks: int, data: st.DataObject
) -> None:
    # a request's outputs are computed as the stream reaches them and the request closed only
    # when the next is needed: any order of reads must still draw whole generate(128) requests
    expected = pure_python_shoe(seed, client_seed, decks)
    n = len(expected)
    lazy, reference = LazyShoe(seed, client_seed, decks), ReferenceLazyShoe(seed, client_seed,
                                                                            decks)
    assert len(lazy) == n and lazy.fixed == 0
    reads = data.draw(st.lists(st.integers(-n, n - 1), max_size=12), label="reads")
    for i in reads:
        assert lazy[i] == reference[i] == expected[i]
        assert lazy.fixed >= (i % n) + 1
    start, stop = data.draw(st.integers(-n, n), label="start"), data.draw(st.integers(-n, n))
    step = data.draw(st.sampled_from([None, 1, 2, 7, -1, -3]), label="step")
    assert lazy[start:stop:step] == reference[start:stop:step] == expected[start:stop:step]
    assert list(lazy) == list(reference) == expected
    assert lazy.fixed == n


@pytest.mark.parametrize("decks", [1, 2, 6, 8, 16])
def test_many_fresh_shoes_agree_with_the_reference(decks: int) -> None:
    for _ in range(40):
        seed, client_seed = os.urandom(48), os.urandom(decks * 3)
        expected = pure_python_shoe(seed, client_seed, decks)
        lazy = LazyShoe(seed, client_seed, decks)
        assert [lazy[i] for i in range(12)] == expected[:12]
        assert lazy[:] == expected


def test_reads_outside_the_shoe_or_of_other_keys_are_refused() -> None:
    lazy = LazyShoe(KAT_SEED, KAT_CLIENT_SEED, 1)
    first = lazy[3]
    for index in (52, -53, 2**70):
        with pytest.raises(IndexError):
            lazy[index]
    for key in ("3", 3.0, None, (1, 2)):
        with pytest.raises(TypeError):
            lazy[key]  # type: ignore[call-overload]
    assert lazy.fixed == 4 and lazy[3] == first  # a refused read changed nothing
    assert lazy[:] == pure_python_shoe(KAT_SEED, KAT_CLIENT_SEED, 1)


@pytest.mark.parametrize("decks", [0, -1, 1261])
def test_the_c_shoe_refuses_deck_counts_without_one_or_two_byte_draws(decks: int) -> None:
    with pytest.raises(ValueError, match="decks"):
        Cards(KAT_SEED, decks)


def test_an_uninitialised_c_shoe_refuses_reads() -> None:
    cards = Cards.__new__(Cards)
    with pytest.raises(ValueError, match="not initialised"):
        len(cards)
    with pytest.raises(ValueError, match="not initialised"):
        cards[0]


def test_a_c_shoe_is_not_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(Cards(KAT_SEED, 1))
    with pytest.raises(TypeError):
        pickle.dumps(LazyShoe(KAT_SEED, b"", 1))


def test_a_c_shoe_in_a_reference_cycle_is_collected() -> None:
    class Holder(Cards):  # a subclass with a __dict__ can hold itself
        pass

    holder = Holder(KAT_SEED, 1)
    holder.me = holder  # type: ignore[attr-defined]
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None


def test_a_key_that_initialises_the_shoe_again_is_read_against_the_new_shoe() -> None:
    """A key's ``__index__`` runs Python code, which may initialise the shoe again (here with
    fewer decks) while the read is under way: the position is checked against the shoe as it
    is once the key is converted (a 400 checked against the old 416 cards read past the new
    list's 52 cells), and a slice is taken from the shoe's own cards at the positions converted
    once (handed to the list, its keys were converted again, and the shoe made again, read
    unshuffled)."""
    shoe = Cards(KAT_SEED, 8)

    class Shrinking:
        def __init__(self, value: int) -> None:
            self.value = value

        def __index__(self) -> int:
            shoe.__init__(KAT_SEED, 1)  # type: ignore[misc]
            return self.value

    with pytest.raises(IndexError, match=r"^position 400 is outside a 52-card shoe$"):
        shoe[Shrinking(400)]
    expected = Cards(KAT_SEED, 1)[:]
    assert shoe[Shrinking(-1)] == expected[-1] and len(shoe) == 52
    shoe = Cards(KAT_SEED, 8)
    assert shoe[Shrinking(0) : Shrinking(400)] == expected
    shoe = Cards(KAT_SEED, 8)
    assert shoe[Shrinking(400) : Shrinking(0) : Shrinking(-3)] == expected[400:0:-3]
    assert shoe.fixed == 52


@pytest.mark.parametrize("lazy_shoe", [LazyShoe, ReferenceLazyShoe])
@pytest.mark.parametrize(
    ("seed", "client_seed", "decks"),
    [(bytes(47), b"", 1), (bytes(48), b"", 0), (bytes(48), b"", 17),
     (bytes(48), bytes(MAX_CLIENT_SEED_BYTES + 1), 1)],
)
def test_both_paths_refuse_the_same_inputs(seed: bytes, client_seed: bytes, decks: int,
                                           lazy_shoe: type[LazyShoe]) -> None:
    with pytest.raises(InvalidShoeInput):
        lazy_shoe(seed, client_seed, decks)
    with pytest.raises(InvalidShoeInput):
        shoe_cards(seed, client_seed, decks, reference=lazy_shoe is ReferenceLazyShoe)
