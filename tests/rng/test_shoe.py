"""Shoes: the known answer, an auditor's recomputation, lazy dealing, commitments, the lifecycle."""

from __future__ import annotations

import hashlib
import pickle
import subprocess
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.shoe_kat import KAT_CLIENT_SEED, KAT_SEED, auditor_shoe

from game_math.cards import card_codes, ordered_shoe
from game_math.games import game_rules
from game_math.round import Action, ActionKind, Decision, HandBet, Phase, Round
from game_math.rules import GAME_IDS
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.seed_vault import SeedVault, SeedVaultError
from rng_service.rng.shoe import (
    ClientSeedLocked,
    InvalidShoeInput,
    LazyShoe,
    ReferenceLazyShoe,
    Shoe,
    ShoeExhausted,
    ShoeFinished,
    ShoeNotFinished,
    drbg_inputs,
    new_server_seed,
    new_server_seeds,
    seed_commitment,
    shoe_cards,
    shoe_drbg,
)

# Generated once by shoe_cards after HmacDrbg passed all 36 CAVP vectors (forward Fisher–Yates,
# 128-byte requests, the v2 mapping: 48-byte seed = entropy input || nonce, client seed in the
# personalization string), and matched by auditor_shoe (tests/support/shoe_kat.py) and by a
# separate stdlib-hmac HMAC_DRBG; pinned so any change to the DRBG mapping, the byte convention,
# the sampling or the shuffle shows up here.
KAT_ONE_DECK = (
    "6D AC 2H QH AD 3C 2S 8S 5H KH 5D 7S QC JD 5S 9C 4H QS 9H 5C 2D 9D 7C JC 6S 4C "
    "3H QD 8C TS KS AS KC 2C JH 6C TH 7H 3S TC 8H KD 8D 3D 9S 7D JS 4D 6H 4S TD AH"
)

KAT_TWO_DECKS = (
    "5D 9H AD 9D 2H 8H 2D 8S 5S 3S QD 9S JD 2D 6H AS 2H 6D 6S 6D AD 5H 2C AH 6C 6S "
    "8S 3C KD QS 4C 3D TC 5C QH 8C 2C 9C 3H QH AC QD 8H 7C JS 8D 5S 2S 4C KC 4D JC "
    "TH 9H KS TS 5C 9C TC 5H QC QC JH 4H AS 5D KH 6C 3D 7C TS JD KC 4S 4H JH 7H 8D "
    "JS AC 7H 7S 4D 2S QS 3S TD TH KS 7S 9D 8C 3C KD AH 4S KH 7D 6H TD 3H JC 7D 9S"
)

KAT_SIX_DECKS = (
    "QD TH 4C 4H 7S 6D AS 2S 3S QS 2D 4D 3S 6C AD 8S AH 9H TH TH 8C 7D 5C QC 2D KH "
    "AC KD TC 7D KH 3H 7H 2S 3S 6C QS 9H 9C KD 4H TH 7S 4S 8H 3H 7H JD 3C AC 7D 6H "
    "JC 6S 2H AS TS AC AS 4D 8H 6H 2D 2C KS 5D AH 5S JH KD 4H JS JS 4D 3C 3S 2H 9C "
    "3H AC 4H 4C 4S 8D 8H 8C AS 9C 7D 8S JD 7S 7H 5C 7C 2C 8D TS 9C 2C 5S 6H 5H 7S "
    "6S 6H 6D 5D 4S 9S 6C 8C 7C QC 8S AH JS 2H TD 6C 5S TC 6D TD QH 4D AC 7D 9D 6S "
    "8C 3C 5H 9S QC 3C 9D QC KD KC KD 4D JH 2S TS 5H 4S JC 5C 2H 8D QS 9H TD JC 5D "
    "KS AD 3S TC 9H 2H 9S QD TD AD 4S KC 2S 7D TH 2D 2S 9D 9C 2C QD QS QH 8D 5H JH "
    "2S 8H QH 5S 9S JH 3H 8D AC 3D 2D 5D 7C TS AS KH JD 6D 8S 7C AH JH KH 5C QS TH "
    "KC 7C 3C 9H QH 8S AD KS KH 9D 6C QD AS TC QS 9D 6C TD 2C 3H 4C 7H QD JD JS 5H "
    "JS 5C JS KS AD 6S 5S 2D 5H KS AD 6H 6S 3S TD KC JC TS JC 7S TC 4C AH KH 6H QD "
    "QH KS 5D 9S 9S KC 3D 5S 3D 2H 8H 3D 6D 7C 7S 4H 8C 6D QH TC KD 8S 7H 9H 4S 2C "
    "AH 3C QC 8D JD 3H 3D TS 7H 5C KC 4H 8H 4D 3D JD JH 4C QC 6S 4C 9C 5D 9D JC 8C"
)


