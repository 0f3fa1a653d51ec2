"""Canonical encoding and signed envelopes: what an auditor's verification rests on."""

from __future__ import annotations

import base64
import copy
import enum
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rng_service.crypto import signing
from rng_service.crypto.keys import SigningKey, export_jwk, load_trusted_public_keys
from rng_service.crypto.signing import (
    FORMAT,
    MAX_DEPTH,
    MAX_INT,
    CanonicalEncodingError,
    Claimed,
    Failure,
    VerificationError,
    _dumps,
    canonical_encode,
    decode_claimed,
    decode_envelope,
    decode_signed,
    decode_signed_again,
    decode_sorted,
    decode_spanned,
    encode_envelope,
    payload_span,
    sign_and_encode,
    sign_payload,
    verify_envelope,
    verify_signed,
)

Payload = dict[str, Any]


def round_record() -> Payload:
    """Shaped like a finished round record: nested objects, lists of cards, actions and wagers."""
    return {
        "schema": "fairshoe.round/v1",
        "round_id": "r-000042",
        "shoe": {"id": "s-7", "commitment": "ab" * 32, "positions": [0, 12]},
        "cards": ["AS", "TD", "9H", "KC", "2S", "QH", "5D", "7C", "8S", "JD", "3H", "4C"],
        "actions": [
            {"seat": 0, "hand": 0, "action": "hit"},
            {"seat": 0, "hand": 0, "action": "stand"},
        ],
        "wagers": [
            {"seat": s, "kind": "main", "amount": 500 + s, "payout": 1000, "doubled": False}
            for s in range(4)
        ],
        "note": None,
    }


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey.generate()


@pytest.fixture(scope="module")
def other_key() -> SigningKey:
    return SigningKey.generate()


@pytest.fixture
def trusted(key: SigningKey, other_key: SigningKey) -> dict[str, Any]:
    return {key.key_id: key.public_key, other_key.key_id: other_key.public_key}


def failure_of(envelope: Any, trusted: dict[str, Any]) -> VerificationError:
    with pytest.raises(VerificationError) as caught:
        verify_envelope(envelope, trusted)
    return caught.value


# --- the signature and what it covers -------------------------------------------------------------


