"""The one interface of the audit's checks: every line the audit prints is written by a named
check, and the finding carries its name (:attr:`rng_service.audit.files.Finding.check`).

A check (:class:`Check`) judges one subject (a round record, a shoe reveal, a key record, ...):
``check(subject)`` returns if the subject passes it and raises
:class:`~rng_service.audit.failures.AuditFailure` (or a signature's ``VerificationError``, or
:class:`~rng_service.audit.failures.Unrevealed`) if not, as sigstore-python's verification
policies do. The checks of one kind of subject run in a fixed order (:func:`run_checks`), the
first failure being the subject's; a later check may use what an earlier one established on the
subject (the rules a round names, its shoe recomputed, the round replayed).

Some lines are written by a part of the audit that is not a predicate on one subject: the
per-file time bound, the checks across a collection (a seed serving two shoes), the log. They
are :class:`Named` too, so that every name a finding carries is in :data:`CHECKS`, the class
that wrote it found from the name.

Names are ``<kind>.<what>``: the kind of the finding (``round``, ``shoe``, ``key``, ...) and what
is checked (``round.place``: the round's place in its shoe).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.crypto.signing import verify_signed

#: every named check by its name: what a finding's ``check`` names
CHECKS: dict[str, type[Named]] = {}


class Named:
    """A part of the audit that writes findings under a name of its own (``name``, unique)."""

    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if name is None:  # an abstract base, as SignatureCheck: its subclasses are the checks
            return
        if name in CHECKS:
            raise TypeError(f"two checks are named {name!r}: {CHECKS[name].__qualname__} "
                            f"and {cls.__qualname__}")
        CHECKS[name] = cls


class Subject:
    """What a sequence of checks judges; ``check`` is the name of the check running, so of the
    one that failed once one has."""

    check: str = ""


S = TypeVar("S", bound=Subject)


class Check(Named, ABC, Generic[S]):
    """One named check of a subject: :meth:`check` returns if it passes, raises if not."""

    @abstractmethod
    def check(self, subject: S) -> None:
        """Pass, or raise AuditFailure naming the member at fault (see the module docstring)."""


class Signed(Subject):
    """A signed record's subject: its envelope, and its payload once the signature verified."""

    envelope: dict[str, Any]
    payload: dict[str, Any]
    #: the payload's sorted encoding as read with the envelope, if the reader had it
    #: (:func:`~rng_service.crypto.signing.decode_signed`): the signature check then does not
    #: encode the payload again
    encoded: bytes = b""
    #: the payload's canonical bytes, which the signature covers, once it verified
    payload_bytes: bytes = b""


G = TypeVar("G", bound=Signed)


class SignatureCheck(Check[G]):
    """The record is signed by a key the auditor trusts, and its payload is of ``schema``; the
    verified payload is left on the subject for the checks after it. One class a kind of record,
    each naming its schema."""

    schema: ClassVar[str]

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey]) -> None:
        self.trusted = trusted

    def check(self, subject: G) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.payload, subject.payload_bytes = verify_signed(
            subject.envelope, self.trusted, schema=self.schema, encoded=subject.encoded)


def run_checks(checks: Iterable[Check[S]], subject: S) -> None:
    """Run ``checks`` on ``subject`` in order; the first failure propagates, ``subject.check``
    naming the check that raised it."""
    for one in checks:
        subject.check = one.name
        one.check(subject)
