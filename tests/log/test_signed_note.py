"""C2SP signed notes: byte-for-byte what golang.org/x/mod/sumdb/note writes and reads."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from log_helpers import VECTORS

from rng_service.core.errors import IntegrityFailure, InvalidInput
from rng_service.crypto.keys import SigningKey, raw_public_bytes
from rng_service.log import NoteVerifier, open_note, sign_note, vkey
from rng_service.log.note import MAX_NOTE_BYTES, key_id, split_note

GO = VECTORS["note"]
TEXT: str = GO["text"]
SIGNED: str = GO["signed"]
PETER_SIG_LINE = SIGNED[len(TEXT) + 1 :]
ENOCH_SIG_LINE: str = GO["other_signature_line"]


def go_key() -> SigningKey:
    """The PeterNeumann key from its Go skey: PRIVATE+KEY+<name>+<id>+base64(0x01 || seed)."""
    material = GO["skey"].split("+", 4)[4]  # the base64 may hold "+" itself
    raw = base64.b64decode(material)
    assert raw[0] == 0x01 and len(raw) == 33
    return SigningKey(Ed25519PrivateKey.from_private_bytes(raw[1:]))


def independent_key_id(name: str, public: bytes) -> str:
    """signed-note.md: SHA-256(key name || 0x0A || 0x01 || 32-byte public key)[:4], in hex."""
    return hashlib.sha256(name.encode() + bytes([0x0A, 0x01]) + public).digest()[:4].hex()


def test_key_id_and_vkey_match_go() -> None:
    key = go_key()
    assert key_id("PeterNeumann", key.public_key).hex() == "c74f20a3"
    assert independent_key_id("PeterNeumann", raw_public_bytes(key.public_key)) == "c74f20a3"
    assert vkey("PeterNeumann", key.public_key) == GO["vkey"]
    assert NoteVerifier.from_vkey(GO["vkey"]).vkey() == GO["vkey"]


def test_signing_reproduces_the_go_note_exactly() -> None:
    # Ed25519 is deterministic: the same key and text give Go's very bytes.
    assert sign_note(TEXT, go_key(), "PeterNeumann") == SIGNED


def test_go_notes_open() -> None:
    assert open_note(SIGNED, [GO["vkey"]])[0] == TEXT
    both = SIGNED + ENOCH_SIG_LINE
    text, sigs = open_note(both, [GO["vkey"]])  # Enoch unknown: ignored
    assert text == TEXT and [s.name for s in sigs] == ["PeterNeumann"]
    _, sigs = open_note(both, [GO["vkey"], GO["other_vkey"]])
    assert [s.name for s in sigs] == ["PeterNeumann", "EnochRoot"]
    _, sigs = open_note(SIGNED + PETER_SIG_LINE, [GO["vkey"]])  # repeated: counted once
    assert len(sigs) == 1


def test_unverified_notes_are_refused() -> None:
    with pytest.raises(IntegrityFailure) as err:
        open_note(SIGNED + ENOCH_SIG_LINE, [])
    assert err.value.reason == "NOTE_NOT_VERIFIED"
    with pytest.raises(IntegrityFailure):
        open_note(SIGNED.replace("cryptography", "cryptographY"), [GO["vkey"]])
    # Go's "invalid signature" case: a corrupt signature from a trusted key sinks the note.
    corrupt = TEXT + "\n" + PETER_SIG_LINE[:60] + "ABCD" + PETER_SIG_LINE[60:]
    with pytest.raises(IntegrityFailure) as err:
        open_note(corrupt, [GO["vkey"]])
    assert err.value.reason == "NOTE_SIGNATURE_INVALID"


@pytest.mark.parametrize(
    "note",
    [
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG_LINE[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG_LINE,
        TEXT + "\n" + PETER_SIG_LINE.replace("PeterNeumann", "Bad Name")[:-1],
        TEXT + "\n" + PETER_SIG_LINE + "Unexpected line.\n",
        TEXT + "\n" + PETER_SIG_LINE * 101,
        TEXT.replace("\n", "\r\n") + "\r\n" + PETER_SIG_LINE,
        TEXT + "\n" + PETER_SIG_LINE.replace("x08go", "x08go="),  # not base64
        TEXT + "\n" + PETER_SIG_LINE.replace("AM=", "AN="),  # non-canonical padding bits
        TEXT + "\n" + "— PeterNeumann AAAA\n",  # shorter than a key ID
        TEXT + "\n" + "- PeterNeumann " + PETER_SIG_LINE[len("— PeterNeumann ") :],  # hyphen
        "x" * (MAX_NOTE_BYTES + 1),
    ],
)
def test_malformed_notes_are_refused(note: str) -> None:
    with pytest.raises(InvalidInput) as err:
        open_note(note, [GO["vkey"]])
    assert err.value.reason == "MALFORMED_NOTE"


@pytest.mark.parametrize("note", [b"\xff" + SIGNED.encode(), "\ud800" + SIGNED, 42])
def test_notes_that_are_not_utf8_text_are_refused(note: object) -> None:
    with pytest.raises(InvalidInput):
        split_note(note)  # type: ignore[arg-type]


def test_every_mangled_vkey_is_refused() -> None:
    # As Go's TestNewVerifier: every proper substring and every single-byte change fails.
    good: str = GO["vkey"]
    for i in range(len(good) + 1):
        for j in range(i + 1, len(good) + 1):
            if (i, j) != (0, len(good)):
                with pytest.raises(InvalidInput):
                    NoteVerifier.from_vkey(good[i:j])
    for i in range(len(good)):
        mangled = good[:i] + chr(ord(good[i]) + 1) + good[i + 1 :]
        with pytest.raises(InvalidInput):
            NoteVerifier.from_vkey(mangled)
    for bad in GO["bad_vkeys"]:  # wrong key length, unknown algorithm (key IDs adjusted)
        with pytest.raises(InvalidInput):
            NoteVerifier.from_vkey(bad)


def test_two_keys_with_one_name_and_id_are_ambiguous() -> None:
    real = NoteVerifier.from_vkey(GO["vkey"])
    impostor = NoteVerifier(real.name, real.key_id, SigningKey.generate().public_key)
    with pytest.raises(InvalidInput) as err:
        open_note(SIGNED, [real, impostor])
    assert err.value.reason == "AMBIGUOUS_KEY"
    open_note(SIGNED, [real, GO["vkey"]])  # the same key twice is fine


@pytest.mark.parametrize(("text", "name"), [("no newline", "k"), ("a\tb\n", "k"), ("ok\n", "a b"),
                                            ("ok\n", "a+b"), ("ok\n", ""), ("\ud800\n", "k")])
def test_sign_refuses_what_is_not_a_note(text: str, name: str) -> None:
    with pytest.raises(InvalidInput):
        sign_note(text, go_key(), name)