def test_round_trip(key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    assert verify_envelope(envelope, trusted) == round_record()
    decoded = decode_envelope(encode_envelope(envelope), require_canonical=True)
    assert verify_envelope(decoded, trusted, schema="fairshoe.round/v1") == round_record()


def test_envelope_is_the_documented_shape(key: SigningKey) -> None:
    envelope = sign_payload(round_record(), key)
    assert set(envelope) == {"format", "payload", "signature"}
    assert envelope["format"] == "fairshoe.signed/v1" == FORMAT
    assert envelope["signature"]["alg"] == "Ed25519"
    assert envelope["signature"]["key_id"] == key.key_id
    value = envelope["signature"]["value"]
    assert "=" not in value and "+" not in value and "/" not in value


def test_signature_covers_prefix_and_rfc8785_bytes(key: SigningKey) -> None:
    """Checked with rfc8785 and raw Ed25519, independently of the module's own encoder."""
    envelope = sign_payload(round_record(), key)
    value = envelope["signature"]["value"]
    signature = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    key.public_key.verify(signature, b"fairshoe.signed/v1\n" + rfc8785.dumps(round_record()))
    with pytest.raises(InvalidSignature):
        key.public_key.verify(signature, rfc8785.dumps(round_record()))


def test_signature_without_the_domain_prefix_is_refused(
    key: SigningKey, trusted: dict[str, Any]
) -> None:
    """A signature this key made for some other protocol over the same JSON does not carry over."""
    foreign = key.sign(rfc8785.dumps(round_record()))
    envelope = sign_payload(round_record(), key)
    envelope["signature"]["value"] = base64.urlsafe_b64encode(foreign).decode().rstrip("=")
    assert failure_of(envelope, trusted).failure is Failure.BAD_SIGNATURE


# --- tampering ------------------------------------------------------------------------------------


def _bump_amount(p: Payload) -> None:
    p["wagers"][3]["amount"] += 1


def _change_card(p: Payload) -> None:
    p["cards"][5] = "QS"


def _drop_card(p: Payload) -> None:
    del p["cards"][-1]


def _swap_cards(p: Payload) -> None:
    p["cards"][0], p["cards"][1] = p["cards"][1], p["cards"][0]


def _change_action(p: Payload) -> None:
    p["actions"][1]["action"] = "double"


def _flip_bool(p: Payload) -> None:
    p["wagers"][0]["doubled"] = True


def _add_member(p: Payload) -> None:
    p["bonus"] = 0


def _null_to_string(p: Payload) -> None:
    p["note"] = "null"


def _int_to_string(p: Payload) -> None:
    p["wagers"][2]["payout"] = "1000"


@pytest.mark.parametrize(
    "tamper",
    [
        _bump_amount,
        _change_card,
        _drop_card,
        _swap_cards,
        _change_action,
        _flip_bool,
        _add_member,
        _null_to_string,
        _int_to_string,
    ],
)
def test_tampered_payload_is_a_bad_signature(
    tamper: Callable[[Payload], None], key: SigningKey, trusted: dict[str, Any]
) -> None:
    envelope = sign_payload(round_record(), key)
    tamper(envelope["payload"])
    error = failure_of(envelope, trusted)
    assert error.failure is Failure.BAD_SIGNATURE
    assert str(error) == f"bad signature (key {key.key_id})"


def test_flipped_signature_bit_is_a_bad_signature(key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    raw = bytearray(base64.urlsafe_b64decode(envelope["signature"]["value"] + "=="))
    raw[10] ^= 0x01
    envelope["signature"]["value"] = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    assert failure_of(envelope, trusted).failure is Failure.BAD_SIGNATURE


def test_key_id_changed_to_an_unknown_id(key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    envelope["signature"]["key_id"] = "ed25519:" + "0" * 32
    error = failure_of(envelope, trusted)
    assert error.failure is Failure.UNKNOWN_KEY
    assert str(error).startswith("unknown key id 'ed25519:0000")
    assert error.field == "signature.key_id"


def test_key_id_changed_to_another_trusted_key(
    key: SigningKey, other_key: SigningKey, trusted: dict[str, Any]
) -> None:
    envelope = sign_payload(round_record(), key)
    envelope["signature"]["key_id"] = other_key.key_id
    assert str(failure_of(envelope, trusted)) == f"bad signature (key {other_key.key_id})"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("A" * 85, "not base64url"),  # 85 chars cannot be whole bytes
        ("A" * 86 + "==", "unpadded"),  # padded
        ("A" * 42, "64 bytes"),  # too short
        ("A" * 85 + "B", "unpadded"),  # stray low bits: a second spelling of a signature
        ("*" * 86, "not base64url"),
        ("A" * 85 + "+", "unpadded"),  # the standard alphabet's character, not base64url's
        ("A" * 84 + "==", "unpadded"),  # padded within the length
        ("\u00e9" * 86, "not base64url"),
        (12345, "not base64url"),
    ],
)
def test_malformed_signature_value(
    value: object, problem: str, key: SigningKey, trusted: dict[str, Any]
) -> None:
    envelope = sign_payload(round_record(), key)
    envelope["signature"]["value"] = value
    error = failure_of(envelope, trusted)
    assert error.failure is Failure.MALFORMED
    assert problem in str(error)
    assert error.field == "signature.value"


def test_every_single_byte_change_of_encoded_envelope_is_caught(
    key: SigningKey, trusted: dict[str, Any]
) -> None:
    """Flip the low bit of each byte in turn: none may leave a verifying envelope."""
    data = encode_envelope(sign_payload(round_record(), key))
    assert data.isascii()  # so a flipped ASCII byte stays ASCII: each case is a real candidate
    for index in range(len(data)):
        tampered = bytearray(data)
        tampered[index] ^= 0x01
        with pytest.raises(VerificationError):
            verify_envelope(decode_envelope(bytes(tampered)), trusted)


# --- trust comes only from the caller -------------------------------------------------------------


def test_unknown_key(key: SigningKey) -> None:
    error = failure_of(sign_payload(round_record(), key), {})
    assert error.failure is Failure.UNKNOWN_KEY
    assert "not among the 0 trusted key(s)" in str(error)


def test_key_lying_beside_the_records_is_not_trusted(
    tmp_path: Path, key: SigningKey, trusted: dict[str, Any]
) -> None:
    forger = SigningKey.generate()
    forged = round_record()
    forged["wagers"][0]["payout"] = 10**9
    records = tmp_path / "records"
    records.mkdir()
    (records / "r-000042.json").write_bytes(encode_envelope(sign_payload(forged, forger)))
    (records / "keys.jwks").write_text(export_jwk({forger.key_id: forger.public_key}))
    auditor_keys = tmp_path / "auditor.jwks"
    auditor_keys.write_text(export_jwk(trusted))

    envelope = decode_envelope((records / "r-000042.json").read_bytes())
    error = failure_of(envelope, load_trusted_public_keys(auditor_keys))
    assert error.failure is Failure.UNKNOWN_KEY
    assert forger.key_id in str(error)
    # Only by handing the forger's key over as trusted would it pass: trust is the caller's choice.
    assert verify_envelope(envelope, load_trusted_public_keys(records / "keys.jwks")) == forged


def test_key_embedded_in_the_envelope_is_not_used(key: SigningKey, trusted: dict[str, Any]) -> None:
    forger = SigningKey.generate()
    envelope = sign_payload(round_record(), forger)
    envelope["signature"]["public_key"] = export_jwk({forger.key_id: forger.public_key})
    error = failure_of(envelope, trusted)
    assert error.failure is Failure.MALFORMED
    assert str(error) == "malformed envelope: unexpected field signature.public_key"


def test_mislabelled_trust_map_is_refused(key: SigningKey, other_key: SigningKey) -> None:
    envelope = sign_payload(round_record(), other_key)
    envelope["signature"]["key_id"] = key.key_id
    error = failure_of(envelope, {key.key_id: other_key.public_key})
    assert error.failure is Failure.UNKNOWN_KEY
    assert "is really" in str(error)


def test_mislabelled_trust_map_is_refused_after_the_key_verified(
        key: SigningKey, other_key: SigningKey, trusted: dict[str, Any]) -> None:
    # a key id checked once against its key is not believed of another key listed under it
    assert verify_envelope(sign_payload(round_record(), key), trusted) == round_record()
    envelope = sign_payload(round_record(), other_key)
    envelope["signature"]["key_id"] = key.key_id
    error = failure_of(envelope, {key.key_id: other_key.public_key})
    assert error.failure is Failure.UNKNOWN_KEY
    assert "is really" in str(error)


# --- malformed envelopes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["format", "payload", "signature", "signature.alg", "signature.key_id", "signature.value"],
)
def test_missing_field_is_named(path: str, key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    *parents, leaf = path.split(".")
    holder = envelope
    for name in parents:
        holder = holder[name]
    del holder[leaf]
    error = failure_of(envelope, trusted)
    assert str(error) == f"malformed envelope: missing field {path}"
    assert error.field == path


def test_unsupported_format_and_alg(key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    envelope["format"] = "fairshoe.signed/v2"
    assert failure_of(envelope, trusted).failure is Failure.UNSUPPORTED
    envelope = sign_payload(round_record(), key)
    envelope["signature"]["alg"] = "none"
    error = failure_of(envelope, trusted)
    assert error.failure is Failure.UNSUPPORTED
    assert "'none'" in str(error)


def test_payload_must_be_an_object(key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    envelope["payload"] = ["not", "an", "object"]
    assert str(failure_of(envelope, trusted)) == "malformed envelope: payload is not an object"


def test_schema_is_checked_when_asked(key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    with pytest.raises(VerificationError, match=r"expected 'fairshoe\.reveal/v1'") as caught:
        verify_envelope(envelope, trusted, schema="fairshoe.reveal/v1")
    assert caught.value.failure is Failure.SCHEMA


# --- floats and the rest of the domain ------------------------------------------------------------


def test_float_is_refused_when_signing_with_its_path(key: SigningKey) -> None:
    payload = round_record()
    payload["wagers"][2]["amount"] = 5.0
    with pytest.raises(CanonicalEncodingError) as caught:
        sign_payload(payload, key)
    assert caught.value.problem == "float"
    assert caught.value.path == "$.wagers[2].amount"


def test_float_in_a_received_envelope_is_named(key: SigningKey, trusted: dict[str, Any]) -> None:
    data = encode_envelope(sign_payload(round_record(), key))
    assert b'"amount":502,' in data
    envelope = decode_envelope(data.replace(b'"amount":502,', b'"amount":502.0,'))
    error = failure_of(envelope, trusted)
    assert error.failure is Failure.MALFORMED
    assert str(error).startswith("float in payload at path payload.wagers[2].amount")
    assert error.field == "payload.wagers[2].amount"


class Chip(enum.IntEnum):
    RED = 500


@pytest.mark.parametrize(
    ("value", "kind", "path"),
    [
        ({"a": [1, 2, MAX_INT + 1]}, "integer out of range", "$.a[2]"),
        ({"a": {"b": -MAX_INT - 1}}, "integer out of range", "$.a.b"),
        ({"a": {1: "x"}}, "non-string key", "$.a"),
        ({"a": {"odd key": Chip.RED}}, "unsupported type", '$.a["odd key"]'),
        ({"a": [{1, 2}]}, "unsupported type", "$.a[0]"),
        ({"a": b"bytes"}, "unsupported type", "$.a"),
        ({"a": ["ok", "bad \ud800"]}, "invalid text", "$.a[1]"),
        ({"a": {"k\ud800": 1}}, "invalid text", '$.a["k\\ud800"] (the key)'),
        ({"a": float("nan")}, "float", "$.a"),
    ],
)
def test_values_outside_the_domain_are_named(value: Any, kind: str, path: str) -> None:
    with pytest.raises(CanonicalEncodingError) as caught:
        canonical_encode(value)
    assert (caught.value.problem, caught.value.path) == (kind, path)
    str(caught.value).encode("utf-8")  # printable: no lone surrogate leaks into the message


def test_deep_nesting_is_refused() -> None:
    value: Any = 0
    for _ in range(100):
        value = [value]
    with pytest.raises(CanonicalEncodingError, match="nesting too deep"):
        canonical_encode(value)


def test_limits_are_inclusive() -> None:
    assert canonical_encode([MAX_INT, -MAX_INT]) == rfc8785.dumps([MAX_INT, -MAX_INT])


# --- canonical encoding = RFC 8785 ----------------------------------------------------------------


def test_rfc8785_property_sorting_example() -> None:
    """RFC 8785 section 3.2.3: keys sort by UTF-16 code units, not code points."""
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    order = [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]
    text = canonical_encode(value).decode("utf-8")
    assert [text.index(name) for name in order] == sorted(text.index(name) for name in order)
    assert text.startswith('{"\\r":"Carriage Return","1":"One","\u0080":"Control"')
    # The plain json path alone would get this wrong, which is why such keys take the rfc8785 path.
    assert _dumps(value).encode() != canonical_encode(value)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_INT, max_value=MAX_INT)
    | st.text(st.characters(exclude_categories=["Cs"]))
)
any_text = st.text(st.characters(exclude_categories=["Cs"]))
bmp_text = st.text(st.characters(exclude_categories=["Cs"], max_codepoint=0xFFFF))


def json_values(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        json_scalars,
        lambda inner: st.lists(inner, max_size=6) | st.dictionaries(keys, inner, max_size=6),
        max_leaves=40,
    )


@settings(max_examples=400, deadline=None)
@given(json_values(bmp_text))
def test_json_fast_path_equals_rfc8785_for_bmp_keys(value: Any) -> None:
    assert _dumps(value).encode("utf-8") == rfc8785.dumps(value)


def test_orjson_writes_the_json_fast_paths_bytes_for_every_character() -> None:
    # canonical_encode writes BMP-keyed payloads with orjson: the same bytes as _dumps for each
    # character as a key and as a value (escapes of controls, quote and backslash, no others)
    # (a key above U+FFFF takes the rfc8785 path: those characters are values only)
    for start in range(0, 0x110000, 0x800):
        chars = [chr(c) for c in range(start, start + 0x800) if not 0xD800 <= c < 0xE000]
        value = {f"k{c}" if c <= "\uffff" else f"k{ord(c)}": [c, f"{c}\\\"x"] for c in chars}
        assert canonical_encode(value) == _dumps(value).encode("utf-8"), hex(start)


@settings(max_examples=400, deadline=None)
@given(json_values(bmp_text))
def test_canonical_encode_equals_the_json_fast_path_for_bmp_keys(value: Any) -> None:
    assert canonical_encode(value) == _dumps(value).encode("utf-8")


def test_deepest_payload_and_lone_surrogates() -> None:
    # the deepest payload the check allows is within orjson's nesting (254), same bytes; a lone
    # surrogate, which orjson refuses, is still named by the json path
    value: Any = "x"
    for _ in range(MAX_DEPTH):
        value = [value]
    assert canonical_encode(value) == _dumps(value).encode("utf-8")
    with pytest.raises(CanonicalEncodingError, match="lone surrogate"):
        canonical_encode({"a": "\ud800"})


@settings(max_examples=400, deadline=None)
@given(json_values(any_text))
def test_canonical_encode_equals_rfc8785(value: Any) -> None:
    assert canonical_encode(value) == rfc8785.dumps(value)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(any_text, json_values(any_text), max_size=5))
def test_any_payload_survives_encode_decode_verify(payload: Payload) -> None:
    key = SigningKey.generate()
    data = encode_envelope(sign_payload(copy.deepcopy(payload), key))
    envelope = decode_envelope(data, require_canonical=True)
    assert verify_envelope(envelope, {key.key_id: key.public_key}) == payload


# --- one-pass signing: the envelope's bytes from the payload's ------------------------------------


def test_sign_and_encode_writes_the_envelopes_jcs_bytes(key: SigningKey,
                                                        trusted: dict[str, Any]) -> None:
    data = sign_and_encode(round_record(), key)
    envelope = sign_payload(round_record(), key)  # Ed25519 is deterministic: the same signature
    assert data == encode_envelope(envelope) == rfc8785.dumps(envelope)
    decoded = decode_envelope(data, require_canonical=True)
    assert verify_envelope(decoded, trusted, schema="fairshoe.round/v1") == round_record()


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(any_text, json_values(any_text), max_size=5))
@example({"signature": {"value": "x"}, "format": 1, "payload": None, "\U0001f600": [], "": 0})
def test_sign_and_encode_equals_rfc8785_of_the_envelope(payload: Payload) -> None:
    """Any payload: keys above U+FFFF, and the envelope's own member names, change nothing."""
    key = SigningKey.generate()
    data = sign_and_encode(copy.deepcopy(payload), key)
    assert data == rfc8785.dumps(sign_payload(copy.deepcopy(payload), key))
    envelope = decode_envelope(data, require_canonical=True)
    assert verify_envelope(envelope, {key.key_id: key.public_key}) == payload


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(any_text, json_values(any_text), max_size=5))
@example({"\U0001f600": 1, "\uffff": 2})  # JCS orders these two otherwise than orjson
def test_decode_signed_slices_the_payloads_sorted_encoding(payload: Payload) -> None:
    """The payload's bytes sliced from a written envelope are orjson's sorted encoding of it,
    and verifying with them gives what verifying without them gives (the canonical bytes)."""
    key = SigningKey.generate()
    trusted = {key.key_id: key.public_key}
    data = sign_and_encode(copy.deepcopy(payload), key)
    envelope, encoded = decode_signed(data)
    assert envelope == decode_envelope(data)
    sorted_bytes = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    # where JCS orders the keys otherwise (beyond U+FFFF) the file is not orjson's sorted
    # encoding: no bytes, and the verification encodes the payload itself
    assert encoded == (sorted_bytes if sorted_bytes in data else b"")
    assert decode_signed(data + b"\n") == (envelope, encoded)
    assert verify_signed(envelope, trusted, encoded=encoded) == verify_signed(envelope, trusted)
    assert verify_signed(envelope, trusted)[1] == rfc8785.dumps(payload)


