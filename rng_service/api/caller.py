"""Who is calling: the operator every request is scoped to, and what the caller may call.

The operator is the authenticated caller, never a request field (``fairshoe.common.v1``):

* **No client certificate** (plaintext, or TLS without ``--tls-client-ca``): every call is the
  one default operator's (:data:`~rng_service.service.ports.DEFAULT_OPERATOR`); ``fairshoe
  serve`` says so in its ``serving`` log line.
* **Mutual TLS**: the server accepts only certificates its client CA signed (others fail the
  handshake) and reads the caller's identity from the certificate's one URI subject alternative
  name in the ``fairshoe`` scheme: ``fairshoe://operator/<operator id>`` is an operator, which
  acts for itself only; ``fairshoe://auditor/<name>`` is an auditor, which may call only the read
  RPCs of AuditService (:func:`auditor_may_call`), for the operators its grant names
  (:class:`AuditorGrants`, server configuration), naming the operator of each call in the
  request metadata ``x-fairshoe-operator``. A URI SAN and not the subject CN: a CN is a display
  name any PKI fills with anything, while a URI in our own scheme cannot be mistaken for a host
  name and carries the role with the name. A certificate with no such URI, or several, or a name
  that is no valid operator id, or a CA's certificate (basicConstraints CA:TRUE), is refused
  (PERMISSION_DENIED); so is each call on a connection whose certificate has expired since.

Health and reflection (``/grpc.*``) are open to any peer that passed the handshake: a probe needs
no tenant. :class:`Access` decides, in the interceptor, before any handler runs;
:func:`operator_of` is then the one place handlers learn whose data a call touches.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from types import MappingProxyType
from typing import Final

import grpc
from cryptography import x509

from rng_service.core.errors import InvalidInput, PermissionDenied, quote
from rng_service.service.ports import DEFAULT_OPERATOR

SCHEME: Final = "fairshoe://"
#: the request metadata an auditor names the operator of its call in
OPERATOR_METADATA: Final = "x-fairshoe-operator"
AUDIT_SERVICE: Final = "fairshoe.audit.v1.AuditService"
#: AuditService methods an auditor may call: the reads, by verb, so reads added later (the log's
#: checkpoints and proofs) are covered and anything else (a write would be named otherwise) is not
READ_VERBS: Final = ("Get", "List", "Export")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")  # as service.validate's operator ids


class Role(StrEnum):
    """What a client certificate makes its holder."""

    OPERATOR = "operator"
    AUDITOR = "auditor"


@dataclass(frozen=True)
class Identity:
    """A caller named by its client certificate."""

    role: Role
    name: str

    @property
    def uri(self) -> str:
        """The URI SAN that names it, e.g. ``fairshoe://operator/op-a``."""
        return f"{SCHEME}{self.role}/{self.name}"


def identity_from_pem(pem: bytes, now: datetime | None = None) -> Identity:
    """The identity a PEM client certificate names (see the module docstring), or
    :class:`PermissionDenied` saying what is wrong with it, if it is still valid ``now``
    (default: the current time). TLS checks a certificate's dates at the handshake only, and a
    connection may stay open for days: checked per call, an expired certificate stops naming
    its caller on a connection made before it expired."""
    identity, expires = _parsed(pem)
    if (now if now is not None else datetime.now(UTC)) >= expires:
        raise PermissionDenied(f"the client certificate expired at {expires.isoformat()}; "
                               "reconnect with a current one", reason="CERTIFICATE_EXPIRED")
    return identity


