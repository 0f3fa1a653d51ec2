"""The start-up self-test and the guard that refuses dealing after a failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rng_service import selftest
from rng_service.drbg import HmacDrbg
from rng_service.sampling import DrbgRandom
from rng_service.selftest import SelfTestFailed, require_healthy_rng, run_self_test
from rng_service.shoe import LazyShoe

VECTORS = Path(__file__).parent / "data" / "hmac_drbg_sha256.json"


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


def test_the_embedded_vectors_are_the_cavp_ones() -> None:
    published = {v["name"]: v for v in json.loads(VECTORS.read_text())["vectors"]}
    for vector in selftest._DRBG_VECTORS:
        source = published[vector.name]
        for name, value in vars(vector).items():
            assert source.get(name, "") == value, (vector.name, name)


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
    # The full shuffle is intact; only the lazily dealt shoe (what rounds read) stops shuffling.
    monkeypatch.setattr(LazyShoe, "_fix", lambda self, count: None)
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
