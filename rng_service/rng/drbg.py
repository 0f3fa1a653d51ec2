"""HMAC_DRBG with SHA-256 (NIST SP 800-90A rev1, 10.1.2), without prediction resistance.

This is the deterministic half of the certified RNG: fresh operating-system entropy goes in, and
the shuffle draws every byte it uses from :meth:`HmacDrbg.generate`. Being deterministic is the
point: from a revealed seed anyone can recompute exactly the bytes a shoe was shuffled with.

The standard's limits for HMAC_DRBG(SHA-256) are enforced (SP 800-90A rev1, table 2):

* at most 2**19 bits (65,536 bytes) per ``generate`` request (:class:`RequestTooLarge`);
* at most 2**48 requests between reseeds; after that ``generate`` raises :class:`ReseedRequired`
  and produces nothing until :meth:`HmacDrbg.reseed` is called;
* entropy input of at least the security strength, 256 bits, on instantiate and reseed
  (:class:`InsufficientEntropy`). The CAVP vectors happen to use 256-bit entropy, but tests of short
  inputs may pass ``min_entropy_bits`` explicitly; production callers never do;
* entropy input, nonce, personalization string and additional input of at most 2**35 bits each.

The HMAC comes from ``cryptography``: a keyed HMAC context copied per block is about twice as fast
as the standard library's one-shot ``hmac.digest`` here (``bench/bench_rng.py`` measures both).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC

from rng_service.core.errors import ErrorFamily, IllegalState, InvalidInput

OUTLEN_BYTES: Final = 32
SECURITY_STRENGTH_BITS: Final = 256
#: SP 800-90A rev1 table 2, HMAC_DRBG.
RESEED_INTERVAL: Final = 2**48
MAX_BITS_PER_REQUEST: Final = 2**19
MAX_BYTES_PER_REQUEST: Final = MAX_BITS_PER_REQUEST // 8
MAX_INPUT_BITS: Final = 2**35
#: Nonce of half the security strength (SP 800-90A rev1, 8.6.7), as :func:`os_seeded_drbg` uses.
NONCE_BYTES: Final = SECURITY_STRENGTH_BITS // 16

_SHA256: Final = hashes.SHA256()


class DrbgError(ErrorFamily):
    """The DRBG refused a request. Messages never contain internal state or inputs."""


class ReseedRequired(DrbgError, IllegalState):
    """The reseed interval is used up: ``reseed`` with fresh entropy before generating again."""

    reason_code = "RESEED_REQUIRED"


class RequestTooLarge(DrbgError, InvalidInput):
    """A request for more than 2**19 bits at once, or an input longer than 2**35 bits."""


class InsufficientEntropy(DrbgError, InvalidInput):
    """Entropy input shorter than the required minimum (256 bits unless the caller says so)."""


class Uninstantiated(DrbgError, IllegalState):
    """The DRBG's state was wiped by ``uninstantiate``."""

    reason_code = "DRBG_UNINSTANTIATED"


def _mac(keyed: HMAC, data: bytes) -> bytes:
    """HMAC of ``data`` under the key ``keyed`` was made with; ``keyed`` stays reusable."""
    mac = keyed.copy()
    mac.update(data)
    return mac.finalize()


# Instantiate starts from the all-zero key (10.1.2.3); its context is made once.
_ZERO_KEYED: Final = HMAC(b"\x00" * OUTLEN_BYTES, _SHA256)


def _check_input_length(name: str, value: bytes) -> None:
    if len(value) * 8 > MAX_INPUT_BITS:
        raise RequestTooLarge(f"{name} is longer than 2**35 bits")


