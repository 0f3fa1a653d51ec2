"""C2SP signed notes (https://c2sp.org/signed-note) with Ed25519 keys: sign, parse, verify.

A note is UTF-8 text ending in a newline, a blank line, then one or more signature lines::

    — <key name> base64(key ID (4 bytes) || Ed25519 signature over the text)

The key ID is ``SHA-256(key name || 0x0A || 0x01 || 32-byte public key)[:4]``; a verifier's key is
written ``<name>+<key ID hex>+base64(0x01 || public key)`` (a *vkey*, the form Go's
``golang.org/x/mod/sumdb/note`` and the transparency-dev witnesses read).

Parsing is strict and bounded (:data:`MAX_NOTE_BYTES`, :data:`MAX_SIGNATURES`); verification
follows the spec: signatures from keys the caller does not trust are ignored, a bad signature from
a trusted key rejects the whole note, and a note with no good trusted signature is rejected.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.core.errors import IntegrityFailure, InvalidInput, quote
from rng_service.crypto.keys import SigningKey, raw_public_bytes

ALG_ED25519: Final = 0x01
KEY_ID_SIZE: Final = 4
ED25519_SIGNATURE_SIZE: Final = 64
SIGNATURE_PREFIX: Final = "— "  # em dash U+2014, space
# Bounds for hostile input: the spec asks verifiers to accept at least 16 signatures (post-quantum
# ones can be ~5 kB each); Go's reference implementation stops at 100.
MAX_NOTE_BYTES: Final = 128 * 1024
MAX_SIGNATURES: Final = 100

MALFORMED: Final = "MALFORMED_NOTE"
UNVERIFIED: Final = "NOTE_NOT_VERIFIED"
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")  # every ASCII control character except newline
_KEY_ID_HEX = re.compile(r"[0-9a-f]{8}\Z")


def is_valid_key_name(name: str) -> bool:
    """Non-empty, no Unicode space, no ``+``, no control character (signed-note's key names).

    >>> is_valid_key_name("fairshoe.example/log"), is_valid_key_name("a b"), is_valid_key_name("")
    (True, False, False)
    """
    return (
        bool(name)
        and "+" not in name
        and not any(ch.isspace() for ch in name)
        and not _CONTROL.search(name)
    )


def _check_key_name(name: object, field: str) -> str:
    if not isinstance(name, str) or not is_valid_key_name(name):
        raise InvalidInput(field, f"not a valid note key name: {quote(name)}", reason=MALFORMED)
    return name


def key_id(name: str, public_key: Ed25519PublicKey) -> bytes:
    """The 4-byte key ID: ``SHA-256(name || 0x0A || 0x01 || public key)[:4]``.

    >>> raw = bytes.fromhex("1a5cd907143c384c41e830c5bce12aa8817ec5649aaabf2c31388b35b2d744d6")
    >>> key_id("PeterNeumann", Ed25519PublicKey.from_public_bytes(raw)).hex()
    'c74f20a3'
    """
    name = _check_key_name(name, "key_name")
    material = name.encode() + b"\n" + bytes([ALG_ED25519]) + raw_public_bytes(public_key)
    return hashlib.sha256(material).digest()[:KEY_ID_SIZE]


def vkey_parts(vkey: object) -> tuple[str, str, str]:
    """A verifier key string's name, key ID hex and base64 key material, unchecked (the
    material may itself contain '+': split twice); a note key's and a witness's alike."""
    if not isinstance(vkey, str) or len(vkey) > 1024:
        raise InvalidInput("vkey", "must be a short string", reason=MALFORMED)
    name, _, rest = vkey.partition("+")
    id_hex, _, material = rest.partition("+")
    return name, id_hex, material


def vkey_text(name: str, key_id: bytes, alg: int, public_key: Ed25519PublicKey) -> str:
    """``<name>+<key ID hex>+base64(alg || public key)``."""
    material = bytes([alg]) + raw_public_bytes(public_key)
    return f"{name}+{key_id.hex()}+{base64.b64encode(material).decode('ascii')}"


def _b64_strict(text: str, field: str) -> bytes:
    """Standard padded base64 with exactly one spelling per byte string (RFC 4648 section 4)."""
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise InvalidInput(field, "not base64", reason=MALFORMED) from None
    if base64.b64encode(data).decode("ascii") != text:
        raise InvalidInput(field, "not canonical base64", reason=MALFORMED)
    return data


@dataclass(frozen=True)
class NoteVerifier:
    """A trusted Ed25519 note key: its name, 4-byte key ID and public key."""

    name: str
    key_id: bytes
    public_key: Ed25519PublicKey

    @classmethod
    def from_public_key(cls, name: str, public_key: Ed25519PublicKey) -> NoteVerifier:
        """The verifier of ``public_key`` under ``name``, its key ID computed (never given)."""
        return cls(name, key_id(name, public_key), public_key)

    @classmethod
    def from_vkey(cls, vkey: str) -> NoteVerifier:
        """Parse ``<name>+<8 lowercase hex>+<base64(0x01 || 32-byte key)>``; the ID must match."""
        name, id_hex, material = vkey_parts(vkey)
        name = _check_key_name(name, "vkey")
        if not _KEY_ID_HEX.match(id_hex):
            raise InvalidInput("vkey", "key ID must be 8 lowercase hex digits", reason=MALFORMED)
        raw = _b64_strict(material, "vkey")
        if len(raw) != 1 + 32 or raw[0] != ALG_ED25519:
            raise InvalidInput("vkey", "not an Ed25519 note key (0x01 || 32 bytes)",
                               reason=MALFORMED)
        verifier = cls.from_public_key(name, Ed25519PublicKey.from_public_bytes(raw[1:]))
        if verifier.key_id.hex() != id_hex:
            raise InvalidInput("vkey", "key ID does not match the key", reason=MALFORMED)
        return verifier

    def vkey(self) -> str:
        """``<name>+<key ID hex>+base64(0x01 || public key)``."""
        return vkey_text(self.name, self.key_id, ALG_ED25519, self.public_key)

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        try:
            self.public_key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


def vkey(name: str, public_key: Ed25519PublicKey) -> str:
    """The verifier key string of ``public_key`` under ``name``, as note tooling reads it.

    >>> raw = bytes.fromhex("1a5cd907143c384c41e830c5bce12aa8817ec5649aaabf2c31388b35b2d744d6")
    >>> vkey("PeterNeumann", Ed25519PublicKey.from_public_bytes(raw))
    'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW'
    """
    return NoteVerifier.from_public_key(name, public_key).vkey()


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 4-byte key ID and the signature bytes after the ID."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        """The signature line as it appears in a note, newline included."""
        blob = base64.b64encode(self.key_id + self.signature).decode("ascii")
        return f"{SIGNATURE_PREFIX}{self.name} {blob}\n"


def _check_text(text: object) -> str:
    """Note text: a str ending in newline, with no control characters but newlines."""
    if not isinstance(text, str) or not text.endswith("\n"):
        raise InvalidInput("note", "text must be a string ending in a newline", reason=MALFORMED)
    if _CONTROL.search(text):
        raise InvalidInput("note", "text holds a control character", reason=MALFORMED)
    return text


def sign_note(text: str, key: SigningKey, name: str) -> str:
    """``text``, a blank line and the signature line of ``key`` under ``name``."""
    text = _check_text(text)
    name = _check_key_name(name, "key_name")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        raise InvalidInput("note", "text is not valid UTF-8", reason=MALFORMED) from None
    sig = NoteSignature(name, key_id(name, key.public_key), key.sign(text.encode("utf-8")))
    return text + "\n" + sig.line()


def _decode_note(note: str | bytes) -> str:
    if isinstance(note, str):
        try:
            data = note.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput("note", "not valid UTF-8", reason=MALFORMED) from None
    elif isinstance(note, bytes | bytearray | memoryview):
        data = bytes(note)
    else:
        raise InvalidInput("note", f"must be str or bytes, got {type(note).__name__}")
    if len(data) > MAX_NOTE_BYTES:
        raise InvalidInput("note", f"longer than {MAX_NOTE_BYTES} bytes", reason=MALFORMED)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("note", "not valid UTF-8", reason=MALFORMED) from None


def _parse_signature_line(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        raise InvalidInput("note", f"not a signature line: {quote(line)}", reason=MALFORMED)
    name, sep, blob = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not sep:
        raise InvalidInput("note", f"not a signature line: {quote(line)}", reason=MALFORMED)
    name = _check_key_name(name, "note")
    raw = _b64_strict(blob, "note")
    if len(raw) <= KEY_ID_SIZE:
        raise InvalidInput("note", "signature too short", reason=MALFORMED)
    return NoteSignature(name, raw[:KEY_ID_SIZE], raw[KEY_ID_SIZE:])


def split_note(note: str | bytes) -> tuple[str, list[NoteSignature]]:
    """The text (with its final newline) and the signature lines of a note, *unverified*.

    Nothing returned here may be trusted: use :func:`open_note`.
    """
    full = _decode_note(note)
    _check_text(full)
    cut = full.rfind("\n\n")  # the text ends at the last blank line
    if cut < 0:
        raise InvalidInput("note", "no blank line before the signatures", reason=MALFORMED)
    text, lines = full[: cut + 1], full[cut + 2 :].split("\n")[:-1]
    if not lines:
        raise InvalidInput("note", "no signature lines", reason=MALFORMED)
    if len(lines) > MAX_SIGNATURES:
        raise InvalidInput("note", f"more than {MAX_SIGNATURES} signatures", reason=MALFORMED)
    return text, [_parse_signature_line(line) for line in lines]


def _index_verifiers(verifiers: Iterable[NoteVerifier | str]) -> dict[tuple[str, bytes],
                                                                        NoteVerifier]:
    index: dict[tuple[str, bytes], NoteVerifier] = {}
    for item in verifiers:
        verifier = NoteVerifier.from_vkey(item) if isinstance(item, str) else item
        if not isinstance(verifier, NoteVerifier):
            raise InvalidInput("trusted_keys", "must be NoteVerifier objects or vkey strings")
        slot = (verifier.name, verifier.key_id)
        known = index.setdefault(slot, verifier)
        if raw_public_bytes(known.public_key) != raw_public_bytes(verifier.public_key):
            # Two keys one name and ID: which signed is undecidable, so neither may be used.
            raise InvalidInput("trusted_keys", f"ambiguous key {verifier.name}+"
                               f"{verifier.key_id.hex()}", reason="AMBIGUOUS_KEY")
    return index


def open_note(note: str | bytes, trusted_keys: Iterable[NoteVerifier | str]
              ) -> tuple[str, list[NoteSignature]]:
    """The text of ``note`` and its signatures that verified under ``trusted_keys``.

    ``trusted_keys`` holds :class:`NoteVerifier` objects or vkey strings. Signatures from other
    keys are ignored; a failing signature from a trusted key raises :class:`IntegrityFailure`, and
    so does a note without one good trusted signature.
    """
    text, signatures = split_note(note)
    return text, verify_signatures(text, signatures, trusted_keys)


def verify_signatures(text: str, signatures: Iterable[NoteSignature],
                      trusted_keys: Iterable[NoteVerifier | str]) -> list[NoteSignature]:
    """The rules of :func:`open_note` for a note already split by :func:`split_note`."""
    index = _index_verifiers(trusted_keys)
    message = text.encode("utf-8")
    verified: list[NoteSignature] = []
    for sig in signatures:
        verifier = index.get((sig.name, sig.key_id))
        if verifier is None:
            continue
        if len(sig.signature) != ED25519_SIGNATURE_SIZE or not verifier.verify(message,
                                                                                sig.signature):
            raise IntegrityFailure(f"invalid signature for key {sig.name}+{sig.key_id.hex()}",
                                   reason="NOTE_SIGNATURE_INVALID")
        if sig not in verified:
            verified.append(sig)
    if not verified:
        raise IntegrityFailure("note has no signature from a trusted key", reason=UNVERIFIED)
    return verified
