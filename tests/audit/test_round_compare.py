"""The rebuilt record's comparison with the signed one (rng_service/audit/round_checks.py,
``_same``): given the recorded payload's signed canonical bytes, a replay is the same only if
it is equal as a value and in its JSON types, as without them."""

from __future__ import annotations

from typing import Any

import pytest

from rng_service.audit.round_checks import _same
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import decode_envelope, sign_and_encode, verify_signed

RECORDED: dict[str, Any] = {"a": 1, "b": [1, 2], "c": {"d": "x", "e": None}, "f": False}


def _signed(payload: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    key = SigningKey.generate()
    envelope = decode_envelope(sign_and_encode(payload, key))
    return verify_signed(envelope, {key.key_id: key.public_key})


@pytest.mark.parametrize("replay", [
    {**RECORDED, "a": True},  # == 1 in Python, not in JSON
    {**RECORDED, "a": 1.0},
    {**RECORDED, "f": 0},
    {**RECORDED, "b": (1, 2)},  # a tuple is not the recorded list
    {**RECORDED, "b": [1, 3]},
    {**RECORDED, "c": {"d": "x"}},
    {**RECORDED, "g": 1},
])
def test_a_replay_that_differs_in_value_or_type_is_not_the_same(replay: dict[str, Any]) -> None:
    recorded, signed = _signed(RECORDED)
    assert not _same(recorded, replay, signed)
    assert not _same(recorded, replay)


def test_an_equal_replay_is_the_same_with_or_without_the_bytes() -> None:
    recorded, signed = _signed(RECORDED)
    replay = {"f": False, "c": {"e": None, "d": "x"}, "b": [1, 2], "a": 1}
    assert _same(recorded, replay, signed) and _same(recorded, replay)


def test_keys_beyond_the_bmp_are_compared_by_encoding_the_recorded_side() -> None:
    """JCS orders such keys by UTF-16 units, orjson by code points: the signed bytes then differ
    from the replay's encoding, and the recorded payload is encoded to decide."""
    payload = {"\U0001f600": 1, "\uffff": 2}
    recorded, signed = _signed(payload)
    assert _same(recorded, dict(payload), signed)
    assert not _same(recorded, {"\U0001f600": True, "\uffff": 2}, signed)