def test_decode_signed_has_no_bytes_of_what_is_not_sorted(key: SigningKey) -> None:
    data = sign_and_encode(round_record(), key)
    spaced = data.replace(b',"payload":', b', "payload": ')
    assert decode_signed(spaced) == (decode_envelope(data), b"")
    extra = data[:-1] + b',"x":1}'
    assert decode_signed(extra) == (decode_envelope(extra), b"")
    assert decode_signed(b'{"payload":{}}') == ({"payload": {}}, b"")


def test_verify_signed_with_encoded_bytes_refuses_as_without(key: SigningKey,
                                                              trusted: dict[str, Any]) -> None:
    # a float in a sorted envelope: the bytes are sliced, and the domain check still refuses it
    data = sign_and_encode(round_record(), key).replace(b'"amount":500', b'"amount":500.5')
    envelope, encoded = decode_signed(data)
    assert encoded
    with pytest.raises(VerificationError) as without:
        verify_signed(envelope, trusted)
    with pytest.raises(VerificationError) as with_bytes:
        verify_signed(envelope, trusted, encoded=encoded)
    assert (str(with_bytes.value), with_bytes.value.field) == (str(without.value),
                                                               without.value.field)
    assert "float in payload at path payload.wagers[0].amount" in str(without.value)


def _judged(data: bytes, trusted: dict[str, Any], *, sliced: bool) -> object:
    """What the audit's reading of ``data`` comes to: the payload and its signed bytes, or the
    refusal (its text and field); ``sliced``: verified with the bytes cut from the file."""
    try:
        if sliced:
            envelope, encoded = decode_signed(data)
            return verify_signed(envelope, trusted, encoded=encoded)
        return verify_signed(decode_envelope(data), trusted)
    except VerificationError as exc:
        return (str(exc), exc.field)


