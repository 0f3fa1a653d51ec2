"""HMAC_DRBG(SHA-256): the NIST CAVP vectors and the limits SP 800-90A sets."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.rng import drbg as drbg_module
from rng_service.rng.drbg import (
    MAX_BYTES_PER_REQUEST,
    RESEED_INTERVAL,
    HmacDrbg,
    InsufficientEntropy,
    RequestTooLarge,
    ReseedRequired,
    Uninstantiated,
    os_seeded_output,
)

REPO = Path(__file__).resolve().parents[2]
VECTORS_COPY = REPO / "tests" / "rng" / "data" / "hmac_drbg_sha256.json"
# CI and the shared workspace keep the original beside the clone.
VECTORS_SHARED = REPO.parent / "shared" / "vectors" / "hmac_drbg_sha256.json"

ENTROPY = bytes(range(32))
NONCE = bytes(range(100, 116))


def load_vectors() -> dict[str, Any]:
    path = VECTORS_COPY if VECTORS_COPY.exists() else VECTORS_SHARED
    data: dict[str, Any] = json.loads(path.read_text())
    return data


VECTORS = load_vectors()["vectors"]


def field(vector: dict[str, str], name: str) -> bytes:
    return bytes.fromhex(vector.get(name, ""))


def test_the_vector_file_has_all_36_cases() -> None:
    names = [v["name"] for v in VECTORS]
    assert len(names) == 36 == len(set(names))
    reseeding = [v for v in VECTORS if "entropy_input_reseed" in v]
    with_additional = [v for v in reseeding if v.get("additional_input_1")]
    with_personalization = [v for v in VECTORS if v["personalization_string"]]
    assert (len(reseeding), len(with_additional), len(with_personalization)) == (6, 3, 15)


# SHA-256 of ../shared/vectors/hmac_drbg_sha256.json as the project received it
SHARED_VECTORS_SHA256 = "80ff1e5b3cad0837c7f3485a79e37a058128f489034374a46022d4b8531f5bf5"


def test_the_copy_is_the_shared_vector_file() -> None:
    assert hashlib.sha256(VECTORS_COPY.read_bytes()).hexdigest() == SHARED_VECTORS_SHA256
    if VECTORS_SHARED.exists():  # beside a clone (as in CI): the original must still agree
        assert VECTORS_COPY.read_bytes() == VECTORS_SHARED.read_bytes()


@pytest.mark.parametrize("reference", [False, True], ids=["c-core", "python-core"])
@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_cavp_vector(vector: dict[str, str], reference: bool) -> None:
    # The file's procedure: instantiate; reseed if given; generate 1024 bits twice; check the 2nd.
    drbg = HmacDrbg(
        field(vector, "entropy_input"),
        field(vector, "nonce"),
        field(vector, "personalization_string"),
        reference=reference,
    )
    assert drbg.reference is reference
    if "entropy_input_reseed" in vector:
        drbg.reseed(field(vector, "entropy_input_reseed"), field(vector, "additional_input_reseed"))
    drbg.generate(128, field(vector, "additional_input_1"))
    assert drbg.generate(128, field(vector, "additional_input_2")) == field(vector, "returned_bits")


def test_the_c_core_is_built() -> None:
    # a build without it would still be right, but four times slower per one-round shoe
    assert drbg_module._CCore is not None
    assert not HmacDrbg(ENTROPY, NONCE).reference


@settings(max_examples=300, deadline=None)
@given(entropy=st.binary(min_size=32, max_size=80), nonce=st.binary(max_size=40),
       personalization=st.binary(max_size=200), reseed=st.none() | st.binary(min_size=32,
                                                                               max_size=64),
       additional=st.binary(max_size=100),
       sizes=st.lists(st.integers(min_value=0, max_value=700), min_size=1, max_size=6))
def test_the_c_core_gives_the_reference_cores_bytes(  # noqa: PLR0917  (hypothesis's draws)
    entropy: bytes, nonce: bytes, personalization: bytes, reseed: bytes | None,
    additional: bytes, sizes: list[int],
) -> None:
    fast = HmacDrbg(entropy, nonce, personalization)
    slow = HmacDrbg(entropy, nonce, personalization, reference=True)
    if reseed is not None:
        fast.reseed(reseed, additional)
        slow.reseed(reseed, additional)
    for i, size in enumerate(sizes):
        extra = additional if i % 2 else b""
        assert fast.generate(size, extra) == slow.generate(size, extra)


def test_a_drbg_is_not_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(HmacDrbg(ENTROPY, NONCE))


def test_requests_are_limited_to_2_to_the_19_bits() -> None:
    drbg = HmacDrbg(ENTROPY, NONCE)
    assert len(drbg.generate(MAX_BYTES_PER_REQUEST)) == 2**16
    with pytest.raises(RequestTooLarge):
        drbg.generate(MAX_BYTES_PER_REQUEST + 1)
    with pytest.raises(ValueError, match="negative"):
        drbg.generate(-1)


def test_reseed_is_demanded_after_the_interval_and_clears_it() -> None:
    drbg = HmacDrbg(ENTROPY, NONCE, reseed_interval=2)
    drbg.generate(16)
    drbg.generate(16)
    with pytest.raises(ReseedRequired):
        drbg.generate(16)
    with pytest.raises(ReseedRequired):  # still refused: nothing was produced meanwhile
        drbg.generate(16)
    drbg.reseed(bytes(32))
    assert len(drbg.generate(16)) == 16


def test_the_reseed_interval_cannot_exceed_the_standard() -> None:
    with pytest.raises(ValueError):
        HmacDrbg(ENTROPY, NONCE, reseed_interval=RESEED_INTERVAL + 1)
    assert repr(HmacDrbg(ENTROPY, NONCE, reseed_interval=RESEED_INTERVAL))


def test_short_entropy_is_refused_unless_the_caller_lowers_the_minimum() -> None:
    with pytest.raises(InsufficientEntropy):
        HmacDrbg(ENTROPY[:31], NONCE)
    drbg = HmacDrbg(ENTROPY[:16], NONCE, min_entropy_bits=128)
    with pytest.raises(InsufficientEntropy):
        drbg.reseed(ENTROPY[:15])
    with pytest.raises(InsufficientEntropy):
        HmacDrbg(ENTROPY, NONCE).reseed(ENTROPY[:31])


def test_each_request_ends_with_a_state_update() -> None:
    # Why callers fix their request sizes: one request of 64 is not two of 32.
    one, two = HmacDrbg(ENTROPY, NONCE), HmacDrbg(ENTROPY, NONCE)
    assert one.generate(64) != two.generate(32) + two.generate(32)
    assert HmacDrbg(ENTROPY, NONCE).generate(64)[:32] == HmacDrbg(ENTROPY, NONCE).generate(32)


def test_additional_input_and_personalization_change_the_output() -> None:
    base = HmacDrbg(ENTROPY, NONCE).generate(32)
    assert HmacDrbg(ENTROPY, NONCE, b"p").generate(32) != base
    assert HmacDrbg(ENTROPY, NONCE).generate(32, b"a") != base


@pytest.mark.parametrize("reference", [False, True])
def test_uninstantiate_wipes_the_state(reference: bool) -> None:
    drbg = HmacDrbg(ENTROPY, NONCE, reference=reference)
    drbg.uninstantiate()
    with pytest.raises(Uninstantiated):
        drbg.generate(1)
    with pytest.raises(Uninstantiated):
        drbg.reseed(ENTROPY)


def test_repr_shows_no_state() -> None:
    drbg = HmacDrbg(ENTROPY, NONCE)
    text = repr(drbg)
    assert ENTROPY.hex() not in text
    assert drbg.generate(32).hex() not in text
    assert "reseed_counter=2" in repr(drbg)


class CountingEntropy:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, n: int) -> bytes:
        self.calls.append(n)
        return bytes([len(self.calls)]) * n


def test_os_seeded_output_is_the_drbg_output_in_chunks() -> None:
    source = CountingEntropy()
    out = b"".join(os_seeded_output(100, b"pers", chunk_bytes=40, entropy_source=source))
    assert source.calls == [32, 16]
    expected = HmacDrbg(b"\x01" * 32, b"\x02" * 16, b"pers")
    assert out == expected.generate(40) + expected.generate(40) + expected.generate(20)


def test_os_seeded_output_reseeds_with_fresh_entropy_when_due() -> None:
    source = CountingEntropy()
    chunks = list(
        os_seeded_output(50, chunk_bytes=10, entropy_source=source, reseed_interval=2)
    )
    assert [len(c) for c in chunks] == [10] * 5
    # instantiate (entropy + nonce), then one reseed after every second request
    assert source.calls == [32, 16, 32, 32]
