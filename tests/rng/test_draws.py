"""The certified-draw convention (rng_service/rng/draws.py) recomputed independently from its
docstring, as an auditor would: HMAC_DRBG with the standard library's hmac, the 128-byte stream,
rejection sampling and the forward Fisher-Yates."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from rng_service.rng.draws import (
    MAX_ABS_VALUE,
    MAX_COUNT,
    MAX_ITEMS,
    DrawRequest,
    InvalidDrawInput,
    check_request,
    draw,
    rng_commitment,
)
from rng_service.rng.shoe import seed_commitment

SEED = bytes(range(48))


class ReferenceStream:
    """HMAC_DRBG(SHA-256) (SP 800-90A 10.1.2) read as 128-byte generate blocks."""

    def __init__(self, seed_material: bytes) -> None:
        self.key, self.value = b"\0" * 32, b"\1" * 32
        self._update(seed_material)
        self.buffer = b""

    def _mac(self, data: bytes) -> bytes:
        return hmac.new(self.key, data, hashlib.sha256).digest()

    def _update(self, data: bytes) -> None:
        self.key = self._mac(self.value + b"\0" + data)
        self.value = self._mac(self.value)
        if data:
            self.key = self._mac(self.value + b"\1" + data)
            self.value = self._mac(self.value)

    def _generate(self) -> bytes:
        out = b""
        while len(out) < 128:
            self.value = self._mac(self.value)
            out += self.value
        self._update(b"")
        return out[:128]

    def take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self._generate()
        head, self.buffer = self.buffer[:n], self.buffer[n:]
        return head

    def randbelow(self, n: int) -> int:
        k = (n - 1).bit_length()
        while True:
            value = int.from_bytes(self.take((k + 7) // 8), "big") & ((1 << k) - 1)
            if value < n:
                return value


def reference(seed: bytes, request_part: bytes, client_seed: bytes) -> ReferenceStream:
    client = hashlib.sha256(b"fairshoe/client-seed/v2\0" + client_seed).digest()
    return ReferenceStream(seed + b"fairshoe/rng/v1\0" + request_part + client)


@pytest.mark.parametrize(("count", "lo", "hi"), [(20, 1, 6), (5, -(2**40), 2**40), (3, 7, 7),
                                                 (50, -3, 300)])
def test_integers_follow_the_documented_convention(count: int, lo: int, hi: int) -> None:
    part = (b"integers\0" + count.to_bytes(4, "big") + lo.to_bytes(8, "big", signed=True)
            + hi.to_bytes(8, "big", signed=True))
    stream = reference(SEED, part, b"player")
    expected = [lo + stream.randbelow(hi - lo + 1) for _ in range(count)]
    got = draw(SEED, DrawRequest.integers(count, lo, hi), b"player")
    assert got == expected
    assert all(lo <= v <= hi for v in got)


@pytest.mark.parametrize("n", [1, 2, 52, 300])
def test_shuffle_follows_the_documented_convention(n: int) -> None:
    stream = reference(SEED, b"shuffle\0" + n.to_bytes(4, "big"), b"")
    items = list(range(n))
    for i in range(n - 1):
        j = i + stream.randbelow(n - i)
        items[i], items[j] = items[j], items[i]
    got = draw(SEED, DrawRequest.shuffle(n))
    assert got == items
    assert sorted(got) == list(range(n))


def test_every_input_changes_the_results() -> None:
    base = draw(SEED, DrawRequest.integers(10, 0, 10**6), b"a")
    assert draw(SEED, DrawRequest.integers(10, 0, 10**6), b"b") != base
    assert draw(bytes(48), DrawRequest.integers(10, 0, 10**6), b"a") != base
    assert draw(SEED, DrawRequest.integers(10, 1, 10**6), b"a") != base
    assert draw(SEED, DrawRequest.integers(10, 0, 10**6), b"a") == base


def test_commitment_is_domain_separated_from_a_shoes() -> None:
    assert rng_commitment(SEED) == hashlib.sha256(b"fairshoe/rng-commitment/v1\0" + SEED
                                                  ).hexdigest()
    assert rng_commitment(SEED) != seed_commitment(SEED)


@pytest.mark.parametrize("request_", [
    DrawRequest.integers(0, 1, 6), DrawRequest.integers(MAX_COUNT + 1, 1, 6),
    DrawRequest.integers(1, 6, 1), DrawRequest.integers(1, 0, MAX_ABS_VALUE + 1),
    DrawRequest.integers(1, -MAX_ABS_VALUE - 1, 0), DrawRequest.shuffle(0),
    DrawRequest.shuffle(MAX_ITEMS + 1), DrawRequest("dice", {"n": 1}),
    DrawRequest("shuffle", {"n": 3, "extra": 1}),
])
def test_out_of_bounds_requests_are_refused(request_: DrawRequest) -> None:
    with pytest.raises(InvalidDrawInput):
        check_request(request_)


def test_seed_and_client_seed_lengths() -> None:
    with pytest.raises(InvalidDrawInput, match="48"):
        draw(SEED[:32], DrawRequest.shuffle(3))
    with pytest.raises(InvalidDrawInput, match="256"):
        draw(SEED, DrawRequest.shuffle(3), b"x" * 257)
