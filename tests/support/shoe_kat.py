"""The shoe's known-answer inputs and an auditor's recomputation of a shoe from the
documentation alone (raw DRBG bytes, no DrbgRandom), as tests/rng/test_shoe.py and
test_selftest.py check the shoe against them."""

from __future__ import annotations

import hashlib

from rng_service.rng.drbg import HmacDrbg

KAT_SEED = bytes(range(48))  # entropy input 00..1f, nonce 20..2f
KAT_CLIENT_SEED = b"fairshoe known-answer test"


def auditor_shoe(seed: bytes, client_seed: bytes, decks: int) -> list[str]:
    """The shoe recomputed from the documentation alone, from raw DRBG bytes, without DrbgRandom."""
    assert len(seed) == 48
    client_digest = hashlib.sha256(b"fairshoe/client-seed/v2\0" + client_seed).digest()
    personalization = b"fairshoe/shoe/v2\0" + decks.to_bytes(4, "big") + client_digest
    drbg = HmacDrbg(seed[:32], seed[32:], personalization)
    stream = bytearray()
    used = 0

    def draw(n: int) -> int:
        nonlocal used
        k = (n - 1).bit_length()
        width = (k + 7) // 8
        while True:
            while len(stream) - used < width:
                stream.extend(drbg.generate(128))
            value = int.from_bytes(stream[used : used + width], "big") % (1 << k)
            used += width
            if value < n:
                return value

    cards = [(suit, rank) for _ in range(decks) for suit in "SHDC" for rank in "A23456789TJQK"]
    for i in range(len(cards) - 1):
        j = i + draw(len(cards) - i)
        cards[i], cards[j] = cards[j], cards[i]
    return [rank + suit for suit, rank in cards]
