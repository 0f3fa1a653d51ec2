"""Checkpoints in the C2SP tlog-checkpoint format: strict parsing, signing, verification."""

from __future__ import annotations

import base64
import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_helpers import VECTORS

from rng_service.core.errors import IntegrityFailure, InvalidInput
from rng_service.crypto.keys import SigningKey
from rng_service.log import (
    DEFAULT_ORIGIN,
    Checkpoint,
    MemoryNodeStore,
    NoteVerifier,
    checkpoint_verifier,
    consistency_proof,
    parse_checkpoint,
    sign_checkpoint,
    verify_checkpoint,
    verify_consistency,
)
from rng_service.log.note import MAX_NOTE_BYTES, sign_note

KEY = SigningKey.generate()
VKEY = checkpoint_verifier(KEY.public_key).vkey()
ROOT = bytes(range(32))
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
ROOT_B64 = base64.b64encode(ROOT).decode()


def signed(text: str, key: SigningKey = KEY, name: str = DEFAULT_ORIGIN) -> str:
    """A note over any text, signed properly: so only the checkpoint format can refuse it."""
    return sign_note(text, key, name)


def test_layout_is_the_spec_example_layout() -> None:
    example = VECTORS["checkpoint_example"]
    parsed = parse_checkpoint(example["note"])
    cp = parsed.checkpoint
    assert (cp.origin, cp.size, cp.root_hash.hex()) == (example["origin"], example["size"],
                                                        example["root"])
    assert cp.time is None
    # Our text for the same tree head is the example's text, byte for byte.
    assert example["note"].startswith(cp.text() + "\n— ")
    assert [s.name for s in parsed.signatures] == [example["origin"]]
    assert len(parsed.signatures[0].key_id + parsed.signatures[0].signature) == 4 + 64


def test_sign_and_verify_round_trip() -> None:
    cp = Checkpoint(DEFAULT_ORIGIN, 20852163, ROOT, WHEN)
    note = sign_checkpoint(cp, KEY)
    assert note.startswith(
        f"fairshoe.example/log\n20852163\n{ROOT_B64}\ntime 2025-01-02T03:04:05Z\n\n"
        "— fairshoe.example/log "
    )
    assert verify_checkpoint(note, [VKEY]) == cp
    assert verify_checkpoint(note.encode(), [checkpoint_verifier(KEY.public_key)]) == cp
    assert verify_checkpoint(note, [VKEY], origin=DEFAULT_ORIGIN) == cp


def test_time_is_kept_in_utc_to_the_second() -> None:
    east = timezone(timedelta(hours=2))
    cp = Checkpoint(DEFAULT_ORIGIN, 1, ROOT, datetime(2025, 1, 2, 5, 4, 5, 999, tzinfo=east))
    assert cp.time == WHEN
    with pytest.raises(InvalidInput):
        Checkpoint(DEFAULT_ORIGIN, 1, ROOT, datetime(2025, 1, 2))  # naive: which zone?


@pytest.mark.parametrize(
    ("origin", "size", "root"),
    [("a b", 1, ROOT), ("", 1, ROOT), ("a+b", 1, ROOT), ("o", -1, ROOT), ("o", 2**64, ROOT),
     ("o", True, ROOT), ("o", 1, ROOT[:31])],
)
def test_checkpoint_fields_are_checked(origin: str, size: int, root: bytes) -> None:
    with pytest.raises(InvalidInput):
        Checkpoint(origin, size, root)


TIME = "time 2025-01-02T03:04:05Z"
MALFORMED_TEXTS = [
    "fairshoe.example/log\n5\n",  # missing root line
    f"fairshoe.example/log\n{ROOT_B64}\n",
    f"fairshoe.example/log\n05\n{ROOT_B64}\n",  # leading zero
    f"fairshoe.example/log\n+5\n{ROOT_B64}\n",
    f"fairshoe.example/log\n 5\n{ROOT_B64}\n",
    f"fairshoe.example/log\n5 \n{ROOT_B64}\n",
    f"fairshoe.example/log\n-0\n{ROOT_B64}\n",
    f"fairshoe.example/log\n\uff15\n{ROOT_B64}\n",  # fullwidth digit five
    f"fairshoe.example/log\n{2**64}\n{ROOT_B64}\n",  # over uint64
    f"fairshoe.example/log\n1{'0' * 20}\n{ROOT_B64}\n",
    "fairshoe.example/log\n5\n" + ROOT_B64.rstrip("=") + "\n",  # unpadded
    "fairshoe.example/log\n5\n" + ROOT_B64[:-2] + "x=\n",  # non-zero padding bits
    "fairshoe.example/log\n5\n" + base64.b64encode(ROOT[:31]).decode() + "\n",
    "fairshoe.example/log\n5\n" + base64.urlsafe_b64encode(b"\xff" * 32).decode() + "\n",
    f"fairshoe.example/log\n5\n{ROOT_B64}\n{TIME}\n{TIME}\n",  # extra line
    f"fairshoe.example/log\n5\n{ROOT_B64}\nother extension\n",  # not ours
    f"fairshoe.example/log\n5\n{ROOT_B64}\ntime 2025-01-02T03:04:05.5Z\n",
    f"fairshoe.example/log\n5\n{ROOT_B64}\ntime 2025-01-02T03:04:05+00:00\n",
    f"fairshoe.example/log\n5\n{ROOT_B64}\ntime 2025-02-30T03:04:05Z\n",
    f"fairshoe.example/log\n5\n{ROOT_B64}\ntime  2025-01-02T03:04:05Z\n",
    f"fairshoe example/log\n5\n{ROOT_B64}\n",  # origin with a space
    f"\n5\n{ROOT_B64}\n",  # empty origin
]


