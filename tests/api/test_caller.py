"""Who a client certificate names (``api/caller.py``), on certificates made here with the
``cryptography`` library: the one ``fairshoe://`` URI SAN decides, the CN never does, and
anything ambiguous is refused. And the auditor grants' configuration syntax."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from rng_service.api.caller import (
    AuditorGrants,
    Identity,
    Role,
    auditor_may_call,
    identity_from_pem,
)
from rng_service.core.errors import InvalidInput, PermissionDenied

KEY = ec.generate_private_key(ec.SECP256R1())


def _pem(cn: str, names: list[x509.GeneralName], *, ca: bool | None = None) -> bytes:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
               .public_key(KEY.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1)))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if ca is not None:
        builder = builder.add_extension(x509.BasicConstraints(ca=ca, path_length=None),
                                        critical=True)
    return builder.sign(KEY, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def uri(value: str) -> x509.GeneralName:
    return x509.UniformResourceIdentifier(value)


@pytest.mark.parametrize(("names", "expected"), [
    ([uri("fairshoe://operator/op-a")], Identity(Role.OPERATOR, "op-a")),
    ([uri("fairshoe://auditor/aud.1")], Identity(Role.AUDITOR, "aud.1")),
    # other SANs (a host name, another scheme) are no identity and do not get in the way
    ([x509.DNSName("client.example"), uri("spiffe://x/y"), uri("fairshoe://operator/b")],
     Identity(Role.OPERATOR, "b")),
])
def test_the_fairshoe_uri_san_names_the_caller(names: list[x509.GeneralName],
                                                expected: Identity) -> None:
    assert identity_from_pem(_pem("whatever the CN says", names)) == expected


@pytest.mark.parametrize("names", [
    [],  # a CN alone names nobody
    [x509.DNSName("op-a")],
    [uri("fairshoe://operator/op-a"), uri("fairshoe://operator/op-b")],  # ambiguous
    [uri("fairshoe://operator/op-a"), uri("fairshoe://auditor/op-a")],
    [uri("fairshoe://admin/root")],  # no such role
    [uri("fairshoe://operator/")],
    [uri("fairshoe://operator/op a")],
    [uri("fairshoe://operator/op-a/extra")],
    [uri("fairshoe://operator/" + "x" * 65)],
])
def test_anything_else_is_refused(names: list[x509.GeneralName]) -> None:
    with pytest.raises(PermissionDenied) as err:
        identity_from_pem(_pem("op-a", names))
    assert err.value.reason == "NO_IDENTITY"


def test_a_certificate_that_does_not_parse_is_refused() -> None:
    with pytest.raises(PermissionDenied):
        identity_from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")


@pytest.mark.parametrize(("method", "allowed"), [
    ("/fairshoe.audit.v1.AuditService/GetSigningKeys", True),
    ("/fairshoe.audit.v1.AuditService/ExportRecords", True),
    ("/fairshoe.audit.v1.AuditService/GetCheckpoint", True),  # reads added later are covered
    ("/fairshoe.audit.v1.AuditService/ListCheckpoints", True),
    ("/fairshoe.audit.v1.AuditService/PublishCheckpoint", False),  # a write would not be
    ("/fairshoe.audit.v2.AuditService/GetRoundRecord", False),
    ("/fairshoe.round.v1.RoundService/GetRound", False),
    ("/fairshoe.wallet.v1.WalletService/GetBalance", False),
])
def test_auditors_call_only_audit_reads(method: str, allowed: bool) -> None:
    assert auditor_may_call(method) is allowed


def test_grants_parse() -> None:
    grants = AuditorGrants.parse(" a=op-a ; b = op-a, op-b ;")
    assert grants.describe() == {"a": ["op-a"], "b": ["op-a", "op-b"]}
    assert grants.operators("c") == frozenset()
    assert AuditorGrants.parse("").grants == {}


@pytest.mark.parametrize("text", ["a", "a=", "=op", "a=op;a=op2", "a=op x", "a b=op"])
def test_bad_grants_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        AuditorGrants.parse(text)
    assert err.value.field == "auditor_grants"


def test_a_ca_certificate_names_no_caller() -> None:
    """TLS accepts a CA's certificate as a client's (tests/api/test_tenant_attacks.py)."""
    names = [uri("fairshoe://operator/op-a")]
    assert identity_from_pem(_pem("op-a", names, ca=False)) == Identity(Role.OPERATOR, "op-a")
    with pytest.raises(PermissionDenied) as err:
        identity_from_pem(_pem("op-a", names, ca=True))
    assert err.value.reason == "CERTIFICATE_UNUSABLE"


def test_an_expired_certificate_names_no_caller_any_more() -> None:
    """Checked per call: TLS checked the dates at the handshake, maybe days ago."""
    pem = _pem("op-a", [uri("fairshoe://operator/op-a")])
    expires = x509.load_pem_x509_certificate(pem).not_valid_after_utc
    second = datetime.timedelta(seconds=1)
    assert identity_from_pem(pem, now=expires - second) == Identity(Role.OPERATOR, "op-a")
    with pytest.raises(PermissionDenied) as err:
        identity_from_pem(pem, now=expires)
    assert err.value.reason == "CERTIFICATE_EXPIRED"
