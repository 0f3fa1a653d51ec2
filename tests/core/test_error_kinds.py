"""Every deliberate error of the service belongs to one kind, whatever module raised it."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Final

import pytest

import game_math
import game_math.errors
import rng_service
from game_math.cards import CardError
from game_math.errors import BetError, IllegalAction, RulesError
from rng_service.audit.verifier import AuditFailure, AuditInputError
from rng_service.core.config import ConfigError
from rng_service.core.errors import ErrorKind, FairshoeError, InvalidInput, kind_of
from rng_service.crypto.keys import KeyExists, KeyFileError, KeyNotFound, KeyStoreError
from rng_service.crypto.signing import (
    CanonicalEncodingError,
    Failure,
    SigningError,
    VerificationError,
)
from rng_service.rng import shoe
from rng_service.rng.draws import InvalidDrawInput
from rng_service.rng.drbg import (
    DrbgError,
    InsufficientEntropy,
    RequestTooLarge,
    ReseedRequired,
    Uninstantiated,
)
from rng_service.rng.seed_vault import SealedSeedRejected, SeedVaultError, VaultKeyError
from rng_service.rng.selftest import SelfTestFailed
from rng_service.service.ports import MissingAccount

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


def test_errors_inherit_one_way_not_also_from_value_error() -> None:
    for error in (shoe.InvalidShoeInput("x"), CanonicalEncodingError("float", "x"),
                  CardError("bad card"), InvalidDrawInput("x"), MissingAccount("x"),
                  ConfigError("x")):
        assert isinstance(error, FairshoeError) and not isinstance(error, ValueError), error


@pytest.mark.parametrize(("error", "kind"), [
    (RulesError("decks", "must be 1..8"), INV),
    (BetError("hands[0].bet", "too small"), INV),
    (CardError("bad card"), INV),
    (IllegalAction("cannot split"), S),
    (InvalidDrawInput("count must be 1..10000"), INV),
    (MissingAccount("no such account"), N),
    (ConfigError("test switch in production"), INV),
])
def test_engine_and_service_errors_share_the_root(error: FairshoeError, kind: ErrorKind) -> None:
    assert isinstance(error, FairshoeError) and isinstance(error, Exception)
    assert error.kind is kind and kind_of(error) is kind


# Exceptions that never leave the module that raises them: each is caught there and turned into
# a Fairshoe error, a verdict line or an exit status (none is an error a caller sees)
_SIGNALS: Final = frozenset({
    "rng_service.api.par_jobs.Busy", "rng_service.api.par_jobs.CallerGone",
    "rng_service.api.par_jobs.AnalysisFailed", "rng_service.audit.failures.Unrevealed",
    "rng_service.audit.files.FileTimeout", "rng_service.audit.files.Unreadable",
    "rng_service.audit.log_lines.Malformed", "rng_service.audit.log_lines.BadLeaf",
    "rng_service.cli.play_session.InputError", "rng_service.cli.play_session.Quit",
    "rng_service.cli.play_bets.BetRefused",
    "rng_service.service.rounds._Seamless", "rng_service.service.round_seamless.NeedsDebit",
    "rng_service.service.rounds._Unconfirmed",
    "rng_service.service.idempotency._Answered",
    "rng_service.api.server.BindFailed", "rng_service.api.port_claim.PortTaken",
    # the NIST test module keeps numpy's convention (ValueError) as a pure statistics library
    "rng_service.lab.stats.sp800_22.SequenceTooShortError",
})


def _defined_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in (game_math, rng_service):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".proto" in info.name or info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (isinstance(value, type) and issubclass(value, BaseException)
                        and value.__module__ == info.name):
                    found[f"{info.name}.{name}"] = value
    return found


def test_every_exception_the_code_defines_derives_from_the_one_root() -> None:
    found = _defined_exceptions()
    assert len(found) > 40 and "game_math.errors.GameMathError" in found
    strays = sorted(name for name, cls in found.items()
                    if not issubclass(cls, FairshoeError) and name not in _SIGNALS)
    assert strays == []
    assert set(found) >= _SIGNALS  # a signal renamed or removed leaves the list


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
