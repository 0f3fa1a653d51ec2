"""Known-answer self-test of the RNG, and the guard that refuses dealing until it has passed.

``run_self_test()`` runs at start-up: three NIST CAVP HMAC_DRBG(SHA-256) vectors (plain, with a
personalization string, with reseed and additional inputs), each through both of the DRBG's cores
(the C one shoes use and the pure-Python reference) and the pinned shoe known answers, all
read from one data file (``known_answers.json`` beside this module, shared with the tests), which
cover the DRBG mapping, the byte convention, rejection sampling (one- and two-byte draws) and
Fisher–Yates together, both as one full shuffle and dealt lazily card by card as rounds deal
(:class:`rng_service.rng.shoe.LazyShoe`). Any mismatch or error marks the RNG failed;
``require_healthy_rng()`` then raises :class:`SelfTestFailed` until a later run passes; if no test
has run yet, it runs one first. The service runs the test where it starts and every command that
deals calls the guard before its first shoe; creating a shoe (``Shoe.new``) has no such side
effect, so the shoe module does not depend on this one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

from game_math.cards import card_codes
from rng_service.core import config
from rng_service.core.errors import Unavailable
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.shoe import LazyShoe, ReferenceLazyShoe, shoe_cards


class SelfTestFailed(Unavailable):
    """The RNG failed its known-answer test: no shoe may be dealt."""

    reason_code = "RNG_SELF_TEST_FAILED"


@dataclass(frozen=True)
class DrbgVector:
    """One NIST CAVP HMAC_DRBG(SHA-256) case; absent additional inputs are empty."""

    name: str
    entropy_input: str
    nonce: str
    returned_bits: str
    personalization_string: str = ""
    entropy_input_reseed: str = ""
    additional_input_reseed: str = ""
    additional_input_1: str = ""
    additional_input_2: str = ""


@dataclass(frozen=True)
class KnownAnswers:
    """Everything the self-test compares against, as read from :data:`KNOWN_ANSWERS_FILE`."""

    drbg_vectors: tuple[DrbgVector, ...]
    shoe_seed: bytes
    shoe_client_seed: bytes
    one_deck: str  # the 1-deck shoe's card codes, space separated
    six_decks_sha256: str  # SHA-256 over the 6-deck shoe's card numbers, one byte each


# One data file shared by the self-test and the tests (tests/rng/test_selftest.py checks its DRBG
# cases against the full CAVP file and its shoes against an auditor's independent shuffle).
KNOWN_ANSWERS_FILE: Final = Path(__file__).with_name("known_answers.json")


def load_known_answers(path: Path = KNOWN_ANSWERS_FILE) -> KnownAnswers:
    """The known answers in ``path``; a missing or malformed file fails the self-test."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        shoes = data["shoes"]
        return KnownAnswers(
            drbg_vectors=tuple(DrbgVector(**v) for v in data["hmac_drbg_sha256"]),
            shoe_seed=bytes.fromhex(shoes["seed"]),
            shoe_client_seed=shoes["client_seed"].encode(),
            one_deck=shoes["one_deck"],
            six_decks_sha256=shoes["six_decks_sha256"],
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SelfTestFailed(f"known answers unreadable: {type(exc).__name__}") from exc


class _Status(Enum):
    NOT_RUN = "not run"
    PASSED = "passed"
    FAILED = "failed"


_status = _Status.NOT_RUN
_lock = threading.Lock()
_test_known_answers: Path | None = None  # set only by tests (use_test_known_answers)


def use_test_known_answers(path: Path) -> None:
    """Tests only: later runs compare against the known answers in ``path`` (a test damages
    that file to make a running server's self-test fail). Raises ``ConfigError`` unless
    ``FAIRSHOE_TEST_SELF_TEST=1`` (itself refused in production), so no deployment runs a
    self-test against answers other than the certified ones."""
    global _test_known_answers  # noqa: PLW0603  (the one process-wide self-test)
    if not config.test_self_test_allowed():
        raise config.ConfigError(f"test known answers need {config.TEST_SELF_TEST_ENV}=1")
    _test_known_answers = path


def _check_drbg_vector(v: DrbgVector) -> None:
    # both cores (rng_service.rng.drbg): the one shoes use and the reference
    for reference in (False, True):
        drbg = HmacDrbg(
            bytes.fromhex(v.entropy_input),
            bytes.fromhex(v.nonce),
            bytes.fromhex(v.personalization_string),
            reference=reference,
        )
        if v.entropy_input_reseed:
            drbg.reseed(bytes.fromhex(v.entropy_input_reseed),
                        bytes.fromhex(v.additional_input_reseed))
        drbg.generate(128, bytes.fromhex(v.additional_input_1))
        if drbg.generate(128, bytes.fromhex(v.additional_input_2)) != bytes.fromhex(
                v.returned_bits):
            core = "reference" if reference else "C"
            raise SelfTestFailed(f"HMAC_DRBG known answer {v.name} does not match ({core} core)")


def _check_shoes(kat: KnownAnswers) -> None:
    # both paths (rng_service.rng.shoe): the C shuffle shoes use and the reference
    for reference in (False, True):
        _check_shoe_path(kat, reference)


def _check_shoe_path(kat: KnownAnswers, reference: bool) -> None:
    seed, client_seed = kat.shoe_seed, kat.shoe_client_seed
    path = "reference" if reference else "C"
    one_deck = shoe_cards(seed, client_seed, 1, reference=reference)
    if " ".join(card_codes(one_deck)) != kat.one_deck:
        raise SelfTestFailed(f"1-deck shoe known answer does not match ({path} path)")
    six_decks = shoe_cards(seed, client_seed, 6, reference=reference)
    if hashlib.sha256(bytes(six_decks)).hexdigest() != kat.six_decks_sha256:
        raise SelfTestFailed(f"6-deck shoe known answer does not match ({path} path)")
    # Production deals lazily: one card at a time, as a round reads them.
    lazy_shoe = ReferenceLazyShoe if reference else LazyShoe
    lazy = lazy_shoe(seed, client_seed, 1)
    if " ".join(card_codes(lazy[i] for i in range(len(lazy)))) != kat.one_deck:
        raise SelfTestFailed(
            f"1-deck shoe dealt lazily does not match its known answer ({path} path)")
    lazy = lazy_shoe(seed, client_seed, 6)
    if hashlib.sha256(bytes(lazy)).hexdigest() != kat.six_decks_sha256:
        raise SelfTestFailed(
            f"6-deck shoe dealt lazily does not match its known answer ({path} path)")


def run_self_test() -> None:
    """Run every known-answer test; on failure raise :class:`SelfTestFailed` and refuse dealing."""
    global _status  # noqa: PLW0603  (one process-wide health state is the point)
    with _lock:
        try:
            kat = (load_known_answers() if _test_known_answers is None
                   else load_known_answers(_test_known_answers))
            for vector in kat.drbg_vectors:
                _check_drbg_vector(vector)
            _check_shoes(kat)
        except SelfTestFailed:
            _status = _Status.FAILED
            raise
        except Exception as exc:
            _status = _Status.FAILED
            raise SelfTestFailed(f"RNG self-test raised {type(exc).__name__}") from exc
        _status = _Status.PASSED


def rng_is_healthy() -> bool:
    """Whether the last self-test run passed (False before any run)."""
    return _status is _Status.PASSED


def require_healthy_rng() -> None:
    """Raise :class:`SelfTestFailed` unless the self-test passed (running it if it never ran)."""
    if _status is _Status.NOT_RUN:
        run_self_test()
    if _status is not _Status.PASSED:
        raise SelfTestFailed("the RNG failed its start-up self-test; dealing is refused")
