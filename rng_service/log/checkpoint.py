"""Signed checkpoints of the log in the C2SP tlog-checkpoint format (https://c2sp.org/tlog-checkpoint).

A checkpoint is a signed note whose text is exactly::

    <origin>
    <tree size, decimal, no leading zeros>
    <root hash, standard base64>
    time <RFC 3339 UTC, whole seconds, e.g. 2025-01-02T03:04:05Z>     (optional extension line)

signed by the service's Ed25519 key under a key name equal to the origin (default
:data:`DEFAULT_ORIGIN`), so the origin, the key name and the vkey all say which log this is. The
time line is this log's only extension: the parser refuses any other, and any line missing, extra,
empty or not in canonical form (so one checkpoint has exactly one text, and so one signature).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.core.errors import IntegrityFailure, InvalidInput, quote
from rng_service.crypto.keys import SigningKey
from rng_service.log.hashing import check_hash, check_size
from rng_service.log.note import (
    MALFORMED,
    NoteSignature,
    NoteVerifier,
    is_valid_key_name,
    sign_note,
    split_note,
    verify_signatures,
)

DEFAULT_ORIGIN: Final = "fairshoe.example/log"
TIME_PREFIX: Final = "time "
_SIZE = re.compile(r"(0|[1-9][0-9]{0,19})\Z")  # ASCII digits only: str.isdigit takes any script
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")


def _utc_seconds(when: datetime) -> datetime:
    if not isinstance(when, datetime) or when.utcoffset() is None:
        raise InvalidInput("time", "must be a timezone-aware datetime")
    return when.astimezone(UTC).replace(microsecond=0)


@dataclass(frozen=True)
class Checkpoint:
    """A tree head: the log's ``origin``, its ``size``, the ``root_hash`` of that size and,
    optionally, the ``time`` it was made (kept in UTC to the second).

    >>> cp = Checkpoint("fairshoe.example/log", 0, bytes(32))
    >>> print(cp.text(), end="")
    fairshoe.example/log
    0
    AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
    """

    origin: str
    size: int
    root_hash: bytes
    time: datetime | None = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.origin, str) or not is_valid_key_name(self.origin):
            # The origin doubles as the key name, so it obeys key-name rules (C2SP: SHOULD).
            raise InvalidInput("origin", f"not a valid origin: {quote(self.origin)}")
        check_size(self.size, "size")
        object.__setattr__(self, "root_hash", check_hash(self.root_hash, "root_hash"))
        if self.time is not None:
            object.__setattr__(self, "time", _utc_seconds(self.time))

    def text(self) -> str:
        """The note text that is signed (final newline included)."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root_hash).decode("ascii")]
        if self.time is not None:
            lines.append(TIME_PREFIX + format_time(self.time))
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SignedCheckpoint:
    """A parsed checkpoint note whose signatures have NOT been checked (see verify_checkpoint)."""

    checkpoint: Checkpoint
    signatures: tuple[NoteSignature, ...]


def sign_checkpoint(checkpoint: Checkpoint, key: SigningKey, *, key_name: str | None = None
                    ) -> str:
    """The checkpoint as a signed note, signed by ``key`` under ``key_name`` (default: origin)."""
    return sign_note(checkpoint.text(), key, key_name or checkpoint.origin)


def format_time(when: datetime) -> str:
    """RFC 3339 in UTC to the second, ``2025-01-02T03:04:05Z``; years below 1000 zero-padded
    (``strftime("%Y")`` does not pad them on glibc, so it is not used)."""
    return _utc_seconds(when).isoformat().removesuffix("+00:00") + "Z"


def _malformed(message: str) -> InvalidInput:
    return InvalidInput("checkpoint", message, reason=MALFORMED)


def _parse_time(line: str) -> datetime:
    stamp = line[len(TIME_PREFIX) :]
    if not line.startswith(TIME_PREFIX) or not _TIME.match(stamp):
        raise _malformed(f"unknown extension line {quote(line)}")
    try:
        return datetime.fromisoformat(stamp[:-1]).replace(tzinfo=UTC)
    except ValueError:  # well-shaped but not a date, e.g. February 30th
        raise _malformed(f"not a valid time {quote(stamp)}") from None


def parse_checkpoint_text(text: str) -> Checkpoint:
    """The checkpoint of a note text, strictly: 3 lines, or 4 with the time line, canonical."""
    if not text.endswith("\n"):
        raise _malformed("text must end in a newline")
    lines = text[:-1].split("\n")
    if not 3 <= len(lines) <= 4:
        raise _malformed(f"expected 3 or 4 lines, got {len(lines)}")
    origin, size_line, root_line = lines[:3]
    if not is_valid_key_name(origin):
        raise _malformed(f"not a valid origin {quote(origin)}")
    if not _SIZE.match(size_line) or int(size_line) > 2**64 - 1:
        raise _malformed(f"tree size is not a canonical uint64: {quote(size_line)}")
    try:
        root = base64.b64decode(root_line.encode("ascii"), validate=True)
    except (UnicodeEncodeError, ValueError):
        raise _malformed("root hash is not base64") from None
    if len(root) != 32 or base64.b64encode(root).decode("ascii") != root_line:
        raise _malformed("root hash is not the canonical base64 of 32 bytes")
    when = _parse_time(lines[3]) if len(lines) == 4 else None
    return Checkpoint(origin, int(size_line), root, when)


def parse_checkpoint(note: str | bytes) -> SignedCheckpoint:
    """Parse a checkpoint note strictly, WITHOUT checking any signature: the result is a claim.

    Bounded (:data:`~rng_service.log.note.MAX_NOTE_BYTES`); :class:`InvalidInput` with reason
    ``MALFORMED_NOTE`` for anything not exactly in the format.
    """
    text, signatures = split_note(note)
    return SignedCheckpoint(parse_checkpoint_text(text), tuple(signatures))


def verify_checkpoint(note: str | bytes, trusted_keys: Iterable[NoteVerifier | str], *,
                      origin: str | None = None) -> Checkpoint:
    """The checkpoint in ``note`` once a trusted key of the log has signed it.

    ``trusted_keys`` are :class:`NoteVerifier` objects or vkey strings. At least one signature must
    verify under a trusted key *whose name is the checkpoint's origin* (a trusted witness's
    cosignature alone does not make a checkpoint the log's); signatures from untrusted keys are
    ignored; a bad one from a trusted key is :class:`IntegrityFailure`. With ``origin``, the
    checkpoint must also be of that log.
    """
    text, signatures = split_note(note)
    checkpoint = parse_checkpoint_text(text)  # the format first: a bad one is never verified
    verified = verify_signatures(text, signatures, trusted_keys)
    if not any(sig.name == checkpoint.origin for sig in verified):
        raise IntegrityFailure("no trusted signature by the log's own key (named as its origin)",
                               reason="CHECKPOINT_ORIGIN")
    if origin is not None and checkpoint.origin != origin:
        raise IntegrityFailure(f"checkpoint is of log {quote(checkpoint.origin)}, not "
                               f"{quote(origin)}", reason="CHECKPOINT_ORIGIN")
    return checkpoint


def checkpoint_verifier(public_key: Ed25519PublicKey, origin: str = DEFAULT_ORIGIN
                        ) -> NoteVerifier:
    """The verifier of the log ``origin``'s checkpoints; ``.vkey()`` is what to publish."""
    return NoteVerifier.from_public_key(origin, public_key)
