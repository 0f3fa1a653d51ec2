"""Known-answer self-test of the RNG, and the guard that refuses dealing until it has passed.

``run_self_test()`` runs at start-up: three NIST CAVP HMAC_DRBG(SHA-256) vectors (plain, with a
personalization string, with reseed and additional inputs) and the pinned shoe known answers, which
cover the DRBG mapping, the byte convention, rejection sampling (one- and two-byte draws) and
Fisher–Yates together, both as one full shuffle and dealt lazily card by card as rounds deal
(:class:`rng_service.rng.shoe.LazyShoe`). Any mismatch or error marks the RNG failed;
``require_healthy_rng()``, called before a shoe is created, then raises :class:`SelfTestFailed`
until a later run passes. If no test has run yet, the guard runs one first.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Final

from game_math.cards import card_codes
from rng_service.core.errors import Unavailable
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.shoe import LazyShoe, shoe_cards


class SelfTestFailed(Unavailable):
    """The RNG failed its known-answer test: no shoe may be dealt."""

    reason_code = "RNG_SELF_TEST_FAILED"


@dataclass(frozen=True)
class _DrbgVector:
    name: str
    entropy_input: str
    nonce: str
    personalization_string: str
    returned_bits: str
    entropy_input_reseed: str = ""
    additional_input_reseed: str = ""
    additional_input_1: str = ""
    additional_input_2: str = ""


# From the NIST CAVP HMAC_DRBG.rsp [SHA-256] sections (also in tests/data/hmac_drbg_sha256.json).
_DRBG_VECTORS: Final = (
    _DrbgVector(
        name="Case0",
        entropy_input="ca851911349384bffe89de1cbdc46e6831e44d34a4fb935ee285dd14b71a7488",
        nonce="659ba96c601dc69fc902940805ec0ca8",
        personalization_string="",
        returned_bits=(
            "e528e9abf2dece54d47c7e75e5fe302149f817ea9fb4bee6f4199697d04d5b89"
            "d54fbb978a15b5c443c9ec21036d2460b6f73ebad0dc2aba6e624abf07745bc1"
            "07694bb7547bb0995f70de25d6b29e2d3011bb19d27676c07162c8b5ccde0668"
            "961df86803482cb37ed6d5c0bb8d50cf1f50d476aa0458bdaba806f48be9dcb8"
        ),
    ),
    _DrbgVector(
        name="WithPersonalizationCase0",
        entropy_input="5cacc68165a2e2ee20812f35ec73a79dbf30fd475476ac0c44fc6174cdac2b55",
        nonce="6f885496c1e63af620becd9e71ecb824",
        personalization_string="e72dd8590d4ed5295515c35ed6199e9d211b8f069b3058caa6670b96ef1208d0",
        returned_bits=(
            "f1012cf543f94533df27fedfbf58e5b79a3dc517a9c402bdbfc9a0c0f721f9d5"
            "3faf4aafdc4b8f7a1b580fcaa52338d4bd95f58966a243cdcd3f446ed4bc546d"
            "9f607b190dd69954450d16cd0e2d6437067d8b44d19a6af7a7cfa8794e5fbd72"
            "8e8fb2f2e8db5dd4ff1aa275f35886098e80ff844886060da8b1e7137846b23b"
        ),
    ),
    _DrbgVector(
        name="ReseedWithAdditionalInputCase2",
        entropy_input="a7ea449b49db48601fc3a3d5d77081fab092b8d420ed1b266f704f94352dd726",
        nonce="d11a159b60af8d20a0e37d27e6c74aa3",
        personalization_string="",
        entropy_input_reseed="50916ab47e8cb5dc843f9fba80639103711f86be8e3aa94f8a64a3fe0e6e5b35",
        additional_input_reseed="e2bb6768120555e7b9e0d573537a82f8f32f54560e1050b6abb1588fb3441e66",
        additional_input_1="a50cec9d1ecddb2c163d24019e81c31a2b350ccd3ad8181fd31bb8d1f64fa50e",
        additional_input_2="591dbbd48b51abced67f9c6269cf0133cd3dcbb5cfafcb6ef758569c555a5773",
        returned_bits=(
            "0a464abcc8685158372d544635b953fcb1d3821c30aaa93982f9b788935f00f8"
            "8115aad61d5cee003b3d1cb50f3e961a501e2dd0fc7e1724778b184a4bdf9f64"
            "e110dda7446e5544a30bd49a400ea1a5411800e1edfeea349323618afc5dc578"
            "2dc4b71d2da4d6a4785f8dd346feb9c8740ffd26bf644e3e4323ff24c30b9f10"
        ),
    ),
)

# The shoe known answer (tests/test_shoe.py pins the same shoes card by card).
# Seed bytes 0..31 are the entropy input, 32..47 the nonce (rng_service.rng.shoe's v2 mapping).
KAT_SEED: Final = bytes(range(48))
KAT_CLIENT_SEED: Final = b"fairshoe known-answer test"
_KAT_ONE_DECK: Final = (
    "6D AC 2H QH AD 3C 2S 8S 5H KH 5D 7S QC JD 5S 9C 4H QS 9H 5C 2D 9D 7C JC 6S 4C "
    "3H QD 8C TS KS AS KC 2C JH 6C TH 7H 3S TC 8H KD 8D 3D 9S 7D JS 4D 6H 4S TD AH"
)
# SHA-256 over the 312 card numbers (one byte each) of the 6-deck KAT shoe.
_KAT_SIX_DECK_SHA256: Final = "dbc97d3284cefd9d8ad045bd0baf816de6b1510d5199525a80305ed97beac45a"


class _Status(Enum):
    NOT_RUN = "not run"
    PASSED = "passed"
    FAILED = "failed"


_status = _Status.NOT_RUN
_lock = threading.Lock()


def _check_drbg_vector(v: _DrbgVector) -> None:
    drbg = HmacDrbg(
        bytes.fromhex(v.entropy_input),
        bytes.fromhex(v.nonce),
        bytes.fromhex(v.personalization_string),
    )
    if v.entropy_input_reseed:
        drbg.reseed(bytes.fromhex(v.entropy_input_reseed), bytes.fromhex(v.additional_input_reseed))
    drbg.generate(128, bytes.fromhex(v.additional_input_1))
    if drbg.generate(128, bytes.fromhex(v.additional_input_2)) != bytes.fromhex(v.returned_bits):
        raise SelfTestFailed(f"HMAC_DRBG known answer {v.name} does not match")


def _check_shoes() -> None:
    one = " ".join(card_codes(shoe_cards(KAT_SEED, KAT_CLIENT_SEED, 1)))
    if one != _KAT_ONE_DECK:
        raise SelfTestFailed("1-deck shoe known answer does not match")
    six = hashlib.sha256(bytes(shoe_cards(KAT_SEED, KAT_CLIENT_SEED, 6))).hexdigest()
    if six != _KAT_SIX_DECK_SHA256:
        raise SelfTestFailed("6-deck shoe known answer does not match")
    # Production deals lazily: one card at a time, as a round reads them.
    lazy = LazyShoe(KAT_SEED, KAT_CLIENT_SEED, 1)
    if " ".join(card_codes(lazy[i] for i in range(len(lazy)))) != _KAT_ONE_DECK:
        raise SelfTestFailed("1-deck shoe dealt lazily does not match its known answer")
    lazy = LazyShoe(KAT_SEED, KAT_CLIENT_SEED, 6)
    if hashlib.sha256(bytes(lazy)).hexdigest() != _KAT_SIX_DECK_SHA256:
        raise SelfTestFailed("6-deck shoe dealt lazily does not match its known answer")


def run_self_test() -> None:
    """Run every known-answer test; on failure raise :class:`SelfTestFailed` and refuse dealing."""
    global _status  # noqa: PLW0603  (one process-wide health state is the point)
    with _lock:
        try:
            for vector in _DRBG_VECTORS:
                _check_drbg_vector(vector)
            _check_shoes()
        except SelfTestFailed:
            _status = _Status.FAILED
            raise
        except Exception as exc:
            _status = _Status.FAILED
            raise SelfTestFailed(f"RNG self-test raised {type(exc).__name__}") from exc
        _status = _Status.PASSED


def rng_is_healthy() -> bool:
    return _status is _Status.PASSED


def require_healthy_rng() -> None:
    """Raise :class:`SelfTestFailed` unless the self-test passed (running it if it never ran)."""
    if _status is _Status.NOT_RUN:
        run_self_test()
    if _status is not _Status.PASSED:
        raise SelfTestFailed("the RNG failed its start-up self-test; dealing is refused")