def test_a_tampered_file_is_judged_alike_with_its_sliced_bytes(key: SigningKey,
                                                               trusted: dict[str, Any]) -> None:
    """A hostile file: every byte of a written record changed to each of a few others (a digit,
    a quote, a brace, a backslash, a letter, a dot). Whatever the change breaks or keeps,
    verifying with the payload's bytes sliced from the file ends as verifying without them."""
    data = sign_and_encode(round_record(), key)
    untouched = _judged(data, trusted, sliced=True)
    assert untouched == _judged(data, trusted, sliced=False)
    assert isinstance(untouched, tuple) and isinstance(untouched[0], dict)
    tried = verified = 0
    for at in range(len(data)):
        for byte in b'7"}\\x.':
            if data[at] == byte:
                continue
            tampered = data[:at] + bytes([byte]) + data[at + 1:]
            judged = _judged(tampered, trusted, sliced=True)
            assert judged == _judged(tampered, trusted, sliced=False), (at, bytes([byte]))
            tried += 1
            verified += isinstance(judged, tuple) and isinstance(judged[0], dict)
    assert tried > 5 * len(data)
    assert verified == 0  # no change keeps the signature good: each is refused, alike


def _read_again(data: bytes) -> object:
    """What decoding ``data`` a second time comes to, as the audit's pass 2 does it: parsed again
    without the checks if the first decoding found it sorted and the payload's span in it, else
    decoded as the first time (the refusal's text and field if it is refused)."""
    try:
        envelope, is_sorted, middle = decode_spanned(data)
    except VerificationError as exc:
        return (str(exc), exc.field)
    span = payload_span(data, envelope, middle) if is_sorted else None
    # the span the bytes' own test gave is the one found by encoding the signature again
    assert span == (payload_span(data, envelope) if is_sorted else None)
    assert (envelope, is_sorted) == decode_sorted(data)
    return decode_signed(data) if span is None else decode_signed_again(data, span)


