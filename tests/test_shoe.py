"""Shoes: the known answer, an auditor's recomputation, commitments and the lifecycle."""

from __future__ import annotations

import hashlib
import pickle
from fractions import Fraction

import pytest

from game_math.cards import card_codes, ordered_shoe
from rng_service import selftest
from rng_service.drbg import HmacDrbg
from rng_service.seed_vault import SeedVault, SeedVaultError
from rng_service.shoe import (
    ClientSeedLocked,
    InvalidShoeInput,
    Shoe,
    ShoeExhausted,
    ShoeFinished,
    ShoeNotFinished,
    new_server_seed,
    seed_commitment,
    shoe_cards,
)

KAT_SEED = bytes(range(32))
KAT_CLIENT_SEED = b"fairshoe known-answer test"

# Generated once by shoe_cards after HmacDrbg passed all 36 CAVP vectors; pinned so any change to
# the DRBG mapping, the byte convention, the sampling or the shuffle shows up here.
KAT_ONE_DECK = (
    "2C 3S 6C 8H AS 7C 5H JC 9D 3C 8D 3D 7H 9H KS 4D 9C TS 8C AD 2S KC 4S KH QS AH "
    "4H 3H 7S 9S 5D KD JD 6H 2H 5C 2D JH 6S 4C QH QC TH QD 8S TC 7D TD 5S JS AC 6D"
)

KAT_TWO_DECKS = (
    "9D 8S 8H QH 7H 5D 3C QC QH 7D 9H TH 5S QC AC 8C 4D QS 3H 4C AC TC TH 2H KS QS "
    "3H 7S KD 8S 9C 3C 4C 5C 7C 7H JH TD 7C TC 9H 3D JS TS 3D 4S QD JC 7S 5C JD 8H "
    "KH 8D 2C 2S 2D 4H 6C 4H KC AD 3S 9C 6H KD 8C TD QD 2D KH JD 3S 9S 5H AD 9S 6C "
    "KS AH AS 5D 7D 6D AS 6H 8D 2S 4D 6D 5S 6S KC JH 2H AH JS 5H 9D 2C JC 6S TS 4S"
)

KAT_SIX_DECKS = (
    "JC QH TS 8D TC 6S 8S 3S TH 9D JH 7S AD KC AC 4H 8C 9C TS TH 9C 5D 2C TH 8S TH "
    "4C 6C 7S 5D 7C QD 7H 3H JH AS 5H 7D 5S TD 6H 6D KD KD 2S KC 3C 5C 9D 7H 2D 9C "
    "JS KH 9D AH AC 9S 6H QD JD AC 2H AD 4D 6S QH TD 9D 7D 4H 2C 2H JS QH 2D AD 8S "
    "3H 4S JS AC JC 8S 2C KS 3H 9C TD 2S 7H JH KC 8D 8D 7D 9S QD KH QH 6C KS JD TC "
    "3D 2H 4H 7C 9S TH KD 3C 3H 9S 6S JS 3S 5D KC QC KC AH 8H 8S 9H 6H 5H 5H AH 2S "
    "4C 5D 2S 2C JD JH JH 8D 2H 5S 5H JD 4S QC 6H 5H KD KD 4D JS 4S QS 7H 3D QC 6C "
    "6S 2H 5H 2C 7C 8D 5C 2D 6H KS 7C 6D QH 9D 9C 6C 8D 4S 3C AD 6D 4S 3S 3S 9H 9D "
    "8H 9S 7S QH 6H 3C 5S QD 4C JC 7D QS QS KH 8H 8S 4H 5C 2H KS QC 5S TC TS 4H AS "
    "JS 9H QS 5D 9H TH TD 4D TC 7H KH 6S 5C KC 3H AS 4D 5C AS 5S JD 8C 3D 8C 7C 8H "
    "AD 6D 8C TS KS AC 7D 3D 8H 3S AH 3S 4D TS QD 6S 7S 7C JC QS 2S 6C 4D 8C TC AS "
    "7S JC 4S 9S 2D 3D 2C 7H 9C QD 4C KS TS TD 6D JC TD AH 7S TC 4C 8H 3C 3C KD JD "
    "5D KH 8C AH AD QC 2S 4C QC KH 6D 4H AC 6C 9H JH 2D 3D QS 9H 3H 2D 5S AS 5C 7D"
)