class HmacDrbg:
    """HMAC_DRBG(SHA-256) without prediction resistance.

    ``min_entropy_bits`` (keyword only) lowers the entropy-length check for known-answer tests of
    short inputs; ``reseed_interval`` (keyword only) may only be made *smaller* than the standard's,
    which lets tests reach the limit.

    NIST CAVP's first HMAC_DRBG SHA-256 case (``known_answers.json``: instantiate, generate 1024
    bits twice, the second are the known answer):

    >>> drbg = HmacDrbg(
    ...     bytes.fromhex("ca851911349384bffe89de1cbdc46e6831e44d34a4fb935ee285dd14b71a7488"),
    ...     bytes.fromhex("659ba96c601dc69fc902940805ec0ca8"))
    >>> _ = drbg.generate(128)
    >>> drbg.generate(128).hex()[:32]
    'e528e9abf2dece54d47c7e75e5fe3021'
    """

    # The key K itself is never kept: only an HMAC context keyed with it, which is all 10.1.2 uses
    # K for. Copying that context per HMAC saves re-deriving the key pads each time.
    __slots__ = ("_keyed", "_min_entropy_bits", "_reseed_counter", "_reseed_interval", "_value")

    def __init__(
        self,
        entropy_input: bytes,
        nonce: bytes,
        personalization_string: bytes = b"",
        *,
        min_entropy_bits: int = SECURITY_STRENGTH_BITS,
        reseed_interval: int = RESEED_INTERVAL,
    ) -> None:
        if not 1 <= reseed_interval <= RESEED_INTERVAL:
            raise ValueError("reseed_interval must be between 1 and 2**48")
        if min_entropy_bits < 0:
            raise ValueError("min_entropy_bits must not be negative")
        self._min_entropy_bits = min_entropy_bits
        self._reseed_interval = reseed_interval
        self._check_entropy(entropy_input)
        _check_input_length("nonce", nonce)
        _check_input_length("personalization string", personalization_string)
        # 10.1.2.3: Key = 0x00 00...00, V = 0x01 01...01, then update with the seed material.
        self._keyed: HMAC | None = _ZERO_KEYED
        self._value = b"\x01" * OUTLEN_BYTES
        self._update(entropy_input + nonce + personalization_string)
        self._reseed_counter = 1

    def __repr__(self) -> str:
        # The working state is as secret as the seed: from it every later output follows.
        return f"<HmacDrbg SHA-256 reseed_counter={self._reseed_counter}>"

    def _check_entropy(self, entropy_input: bytes) -> None:
        if len(entropy_input) * 8 < self._min_entropy_bits:
            raise InsufficientEntropy(
                f"entropy input has {len(entropy_input) * 8} bits; "
                f"at least {self._min_entropy_bits} are required"
            )
        _check_input_length("entropy input", entropy_input)

    def _keyed_context(self) -> HMAC:
        if self._keyed is None:
            raise Uninstantiated("the DRBG was uninstantiated")
        return self._keyed

    def _update(self, provided_data: bytes) -> None:
        """HMAC_DRBG_Update (10.1.2.2)."""
        keyed = self._keyed_context()
        value = self._value
        keyed = HMAC(_mac(keyed, value + b"\x00" + provided_data), _SHA256)
        value = _mac(keyed, value)
        if provided_data:
            keyed = HMAC(_mac(keyed, value + b"\x01" + provided_data), _SHA256)
            value = _mac(keyed, value)
        self._keyed, self._value = keyed, value

    def reseed(self, entropy_input: bytes, additional_input: bytes = b"") -> None:
        """HMAC_DRBG_Reseed (10.1.2.4): mix in fresh entropy and reset the reseed counter."""
        self._keyed_context()
        self._check_entropy(entropy_input)
        _check_input_length("additional input", additional_input)
        self._update(entropy_input + additional_input)
        self._reseed_counter = 1

    def generate(self, n_bytes: int, additional_input: bytes = b"") -> bytes:
        """HMAC_DRBG_Generate (10.1.2.5): ``n_bytes`` pseudorandom bytes.

        Two requests are not the same as one request of their total length: each request ends with
        a state update. Callers that must be reproducible therefore fix their request sizes.
        """
        if not 0 <= n_bytes <= MAX_BYTES_PER_REQUEST:
            if n_bytes < 0:
                raise ValueError("n_bytes must not be negative")
            raise RequestTooLarge(f"{n_bytes} bytes requested; at most 2**19 bits per request")
        if self._reseed_counter > self._reseed_interval:
            raise ReseedRequired("reseed interval exhausted; reseed with fresh entropy")
        if additional_input:
            _check_input_length("additional input", additional_input)
            self._update(additional_input)
        keyed = self._keyed_context()
        value = self._value
        blocks: list[bytes] = []
        for _ in range((n_bytes + OUTLEN_BYTES - 1) // OUTLEN_BYTES):
            mac = keyed.copy()
            mac.update(value)
            value = mac.finalize()
            blocks.append(value)
        self._value = value
        self._update(additional_input)
        self._reseed_counter += 1
        return b"".join(blocks)[:n_bytes]

    def uninstantiate(self) -> None:
        """Wipe the working state (SP 800-90A section 9.4)."""
        self._keyed = None
        self._value = b""


def os_seeded_drbg(
    personalization_string: bytes, entropy_source: Callable[[int], bytes] = os.urandom
) -> HmacDrbg:
    """A DRBG instantiated from the operating system's CSPRNG: 256-bit entropy, 128-bit nonce."""
    return HmacDrbg(
        entropy_source(SECURITY_STRENGTH_BITS // 8),
        entropy_source(NONCE_BYTES),
        personalization_string,
    )


def os_seeded_output(
    n_bytes: int,
    personalization_string: bytes = b"fairshoe/raw-output/v1",
    *,
    chunk_bytes: int = MAX_BYTES_PER_REQUEST,
    entropy_source: Callable[[int], bytes] = os.urandom,
    reseed_interval: int = RESEED_INTERVAL,
) -> Iterator[bytes]:
    """``n_bytes`` of raw DRBG output in chunks, from a freshly OS-seeded DRBG.

    Reseeds with fresh OS entropy whenever the standard demands it. This is what
    ``fairshoe collect raw`` writes and what statistical tests of the generator should read.
    """
    if n_bytes < 0:
        raise ValueError("n_bytes must not be negative")
    drbg = HmacDrbg(
        entropy_source(SECURITY_STRENGTH_BITS // 8),
        entropy_source(NONCE_BYTES),
        personalization_string,
        reseed_interval=reseed_interval,
    )
    remaining = n_bytes
    while remaining > 0:
        size = min(chunk_bytes, remaining)
        try:
            chunk = drbg.generate(size)
        except ReseedRequired:
            drbg.reseed(entropy_source(SECURITY_STRENGTH_BITS // 8))
            continue
        remaining -= size
        yield chunk