def _read_once(data: bytes) -> object:
    try:
        return decode_signed(data)
    except VerificationError as exc:
        return (str(exc), exc.field)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(any_text, json_values(any_text), max_size=5))
@example({"\U0001f600": 1, "\uffff": 2})
def test_bytes_read_again_give_what_the_first_reading_gave(payload: Payload) -> None:
    """A written envelope (and with a trailing newline) parsed again without its checks, where
    the first reading found its payload's span, is what decoding it gives: same object, same
    payload bytes."""
    key = SigningKey.generate()
    data = sign_and_encode(copy.deepcopy(payload), key)
    for one in (data, data + b"\n"):
        again = _read_again(one)
        assert again == decode_signed(one)
        envelope, is_sorted = decode_sorted(one)
        assert envelope == decode_envelope(one)
        span = payload_span(one, envelope)
        if is_sorted and span is not None:  # then the slice is the payload's sorted encoding
            assert one[span[0]:span[1]] == orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)


def test_payload_span_of_what_is_no_sorted_envelope(key: SigningKey) -> None:
    data = sign_and_encode(round_record(), key)
    envelope, is_sorted = decode_sorted(data)
    assert is_sorted and payload_span(data, envelope) is not None
    spaced = data.replace(b',"payload":', b', "payload": ')
    assert decode_sorted(spaced) == (envelope, False)
    extra = data[:-1] + b',"x":1}'
    assert payload_span(extra, decode_sorted(extra)[0]) is None
    assert payload_span(b'{"payload":{}}', {"payload": {}}) is None


