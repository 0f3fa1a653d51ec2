"""tlog-cosignature/v1 (Ed25519): the spec's example, a vector made by a cosigner that is not ours
(aics-tlog 0.2.1, PyPI, from a fixed seed), and the rules a verifier follows."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from rng_service.core.errors import IntegrityFailure, InvalidInput
from rng_service.crypto.keys import SigningKey
from rng_service.log import vkey
from rng_service.log.cosignature import (
    Cosigner,
    cosign,
    signed_message,
    timestamp_of,
    verify_cosignatures,
)
from rng_service.log.note import split_note

# c2sp.org/tlog-cosignature: the checkpoint of its example, its cosignature line, and the message
# it says an Ed25519 cosignature at that time signs
TEXT = ("example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")
SPEC_NOTE = (TEXT + "\n— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOo"
             "RDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n— witness.example.com/w1 jWbPPwAA"
             "AABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIU"
             "BkBIfZ+qnA==\n")
SPEC_MESSAGE = "cosignature/v1\ntime 1679315147\n" + TEXT
# aics-tlog's sign_cosignature with the private key of seed bytes(range(32)), at that time
AICS_VKEY = "witness.example.com/w1+a0059f11+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
AICS_LINE = ("— witness.example.com/w1 oAWfEQAAAABkGFDLBuRDazBLVac2NE+Y+IjbjQOcXLfF9CSDZVUIoS83rE1"
             "nFZsVE8YiWV6Ngr7lV8H6bdoBQGP/l73euDMQ9k+bBQ==\n")


def test_the_specs_example() -> None:
    assert signed_message(TEXT, 1679315147).decode() == SPEC_MESSAGE
    text, lines = split_note(SPEC_NOTE)
    assert text == TEXT
    witness = next(line for line in lines if line.name == "witness.example.com/w1")
    assert timestamp_of(witness) == 1679315147  # the time of the spec's message
    # the log's own signature line is no cosignature/v1 blob (64 bytes, no timestamp)
    with pytest.raises(InvalidInput):
        timestamp_of(next(line for line in lines if line.name != witness.name))


def test_a_cosignature_made_by_another_implementation_verifies() -> None:
    cosigner = Cosigner.from_vkey(AICS_VKEY)
    [found] = verify_cosignatures(TEXT + "\n" + AICS_LINE, [cosigner])
    assert (found.cosigner, found.timestamp) == (cosigner, 1679315147)
    # ours, from the same key at the same time, is the same line (Ed25519 is deterministic)
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))

    class Key:
        public_key = key.public_key()

        @staticmethod
        def sign(data: bytes) -> bytes:
            return key.sign(data)

    assert cosign(TEXT, Key(), "witness.example.com/w1", 1679315147).line() == AICS_LINE
    assert cosigner.vkey() == AICS_VKEY


def test_what_a_verifier_refuses_and_ignores() -> None:
    key, other = SigningKey.generate(), SigningKey.generate()
    w1 = Cosigner.from_public_key("w1.example", key.public_key)
    w2 = Cosigner.from_public_key("w2.example", other.public_key)
    note = TEXT + "\n" + cosign(TEXT, key, "w1.example", 1700000000).line()
    assert [c.cosigner for c in verify_cosignatures(note, [w1, w2])] == [w1]
    assert verify_cosignatures(note, [w2]) == []  # another witness's line is ignored
    # the checkpoint changed under the cosignature: a trusted witness's line fails the note
    with pytest.raises(IntegrityFailure, match="does not verify"):
        verify_cosignatures(note.replace("20852163", "20852164"), [w1])
    # the timestamp is signed: changing it fails too
    line = split_note(note)[1][0]
    moved = base64.b64encode(line.key_id + (1700000001).to_bytes(8, "big")
                             + line.signature[8:]).decode()
    with pytest.raises(IntegrityFailure, match="does not verify"):
        verify_cosignatures(f"{TEXT}\n— w1.example {moved}\n", [w1])
    with pytest.raises(IntegrityFailure, match="in the future"):
        verify_cosignatures(note, [w1], not_after=1699999999)
    # a log's key (0x01) given as a witness's
    with pytest.raises(InvalidInput, match="0x01 is a log's key"):
        Cosigner.from_vkey(vkey("w1.example", key.public_key))
    with pytest.raises(InvalidInput, match="key ID"):
        Cosigner.from_vkey(w1.vkey().replace(w1.key_id.hex(), "00000000"))
