"""C2SP tlog-witness (https://c2sp.org/tlog-witness) ``add-checkpoint``: the bodies, both ways.

A log submits each new checkpoint to a witness with a consistency proof from the size the witness
last cosigned::

    POST <submission prefix>/add-checkpoint

    old <size>\\n
    <base64 hash>\\n            (0 to 63 consistency proof lines)
    \\n
    <the signed checkpoint note>

and the witness answers 200 with its cosignature lines (``— <name> <base64>\\n``, see
:mod:`rng_service.log.cosignature`), or 409 with the size it last cosigned (``text/x.tlog.size``,
``<size>\\n``): the log then submits again from that size. 400, 403, 404 and 422 are refusals (a
malformed request, no trusted log signature, an unknown origin, a proof that does not hold).

Pure: the HTTP exchange is the caller's (a service's client, or a witness).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

from rng_service.core.errors import InvalidInput
from rng_service.log.note import MAX_NOTE_BYTES, SIGNATURE_PREFIX, NoteSignature, split_note

PATH: Final = "/add-checkpoint"
SIZE_CONTENT_TYPE: Final = "text/x.tlog.size"
#: the most consistency proof lines a request may hold
MAX_PROOF_LINES: Final = 63
MAX_BODY_BYTES: Final = MAX_NOTE_BYTES + 64 * (MAX_PROOF_LINES + 1)
_SIZE: Final = re.compile(r"(0|[1-9][0-9]{0,19})\Z")
_BAD: Final = "WITNESS_PROTOCOL"


@dataclass(frozen=True)
class AddCheckpoint:
    """An add-checkpoint request: the old size, the consistency proof and the checkpoint note."""

    old_size: int
    proof: tuple[bytes, ...]
    note: str


def _size(text: str, what: str) -> int:
    if not _SIZE.match(text) or int(text) > 2**63 - 1:
        raise InvalidInput(what, f"not a tree size in decimal: {text[:40]!r}", reason=_BAD)
    return int(text)


def request_body(old_size: int, proof: list[bytes] | tuple[bytes, ...], note: str) -> bytes:
    """The body of an add-checkpoint request."""
    if len(proof) > MAX_PROOF_LINES:
        raise InvalidInput("proof", f"more than {MAX_PROOF_LINES} hashes", reason=_BAD)
    lines = [f"old {old_size}\n"] + [base64.b64encode(h).decode("ascii") + "\n" for h in proof]
    return ("".join(lines) + "\n" + note).encode("utf-8")


def parse_request(body: bytes) -> AddCheckpoint:
    """An add-checkpoint body, strictly: :class:`InvalidInput` if it is malformed (a 400)."""
    if len(body) > MAX_BODY_BYTES:
        raise InvalidInput("body", f"longer than {MAX_BODY_BYTES} bytes", reason=_BAD)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("body", "not UTF-8", reason=_BAD) from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise InvalidInput("body", "no empty line before the checkpoint", reason=_BAD)
    lines = head.split("\n")
    if not lines[0].startswith("old "):
        raise InvalidInput("body", "the first line is not 'old <size>'", reason=_BAD)
    old_size = _size(lines[0][4:], "old")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise InvalidInput("body", f"more than {MAX_PROOF_LINES} proof lines", reason=_BAD)
    proof = []
    for line in lines[1:]:
        try:
            digest = base64.b64decode(line.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error):
            digest = b""
        if len(digest) != 32:
            raise InvalidInput("body", "a proof line is not a base64 hash", reason=_BAD)
        proof.append(digest)
    split_note(note)  # a note, signature lines and all (verified by the witness, not here)
    return AddCheckpoint(old_size, tuple(proof), note)


def parse_cosignatures(body: bytes) -> list[NoteSignature]:
    """The signature lines of a 200 answer (unverified: see
    :func:`rng_service.log.cosignature.verify_cosignatures`)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("response", "not UTF-8", reason=_BAD) from None
    if not text.endswith("\n") or not text.startswith(SIGNATURE_PREFIX):
        raise InvalidInput("response", "not note signature lines", reason=_BAD)
    # parsed as the signatures of a note with a placeholder text
    return split_note("x\n\n" + text)[1]


def parse_conflict(body: bytes) -> int:
    """The size a 409 answer says the witness last cosigned."""
    text = body.decode("ascii", errors="replace")
    if not text.endswith("\n"):
        raise InvalidInput("response", "a 409 body is '<size>\\n'", reason=_BAD)
    return _size(text[:-1], "response")