@lru_cache(maxsize=1024)  # one parse per certificate, not per call
def _parsed(pem: bytes) -> tuple[Identity, datetime]:
    """The identity ``pem`` names and when it expires (PermissionDenied if it names none)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        _refuse_ca(cert)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        uris = [u for u in sans.get_values_for_type(x509.UniformResourceIdentifier)
                if u.lower().startswith(SCHEME)]
    except x509.ExtensionNotFound:
        uris = []
    except ValueError as exc:
        raise PermissionDenied(f"the client certificate does not parse: {exc}",
                               reason="CERTIFICATE_UNUSABLE") from None
    if len(uris) != 1:
        raise PermissionDenied(
            f"the client certificate must carry exactly one {SCHEME}operator/<id> or "
            f"{SCHEME}auditor/<name> URI SAN; it has {len(uris)}", reason="NO_IDENTITY")
    role, _, name = uris[0][len(SCHEME):].partition("/")
    if role not in tuple(Role) or not _NAME.match(name):
        raise PermissionDenied(f"the client certificate's identity {quote(uris[0])} is not "
                               f"{SCHEME}operator/<id> or {SCHEME}auditor/<name> (1-64 letters, "
                               "digits or . _ -)", reason="NO_IDENTITY")
    return Identity(Role(role), name), cert.not_valid_after_utc


def _refuse_ca(cert: x509.Certificate) -> None:
    """A CA's certificate (basicConstraints CA:TRUE) names an issuer, never a caller: TLS
    accepts one as a client certificate when its key usage allows signing, and an intermediate
    CA that carried a ``fairshoe://`` URI would otherwise act as that operator."""
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return
    if constraints.ca:
        raise PermissionDenied("the client certificate is a CA's (basicConstraints CA:TRUE); "
                               "a caller's certificate is an end entity's",
                               reason="CERTIFICATE_UNUSABLE")


class _LastCall(threading.local):
    """The last call whose identity a thread read, and that identity (see :func:`identity_of`):
    None when it has none. A class default, so that reading it never misses (a thread-local's
    missing attribute raises, and formats, an AttributeError even inside ``getattr``)."""

    entry: tuple[grpc.ServicerContext, Identity | None] | None = None


_last_call = _LastCall()


def identity_of(context: grpc.ServicerContext) -> Identity | None:
    """The caller's identity, or None when it presented no client certificate (no mutual TLS).

    Read once per call: the interceptor's checks and the handler all ask, and each reading
    costs gRPC a copy of the whole auth context. The thread remembers the last call it read
    (a call runs on one worker thread) by the context object itself, which it holds: no other
    call's context can be that object, and a certificate's expiry is still checked per call.
    """
    last = _last_call.entry
    if last is not None and last[0] is context:
        return last[1]
    pems = context.auth_context().get("x509_pem_cert")
    identity = identity_from_pem(bytes(pems[0])) if pems else None
    _last_call.entry = (context, identity)
    return identity


def caller_of(context: grpc.ServicerContext) -> str:
    """Whom a stream counts against: the identity its client certificate names (mutual TLS),
    else the peer's host (every connection from one host is one caller: a peer opening more
    connections gains nothing). Read before authorization: a certificate naming no one counts
    by host, and is refused by :meth:`Access.authorize` after."""
    try:
        identity = identity_of(context)
    except PermissionDenied:  # refused later, with its reason, by Access.authorize
        identity = None
    if identity is not None:
        return identity.uri
    peer = context.peer() or ""
    # "ipv4:127.0.0.1:50000", "ipv6:[::1]:50000", "unix:/path": the host without the port
    kind, _, address = peer.partition(":")
    return f"{kind}:{address.rpartition(':')[0]}" if kind in ("ipv4", "ipv6") else peer


def forget_call(context: grpc.ServicerContext) -> None:
    """The call of ``context`` has ended: its thread drops what it remembered of it."""
    last = _last_call.entry
    if last is not None and last[0] is context:
        _last_call.entry = None


def named_operator(context: grpc.ServicerContext) -> str | None:
    """The operator the call's ``x-fairshoe-operator`` metadata names, if any (InvalidInput if
    it names several: which one a check and a handler read must never differ)."""
    named = []  # a loop, not a comprehension: every call passes here, and 3.11 gives one a frame
    for key, value in context.invocation_metadata() or ():
        if key == OPERATOR_METADATA:
            named.append(str(value))
    if len(named) > 1:
        raise InvalidInput(OPERATOR_METADATA, f"one operator per call, got {len(named)}")
    return named[0] if named else None


def operator_of(context: grpc.ServicerContext) -> str:
    """The operator the call acts for: the certificate's operator, the operator an auditor names
    (which :meth:`Access.authorize` has checked against its grant before any handler runs), or
    the default operator without client certificates."""
    identity = identity_of(context)
    if identity is None:
        return DEFAULT_OPERATOR
    if identity.role is Role.OPERATOR:
        return identity.name
    named = named_operator(context)
    if named is None:  # unreachable behind Access.authorize; refuse rather than guess
        raise InvalidInput(OPERATOR_METADATA, "an auditor names the operator of each call")
    return named


