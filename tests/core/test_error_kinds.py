"""Every deliberate error of the service belongs to one kind, whatever module raised it."""

from __future__ import annotations

import pytest

import game_math.errors
from rng_service.audit.verifier import AuditFailure, AuditInputError
from rng_service.core.errors import ErrorKind, FairshoeError, InvalidInput, kind_of
from rng_service.crypto.keys import KeyExists, KeyFileError, KeyNotFound, KeyStoreError
from rng_service.crypto.signing import (
    CanonicalEncodingError,
    Failure,
    SigningError,
    VerificationError,
)
from rng_service.rng import shoe
from rng_service.rng.drbg import (
    DrbgError,
    InsufficientEntropy,
    RequestTooLarge,
    ReseedRequired,
    Uninstantiated,
)
from rng_service.rng.seed_vault import SealedSeedRejected, SeedVaultError, VaultKeyError
from rng_service.rng.selftest import SelfTestFailed

INV, N, S, C, D, U = (ErrorKind.INVALID_INPUT, ErrorKind.NOT_FOUND, ErrorKind.ILLEGAL_STATE,
                    ErrorKind.CONFLICT, ErrorKind.INTEGRITY, ErrorKind.UNAVAILABLE)


@pytest.mark.parametrize(("error", "family", "kind"), [
    (ReseedRequired("reseed"), DrbgError, S),
    (RequestTooLarge("too large"), DrbgError, INV),
    (InsufficientEntropy("short"), DrbgError, INV),
    (Uninstantiated("wiped"), DrbgError, S),
    (shoe.InvalidShoeInput("decks"), shoe.ShoeError, INV),
    (shoe.ShoeFinished("finished"), shoe.ShoeError, S),
    (shoe.ShoeNotFinished("in play"), shoe.ShoeError, S),
    (shoe.ClientSeedLocked("fixed"), shoe.ShoeError, S),
    (SealedSeedRejected("tampered"), SeedVaultError, D),
    (VaultKeyError("bad key"), SeedVaultError, U),
    (SelfTestFailed("mismatch"), SelfTestFailed, U),
    (KeyFileError("malformed"), KeyStoreError, INV),
    (KeyNotFound("no key"), KeyStoreError, N),
    (KeyExists("exists"), KeyStoreError, C),
    (CanonicalEncodingError("float", "no floats"), SigningError, INV),
    (VerificationError(Failure.BAD_SIGNATURE, "bad signature"), SigningError, D),
    (AuditFailure("rules_digest", "does not match"), AuditFailure, D),
    (AuditInputError("x: no such file"), AuditInputError, N),
])
def test_each_family_member_has_its_kind_and_keeps_its_message(
    error: FairshoeError, family: type[Exception], kind: ErrorKind
) -> None:
    assert isinstance(error, family) and isinstance(error, FairshoeError)
    assert error.kind is kind and kind_of(error) is kind
    assert str(error)


def test_errors_that_callers_catch_as_value_error_still_are() -> None:
    assert isinstance(shoe.InvalidShoeInput("x"), ValueError)
    assert isinstance(CanonicalEncodingError("float", "x"), ValueError)


def test_there_is_one_shoe_exhausted() -> None:
    assert shoe.ShoeExhausted is game_math.errors.ShoeExhausted
    assert kind_of(shoe.ShoeExhausted("empty")) is S


def test_reasons_and_messages_keep_their_established_form() -> None:
    assert VerificationError(Failure.UNKNOWN_KEY, "unknown key", "signature.key_id").reason \
        == "UNKNOWN_KEY"
    assert SelfTestFailed("x").reason == "RNG_SELF_TEST_FAILED"
    failure = AuditFailure("rules_digest", "does not match")
    assert (str(failure), failure.field) == ("rules_digest does not match", "rules_digest")


def test_under_moves_the_field_below_the_request_field() -> None:
    assert str(InvalidInput(None, "not JSON").under("script_json")) == "script_json: not JSON"
    nested = InvalidInput("shoe[2]", "bad").under("script_json")
    assert (nested.field, nested.detail) == ("script_json.shoe[2]", "bad")