def auditor_shoe(seed: bytes, client_seed: bytes, decks: int) -> list[str]:
    """The shoe recomputed from the documentation alone, from raw DRBG bytes, without DrbgRandom."""
    nonce = hashlib.sha256(b"fairshoe/client-seed/v1\0" + client_seed).digest()
    drbg = HmacDrbg(seed, nonce, b"fairshoe/shoe/v1\0" + decks.to_bytes(4, "big"))
    stream = bytearray()
    used = 0

    def draw(n: int) -> int:
        nonlocal used
        k = (n - 1).bit_length()
        width = (k + 7) // 8
        while True:
            while len(stream) - used < width:
                stream.extend(drbg.generate(640))
            value = int.from_bytes(stream[used : used + width], "big") % (1 << k)
            used += width
            if value < n:
                return value

    cards = [(suit, rank) for _ in range(decks) for suit in "SHDC" for rank in "A23456789TJQK"]
    for i in range(len(cards) - 1, 0, -1):
        j = draw(i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return [rank + suit for suit, rank in cards]


@pytest.mark.parametrize(
    ("decks", "expected"), [(1, KAT_ONE_DECK), (2, KAT_TWO_DECKS), (6, KAT_SIX_DECKS)]
)
def test_known_answer_shoes(decks: int, expected: str) -> None:
    assert card_codes(shoe_cards(KAT_SEED, KAT_CLIENT_SEED, decks)) == expected.split()
    assert auditor_shoe(KAT_SEED, KAT_CLIENT_SEED, decks) == expected.split()


@pytest.mark.parametrize("decks", [1, 2, 6, 8])
def test_an_auditor_recomputes_fresh_shoes_from_the_documentation(decks: int) -> None:
    for client_seed in (b"", b"player chose this"):
        seed = new_server_seed()
        assert card_codes(shoe_cards(seed, client_seed, decks)) == auditor_shoe(
            seed, client_seed, decks
        )


def test_a_shoe_is_a_permutation_of_the_ordered_shoe() -> None:
    cards = shoe_cards(new_server_seed(), b"", 6)
    assert sorted(cards) == sorted(ordered_shoe(6))
    assert cards != ordered_shoe(6)


def test_every_input_changes_the_shoe() -> None:
    seed = KAT_SEED
    base = shoe_cards(seed, KAT_CLIENT_SEED, 2)
    assert shoe_cards(seed, KAT_CLIENT_SEED + b"!", 2) != base
    assert shoe_cards(seed, b"", 2) != base
    assert shoe_cards(bytes(32), KAT_CLIENT_SEED, 2) != base
    # A different deck count is not just a longer prefix of the same order.
    assert shoe_cards(seed, KAT_CLIENT_SEED, 3)[:104] != base


def test_seeds_are_fresh_256_bit_values() -> None:
    seeds = {new_server_seed() for _ in range(8)}
    assert len(seeds) == 8
    assert {len(s) for s in seeds} == {32}


def test_commitment_is_a_domain_separated_sha256() -> None:
    seed = new_server_seed()
    expected = hashlib.sha256(b"fairshoe/seed-commitment/v1\0" + seed).hexdigest()
    assert seed_commitment(seed) == expected
    assert seed_commitment(seed) != hashlib.sha256(seed).hexdigest()
    assert seed_commitment(new_server_seed()) != expected


@pytest.mark.parametrize(
    ("seed", "client_seed", "decks"),
    [(bytes(31), b"", 1), (bytes(32), b"", 0), (bytes(32), b"", 17), (bytes(32), bytes(257), 1)],
)
def test_out_of_range_inputs_are_refused(seed: bytes, client_seed: bytes, decks: int) -> None:
    with pytest.raises(InvalidShoeInput):
        shoe_cards(seed, client_seed, decks)


def make_shoe(decks: int = 2, cut: Fraction | None = None) -> tuple[Shoe, bytes]:
    seed = new_server_seed()
    return Shoe(shoe_id="shoe-1", seed=seed, decks=decks, cut=cut), seed


def test_the_commitment_is_fixed_before_the_first_card() -> None:
    shoe, seed = make_shoe()
    assert shoe.commitment == seed_commitment(seed)
    assert shoe.position == 0
    shoe.start_round()
    shoe.take(4)
    assert shoe.commitment == seed_commitment(seed)


def test_a_one_round_shoe_deals_in_order_then_reveals() -> None:
    shoe, seed = make_shoe()
    assert shoe.start_round()
    assert [*shoe.take(3), shoe.deal()] == shoe_cards(seed, b"", 2)[:4]
    assert (shoe.position, shoe.remaining) == (4, 100)
    with pytest.raises(ShoeNotFinished):
        shoe.reveal()
    shoe.end_round()
    assert shoe.finished
    assert not shoe.start_round()
    with pytest.raises(ShoeFinished):
        shoe.deal()
    assert shoe.reveal() == seed


def test_a_cut_card_shoe_spans_rounds_until_one_would_start_past_the_cut() -> None:
    shoe, seed = make_shoe(decks=6, cut=Fraction(1, 2))
    assert shoe.cut_position == 156
    dealt: list[int] = []
    rounds = 0
    while shoe.start_round():
        rounds += 1
        dealt += shoe.take(25)
        shoe.end_round()
        if not shoe.finished:
            with pytest.raises(ShoeNotFinished):
                shoe.reveal()
    # Rounds start at 0, 25, ..., 150 (< 156); the one ending at 175 finishes the shoe.
    assert rounds == 7
    assert shoe.finished
    assert dealt == shoe_cards(seed, b"", 6)[:175]
    assert shoe.reveal() == seed


def test_start_round_at_the_cut_finishes_the_shoe() -> None:
    shoe, _ = make_shoe(decks=1, cut=Fraction(1, 2))
    assert shoe.start_round()
    shoe.take(26)
    assert not shoe.start_round()
    assert shoe.finished


def test_revealing_before_the_end_is_refused_without_the_seed() -> None:
    shoe, seed = make_shoe()
    shoe.start_round()
    with pytest.raises(ShoeNotFinished) as caught:
        shoe.reveal()
    assert seed.hex() not in str(caught.value)
    assert repr(seed) not in str(caught.value)


def test_the_seed_never_appears_in_repr_str_or_pickles() -> None:
    shoe, seed = make_shoe(decks=6, cut=Fraction(3, 4))
    for text in (repr(shoe), str(shoe), f"{shoe}", f"{shoe!r}"):
        assert seed.hex() not in text
        assert repr(seed)[2:-1] not in text
        assert shoe.commitment in text
    with pytest.raises(TypeError):
        pickle.dumps(shoe)


def test_the_client_seed_may_change_until_the_cards_are_fixed() -> None:
    shoe, seed = make_shoe()
    shoe.set_client_seed(b"lucky")
    shoe.start_round()
    assert shoe.take(104) == shoe_cards(seed, b"lucky", 2)
    with pytest.raises(ClientSeedLocked):
        shoe.set_client_seed(b"other")


def test_asking_for_more_cards_than_remain_is_refused() -> None:
    shoe, _ = make_shoe(decks=1)
    shoe.start_round()
    shoe.take(50)
    with pytest.raises(ShoeExhausted):
        shoe.take(3)
    assert shoe.position == 50


@pytest.mark.parametrize("cut", [Fraction(0), Fraction(1), Fraction(3, 2)])
def test_a_cut_must_lie_inside_the_shoe(cut: Fraction) -> None:
    with pytest.raises(InvalidShoeInput):
        make_shoe(cut=cut)


def test_a_sealed_shoe_restores_with_the_same_cards() -> None:
    vault = SeedVault(bytes(range(32)))
    shoe, seed = make_shoe(decks=6, cut=Fraction(1, 2))
    shoe.set_client_seed(b"cs")
    shoe.start_round()
    first = shoe.take(10)
    blob = shoe.seal_seed(vault)
    assert seed not in blob
    again = Shoe.restore(
        vault, blob, shoe_id=shoe.id, decks=6, client_seed=b"cs", cut=Fraction(1, 2),
        position=shoe.position, rounds_started=1,
    )
    assert again.commitment == shoe.commitment
    assert again.take(5) == shoe_cards(seed, b"cs", 6)[10:15]
    assert first == shoe_cards(seed, b"cs", 6)[:10]
    with pytest.raises(SeedVaultError):
        Shoe.restore(vault, blob, shoe_id="another-shoe", decks=6)


def test_new_shoes_have_fresh_ids_and_seeds() -> None:
    a, b = Shoe.new(2), Shoe.new(6, cut=Fraction(1, 2))
    assert a.id != b.id
    assert a.commitment != b.commitment
    assert len(a.id) == 32


def test_new_shoes_are_refused_when_the_self_test_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selftest, "_status", selftest._Status.FAILED)
    with pytest.raises(selftest.SelfTestFailed):
        Shoe.new(2)
