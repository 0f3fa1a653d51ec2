"""Key records (``fairshoe.key/v1``, under ``keys/``): each must be signed by the key it names,
which must be the trusted key of that id (its ``jwk``), within its validity period. The named
checks: ``key.signature`` (:class:`KeySignature`) and ``key.record`` (:class:`KeyRecord`), run by
:func:`key_finding`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.checks import Check, SignatureCheck, Signed, run_checks
from rng_service.audit.claims import label
from rng_service.audit.failures import AuditFailure, Doc, exact_members, fail
from rng_service.audit.files import Finding, Status, show, tok
from rng_service.audit.times import Times
from rng_service.crypto.keys import KeyFileError, jwk_to_public_key, raw_public_bytes
from rng_service.crypto.signing import VerificationError
from rng_service.records.schema import KEY_SCHEMA

_KEY_MEMBERS: Final = frozenset({"schema", "key_id", "jwk", "valid_from"})


class KeyCase(Signed):
    """A key record being checked: its envelope, its payload once verified, and the line's
    message once it passed."""

    def __init__(self, path: Path, envelope: dict[str, Any]) -> None:
        self.path = path
        self.envelope = envelope
        self.payload: dict[str, Any] = {}
        self.message = ""


class KeySignature(SignatureCheck[KeyCase]):
    """A key record is signed by a key the auditor trusts."""

    name = "key.signature"
    schema = KEY_SCHEMA


class KeyRecord(Check[KeyCase]):
    """A key record's members; signed by the key it names, which is the trusted key of that id,
    within its validity period (``valid_from``)."""

    name = "key.record"

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey], times: Times) -> None:
        self.trusted = trusted
        self.times = times

    def check(self, subject: KeyCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        payload, signer = subject.payload, subject.envelope["signature"]["key_id"]
        doc = Doc(payload, "")
        exact_members(payload, _KEY_MEMBERS, "key record")
        kid = doc.get_str("key_id")
        if signer != kid:
            fail("signature.key_id", f"is {tok(signer)}: a key record is signed by the key it "
                  f"names ({tok(kid)})")
        try:
            public = jwk_to_public_key(doc.get_obj("jwk").data, where="jwk")
        except KeyFileError as exc:
            fail("jwk", str(exc).removeprefix("jwk: "))
        if raw_public_bytes(public) != raw_public_bytes(self.trusted[kid]):
            fail("jwk", f"is not the trusted key {tok(kid)}")
        self.times.signed_within(kid, doc, "valid_from")
        subject.message = f"the trusted key, valid from {show(doc.get_str('valid_from'))}"


def key_checks(trusted: Mapping[str, Ed25519PublicKey], times: Times) -> tuple[Check[KeyCase], ...]:
    """The checks of a key record, in order."""
    return KeySignature(trusted), KeyRecord(trusted, times)


def key_finding(path: Path, envelope: dict[str, Any],
                checks: Sequence[Check[KeyCase]]) -> Finding:
    """The line of a key record: the first of ``checks`` it fails, else OK."""
    ident = label(envelope.get("payload"), "key_id", path)
    case = KeyCase(path, envelope)
    try:
        run_checks(checks, case)
    except VerificationError as exc:
        return Finding("key", ident, path, Status.FAIL, exc.field, str(exc), check=case.check)
    except AuditFailure as exc:
        return Finding("key", ident, path, Status.FAIL, exc.field, exc.message, check=case.check)
    return Finding("key", ident, path, Status.OK, message=case.message, check=case.check)