def test_payload_span_whatever_the_format_member(key: SigningKey) -> None:
    """The span of an envelope of another format (a string or not): its head is encoded then,
    not taken as the one of ``fairshoe.signed/v1``; the slice is still the payload's bytes."""
    envelope = decode_envelope(sign_and_encode(round_record(), key))
    payload = orjson.dumps(envelope["payload"], option=orjson.OPT_SORT_KEYS)
    for form in ("fairshoe.signed/v1", "fairshoe.signed/v2", "", "\u00e9\"", 1, None, ["x"]):
        data = orjson.dumps({**envelope, "format": form}, option=orjson.OPT_SORT_KEYS)
        decoded, is_sorted = decode_sorted(data)
        span = payload_span(data, decoded)
        assert is_sorted and span is not None, form
        middle = decode_spanned(data)[2]
        # the escaped quote is left to the encoding test, which gives no middle
        assert payload_span(data, decoded, middle) == span
        assert (middle is None) == (form == "\u00e9\"")
        assert data[span[0]:span[1]] == payload
        # the bytes are what the span is found in: another envelope's do not fit
        other = {**decoded, "format": "x" if form != "x" else "y"}
        assert payload_span(data, other) is None


def test_a_tampered_file_read_again_is_what_reading_it_gives(key: SigningKey) -> None:
    """A hostile file, every byte changed to each of a few others: whatever the first reading
    accepted and found sorted, the second reading without the checks gives the same object and
    payload bytes; whatever it refused stays refused alike."""
    data = sign_and_encode(round_record(), key)
    tried = again = 0
    for at in range(len(data)):
        for byte in b'7"}\\x.{,:':
            if data[at] == byte:
                continue
            tampered = data[:at] + bytes([byte]) + data[at + 1:]
            assert _read_again(tampered) == _read_once(tampered), (at, bytes([byte]))
            tried += 1
            try:
                envelope, is_sorted = decode_sorted(tampered)
            except VerificationError:
                continue
            again += is_sorted and payload_span(tampered, envelope) is not None
    assert tried > 5 * len(data)
    assert again > len(data)  # many changes keep the bytes sorted: those are read again


def test_sign_and_encode_refuses_what_sign_payload_refuses(key: SigningKey) -> None:
    payload = round_record()
    payload["wagers"][2]["amount"] = 5.0
    with pytest.raises(CanonicalEncodingError) as caught:
        sign_and_encode(payload, key)
    assert (caught.value.problem, caught.value.path) == ("float", "$.wagers[2].amount")
    with pytest.raises(CanonicalEncodingError, match="not an object"):
        sign_and_encode([1, 2], key)  # type: ignore[arg-type]


# --- decoding -------------------------------------------------------------------------------------


def test_decode_refuses_duplicate_members(key: SigningKey) -> None:
    data = encode_envelope(sign_payload({"amount": 1}, key))
    forged = data.replace(b'{"amount":1}', b'{"amount":1,"amount":1000}')
    with pytest.raises(VerificationError, match="duplicate member 'amount'"):
        decode_envelope(forged)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": NaN}', "non-JSON number NaN"),
        (b'{"a": -Infinity}', "non-JSON number -Infinity"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"a": "\xff"}', "not UTF-8"),
        (b'{"a": 1} trailing', "not JSON"),
        ('{"a": 1}'.encode("utf-16"), "not UTF-8"),
    ],
)
def test_decode_refuses_what_parsers_disagree_on(data: bytes, message: str) -> None:
    with pytest.raises(VerificationError, match=message) as caught:
        decode_envelope(data)
    assert caught.value.failure is Failure.MALFORMED


def test_decode_of_absurd_nesting_is_malformed_not_a_crash() -> None:
    with pytest.raises(VerificationError, match="nested too deeply"):
        decode_envelope(b"[" * 100_000 + b"]" * 100_000)


