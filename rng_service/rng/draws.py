"""Certified draws outside blackjack: integers in a range and shuffles, each from a fresh seed.

A draw is a pure function of (seed, kind, parameters, client seed), so anyone holding the revealed
seed recomputes its results. The exact convention an auditor recomputes (:func:`draw`):

1. **Seed.** 48 bytes from the operating system's CSPRNG
   (:func:`rng_service.rng.shoe.new_server_seed`), one per draw, never reused: ``entropy_input``
   = bytes 0..31, ``nonce`` = bytes 32..47 (as a shoe's, SP 800-90A section 8.6.7).
2. **Commitment**, fixed before any value is drawn: hex SHA-256(``b"fairshoe/rng-commitment/v1\\0"``
   || seed). Its domain differs from a shoe's (``fairshoe/seed-commitment/v1``), so a draw's
   commitment can never be passed off as a shoe's or the other way round.
3. **Personalization string** = ``b"fairshoe/rng/v1\\0"`` || request || SHA-256(
   ``b"fairshoe/client-seed/v2\\0"`` || client seed), where request is

   * ``b"integers\\0"`` || count (4-byte big-endian unsigned) || min || max (each an 8-byte
     big-endian two's-complement signed integer), or
   * ``b"shuffle\\0"`` || n (4-byte big-endian unsigned).

   So the stream depends on the kind and parameters as well as on both seeds.
4. **DRBG**: HMAC_DRBG(SHA-256) instantiated on (entropy_input, nonce, personalization string),
   read through :class:`rng_service.rng.sampling.DrbgRandom` (``generate(128)`` blocks, rejection
   sampling: the byte convention is in that module's docstring).
5. **Results.** ``integers``: ``values[i] = min + randbelow(max - min + 1)`` for i = 0..count-1, in
   order (a range of one value consumes no bytes). ``shuffle``: ``items = [0, 1, ..., n-1]``,
   shuffled in place by ``DrbgRandom.shuffle`` (forward Fisher-Yates: for i from 0 to n-2,
   ``j = i + randbelow(n - i)``, swap i and j); the permutation is ``items``: position j of the
   shuffled list holds the caller's item ``permutation[j]``.

Bounds: 1..:data:`MAX_COUNT` integers in a range whose ends lie within ±(2**53 - 1) (the signed
records' integer range), 1..:data:`MAX_ITEMS` items to shuffle, a client seed of at most 256 bytes.

What the commitment proves: the results follow from a seed the service fixed before drawing and
cannot change afterwards. A one-call draw takes the client seed with the request, so it does not
prove the service did not pick its seed knowing the client seed (a shoe's two-step commitment does);
the seed comes from the OS CSPRNG and the code path is the certified one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from rng_service.core.errors import InvalidInput
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.sampling import DrbgRandom
from rng_service.rng.shoe import (
    CLIENT_SEED_DOMAIN,
    ENTROPY_INPUT_BYTES,
    MAX_CLIENT_SEED_BYTES,
    SEED_BYTES,
)

INTEGERS: Final = "integers"
SHUFFLE: Final = "shuffle"
KINDS: Final = (INTEGERS, SHUFFLE)
MAX_COUNT: Final = 10_000
MAX_ITEMS: Final = 10_000
MAX_ABS_VALUE: Final = 2**53 - 1
COMMITMENT_DOMAIN: Final = b"fairshoe/rng-commitment/v1\0"
PERSONALIZATION_PREFIX: Final = b"fairshoe/rng/v1\0"


class InvalidDrawInput(InvalidInput):
    """A kind, parameter, seed or client seed outside the bounds (never echoes a seed)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


@dataclass(frozen=True)
class DrawRequest:
    """What is drawn: ``kind`` with its parameters (``count``, ``min``, ``max``; or ``n``)."""

    kind: str
    parameters: Mapping[str, int]

    @classmethod
    def integers(cls, count: int, lo: int, hi: int) -> DrawRequest:
        """``count`` integers in ``[lo, hi]``."""
        return cls(INTEGERS, {"count": count, "min": lo, "max": hi})

    @classmethod
    def shuffle(cls, n: int) -> DrawRequest:
        """A permutation of ``0..n-1``."""
        return cls(SHUFFLE, {"n": n})


def rng_commitment(seed: bytes) -> str:
    """Hex SHA-256 over the draw commitment domain and the seed (step 2 of the convention)."""
    return hashlib.sha256(COMMITMENT_DOMAIN + seed).hexdigest()


def _int(params: Mapping[str, int], name: str, lo: int, hi: int) -> int:
    value = params.get(name)
    if type(value) is not int or not lo <= value <= hi:
        raise InvalidDrawInput(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def check_request(request: DrawRequest) -> None:
    """InvalidDrawInput unless ``request`` is within the convention's bounds."""
    params = request.parameters
    if request.kind == INTEGERS:
        expected = {"count", "min", "max"}
        _int(params, "count", 1, MAX_COUNT)
        lo = _int(params, "min", -MAX_ABS_VALUE, MAX_ABS_VALUE)
        _int(params, "max", lo, MAX_ABS_VALUE)
    elif request.kind == SHUFFLE:
        expected = {"n"}
        _int(params, "n", 1, MAX_ITEMS)
    else:
        raise InvalidDrawInput(f"kind must be one of {', '.join(KINDS)}, got {request.kind!r}")
    if set(params) != expected:
        raise InvalidDrawInput(f"{request.kind} parameters are {sorted(expected)}, "
                               f"got {sorted(map(str, params))}")


def request_bytes(request: DrawRequest) -> bytes:
    """The request part of the personalization string (step 3)."""
    check_request(request)
    p = request.parameters
    if request.kind == INTEGERS:
        return (b"integers\0" + p["count"].to_bytes(4, "big")
                + p["min"].to_bytes(8, "big", signed=True)
                + p["max"].to_bytes(8, "big", signed=True))
    return b"shuffle\0" + p["n"].to_bytes(4, "big")


def personalization(request: DrawRequest, client_seed: bytes) -> bytes:
    """The DRBG personalization string of a draw (step 3)."""
    if len(client_seed) > MAX_CLIENT_SEED_BYTES:
        raise InvalidDrawInput(f"client seed has {len(client_seed)} bytes; at most "
                               f"{MAX_CLIENT_SEED_BYTES} are allowed")
    client_digest = hashlib.sha256(CLIENT_SEED_DOMAIN + client_seed).digest()
    return PERSONALIZATION_PREFIX + request_bytes(request) + client_digest


def draw(seed: bytes, request: DrawRequest, client_seed: bytes = b"") -> list[int]:
    """The results of ``request`` drawn from ``seed`` (steps 4 and 5): a pure function."""
    if len(seed) != SEED_BYTES:
        raise InvalidDrawInput(f"seed has {len(seed)} bytes; a draw seed is exactly {SEED_BYTES}")
    source = DrbgRandom(HmacDrbg(seed[:ENTROPY_INPUT_BYTES], seed[ENTROPY_INPUT_BYTES:],
                                 personalization(request, client_seed)))
    p = request.parameters
    if request.kind == INTEGERS:
        span = p["max"] - p["min"] + 1
        return [p["min"] + source.randbelow(span) for _ in range(p["count"])]
    items = list(range(p["n"]))
    source.shuffle(items)
    return items