@pytest.mark.parametrize("text", MALFORMED_TEXTS)
def test_strict_parsing(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_checkpoint(signed(text))
    assert err.value.reason == "MALFORMED_NOTE"
    with pytest.raises(InvalidInput):
        verify_checkpoint(signed(text), [VKEY])


def test_empty_extension_line_is_refused() -> None:
    # The text ends at the note's last blank line, so an empty extension line stays in the text.
    with pytest.raises(InvalidInput):
        parse_checkpoint(signed(f"fairshoe.example/log\n5\n{ROOT_B64}\n\n"))


def test_note_size_is_bounded() -> None:
    note = sign_checkpoint(Checkpoint(DEFAULT_ORIGIN, 1, ROOT), KEY)
    with pytest.raises(InvalidInput):
        parse_checkpoint(note + note.split("\n\n")[1] * (MAX_NOTE_BYTES // 100))


def test_signatures_by_others_do_not_count() -> None:
    cp = Checkpoint(DEFAULT_ORIGIN, 7, ROOT, WHEN)
    other = SigningKey.generate()
    forged = sign_checkpoint(cp, other)  # right name, wrong key: unknown key, ignored
    with pytest.raises(IntegrityFailure) as err:
        verify_checkpoint(forged, [VKEY])
    assert err.value.reason == "NOTE_NOT_VERIFIED"
    # A trusted witness's signature alone is not the log's
    witness = NoteVerifier.from_public_key("witness.example/w1", other.public_key)
    cosigned_only = sign_checkpoint(cp, other, key_name="witness.example/w1")
    with pytest.raises(IntegrityFailure) as err:
        verify_checkpoint(cosigned_only, [VKEY, witness])
    assert err.value.reason == "CHECKPOINT_ORIGIN"
    # ... but beside the log's signature it is welcome
    both = sign_checkpoint(cp, KEY) + cosigned_only.split("\n\n")[1]
    assert verify_checkpoint(both, [VKEY, witness]) == cp
    assert verify_checkpoint(both, [VKEY]) == cp


def test_tampering_breaks_the_signature() -> None:
    note = sign_checkpoint(Checkpoint(DEFAULT_ORIGIN, 7, ROOT, WHEN), KEY)
    for before, after in [("\n7\n", "\n8\n"), ("03:04:05Z", "03:04:06Z"), (ROOT_B64[:4], "AAAA")]:
        with pytest.raises(IntegrityFailure):
            verify_checkpoint(note.replace(before, after, 1), [VKEY])


def test_other_logs_checkpoints_are_refused_when_the_origin_is_given() -> None:
    other_log = "other.example/log"
    note = sign_checkpoint(Checkpoint(other_log, 1, ROOT), KEY)
    trusted = [checkpoint_verifier(KEY.public_key, other_log)]
    assert verify_checkpoint(note, trusted).origin == other_log
    with pytest.raises(IntegrityFailure):
        verify_checkpoint(note, trusted, origin=DEFAULT_ORIGIN)
    with pytest.raises(IntegrityFailure):  # the same key under our name did not sign it
        verify_checkpoint(note, [VKEY])


def test_checkpoints_of_a_growing_log_are_consistent() -> None:
    store, notes = MemoryNodeStore(), []
    for i in range(40):
        store.append_entry(i.to_bytes(2, "big"))
        if i % 7 == 0:
            notes.append(sign_checkpoint(Checkpoint(DEFAULT_ORIGIN, store.size, store.root()), KEY))
    heads = [verify_checkpoint(n, [VKEY]) for n in notes]
    for old, new in itertools.pairwise(heads):
        proof = consistency_proof(store, old.size, new.size)
        verify_consistency(old.size, new.size, proof, old.root_hash, new.root_hash)


origins = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp"),
                                blacklist_characters="+\x85\xa0\u1680"), min_size=1, max_size=40)


@given(origins.filter(lambda o: not any(c.isspace() for c in o)),
       st.integers(0, 2**64 - 1), st.binary(min_size=32, max_size=32),
       st.none() | st.datetimes(min_value=datetime(1, 1, 1), timezones=st.just(UTC)))
def test_any_checkpoint_round_trips(origin: str, size: int, root: bytes,
                                    when: datetime | None) -> None:
    cp = Checkpoint(origin, size, root, when)
    note = sign_checkpoint(cp, KEY)
    assert parse_checkpoint(note).checkpoint == cp
    assert verify_checkpoint(note, [checkpoint_verifier(KEY.public_key, origin)]) == cp
