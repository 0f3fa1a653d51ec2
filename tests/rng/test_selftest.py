"""The start-up self-test and the guard that refuses dealing after a failure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.shoe_kat import KAT_CLIENT_SEED, KAT_SEED, auditor_shoe

from rng_service.rng import selftest, shoe
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.sampling import DrbgRandom
from rng_service.rng.selftest import SelfTestFailed, require_healthy_rng, run_self_test
from rng_service.rng.shoe import DrbgInputs, LazyShoe

VECTORS = Path(__file__).parent / "data" / "hmac_drbg_sha256.json"
#: card codes by card number (suit * 13 + rank - 1), written out independently of game_math
CODES = [rank + suit for suit in "SHDC" for rank in "A23456789TJQK"]


@pytest.fixture(autouse=True)
def fresh_status() -> Iterator[None]:
    selftest._status = selftest._Status.NOT_RUN
    yield
    selftest._status = selftest._Status.NOT_RUN


def test_the_self_test_passes_and_allows_dealing() -> None:
    run_self_test()
    assert selftest.rng_is_healthy()
    require_healthy_rng()


def test_the_guard_runs_the_self_test_if_it_never_ran() -> None:
    assert not selftest.rng_is_healthy()
    require_healthy_rng()
    assert selftest.rng_is_healthy()


def test_the_known_answer_vectors_are_cavp_ones() -> None:
    published = {v["name"]: v for v in json.loads(VECTORS.read_text())["vectors"]}
    kat = selftest.load_known_answers()
    assert len(kat.drbg_vectors) == 3
    for vector in kat.drbg_vectors:
        source = published[vector.name]
        for name, value in vars(vector).items():
            assert source.get(name, "") == value, (vector.name, name)


def test_the_known_answer_shoes_are_the_ones_the_auditor_recomputes() -> None:
    kat = selftest.load_known_answers()
    assert (kat.shoe_seed, kat.shoe_client_seed) == (KAT_SEED, KAT_CLIENT_SEED)
    assert kat.one_deck.split() == auditor_shoe(KAT_SEED, KAT_CLIENT_SEED, 1)
    six = [CODES.index(code) for code in auditor_shoe(KAT_SEED, KAT_CLIENT_SEED, 6)]
    assert hashlib.sha256(bytes(six)).hexdigest() == kat.six_decks_sha256


@pytest.mark.parametrize("damage", ["missing", "not json", "wrong answer"])
def test_a_damaged_known_answer_file_fails_the_self_test(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "known_answers.json"
    if damage == "not json":
        bad.write_text("{")
    elif damage == "wrong answer":
        data = json.loads(selftest.KNOWN_ANSWERS_FILE.read_text())
        data["shoes"]["one_deck"] = data["shoes"]["one_deck"].replace("6D AC", "AC 6D")
        bad.write_text(json.dumps(data))
    monkeypatch.setattr(selftest, "KNOWN_ANSWERS_FILE", bad)
    monkeypatch.setattr(selftest.load_known_answers, "__defaults__", (bad,))
    monkeypatch.setattr(selftest, "_test_known_answers", None)  # the production path
    with pytest.raises(SelfTestFailed):
        run_self_test()
    assert not selftest.rng_is_healthy()
    with pytest.raises(SelfTestFailed):
        require_healthy_rng()


def test_a_changed_drbg_mapping_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    # The nonce taken from the client seed again (the v1 mapping): the known answers catch it.
    real = shoe.drbg_inputs

    def client_seed_nonce(seed: bytes, client_seed: bytes, decks: int) -> DrbgInputs:
        inputs = real(seed, client_seed, decks)
        return inputs._replace(nonce=hashlib.sha256(client_seed).digest())

    monkeypatch.setattr(shoe, "drbg_inputs", client_seed_nonce)
    with pytest.raises(SelfTestFailed, match="shoe known answer"):
        run_self_test()
    assert not selftest.rng_is_healthy()


def test_a_broken_drbg_fails_the_self_test_and_dealing_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_generate = HmacDrbg.generate

    def off_by_one(self: HmacDrbg, n_bytes: int, additional_input: bytes = b"") -> bytes:
        out = bytearray(real_generate(self, n_bytes, additional_input))
        if out:
            out[-1] ^= 1
        return bytes(out)

    monkeypatch.setattr(HmacDrbg, "generate", off_by_one)
    with pytest.raises(SelfTestFailed, match="HMAC_DRBG"):
        run_self_test()
    with pytest.raises(SelfTestFailed, match="refused"):
        require_healthy_rng()


def test_a_broken_shuffle_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DrbgRandom, "shuffle", lambda self, items: items.reverse())
    with pytest.raises(SelfTestFailed, match="shoe"):
        run_self_test()
    assert not selftest.rng_is_healthy()


def test_a_broken_lazy_deal_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    # The full shuffle is intact; only the reference lazily dealt shoe stops shuffling.
    monkeypatch.setattr(shoe._PythonCards, "_fix", lambda self, count: None)
    with pytest.raises(SelfTestFailed, match="dealt lazily"):
        run_self_test()
    assert not selftest.rng_is_healthy()


def test_an_error_inside_the_test_counts_as_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(self: HmacDrbg, n_bytes: int, additional_input: bytes = b"") -> bytes:
        raise MemoryError

    monkeypatch.setattr(HmacDrbg, "generate", explode)
    with pytest.raises(SelfTestFailed, match="MemoryError"):
        run_self_test()
    with pytest.raises(SelfTestFailed):
        require_healthy_rng()


def test_a_later_passing_run_restores_dealing(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(DrbgRandom, "shuffle", lambda self, items: None)
        with pytest.raises(SelfTestFailed):
            run_self_test()
    run_self_test()
    require_healthy_rng()


def test_a_broken_c_shuffle_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    # The reference path is intact; only the C path shoes use gives a wrong order.
    class Reversing(LazyShoe):
        def __getitem__(self, index: Any) -> Any:
            cards = super().__getitem__(index)
            return cards[::-1] if isinstance(index, slice) else cards

    monkeypatch.setattr(shoe, "LazyShoe", Reversing)  # what shoe_cards shuffles with
    with pytest.raises(SelfTestFailed, match=r"1-deck shoe known answer does not match \(C path\)"):
        run_self_test()
    assert not selftest.rng_is_healthy()


def test_a_broken_c_lazy_deal_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    # The full shuffles are intact; only a card read alone from the C path is off.
    class OffByOne(LazyShoe):
        def __getitem__(self, index: Any) -> Any:
            card = super().__getitem__(index)
            return card if isinstance(index, slice) else (card + 1) % 52

    monkeypatch.setattr(selftest, "LazyShoe", OffByOne)
    with pytest.raises(SelfTestFailed, match=r"dealt lazily does not match .*\(C path\)"):
        run_self_test()
    assert not selftest.rng_is_healthy()