def test_require_canonical(key: SigningKey, trusted: dict[str, Any]) -> None:
    envelope = sign_payload(round_record(), key)
    pretty = json.dumps(envelope, indent=2).encode()
    assert verify_envelope(decode_envelope(pretty), trusted) == round_record()
    with pytest.raises(VerificationError, match="not canonical") as caught:
        decode_envelope(pretty, require_canonical=True)
    assert caught.value.failure is Failure.NOT_CANONICAL


def test_encoding_is_deterministic(key: SigningKey) -> None:
    first = encode_envelope(sign_payload(round_record(), key))
    shuffled = dict(reversed(list(round_record().items())))
    assert encode_envelope(sign_payload(shuffled, key)) == first
    assert encode_envelope(decode_envelope(first)) == first


# --- a payload decoded to the members a reader claims (decode_claimed) -----------------------

#: a round record's members, as the audit's first pass claims them
CLAIMED = Claimed.of("fairshoe.round/v1", ("round_id", "schema", "shoe"))


def _decoded(data: bytes, decode: Callable[[bytes], Any]) -> object:
    try:
        return decode(data)
    except VerificationError as exc:
        return (str(exc), exc.field, exc.failure)


def held_claimed(data: bytes, claimed: Claimed = CLAIMED) -> bool:
    """decode_claimed of ``data`` is decode_spanned's answer (or refusal), but for the payload
    of a sorted envelope of FORMAT and of the claimed schema, which holds the claimed members
    it has, each as the whole decoding has it (types too). Returns whether it was so cut."""
    whole, claimed_answer = _decoded(data, decode_spanned), _decoded(
        data, lambda d: decode_claimed(d, claimed))
    if not isinstance(whole, tuple) or not isinstance(whole[0], dict):
        assert claimed_answer == whole
        return False
    envelope, is_sorted, middle = whole
    payload = envelope.get("payload")
    cut = (is_sorted and middle is not None and envelope.keys() == {"format", "payload",
                                                                    "signature"}
           and envelope["format"] == FORMAT and type(envelope["format"]) is str
           and type(payload) is dict and payload.get("schema") == claimed.schema
           and type(payload.get("schema")) is str)
    assert isinstance(claimed_answer, tuple)
    if not cut:
        assert orjson.dumps(claimed_answer) == orjson.dumps(whole)
        return False
    expected = {name: payload[name] for name in claimed.names if name in payload}
    assert claimed_answer[1:] == whole[1:]
    assert orjson.dumps(claimed_answer[0], option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        {**envelope, "payload": expected}, option=orjson.OPT_SORT_KEYS)
    return True


def test_claimed_of_a_round_record(key: SigningKey) -> None:
    data = sign_and_encode(round_record(), key)
    assert held_claimed(data) and held_claimed(data + b"\n")
    envelope = decode_claimed(data, CLAIMED)[0]
    assert envelope["payload"] == {"round_id": "r-000042", "schema": "fairshoe.round/v1",
                                   "shoe": round_record()["shoe"]}
    assert not held_claimed(sign_and_encode({**round_record(), "schema": "x"}, key))
    # not sorted: decoded whole
    assert not held_claimed(data.replace(b',"payload":', b', "payload":'))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(any_text, json_values(any_text), max_size=5), st.data())
def test_claimed_members_are_the_whole_decodings(payload: Payload, data: st.DataObject) -> None:
    """Random payloads, of the claimed schema or not, signed, and with every kind of byte
    mutation: cut to the claimed members only where the whole decoding says it may be, and
    then each member as it has it; elsewhere the same answer or refusal."""
    if data.draw(st.booleans()):
        payload = {**payload, "schema": "fairshoe.round/v1"}
    if data.draw(st.booleans()):
        payload = {**payload, "round_id": data.draw(json_values(any_text))}
    encoded = sign_and_encode(copy.deepcopy(payload), SigningKey.generate())
    held_claimed(encoded)
    at = data.draw(st.integers(0, len(encoded) - 1))
    byte = data.draw(st.sampled_from(list(b'{}[]",:-0123456789 \\\n\x80tfnu')))
    for mutated in (encoded[:at] + bytes([byte]) + encoded[at + 1:],
                    encoded[:at] + encoded[at + 1:], encoded[:at] + bytes([byte]) + encoded[at:]):
        held_claimed(mutated)


