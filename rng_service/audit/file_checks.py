"""The checks of a file before any record's: it can be read, and it is what it must be.

- ``file.read`` (:class:`FileReadable`): the walk found no problem with it (a link, a FIFO, a
  directory where records lie: :mod:`rng_service.audit.walk`), it is a regular file within the
  byte bound, and it holds one JSON object (:func:`rng_service.crypto.signing.decode_spanned`);
- ``file.bare-payload`` (:class:`BarePayload`): a round, reveal, key or commitment payload with
  no envelope fails as that record, unsigned;
- ``file.envelope`` (:class:`NotAnEnvelope`): any other JSON object without an envelope member
  fails in a record directory, or named explicitly; elsewhere it is skipped (which fails the
  audit), unless it is a ``keys.jwks.json`` holding a JWK Set, passed over (never trusted);
- ``file.schema`` (:class:`UnknownSchema`): an envelope's payload has a schema of no record kind.

:func:`unenveloped` judges a JSON object without any envelope member.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from rng_service.audit.checks import Check, Named, Subject
from rng_service.audit.claims import ROUND_CLAIMS, is_jwk_set, label
from rng_service.audit.failures import fail
from rng_service.audit.files import Finding, Status, Unreadable, read_file, show
from rng_service.audit.log_lines import LEAF_DIRS
from rng_service.audit.walk import Entry
from rng_service.crypto.signing import VerificationError, decode_claimed
from rng_service.records.schema import (
    KEY_SCHEMA,
    KEYS_FILE,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    SHOE_COMMITMENT_SCHEMA,
)

#: the members of which an envelope has at least one: a file without any is unsigned
ENVELOPE_MEMBERS: Final = frozenset({"format", "payload", "signature"})
#: an unsigned payload of each schema fails as this kind of finding, named by this member
BARE_KINDS: Final = {RECORD_SCHEMA: ("round", "round_id"), REVEAL_SCHEMA: ("shoe", "shoe_id"),
                     KEY_SCHEMA: ("key", "key_id"),
                     SHOE_COMMITMENT_SCHEMA: ("commitment", "shoe_id")}
NOT_ENVELOPE: Final = ("is not a signed envelope (members format, payload and signature) "
                       "nor a rules document")


class FileCase(Subject):
    """A file the walk found, and once read its bytes, the JSON object they hold and whether
    the bytes are exactly its sorted encoding (a round's are then parsed again in pass 2
    without their checks), and where the middle of its members' values lies if that was told
    from the bytes (:func:`~rng_service.crypto.signing.payload_span`'s ``middle``).

    A round record so encoded has in its payload only the members pass 1 reads
    (:data:`~rng_service.audit.claims.ROUND_CLAIMS`, :func:`decode_claimed`): its checks, in
    pass 2, decode the whole of its bytes."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.data = b""
        self.envelope: dict[str, Any] = {}
        self.sorted = False
        self.middle: tuple[int, int] | None = None


class FileReadable(Check[FileCase]):
    """The file can be read: no problem found by the walk, a regular file within the byte bound
    holding one JSON object."""

    name = "file.read"

    def check(self, subject: FileCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        entry = subject.entry
        if entry.problem is not None:
            fail(None, entry.problem)
        try:
            subject.data = read_file(entry.path, entry.follow)
            subject.envelope, subject.sorted, subject.middle = decode_claimed(
                subject.data, ROUND_CLAIMS)
        except Unreadable as exc:
            fail(None, str(exc))
        except VerificationError as exc:  # not JSON at all: a truncated or damaged record?
            fail(exc.field, f"{NOT_ENVELOPE}: {exc}")


class BarePayload(Named):
    """A record's payload with no envelope: it fails as that record, its signature missing."""

    name = "file.bare-payload"


class NotAnEnvelope(Named):
    """A JSON object that is no envelope where only envelopes may be (a record directory, a
    file named), or a ``keys.jwks.json`` that is not a JWK Set."""

    name = "file.envelope"


class UnknownSchema(Named):
    """An envelope whose payload's schema is none of the records'."""

    name = "file.schema"

    @staticmethod
    def finding(path: Path, schema: object) -> Finding:
        """The FAIL finding on an envelope of no record kind."""
        return Finding("file", str(path), path, Status.FAIL, "payload.schema",
                       f"{show(schema)} is none of {', '.join(sorted(LEAF_DIRS))}",
                       check=UnknownSchema.name)


def unenveloped(path: Path, data: dict[str, Any],
                strict: bool) -> Finding | Literal["keys", "skip"]:
    """A JSON object without any envelope member: an unsigned payload fails as the round or
    reveal it claims to be; only a keys file outside the record directories is passed over
    (``"keys"``), and anything else there skipped (``"skip"``)."""
    schema = data.get("schema")
    if isinstance(schema, str) and schema in BARE_KINDS:
        kind, member = BARE_KINDS[schema]
        return Finding(kind, label(data, member, path), path, Status.FAIL, "signature",
                       "is missing: the file holds a bare payload, not a signed envelope",
                       check=BarePayload.name)
    if strict:
        return Finding("file", str(path), path, Status.FAIL, message=NOT_ENVELOPE,
                       check=NotAnEnvelope.name)
    if path.name == KEYS_FILE:
        if is_jwk_set(data):
            return "keys"
        return Finding("file", str(path), path, Status.FAIL,
                       message=f'is not a JWK Set ({{"keys": [...]}}) and {NOT_ENVELOPE}',
                       check=NotAnEnvelope.name)
    return "skip"