def auditor_may_call(method: str) -> bool:
    """Whether an auditor may call ``method`` (``/package.Service/Method``): a read of
    AuditService, by its verb.

    >>> auditor_may_call("/fairshoe.audit.v1.AuditService/GetRoundRecord")
    True
    >>> auditor_may_call("/fairshoe.wallet.v1.WalletService/GetBalance")
    False
    """
    service, _, name = method.lstrip("/").rpartition("/")
    return service == AUDIT_SERVICE and name.startswith(READ_VERBS)


@dataclass(frozen=True)
class AuditorGrants:
    """Which operators each auditor may read: server configuration, so a grant is given or
    withdrawn without issuing or revoking a certificate."""

    grants: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> AuditorGrants:
        """``auditor-1=op-a,op-b;auditor-2=op-c`` (spaces ignored; empty: no auditor).

        >>> sorted(AuditorGrants.parse("aud=op-a, op-b; other=op-c").operators("aud"))
        ['op-a', 'op-b']
        """
        grants: dict[str, frozenset[str]] = {}
        for part in filter(None, (p.strip() for p in text.split(";"))):
            name, sep, ops = part.partition("=")
            operators = frozenset(filter(None, (o.strip() for o in ops.split(","))))
            name = name.strip()
            if not sep or not _NAME.match(name) or not operators or name in grants:
                raise InvalidInput("auditor_grants", f"{quote(part)} is not NAME=OPERATOR[,...] "
                                   "(each auditor once)")
            bad = sorted(o for o in operators if not _NAME.match(o))
            if bad:
                raise InvalidInput("auditor_grants", f"{quote(bad[0])} is not an operator id")
            grants[name] = operators
        return cls(MappingProxyType(grants))

    def operators(self, auditor: str) -> frozenset[str]:
        """The operators ``auditor`` may read (none if it has no grant)."""
        return self.grants.get(auditor, frozenset())

    def describe(self) -> dict[str, list[str]]:
        """The grants as a JSON-friendly mapping (for the start-up log)."""
        return {name: sorted(ops) for name, ops in sorted(self.grants.items())}


@dataclass(frozen=True)
class Access:
    """The authorization every call passes before its handler (``api/interceptors.py``)."""

    auditors: AuditorGrants = field(default_factory=AuditorGrants)

    def authorize(self, method: str, context: grpc.ServicerContext) -> str | None:
        """The operator the call acts for (:func:`operator_of`) if its caller may call
        ``method``, None for health and reflection (they act for none); raises
        :class:`PermissionDenied` (or InvalidInput for an auditor that names no operator)
        otherwise."""
        if not method.startswith("/fairshoe."):
            return None  # health and reflection: any peer that passed the handshake
        return self.authorize_own(method, context, identity_of(context))

    def authorize_own(self, method: str, context: grpc.ServicerContext,
                      identity: Identity | None) -> str:
        """:meth:`authorize` for a method of the project's own services (``/fairshoe.``),
        whose caller's ``identity`` (:func:`identity_of`) the caller has read already."""
        named = named_operator(context)
        if identity is None or identity.role is Role.OPERATOR:
            own = identity.name if identity is not None else DEFAULT_OPERATOR
            if named is not None and named != own:
                raise PermissionDenied(f"this certificate acts for operator {quote(own)} only",
                                       reason="OTHER_OPERATOR")
            return own
        if not auditor_may_call(method):
            raise PermissionDenied(f"auditor {quote(identity.name)} may call only the read "
                                   f"RPCs of {AUDIT_SERVICE}", reason="AUDITOR_READ_ONLY")
        if named is None:
            raise InvalidInput(OPERATOR_METADATA,
                               "an auditor names the operator of each call in this metadata")
        if named not in self.auditors.operators(identity.name):
            raise PermissionDenied(f"auditor {quote(identity.name)} is not granted operator "
                                   f"{quote(named)}", reason="NOT_GRANTED")
        return named