@pytest.mark.parametrize(
    ("decks", "expected"), [(1, KAT_ONE_DECK), (2, KAT_TWO_DECKS), (6, KAT_SIX_DECKS)]
)
def test_known_answer_shoes(decks: int, expected: str) -> None:
    assert card_codes(shoe_cards(KAT_SEED, KAT_CLIENT_SEED, decks)) == expected.split()
    assert auditor_shoe(KAT_SEED, KAT_CLIENT_SEED, decks) == expected.split()


def test_a_batch_of_seeds_is_one_read_of_the_os_csprng_cut_into_48_byte_seeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []

    def token_bytes(n: int) -> bytes:
        reads.append(n)
        return bytes(i % 251 for i in range(n))

    monkeypatch.setattr("rng_service.rng.shoe.secrets.token_bytes", token_bytes)
    seeds = new_server_seeds(5)
    pool = token_bytes(5 * 48)
    assert reads[0] == 5 * 48 and len(reads) == 2  # one read for the batch (and ours)
    assert seeds == [pool[i * 48:(i + 1) * 48] for i in range(5)]
    monkeypatch.undo()
    fresh = new_server_seeds(64)
    assert len(set(fresh)) == 64 and {len(s) for s in fresh} == {48}


@pytest.mark.parametrize("decks", [1, 2, 6, 8])
def test_an_auditor_recomputes_fresh_shoes_from_the_documentation(decks: int) -> None:
    for client_seed in (b"", b"player chose this"):
        seed = new_server_seed()
        assert card_codes(shoe_cards(seed, client_seed, decks)) == auditor_shoe(
            seed, client_seed, decks
        )


