"""C2SP tlog-cosignature (https://c2sp.org/tlog-cosignature), Ed25519 ``cosignature/v1``.

A witness (a *cosigner*) that verified a checkpoint consistent with every earlier one it saw adds
a note signature line to it::

    — <witness name> base64(key ID (4) || timestamp (8, big-endian) || Ed25519 signature (64))

The key ID is ``SHA-256(name || 0x0A || 0x04 || public key)[:4]`` and the signature is over::

    cosignature/v1
    time <timestamp, ASCII decimal>
    <the checkpoint's note text, every line of it with its newline>

A witness's key is given as a vkey ``<name>+<key ID hex>+base64(0x04 || public key)``. Lines of
other keys are ignored (the operator's own signature among them); a line that names a trusted
witness but does not verify rejects the note, as signed-note asks of a malformed one.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.core.errors import IntegrityFailure, InvalidInput, quote
from rng_service.crypto.keys import raw_public_bytes
from rng_service.log.note import (
    KEY_ID_SIZE,
    MALFORMED,
    NoteSignature,
    is_valid_key_name,
    split_note,
    vkey_parts,
    vkey_text,
)

ALG_COSIGNATURE_V1: Final = 0x04
HEADER: Final = "cosignature/v1"
#: the bytes after the key ID: the timestamp and the Ed25519 signature
BLOB_SIZE: Final = 8 + 64
MAX_TIMESTAMP: Final = 2**63 - 1


class Signer(Protocol):
    """An Ed25519 private key: :class:`~rng_service.crypto.keys.SigningKey` is one."""

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The key's public half."""
        ...

    def sign(self, data: bytes) -> bytes:
        """The Ed25519 signature of ``data``."""
        ...


def cosigner_key_id(name: str, public_key: Ed25519PublicKey) -> bytes:
    """``SHA-256(name || 0x0A || 0x04 || public key)[:4]``."""
    if not is_valid_key_name(name):
        raise InvalidInput("witness", f"not a valid key name: {quote(name)}", reason=MALFORMED)
    material = name.encode() + b"\n" + bytes([ALG_COSIGNATURE_V1]) + raw_public_bytes(public_key)
    return hashlib.sha256(material).digest()[:KEY_ID_SIZE]


def signed_message(text: str, timestamp: int) -> bytes:
    """What a cosignature signs: the header line, the time line and the checkpoint's text.

    >>> signed_message("example.com/behind-the-sofa\\n20852163\\n"
    ...                "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\\n", 1679315147).decode()[:36]
    'cosignature/v1\\ntime 1679315147\\nexamp'
    """
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise InvalidInput("timestamp", f"must be in [0, 2**63 - 1], got {timestamp}",
                           reason=MALFORMED)
    return f"{HEADER}\ntime {timestamp}\n{text}".encode()


@dataclass(frozen=True)
class Cosigner:
    """A witness's cosignature/v1 key: its name, key ID and Ed25519 public key."""

    name: str
    key_id: bytes
    public_key: Ed25519PublicKey

    @classmethod
    def from_public_key(cls, name: str, public_key: Ed25519PublicKey) -> Cosigner:
        """The cosigner of ``public_key`` under ``name``, its key ID computed."""
        return cls(name, cosigner_key_id(name, public_key), public_key)

    @classmethod
    def from_vkey(cls, vkey: str) -> Cosigner:
        """Parse ``<name>+<8 lowercase hex>+<base64(0x04 || 32-byte key)>``; the ID must match."""
        name, id_hex, material = vkey_parts(vkey)
        try:
            raw = base64.b64decode(material.encode("ascii"), validate=True)
        except (UnicodeEncodeError, ValueError):
            raise InvalidInput("vkey", "key material is not base64", reason=MALFORMED) from None
        if len(raw) != 1 + 32 or raw[0] != ALG_COSIGNATURE_V1:
            kind = f"type 0x{raw[0]:02x}" if raw else "empty"
            raise InvalidInput("vkey", f"is not an Ed25519 cosignature/v1 key (0x04 || 32 "
                               f"bytes; this one is {kind}: 0x01 is a log's key)",
                               reason=MALFORMED)
        cosigner = cls.from_public_key(name, Ed25519PublicKey.from_public_bytes(raw[1:]))
        if cosigner.key_id.hex() != id_hex:
            raise InvalidInput("vkey", "key ID does not match the key", reason=MALFORMED)
        return cosigner

    def vkey(self) -> str:
        """``<name>+<key ID hex>+base64(0x04 || public key)``."""
        return vkey_text(self.name, self.key_id, ALG_COSIGNATURE_V1, self.public_key)


@dataclass(frozen=True)
class Cosignature:
    """A cosignature that verified: whose, and when the witness made it (POSIX seconds)."""

    cosigner: Cosigner
    timestamp: int


def cosign(text: str, key: Signer, name: str, timestamp: int) -> NoteSignature:
    """The cosignature line of ``key`` (the witness ``name``) on a checkpoint's ``text``."""
    blob = timestamp.to_bytes(8, "big") + key.sign(signed_message(text, timestamp))
    return NoteSignature(name, cosigner_key_id(name, key.public_key), blob)


def timestamp_of(signature: NoteSignature) -> int:
    """The timestamp a cosignature line claims (unverified)."""
    if len(signature.signature) != BLOB_SIZE:
        raise InvalidInput("cosignature", f"is {len(signature.signature)} bytes after its key "
                           f"ID, not {BLOB_SIZE} (timestamp and signature)", reason=MALFORMED)
    return int.from_bytes(signature.signature[:8], "big")


def verify_cosignatures(note: str | bytes, cosigners: Iterable[Cosigner], *,
                        not_after: int | None = None) -> list[Cosignature]:
    """The cosignatures on ``note`` by ``cosigners`` that verify, one per cosigner.

    Lines of other keys are ignored. A line of a trusted cosigner that does not verify, or is
    dated after ``not_after`` (POSIX seconds), raises :class:`IntegrityFailure`.
    """
    text, lines = split_note(note)
    index = {(c.name, c.key_id): c for c in cosigners}
    found: dict[tuple[str, bytes], Cosignature] = {}
    for line in lines:
        cosigner = index.get((line.name, line.key_id))
        if cosigner is None:
            continue
        where = f"the cosignature of {cosigner.name}"
        try:
            timestamp = timestamp_of(line)
            message = signed_message(text, timestamp)
        except InvalidInput as exc:
            raise IntegrityFailure(f"{where} is malformed: {exc}",
                                   reason="COSIGNATURE_INVALID") from None
        try:
            cosigner.public_key.verify(line.signature[8:], message)
        except InvalidSignature:
            raise IntegrityFailure(f"{where} does not verify", reason="COSIGNATURE_INVALID"
                                   ) from None
        if not_after is not None and timestamp > not_after:
            raise IntegrityFailure(f"{where} is dated {timestamp}, in the future",
                                   reason="COSIGNATURE_INVALID")
        found.setdefault((cosigner.name, cosigner.key_id), Cosignature(cosigner, timestamp))
    return list(found.values())
