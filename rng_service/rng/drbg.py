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

The arithmetic (the HMACs of Update and Generate) runs in one of two cores with the same outputs:

* the C core (``rng_service/rng/_hmac_drbg.c``, built with the package): HMAC-SHA256 written out
  over OpenSSL's libcrypto SHA-256, each key's padded blocks hashed once; about 0.1 µs an HMAC,
  where a one-round shoe needs about 30 of them;
* the pure-Python core (:class:`_PythonCore`), the reference: HMACs from ``cryptography`` (a keyed
  context copied per block, about 2.7 µs an HMAC: twice as fast as ``hmac.digest``). It serves a
  build without the C core, and ``HmacDrbg(..., reference=True)``.

Everything the standard asks beyond the arithmetic (limits, the reseed counter, additional
input, wiping) is here, in Python, for both. The tests and the start-up self-test run the NIST
vectors through both cores, and the tests compare them on random inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Final, NoReturn, Protocol

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC

from rng_service.core.errors import ErrorFamily, IllegalState, InvalidInput

_CCore: Callable[[bytes], _Core] | None
try:  # the C core, built with the package (pyproject's ext-modules)
    from rng_service.rng._hmac_drbg import Core as _CCore
except ImportError:  # pragma: no cover - a build without libcrypto's headers takes the Python core
    _CCore = None

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


class _Core(Protocol):
    """The working state (Key, V) and the two operations on it: the C core's interface."""

    def update(self, provided_data: bytes, /) -> None: ...

    def blocks(self, n_bytes: int, additional_input: bytes = b"", /) -> bytes: ...

    def wipe(self) -> None: ...


class _PythonCore:
    """The reference core: Instantiate's start, HMAC_DRBG_Update and Generate's output loop,
    HMACs from ``cryptography``. The key K itself is never kept: only an HMAC context keyed with
    it, which is all 10.1.2 uses K for; copying that context per HMAC saves re-deriving the key
    pads each time."""

    __slots__ = ("_keyed", "_value")

    def __init__(self, seed_material: bytes) -> None:
        # 10.1.2.3: Key = 0x00 00...00, V = 0x01 01...01, then update with the seed material.
        self._keyed = _ZERO_KEYED
        self._value = b"\x01" * OUTLEN_BYTES
        self.update(seed_material)

    def update(self, provided_data: bytes) -> None:
        """HMAC_DRBG_Update (10.1.2.2)."""
        keyed, value = self._keyed, self._value
        keyed = HMAC(_mac(keyed, value + b"\x00" + provided_data), _SHA256)
        value = _mac(keyed, value)
        if provided_data:
            keyed = HMAC(_mac(keyed, value + b"\x01" + provided_data), _SHA256)
            value = _mac(keyed, value)
        self._keyed, self._value = keyed, value

    def blocks(self, n_bytes: int, additional_input: bytes = b"") -> bytes:
        """10.1.2.5 steps 3-6: ``n_bytes`` of V = HMAC(Key, V), then Update with the additional
        input (the caller ran step 2, the Update before the output, when there is one)."""
        keyed, value = self._keyed, self._value
        blocks: list[bytes] = []
        for _ in range((n_bytes + OUTLEN_BYTES - 1) // OUTLEN_BYTES):
            mac = keyed.copy()
            mac.update(value)
            value = mac.finalize()
            blocks.append(value)
        self._value = value
        self.update(additional_input)
        return b"".join(blocks)[:n_bytes]

    def wipe(self) -> None:
        """Drop the working state."""
        self._keyed = _ZERO_KEYED
        self._value = b""


def _check_input_length(name: str, value: bytes) -> None:
    if len(value) * 8 > MAX_INPUT_BITS:
        raise RequestTooLarge(f"{name} is longer than 2**35 bits")


class HmacDrbg:
    """HMAC_DRBG(SHA-256) without prediction resistance.

    ``min_entropy_bits`` (keyword only) lowers the entropy-length check for known-answer tests of
    short inputs; ``reseed_interval`` (keyword only) may only be made *smaller* than the standard's,
    which lets tests reach the limit; ``reference`` (keyword only) runs the pure-Python core even
    where the C core is built (the two give the same bytes; see the module docstring).

    NIST CAVP's first HMAC_DRBG SHA-256 case (``known_answers.json``: instantiate, generate 1024
    bits twice, the second are the known answer):

    >>> drbg = HmacDrbg(
    ...     bytes.fromhex("ca851911349384bffe89de1cbdc46e6831e44d34a4fb935ee285dd14b71a7488"),
    ...     bytes.fromhex("659ba96c601dc69fc902940805ec0ca8"))
    >>> _ = drbg.generate(128)
    >>> drbg.generate(128).hex()[:32]
    'e528e9abf2dece54d47c7e75e5fe3021'
    """

    __slots__ = ("_core", "_min_entropy_bits", "_reseed_counter", "_reseed_interval")

    def __init__(
        self,
        entropy_input: bytes,
        nonce: bytes,
        personalization_string: bytes = b"",
        *,
        min_entropy_bits: int = SECURITY_STRENGTH_BITS,
        reseed_interval: int = RESEED_INTERVAL,
        reference: bool = False,
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
        material = entropy_input + nonce + personalization_string
        core = _PythonCore if reference or _CCore is None else _CCore
        self._core: _Core | None = core(material)
        self._reseed_counter = 1

    def __repr__(self) -> str:
        # The working state is as secret as the seed: from it every later output follows.
        return f"<HmacDrbg SHA-256 reseed_counter={self._reseed_counter}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("an HmacDrbg's state is as secret as its seed and is not pickled")

    @property
    def reference(self) -> bool:
        """Whether this DRBG runs the pure-Python core (see the module docstring)."""
        return isinstance(self._core, _PythonCore)

    def _check_entropy(self, entropy_input: bytes) -> None:
        if len(entropy_input) * 8 < self._min_entropy_bits:
            raise InsufficientEntropy(
                f"entropy input has {len(entropy_input) * 8} bits; "
                f"at least {self._min_entropy_bits} are required"
            )
        _check_input_length("entropy input", entropy_input)

    def _working_core(self) -> _Core:
        if self._core is None:
            raise Uninstantiated("the DRBG was uninstantiated")
        return self._core

    def reseed(self, entropy_input: bytes, additional_input: bytes = b"") -> None:
        """HMAC_DRBG_Reseed (10.1.2.4): mix in fresh entropy and reset the reseed counter."""
        core = self._working_core()
        self._check_entropy(entropy_input)
        _check_input_length("additional input", additional_input)
        core.update(entropy_input + additional_input)
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
        core = self._working_core()
        if additional_input:
            _check_input_length("additional input", additional_input)
            core.update(additional_input)
        out = core.blocks(n_bytes, additional_input)
        self._reseed_counter += 1
        return out

    def uninstantiate(self) -> None:
        """Wipe the working state (SP 800-90A section 9.4)."""
        if self._core is not None:
            self._core.wipe()
        self._core = None


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