@settings(max_examples=80, deadline=None)
@given(
    seed=st.binary(min_size=48, max_size=48),
    client_seed=st.binary(max_size=8),
    decks=st.sampled_from([1, 2, 6, 8]),
    data=st.data(),
)
def test_lazy_dealing_of_any_prefix_is_the_full_shuffles_prefix(
    seed: bytes, client_seed: bytes, decks: int, data: st.DataObject
) -> None:
    full = shoe_cards(seed, client_seed, decks)
    count = data.draw(st.integers(0, len(full)), label="prefix")
    lazy = LazyShoe(seed, client_seed, decks)
    assert len(lazy) == len(full)
    # Card by card, as a round deals.
    assert [lazy[i] for i in range(count)] == full[:count]
    # Then any further reads, in any order, by index or slice.
    reads = data.draw(st.lists(st.integers(-len(full), len(full) - 1), max_size=5), label="reads")
    assert [lazy[i] for i in reads] == [full[i] for i in reads]
    assert lazy[count // 2 : count + 20 : 3] == full[count // 2 : count + 20 : 3]
    assert list(lazy) == full


def test_iteration_shuffles_only_as_far_as_it_is_read() -> None:
    seed = new_server_seed()
    full = shoe_cards(seed, b"", 6)
    lazy = LazyShoe(seed, b"", 6)
    dealt = iter(lazy)
    assert [next(dealt) for _ in range(30)] == full[:30]
    assert 30 <= lazy.fixed < len(full)
    assert list(LazyShoe(seed, b"", 6)) == full
    assert lazy[::-1] == full[::-1]
    assert lazy.fixed == len(full)


def test_a_round_of_a_fresh_6_deck_shoe_costs_one_128_byte_drbg_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests: list[int] = []
    real_generate = HmacDrbg.generate

    def counted(self: HmacDrbg, n_bytes: int, additional_input: bytes = b"") -> bytes:
        requests.append(n_bytes)
        return real_generate(self, n_bytes, additional_input)

    monkeypatch.setattr(HmacDrbg, "generate", counted)
    # the reference path, whose requests are HmacDrbg's (the C shuffle makes the same ones inside)
    lazy = ReferenceLazyShoe(KAT_SEED, KAT_CLIENT_SEED, 6)
    assert card_codes(lazy[i] for i in range(12)) == KAT_SIX_DECKS.split()[:12]
    assert requests == [128]
    assert lazy.fixed < 40
    assert card_codes(lazy) == KAT_SIX_DECKS.split()
    assert requests == [128] * len(requests) and len(requests) >= 5


def test_a_lazy_shoe_hides_its_cards_and_is_not_pickled() -> None:
    seed = new_server_seed()
    lazy = LazyShoe(seed, b"", 1)
    lazy[51]
    assert " ".join(card_codes(lazy)) not in repr(lazy)
    assert seed.hex() not in repr(lazy)
    with pytest.raises(TypeError):
        pickle.dumps(lazy)
    with pytest.raises(IndexError):
        lazy[52]
    with pytest.raises(IndexError):
        lazy[-53]


def always_stand_or_hit_to_17(rnd: Round) -> Action:
    turn = rnd.turn
    if turn.phase is Phase.INSURANCE:
        if turn.decision is Decision.EVEN_MONEY:
            return Action(ActionKind.EVEN_MONEY, accept=False)
        return Action(ActionKind.INSURANCE, amount=0)
    assert turn.hand is not None
    legal = {la.action for la in rnd.legal_actions()}
    return Action("hit" if "hit" in legal and rnd.hand(turn.hand).total < 17 else "stand")


@pytest.mark.parametrize("game", GAME_IDS)
def test_the_engine_deals_the_same_round_from_a_lazy_shoe(game: str) -> None:
    rules = game_rules(game)
    hands = [HandBet(1000)] * max(rules.hands.counts)
    for _ in range(20):
        seed = new_server_seed()
        rounds = [Round(rules, shoe, hands) for shoe in (
            shoe_cards(seed, b"", rules.decks), LazyShoe(seed, b"", rules.decks))]
        for rnd in rounds:
            while not rnd.finished:
                rnd.act(always_stand_or_hit_to_17(rnd))
        full, lazy = rounds
        assert lazy.events == full.events
        assert lazy.position == full.position
        assert isinstance(lazy.shoe, LazyShoe)
        assert lazy.shoe.fixed < len(lazy.shoe)


def test_a_shoe_is_a_permutation_of_the_ordered_shoe() -> None:
    cards = shoe_cards(new_server_seed(), b"", 6)
    assert sorted(cards) == sorted(ordered_shoe(6))
    assert cards != ordered_shoe(6)


def test_every_input_changes_the_shoe() -> None:
    seed = KAT_SEED
    base = shoe_cards(seed, KAT_CLIENT_SEED, 2)
    assert shoe_cards(seed, KAT_CLIENT_SEED + b"!", 2) != base
    assert shoe_cards(seed, b"", 2) != base
    assert shoe_cards(bytes(48), KAT_CLIENT_SEED, 2) != base
    # The nonce half of the seed counts as much as the entropy-input half.
    assert shoe_cards(seed[:32] + bytes(16), KAT_CLIENT_SEED, 2) != base
    assert shoe_cards(bytes(32) + seed[32:], KAT_CLIENT_SEED, 2) != base
    # A different deck count is not just a longer prefix of the same order.
    assert shoe_cards(seed, KAT_CLIENT_SEED, 3)[:104] != base


def test_seeds_are_fresh_48_byte_values() -> None:
    seeds = {new_server_seed() for _ in range(8)}
    assert len(seeds) == 8
    assert {len(s) for s in seeds} == {48}


def test_the_drbg_inputs_are_the_documented_mapping() -> None:
    inputs = drbg_inputs(KAT_SEED, KAT_CLIENT_SEED, 6)
    assert inputs.entropy_input == bytes(range(32))
    assert inputs.nonce == bytes(range(32, 48))
    assert inputs.personalization_string == (
        b"fairshoe/shoe/v2\0" + b"\0\0\0\x06"
        + hashlib.sha256(b"fairshoe/client-seed/v2\0" + KAT_CLIENT_SEED).digest()
    )
    assert KAT_SEED.hex() not in repr(inputs) and inputs.nonce.hex() not in str(inputs)


@pytest.mark.parametrize("client_seed", [b"", b"same player seed"])
def test_shoes_with_the_same_client_seed_get_different_nonces(client_seed: bytes) -> None:
    # SP 800-90A 8.6.7: the nonce must not repeat, whatever (or however empty) the client seed.
    inputs = [drbg_inputs(new_server_seed(), client_seed, 6) for _ in range(64)]
    assert len({i.nonce for i in inputs}) == 64
    assert {len(i.nonce) for i in inputs} == {16}
    # Same entropy input, different nonce: a different DRBG, so a different shoe.
    seed = new_server_seed()
    other = seed[:32] + bytes(b ^ 0xFF for b in seed[32:])
    first = shoe_drbg(seed, client_seed, 6).generate(32)
    assert shoe_drbg(other, client_seed, 6).generate(32) != first
    assert shoe_drbg(seed, client_seed, 6).generate(32) == first


def test_the_client_seed_is_in_the_personalization_not_the_nonce() -> None:
    seed = new_server_seed()
    plain, chosen = drbg_inputs(seed, b"", 2), drbg_inputs(seed, b"chosen", 2)
    assert plain.nonce == chosen.nonce == seed[32:]
    assert plain.personalization_string != chosen.personalization_string


def test_commitment_is_a_domain_separated_sha256() -> None:
    seed = new_server_seed()
    expected = hashlib.sha256(b"fairshoe/seed-commitment/v1\0" + seed).hexdigest()
    assert seed_commitment(seed) == expected
    assert seed_commitment(seed) != hashlib.sha256(seed).hexdigest()
    assert seed_commitment(new_server_seed()) != expected
    # The nonce half is committed to as well: the server cannot swap it after the commitment.
    assert seed_commitment(seed[:32] + bytes(b ^ 1 for b in seed[32:])) != expected


@pytest.mark.parametrize(
    ("seed", "client_seed", "decks"),
    [
        (bytes(32), b"", 1),  # a seed of the old 32-byte format: no nonce
        (bytes(47), b"", 1),
        (bytes(49), b"", 1),
        (bytes(64), b"", 1),
        (bytes(48), b"", 0),
        (bytes(48), b"", 17),
        (bytes(48), bytes(257), 1),
    ],
)
def test_out_of_range_inputs_are_refused(seed: bytes, client_seed: bytes, decks: int) -> None:
    with pytest.raises(InvalidShoeInput):
        shoe_cards(seed, client_seed, decks)
    with pytest.raises(InvalidShoeInput):
        Shoe(shoe_id="s", seed=seed, decks=decks, client_seed=client_seed)


def test_a_wrong_seed_length_is_named_without_the_seed() -> None:
    seed = bytes(range(1, 33))
    with pytest.raises(InvalidShoeInput, match="32 bytes; a server seed is exactly 48") as caught:
        LazyShoe(seed, b"", 1)
    assert seed.hex() not in str(caught.value)


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
    assert shoe.cards.fixed < shoe.size  # dealt lazily: the rest is not shuffled yet
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


@pytest.mark.processes
def test_the_shoe_module_does_not_import_the_self_test() -> None:
    # Shoe.new once ran the self-test as a hidden side effect through a circular import
    code = "import sys, rng_service.rng.shoe; print('rng_service.rng.selftest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
