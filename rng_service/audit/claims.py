"""What a file claims before anything in it is verified: the envelope read from it (:func:`load`),
the id its finding is named by (:func:`label`), the members that sort it into its shoe
(:func:`claimed_str`, :func:`claimed_int`), what the log checks match it by (:func:`leaf_file`),
and whether it is a JWK Set (:func:`is_jwk_set`). Nothing here is trusted: a claim only names and
orders what the checks then verify.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from rng_service.audit.files import read_file
from rng_service.audit.log_lines import LeafFile
from rng_service.crypto.signing import Claimed, decode_signed
from rng_service.log import leaf_hash
from rng_service.records.schema import (
    KEY_SCHEMA,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    SHOE_COMMITMENT_SCHEMA,
)

#: a named tuple made from its members' tuple, as its ``_make`` makes one, in one call
_LEAF: Final = tuple.__new__
#: the payloads whose subject is the shoe their ``shoe_id`` names
_OF_SHOES: Final = (REVEAL_SCHEMA, SHOE_COMMITMENT_SCHEMA)
#: the members of a round record's payload that pass 1 reads (:func:`leaf_file`, and
#: :func:`~rng_service.audit.pieces.claims_of`): all it decodes of one
#: (:class:`~rng_service.audit.file_checks.FileReadable`), pass 2 decoding the whole of it
ROUND_CLAIMS: Final = Claimed.of(
    RECORD_SCHEMA, ("finished_at", "round_id", "schema", "shoe", "status"))


def load(path: Path, follow: bool = False) -> tuple[dict[str, Any], bytes]:
    """The envelope (or rules document) in ``path``, and its payload's sorted encoding if the
    file holds exactly an envelope's (:func:`~rng_service.crypto.signing.decode_signed`):
    Unreadable, or VerificationError if it is not one JSON object within the bounds of
    :mod:`rng_service.core.json_input`."""
    return decode_signed(read_file(path, follow))


def printable(value: object, path: Path) -> str:
    """A record's claimed id for its line (escaped when printed), else its file's name."""
    return value if isinstance(value, str) and value else path.name


def claimed_str(obj: object, member: str) -> str:
    """The string ``obj`` claims as ``member``, or "" if it claims none."""
    value = obj.get(member) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def label(payload: object, member: str, path: Path) -> str:
    """What a finding on ``path`` is named by: the id ``payload`` claims as ``member``, else
    the file's name."""
    return printable(payload.get(member) if isinstance(payload, dict) else None, path)


def claimed_int(obj: object, member: str) -> int:
    """The integer ``obj`` claims as ``member``, or -1 if it claims none."""
    value = obj.get(member) if isinstance(obj, dict) else None
    return value if type(value) is int else -1


def leaf_file(data: bytes, envelope: dict[str, Any]) -> LeafFile:
    """What the log checks need of an envelope file: its leaf hash and its claims (unverified).
    (:func:`claimed_str`'s reading inline, and the tuple made without the named tuple's
    ``__new__``: two of them for every file pass 1 reads; tests/audit/test_audit_read.py
    holds it to the readers.)"""
    payload = envelope.get("payload")
    if not isinstance(payload, dict):
        payload = {}
    schema = payload.get("schema")
    if not isinstance(schema, str):
        schema = ""
    if schema == RECORD_SCHEMA:  # a round is of the shoe its shoe member names
        shoe = payload.get("shoe")
        subject = shoe.get("id") if isinstance(shoe, dict) else None
    elif schema == KEY_SCHEMA:
        subject = payload.get("key_id")
    elif schema in _OF_SHOES:
        subject = payload.get("shoe_id")
    else:
        subject = None
    signature = envelope.get("signature")
    signer = signature.get("key_id") if isinstance(signature, dict) else None
    return _LEAF(LeafFile, (leaf_hash(data), schema or None,
                            signer if isinstance(signer, str) and signer else None,
                            subject if isinstance(subject, str) and subject else None))


def is_jwk_set(data: dict[str, Any]) -> bool:
    """True if ``data`` is shaped as a JWK Set: ``{"keys": [...]}`` of objects only."""
    keys = data.get("keys")
    return set(data) == {"keys"} and isinstance(keys, list) and all(
        isinstance(k, dict) for k in keys)