@pytest.mark.parametrize("data", [
    b'{"format":"fairshoe.signed/v1","payload":{"schema":"fairshoe.round/v1"},"signature":{}}',
    b'{"format":"fairshoe.signed/v1","payload":{"schema":"fairshoe.round/v1"},"signature":1}\n',
    b'{"format":"fairshoe.signed/v1","payload":{"schema":"fairshoe.round/v1"},"signaturf":1}',
    b'{"format":"fairshoe.signed/v2","payload":{"schema":"fairshoe.round/v1"},"signature":1}',
    b'{"format":"fairshoe.signed/v1","payloae":{"schema":"fairshoe.round/v1"},"signature":1}',
    b'{"format":"fairshoe.signed/v1","payload":{"schema":"fairshoe.round/v1"},"signature":1,'
    b'"x":2}',
    b'{"format":"fairshoe.signed/v1","payload":{"round_id":[{"a":1}],"schema":"fairshoe.round'
    b'/v1","shoe":null,"x":1.5},"signature":1}',
    b'{"format":"fairshoe.signed/v1","payload":{"round_id":true,"schema":"fairshoe.round/v1",'
    b'"shoe":-12},"signature":[1]}',
    b'{"format":"fairshoe.signed/v1","payload":{"schema":"fairshoe.round\\/v1"},"signature":1}',
    b'{"format":"fairshoe.signed/v1","payload":{"schema":1},"signature":1}',
    b'{"format":"fairshoe.signed/v1","payload":[],"signature":1}', b"[1,2,3]", b"1", b"",
    b'{"format":"fairshoe.signed/v1","payload":{"schema":"fairshoe.round/v1"}}',
])
def test_claimed_adversarial_bytes(data: bytes) -> None:
    held_claimed(data)


def test_claimed_oracle_catches_a_wrong_cut(key: SigningKey) -> None:
    """A decode_claimed that cut a payload of another schema, or left a member out, fails the
    oracle above."""
    data = sign_and_encode(round_record(), key)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(globals(), "decode_claimed", lambda d, c: (
            {**decode_spanned(d)[0], "payload": {"schema": "fairshoe.round/v1"}},
            *decode_spanned(d)[1:]))
        with pytest.raises(AssertionError):
            held_claimed(data)
        with pytest.raises(AssertionError):
            held_claimed(sign_and_encode({**round_record(), "schema": "x"}, key))


def test_claimed_names_are_checked() -> None:
    with pytest.raises(ValueError, match="sorted order"):
        Claimed.of("s", ("shoe", "schema"))
    with pytest.raises(ValueError, match="sorted order"):
        Claimed.of("s", ("round_id",))


# --- the signature's fields read without the general checks --------------------------------

_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _spelled_back(value: object) -> bytes | None:
    """The reference: a signature value decoded, then spelled back to compare."""
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except ValueError:
        return None
    if len(raw) != 64 or base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != value:
        return None
    return raw


def _decoded_value(value: object) -> bytes | None:
    try:
        return signing._decode_signature_value(value)
    except VerificationError:
        return None


@settings(max_examples=2000, deadline=None)
@given(st.text(st.sampled_from(_B64URL), min_size=85, max_size=85),
       st.sampled_from([*_B64URL, "=", "+", "/", "\u00e9", " "]), st.integers(0, 85),
       st.sampled_from(["", "=", "+", "/", "\u00e9", "\n", "A", "=="]))
def test_signature_value_accepted_as_spelled_back(head: str, last: str, at: int,
                                                  stray: str) -> None:
    """Its last character's four clear bits and base64url's alphabet checked rather than the
    value spelled back: the same values accepted, with the same bytes."""
    for value in (head + last, head[:at] + stray + head[at + 1:] + last,
                  head[:at] + stray + head[at:] + last, (head + last)[:at]):
        assert _decoded_value(value) == _spelled_back(value), value


def test_signature_value_oracle_catches_a_lax_check() -> None:
    """A last character with a stray bit, accepted, fails the comparison above."""
    value = "A" * 85 + "B"
    assert _spelled_back(value) is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(signing, "_LAST_CHARS", frozenset(_B64URL))
        assert _decoded_value(value) is not None


@pytest.mark.parametrize("mutate", [
    lambda e: None,
    lambda e: e.__setitem__("format", "fairshoe.signed/v2"),
    lambda e: e.__setitem__("format", 1),
    lambda e: e.__setitem__("x", 1),
    lambda e: e.pop("payload"),
    lambda e: e.__setitem__("signature", []),
    lambda e: e["signature"].__setitem__("alg", "Ed448"),
    lambda e: e["signature"].__setitem__("key_id", 7),
    lambda e: e["signature"].__setitem__("extra", 7),
    lambda e: e["signature"].pop("value"),
    lambda e: e["signature"].__setitem__("value", "A" * 86),
    lambda e: e["signature"].__setitem__("value", 7),
])
def test_signature_fields_as_the_general_checks(mutate: Callable[[Payload], None],
                                                key: SigningKey) -> None:
    """The fast path of a decoded dict and the general one (a Mapping that is not a dict): the
    same answer or refusal, on every way an envelope's members may be wrong."""

    class Frozen(dict[str, Any]):
        """Not exactly a dict: the general path."""

    envelope = decode_envelope(sign_and_encode(round_record(), key))
    mutate(envelope)
    general = Frozen(envelope)
    if isinstance(general.get("signature"), dict):
        general["signature"] = Frozen(general["signature"])
    assert _decoded(envelope, signing._signature_fields) == _decoded(
        general, signing._signature_fields)
