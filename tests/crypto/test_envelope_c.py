"""A signature's fields read in C (``rng_service/crypto/_envelope.c``): whatever it answers is
the Python reading's answer (``signing._signature_fields_reference``, the reference), and it
answers for every envelope that verifies; anything else it leaves to the reference."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.crypto import signing
from rng_service.crypto._envelope import signature_fields
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import ALG, FORMAT, VerificationError, decode_envelope

_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


class _Text(str):
    """A str that is not exactly one: C leaves it to the reference."""


def _reference(envelope: object) -> tuple[str, bytes] | str:
    try:
        return signing._signature_fields_reference(envelope)
    except VerificationError as exc:
        return f"{exc.failure}: {exc}"


def _held(envelope: object) -> tuple[str, bytes] | None:
    """C's answer, held to the reference's: the same (key id, bytes), or no answer."""
    fields = signature_fields(envelope, FORMAT, ALG)
    if fields is not None:
        assert fields == _reference(envelope)
        assert type(fields[0]) is str and type(fields[1]) is bytes
    return fields


def _envelope(value: object = None, kid: object = "ed25519:" + "ab" * 16) -> dict[str, Any]:
    signature = {"alg": ALG, "key_id": kid,
                 "value": "A" * 86 if value is None else value}
    return {"format": FORMAT, "payload": {"schema": "x"}, "signature": signature}


def test_the_c_reading_is_the_one_in_use() -> None:
    assert signing._c_signature_fields is signature_fields


#: one key for the generated envelopes (making one costs more than an example)
_KEY = SigningKey.generate()


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8),
                       st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8), max_size=4))
def test_every_signed_envelope_read_in_c(extra: dict[str, object]) -> None:
    """An envelope as signing writes it and a reader decodes it: C answers, as the reference."""
    envelope = decode_envelope(signing.sign_and_encode({"schema": "x", **extra}, _KEY))
    assert _held(envelope) == (_KEY.key_id, base64.urlsafe_b64decode(
        envelope["signature"]["value"] + "=="))


@settings(max_examples=3000, deadline=None)
@given(st.text(st.sampled_from(_B64URL), min_size=85, max_size=85),
       st.sampled_from([*_B64URL, "=", "+", "/", "\u00e9", " ", "\x00", "\U0001f600"]),
       st.integers(0, 85),
       st.sampled_from(["", "=", "+", "/", "\u00e9", "\n", "A", "==", "\x00", "\udc80"]))
def test_signature_values_as_the_reference(head: str, last: str, at: int, stray: str) -> None:
    """Values of 85 characters and a last one of any kind, with a stray character replacing one,
    put in, or the value cut: C decodes exactly those the reference decodes, to its bytes."""
    for value in (head + last, head[:at] + stray + head[at + 1:] + last,
                  head[:at] + stray + head[at:] + last, (head + last)[:at]):
        envelope = _envelope(value)
        fields = _held(envelope)
        # and it answers whenever the reference accepts the value
        assert (fields is None) == isinstance(_reference(envelope), str), value


@pytest.mark.parametrize("mutate", [
    lambda e: e.__setitem__("format", "fairshoe.signed/v2"),
    lambda e: e.__setitem__("format", 1),
    lambda e: e.__setitem__("format", _Text(FORMAT)),
    lambda e: e.__setitem__("x", 1),
    lambda e: e.pop("payload"),
    lambda e: e.__setitem__(_Text("payload"), e.pop("payload")),
    lambda e: e.__setitem__(1, e.pop("payload")),
    lambda e: e.__setitem__("signature", []),
    lambda e: e.__setitem__("signature", _DictLike(e["signature"])),
    lambda e: e["signature"].__setitem__("alg", "Ed448"),
    lambda e: e["signature"].__setitem__("alg", _Text(ALG)),
    lambda e: e["signature"].__setitem__("key_id", 7),
    lambda e: e["signature"].__setitem__("key_id", _Text("k")),
    lambda e: e["signature"].__setitem__("extra", 7),
    lambda e: e["signature"].pop("value"),
    lambda e: e["signature"].__setitem__("value", 7),
    lambda e: e["signature"].__setitem__("value", _Text("A" * 86)),
    lambda e: e["signature"].__setitem__("value", "A" * 84 + "=="),
    lambda e: e["signature"].__setitem__("value", "A" * 87),
    lambda e: e["signature"].__setitem__(_Text("value"), e["signature"].pop("value")),
    lambda e: e["signature"].__setitem__("value\udc80", e["signature"].pop("value")),
])
def test_what_c_leaves_to_the_reference(mutate: Callable[[dict[Any, Any]], None]) -> None:
    """Each way an envelope's members may be wrong, or not exactly of the types decoded JSON
    has: C gives no answer, and the reference decides."""
    envelope = _envelope()
    assert _held(envelope) == ("ed25519:" + "ab" * 16, bytes(64))
    mutate(envelope)
    assert _held(envelope) is None


class _DictLike(dict[str, Any]):
    """Not exactly a dict."""


@pytest.mark.parametrize("envelope", [None, 1, "x", [], (), {}, _DictLike(_envelope())])
def test_not_an_envelope(envelope: object) -> None:
    assert _held(envelope) is None


def test_its_arguments() -> None:
    with pytest.raises(TypeError):
        signature_fields(_envelope(), FORMAT)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        signature_fields(_envelope(), FORMAT, b"Ed25519")  # type: ignore[arg-type]


def test_the_oracle_catches_a_lax_reading() -> None:
    """A value with a stray bit in its last character is refused by the reference; C,
    answering for it, would fail the comparison above."""
    envelope = _envelope("A" * 85 + "B")
    assert signature_fields(envelope, FORMAT, ALG) is None
    assert isinstance(_reference(envelope), str)
