"""Signed envelopes over a canonical encoding: what round records (and any other signed fact) use.

Canonical encoding
    RFC 8785 JSON Canonicalization Scheme (JCS). Payloads are restricted to JSON's unambiguous part:
    ``dict`` with ``str`` keys, ``list``/``tuple``, ``str``, ``bool``, ``None`` and ``int`` within
    ±(2**53 - 1). Floats are refused: money is integer minor units, and a float's canonical text
    depends on ECMAScript number formatting that implementations get subtly wrong, so one float
    could make the same record encode differently for an auditor's tool. Exact types are required
    (no ``IntEnum``, no ``str`` subclasses): what is signed is exactly what a JSON reader gets back.

    Within that domain ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
    writes the same bytes as JCS, except that JCS orders keys by UTF-16 code units and ``json`` by
    code points; the two disagree only for keys holding characters above U+FFFF, and such payloads
    go through the ``rfc8785`` package instead. The equivalence is tested against ``rfc8785`` with
    hypothesis (tests/test_signing.py); the fast path exists because ``rfc8785`` alone costs about
    four times as much: 80-150 µs per round record against 22-38 µs (bench/bench_signing.py).
    The fast path writes those bytes with orjson (sorted keys), which within the checked domain
    writes exactly ``json``'s (tests/crypto/test_signing.py compares them for every character);
    ``json`` remains for what orjson refuses (a lone surrogate, then reported with its path).
    Whether a value is in the domain is decided by a walk in C (``_canonical.c``, about 1 µs a
    round record where the Python walk, :func:`_check`, costs 25-35); the Python walk is the
    reference (tests/crypto compare them) and names the path of what C refused.

Envelope (format ``fairshoe.signed/v1``)::

    {"format": "fairshoe.signed/v1",
     "payload": {...},
     "signature": {"alg": "Ed25519",
                   "key_id": "ed25519:<32 hex>",
                   "value": "<base64url of the 64-byte signature, no padding>"}}

    The signature is over ``b"fairshoe.signed/v1\\n" + JCS(payload)``. The domain-separation prefix
    means a signature made here can never be replayed as a valid signature in another protocol that
    happens to sign JSON with the same key, nor another protocol's signature be passed off as ours.
    Payloads should name their own type in a ``"schema"`` member (e.g. ``"fairshoe.round/v1"``);
    :func:`verify_envelope` can insist on it so one kind of signed fact cannot pose as another.

    Writers use :func:`sign_and_encode`, which returns the envelope's JCS bytes in one encoding
    pass: JCS sorts members and ``"format" < "payload" < "signature"``, so those bytes are the
    payload's own canonical bytes (the ones just signed) between a fixed head and the signature
    object. Encoding the whole envelope again would cost a second pass over the payload.

    The envelope carries only a key *id*. Verification looks the id up in a mapping of keys the
    verifier trusts; nothing in the envelope (or beside it) is ever used as a key. Unknown members
    in the envelope are rejected: they would be unsigned data a reader might mistake for signed.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from functools import lru_cache
from typing import Any, NamedTuple

import orjson
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.core.errors import ErrorFamily, IntegrityFailure, InvalidInput
from rng_service.core.json_input import (
    DEFAULT_LIMITS,
    JsonLimits,
    parse_json_spanned,
    sorted_members,
)
from rng_service.crypto.keys import SigningKey, key_id

_c_check: Callable[[object], int] | None
try:  # the domain check in C, built with the package (pyproject's ext-modules)
    from rng_service.crypto._canonical import check as _built_check
except ImportError:  # pragma: no cover - a build without a compiler checks in Python
    _c_check = None
else:
    _c_check = _built_check

_c_signature_fields: Callable[[object, str, str], tuple[str, bytes] | None] | None
try:  # a signature's fields read in C, built with the package (pyproject's ext-modules)
    from rng_service.crypto._envelope import signature_fields as _built_signature_fields
except ImportError:  # pragma: no cover - a build without a compiler reads them in Python
    _c_signature_fields = None
else:
    _c_signature_fields = _built_signature_fields

FORMAT = "fairshoe.signed/v1"
ALG = "Ed25519"
MESSAGE_PREFIX = FORMAT.encode("ascii") + b"\n"
MAX_INT = 2**53 - 1
MAX_DEPTH = 64

_ENVELOPE_FIELDS = frozenset({"format", "payload", "signature"})
_SIGNATURE_FIELDS = frozenset({"alg", "key_id", "value"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SIGNATURE_LEN = 64
#: what an envelope's sorted encoding starts with, before its payload's
_HEAD = b'{"format":' + orjson.dumps(FORMAT) + b',"payload":'


class SigningError(ErrorFamily):
    """Base of everything this module raises."""


class CanonicalEncodingError(SigningError, InvalidInput):
    """A value outside the canonical domain.

    ``problem`` is a short noun ("float", "unsupported type", ...), ``detail`` says more, and
    ``path`` is a JSONPath-like location such as ``$.wagers[2].amount``.
    """

    reason_code = "NOT_CANONICAL"

    def __init__(self, problem: str, detail: str, path: str = "$") -> None:
        super().__init__(f"{problem} at path {path}: {detail}")
        self.problem = problem
        self.detail = detail
        self.path = path

    def within(self, segment: str) -> CanonicalEncodingError:
        """The same error one level down: ``segment`` is prepended to the path."""
        return CanonicalEncodingError(self.problem, self.detail, "$" + segment + self.path[1:])


class Failure(StrEnum):
    """Why an envelope failed to verify: stable codes for reports (``audit verify``)."""

    MALFORMED = "malformed"
    UNSUPPORTED = "unsupported"
    NOT_CANONICAL = "not_canonical"
    UNKNOWN_KEY = "unknown_key"
    BAD_SIGNATURE = "bad_signature"
    SCHEMA = "schema"


class VerificationError(SigningError, IntegrityFailure):
    """An envelope that must not be believed. ``failure`` says why, ``field`` where (if known);
    ``reason`` is the failure's code in upper case (``BAD_SIGNATURE``)."""

    def __init__(self, failure: Failure, message: str, field: str | None = None) -> None:
        # the messages already name the place, so the field is not prefixed to them again
        super().__init__(message, reason=failure.name)
        self.failure = failure
        self.field = field


# --- canonical encoding --------------------------------------------------------------------------


def _key_segment(key: str) -> str:
    # ASCII-only (json escapes), so a path prints on any terminal, even with a lone surrogate in it.
    return f".{key}" if _IDENTIFIER.match(key) else f"[{json.dumps(key)}]"


def _check(value: object, depth: int) -> bool:
    """Raise CanonicalEncodingError if ``value`` is outside the domain; True if it needs full JCS.

    Exact type tests keep this cheap (it runs on every record); the path is only assembled while an
    error propagates, so the common case pays nothing for it.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return False
    if kind is int:
        if -MAX_INT <= value <= MAX_INT:  # type: ignore[operator]
            return False
        raise CanonicalEncodingError("integer out of range", f"{value} is outside ±(2**53-1)")
    if depth > MAX_DEPTH:
        raise CanonicalEncodingError("nesting too deep", f"more than {MAX_DEPTH} levels")
    if kind is dict:
        return _check_dict(value, depth)  # type: ignore[arg-type]
    if kind is list or kind is tuple:
        return _check_list(value, depth)  # type: ignore[arg-type]
    if kind is float:
        raise CanonicalEncodingError(
            "float", f"{value!r} is not canonical; use integers (money in minor units)"
        )
    raise CanonicalEncodingError("unsupported type", f"{kind.__name__} is not a JSON type")


def _check_dict(value: dict[object, object], depth: int) -> bool:
    needs_jcs = False
    for key, item in value.items():
        if type(key) is not str:
            raise CanonicalEncodingError("non-string key", f"object key {key!r} is not a str")
        if not key.isascii() and max(key) > "\uffff":
            needs_jcs = True  # UTF-16 order differs from code point order here
        kind = type(item)  # the common leaves are settled inline: a call each would double the cost
        if kind is str or (kind is int and -MAX_INT <= item <= MAX_INT):  # type: ignore[operator]
            continue
        try:
            needs_jcs = _check(item, depth + 1) or needs_jcs
        except CanonicalEncodingError as exc:
            raise exc.within(_key_segment(key)) from None
    return needs_jcs


def _check_list(value: list[object] | tuple[object, ...], depth: int) -> bool:
    needs_jcs = False
    for index, item in enumerate(value):
        kind = type(item)  # the common leaves are settled inline: a call each would double the cost
        if kind is str or (kind is int and -MAX_INT <= item <= MAX_INT):  # type: ignore[operator]
            continue
        try:
            needs_jcs = _check(item, depth + 1) or needs_jcs
        except CanonicalEncodingError as exc:
            raise exc.within(f"[{index}]") from None
    return needs_jcs


def _domain(value: object) -> bool:
    """:func:`_check` of the whole ``value``: by the C walk (``_canonical.c``, about 1 µs where
    the Python one costs 25-35 on a round record), and by the Python walk when C finds the value
    outside the domain, or is not built: that one raises, naming the path."""
    if _c_check is not None:
        verdict = _c_check(value)
        if verdict >= 0:
            return verdict == 1
    return _check(value, 0)


def _find_bad_text(value: object, path: str = "$") -> str:
    """Path of the first string (or key) that is not encodable as UTF-8 (a lone surrogate)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
    elif isinstance(value, dict):
        for key, item in value.items():
            found = _find_bad_text(key, f"{path}{_key_segment(key)} (the key)")
            found = found or _find_bad_text(item, path + _key_segment(key))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _find_bad_text(item, f"{path}[{index}]")
            if found:
                return found
    return ""


#: the canonical bytes of a payload whose keys are all in the BMP (see the module docstring).
#: ``orjson.dumps(value, option=OPT_SORT_KEYS)`` writes the same bytes within the checked
#: domain (escapes, key order by code point, integers) and is what :func:`canonical_encode`
#: uses; this stays for what orjson refuses and as the reference tests/crypto compare it to.
_dumps = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
).encode


def canonical_encode(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of ``value``; CanonicalEncodingError names the offending path.

    Keys sorted, no whitespace, UTF-8; integers within ±(2**53 - 1), never a float:

    >>> canonical_encode({"b": 1, "a": [True, None, "é"]}).decode()
    '{"a":[true,null,"é"],"b":1}'
    >>> canonical_encode({"x": [1.5]})
    Traceback (most recent call last):
    ...
    rng_service.crypto.signing.CanonicalEncodingError: float at path $.x[0]: 1.5 is not ...
    """
    needs_jcs = _domain(value)
    if not needs_jcs:
        try:  # within the checked domain orjson writes json's bytes (see _dumps), 3-5x faster
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # a lone surrogate (or deeper than orjson nests): below
            pass
    try:
        if needs_jcs:
            return rfc8785.dumps(value)
        return _dumps(value).encode("utf-8")
    except (UnicodeEncodeError, rfc8785.CanonicalizationError):
        raise CanonicalEncodingError(
            "invalid text", "a lone surrogate is not Unicode text", _find_bad_text(value)
        ) from None


def _payload_bytes(payload: Mapping[str, Any]) -> bytes:
    if type(payload) is not dict:
        raise CanonicalEncodingError("not an object", "a payload must be a dict")
    return canonical_encode(payload)


def signing_message(payload: Mapping[str, Any]) -> bytes:
    """The exact bytes an envelope's signature covers."""
    return MESSAGE_PREFIX + _payload_bytes(payload)


# --- envelopes -----------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign_payload(payload: dict[str, Any], key: SigningKey) -> dict[str, Any]:
    """An envelope signing ``payload`` with ``key``.

    The envelope holds ``payload`` itself, not a copy: mutating it afterwards breaks the signature.
    """
    signature = key.sign(signing_message(payload))
    return {
        "format": FORMAT,
        "payload": payload,
        "signature": {"alg": ALG, "key_id": key.key_id, "value": _b64url(signature)},
    }


# The envelope's JCS bytes around its payload; members in JCS order (format, payload, signature).
_ENVELOPE_HEAD = b'{"format":' + canonical_encode(FORMAT) + b',"payload":'


@lru_cache(maxsize=64)  # a few key ids over a process's life; every record and reveal asks
def _signature_head(kid: str) -> bytes:
    return (b',"signature":{"alg":' + canonical_encode(ALG) + b',"key_id":' + canonical_encode(kid)
            + b',"value":"')


def sign_and_encode(payload: dict[str, Any], key: SigningKey) -> bytes:
    """``encode_envelope(sign_payload(payload, key))``, with the payload encoded once, not twice.

    The payload's canonical bytes are signed and then spliced into the envelope's: see the module
    docstring for why that is the envelope's JCS encoding (tests/test_signing.py checks it against
    ``rfc8785``). A base64url value needs no JSON escaping, so it goes in as is.
    """
    body = _payload_bytes(payload)
    value = _b64url(key.sign(MESSAGE_PREFIX + body)).encode("ascii")
    return b"".join((_ENVELOPE_HEAD, body, _signature_head(key.key_id), value, b'"}}'))


def _malformed(message: str, field: str | None = None) -> VerificationError:
    return VerificationError(Failure.MALFORMED, f"malformed envelope: {message}", field)


def _require_members(obj: Mapping[str, Any], fields: frozenset[str], where: str) -> None:
    if obj.keys() == fields:  # every envelope that verifies: one set comparison
        return
    for name in sorted(fields):
        if name not in obj:
            raise _malformed(f"missing field {where}{name}", where + name)
    extra = sorted(map(str, set(obj) - fields))
    if extra:
        raise _malformed(f"unexpected field {where}{extra[0]}", where + extra[0])


def _signature_fields(envelope: object) -> tuple[str, bytes]:
    """(key id, signature bytes) from a structurally valid envelope: read in C
    (``_envelope.c``: an envelope of exact dicts and strs, its value the one spelling of 64
    bytes, at a tenth of the cost), else by :func:`_signature_fields_reference`, which decides
    with its errors (tests/crypto/test_envelope_c.py holds the two alike)."""
    if _c_signature_fields is not None:
        fields = _c_signature_fields(envelope, FORMAT, ALG)
        if fields is not None:
            return fields
    return _signature_fields_reference(envelope)


def _signature_fields_reference(envelope: object) -> tuple[str, bytes]:
    """(key id, signature bytes) from a structurally valid envelope, in Python."""
    if type(envelope) is dict and envelope.keys() == _ENVELOPE_FIELDS and (
            envelope["format"] == FORMAT):
        # every envelope that verifies, decoded from JSON: the checks below passed, without
        # their ABC isinstance tests and calls (a third of this function's cost)
        sig = envelope["signature"]
        if (type(sig) is dict and sig.keys() == _SIGNATURE_FIELDS and sig["alg"] == ALG
                and type(sig["key_id"]) is str):
            return sig["key_id"], _decode_signature_value(sig["value"])
    if not isinstance(envelope, Mapping):
        raise _malformed("not a JSON object")
    _require_members(envelope, _ENVELOPE_FIELDS, "")
    if envelope["format"] != FORMAT:
        raise VerificationError(
            Failure.UNSUPPORTED, f"unsupported envelope format {envelope['format']!r}", "format"
        )
    sig = envelope["signature"]
    if not isinstance(sig, Mapping):
        raise _malformed("signature is not an object", "signature")
    _require_members(sig, _SIGNATURE_FIELDS, "signature.")
    if sig["alg"] != ALG:
        raise VerificationError(
            Failure.UNSUPPORTED, f"unsupported signature alg {sig['alg']!r}", "signature.alg"
        )
    if not isinstance(sig["key_id"], str):
        raise _malformed("signature.key_id is not a string", "signature.key_id")
    return sig["key_id"], _decode_signature_value(sig["value"])


#: the standard alphabet's two characters for base64url's, for binascii
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
#: the characters of a signature in unpadded base64url (64 bytes: 86, the last of 2 bits)
_SIGNATURE_CHARS = 86
#: the last character's possible spellings: its two bits kept, its four others clear
_LAST_CHARS = frozenset("AQgw")


def _decode_signature_value(value: object) -> bytes:
    if type(value) is str and len(value) == _SIGNATURE_CHARS:
        # the common case in C: what decodes to 64 bytes spelled back as ``value`` is what the
        # checks below accept, with the same bytes; anything else is judged by them
        try:
            raw = binascii.a2b_base64(value.encode("ascii").translate(_FROM_URLSAFE) + b"==",
                                      strict_mode=True)
        except (ValueError, UnicodeEncodeError):  # binascii.Error is a ValueError
            raw = b""
        # spelled back, it is ``value`` exactly when every character is base64url's (binascii
        # took "+" and "/" too, and "=") and the last, of which two bits are kept, has the other
        # four clear (spelling it back cost about 5,000 instructions)
        if (len(raw) == _SIGNATURE_LEN and value[-1] in _LAST_CHARS and "+" not in value
                and "/" not in value and "=" not in value):
            return raw
    try:
        if not isinstance(value, str):
            raise ValueError
        raw = base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except ValueError:  # binascii.Error included
        raise _malformed("signature.value is not base64url", "signature.value") from None
    # One accepted spelling per signature: no padding, no stray bits, exactly 64 bytes.
    if len(raw) != _SIGNATURE_LEN or _b64url(raw) != value:
        raise _malformed("signature.value is not 64 bytes of unpadded base64url", "signature.value")
    return raw


#: trusted keys whose id was recomputed and found right, by id: the same key object listed under
#: the same id again is not hashed again (an audit looks one key up for every record). Held
#: strongly, so an object here is never freed and another made at its address; a few keys over a
#: process's life, cleared past :data:`_CHECKED_KEYS_MAX`.
_checked_keys: dict[str, Ed25519PublicKey] = {}
_CHECKED_KEYS_MAX = 64


def _trusted_key(kid: str, trusted: Mapping[str, Ed25519PublicKey]) -> Ed25519PublicKey:
    public_key = trusted.get(kid)
    if public_key is None:
        raise VerificationError(
            Failure.UNKNOWN_KEY,
            f"unknown key id {kid!r}: not among the {len(trusted)} trusted key(s)",
            "signature.key_id",
        )
    if _checked_keys.get(kid) is public_key:
        return public_key
    if key_id(public_key) != kid:
        # A mis-built trust map; believing the label would verify under the wrong key id.
        raise VerificationError(
            Failure.UNKNOWN_KEY,
            f"trusted key listed as {kid!r} is really {key_id(public_key)!r}",
            "signature.key_id",
        )
    if len(_checked_keys) >= _CHECKED_KEYS_MAX:
        _checked_keys.clear()
    _checked_keys[kid] = public_key
    return public_key


def verify_envelope(
    envelope: Mapping[str, Any],
    trusted: Mapping[str, Ed25519PublicKey],
    *,
    schema: str | None = None,
) -> dict[str, Any]:
    """The payload of ``envelope`` if a key in ``trusted`` signed it; else VerificationError.

    ``schema``, if given, must equal the payload's ``"schema"`` member.
    """
    return verify_signed(envelope, trusted, schema=schema)[0]


def verify_signed(
    envelope: Mapping[str, Any],
    trusted: Mapping[str, Ed25519PublicKey],
    *,
    schema: str | None = None,
    encoded: bytes = b"",
) -> tuple[dict[str, Any], bytes]:
    """:func:`verify_envelope`'s payload, and its canonical bytes, the ones the signature
    covers (without :data:`MESSAGE_PREFIX`): a reader comparing the payload with what it
    rebuilt can compare bytes without encoding the payload again.

    ``encoded``: ``orjson.dumps(payload, option=OPT_SORT_KEYS)``, if the caller has it
    (:func:`decode_signed` slices it from the envelope's bytes): within the canonical domain
    (still checked here) those are the canonical bytes, which are then not made again."""
    kid, signature = _signature_fields(envelope)
    public_key = _trusted_key(kid, trusted)
    payload = envelope["payload"]
    if type(payload) is not dict:
        raise _malformed("payload is not an object", "payload")
    try:
        # _domain: True if the payload needs rfc8785 (a key beyond U+FFFF), where orjson's
        # bytes are not JCS; it raises, as canonical_encode would, outside the domain
        sliced = bool(encoded) and not _domain(payload)
        message = MESSAGE_PREFIX + encoded if sliced else signing_message(payload)
    except CanonicalEncodingError as exc:
        path = "payload" + exc.path[1:]
        raise VerificationError(
            Failure.MALFORMED, f"{exc.problem} in payload at path {path} ({exc.detail})", path
        ) from None
    try:
        public_key.verify(signature, message)
    except InvalidSignature:
        raise VerificationError(
            Failure.BAD_SIGNATURE, f"bad signature (key {kid})", "signature.value"
        ) from None
    if schema is not None and payload.get("schema") != schema:
        raise VerificationError(
            Failure.SCHEMA,
            f"payload schema is {payload.get('schema')!r}, expected {schema!r}",
            "payload.schema",
        )
    return payload, message[len(MESSAGE_PREFIX):]


def encode_envelope(envelope: Mapping[str, Any]) -> bytes:
    """Canonical (JCS) bytes of an envelope: one byte string per signed payload and key."""
    return canonical_encode(dict(envelope))


def decode_envelope(data: bytes, *, require_canonical: bool = False,
                    limits: JsonLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Parse envelope bytes strictly: UTF-8, one JSON object, no duplicate members, no NaN/Infinity,
    and within ``limits`` (size, nesting, integer digits, string length, no lone surrogate: see
    :mod:`rng_service.core.json_input`).

    Floats parse (so verification can name their path) and are then refused by
    :func:`verify_envelope`. With ``require_canonical`` the bytes must be exactly the envelope's JCS
    encoding, as :func:`encode_envelope` writes them.
    """
    envelope, _ = _decode(data, limits)
    if require_canonical:
        try:
            canonical = canonical_encode(envelope)
        except CanonicalEncodingError as exc:
            raise VerificationError(Failure.NOT_CANONICAL, f"not canonical: {exc}") from None
        if canonical != data:
            raise VerificationError(Failure.NOT_CANONICAL, "envelope bytes are not canonical JCS")
    return envelope


def _decode(data: bytes, limits: JsonLimits) -> tuple[dict[str, Any], bool]:
    """The JSON object in ``data`` (:func:`decode_envelope`'s parse), and whether ``data`` is
    exactly its sorted encoding (:func:`~rng_service.core.json_input.parse_json_sorted`)."""
    envelope, is_sorted, _ = decode_spanned(data, limits)
    return envelope, is_sorted


def decode_spanned(data: bytes, limits: JsonLimits = DEFAULT_LIMITS
                   ) -> tuple[dict[str, Any], bool, tuple[int, int] | None]:
    """:func:`decode_sorted`'s object and answer, and where the middle of its three members'
    values lies if the sorted form was told from the bytes
    (:func:`~rng_service.core.json_input.parse_json_spanned`), for :func:`payload_span`."""
    try:
        envelope, is_sorted, middle = parse_json_spanned(data, limits)
    except InvalidInput as exc:
        raise _malformed(exc.detail) from None
    if not isinstance(envelope, dict):
        raise _malformed("not a JSON object")
    return envelope, is_sorted, middle


class Claimed(NamedTuple):
    """The payload members a reader of one schema's envelopes needs before it verifies them
    (:func:`decode_claimed`), made once: their names (``schema`` among them) in the order of
    their bytes, and as the bytes spell them; where ``schema`` is among them, and its value as
    the bytes spell it."""

    schema: str
    names: tuple[str, ...]
    spelled: tuple[bytes, ...]
    chosen: tuple[int, bytes]

    @classmethod
    def of(cls, schema: str, names: tuple[str, ...]) -> Claimed:
        """The members ``names`` (``schema`` among them) of payloads of ``schema``."""
        spelled = tuple(orjson.dumps(name)[1:-1] for name in names)
        if "schema" not in names or list(spelled) != sorted(set(spelled)):
            raise ValueError(f"{names}: not the schema and other names in sorted order")
        return cls(schema, names, spelled, (names.index("schema"), orjson.dumps(schema)))


#: what follows an envelope's payload in its sorted encoding: its last member's name
_SIGNATURE_HEAD = b',"signature":'


def decode_claimed(data: bytes, claimed: Claimed, limits: JsonLimits = DEFAULT_LIMITS
                   ) -> tuple[dict[str, Any], bool, tuple[int, int] | None]:
    """:func:`decode_spanned`'s answer, but for bytes that are exactly the sorted encoding of
    an envelope of :data:`FORMAT` whose payload is of ``claimed.schema``: then its payload
    holds only the members ``claimed.names`` that it has, each as the whole parse has it, told
    from the bytes without building the rest
    (:func:`~rng_service.core.json_input.sorted_members`: a round record's payload is most of
    its bytes, and the audit's first pass reads five of its members, its second pass the whole
    of it again from the same bytes). Any other bytes are decoded whole, as
    :func:`decode_spanned` decodes them, with its refusals."""
    known = sorted_members(data, claimed.spelled, claimed.names, claimed.chosen, limits)
    if known is False:
        return decode_spanned(data, limits)
    try:
        if known is True:
            value = orjson.loads(data)
            if not isinstance(value, dict):
                raise _malformed("not a JSON object")
            return value, True, None
        start, end, payload, signature = known
        if (payload is None or start != len(_HEAD) or not data.startswith(_HEAD)
                or not data.startswith(_SIGNATURE_HEAD, end)):
            return orjson.loads(data), True, (start, end)
        # sorted, the bytes are the head, the payload and the signature's member
        return {"format": FORMAT, "payload": payload, "signature": signature}, True, (start, end)
    except orjson.JSONDecodeError:  # never, of bytes so told; the whole parse would decide
        return decode_spanned(data, limits)


def decode_signed(data: bytes, limits: JsonLimits = DEFAULT_LIMITS
                  ) -> tuple[dict[str, Any], bytes]:
    """:func:`decode_envelope`'s object, and its payload's sorted encoding (what
    :func:`verify_signed` takes as ``encoded``) if ``data`` is exactly the sorted encoding of an
    object of the three envelope members: then the payload's own encoding lies in ``data``
    between those of ``format`` and ``signature``, sliced rather than made again (about 40,000
    instructions a round record). Else ``b""``: the verification encodes the payload itself."""
    envelope, is_sorted = _decode(data, limits)
    span = payload_span(data, envelope) if is_sorted else None
    return envelope, b"" if span is None else data[span[0]:span[1]]


def decode_sorted(data: bytes, limits: JsonLimits = DEFAULT_LIMITS
                  ) -> tuple[dict[str, Any], bool]:
    """:func:`decode_envelope`'s object, and whether ``data`` (less a trailing newline) is
    exactly its sorted encoding (``orjson.dumps(value, option=OPT_SORT_KEYS)``): then
    :func:`payload_span` finds the payload's encoding in it."""
    return _decode(data, limits)


def payload_span(data: bytes, envelope: Mapping[str, Any],
                 middle: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """Where the payload's sorted encoding lies in ``data`` (``data[start:end]``), the bytes
    ``envelope`` was decoded from, found exactly its sorted encoding (:func:`decode_sorted`);
    None if ``envelope`` is not an object of the three envelope members. A reader that keeps
    ``data`` and the span may parse the bytes again without their checks
    (:func:`decode_signed_again`).

    ``middle``: where :func:`decode_spanned` found the middle member's value, if it did. Sorted,
    an envelope's members are format, payload, signature, so that is the payload's, and it is
    taken rather than found again below (an encoding of the signature and two comparisons,
    12,000 instructions a file; tests/crypto/test_signing.py holds the two alike)."""
    if envelope.keys() != _ENVELOPE_FIELDS:
        return None
    if middle is not None:
        return middle
    # sorted, the members are format, payload, signature: the bytes are head, payload, tail
    form = envelope["format"]
    head = _HEAD if form == FORMAT and type(form) is str else b'{"format":' + orjson.dumps(
        form, option=orjson.OPT_SORT_KEYS) + b',"payload":'
    tail = b',"signature":' + orjson.dumps(envelope["signature"], option=orjson.OPT_SORT_KEYS) + (
        b"}")
    end = len(data) - (1 if data.endswith(b"\n") else 0) - len(tail)
    if not (end >= len(head) and data.startswith(head) and data.startswith(tail, end)):
        return None
    return len(head), end


def decode_signed_again(data: bytes, span: tuple[int, int]) -> tuple[dict[str, Any], bytes]:
    """:func:`decode_signed` of bytes already decoded (:func:`decode_sorted`), in which
    :func:`payload_span` found the payload's encoding at ``span``: the very bytes, kept by the
    caller (the audit carries a round's bytes from the pass that read them to the one that
    checks them), parsed again without their checks, at half the cost. Those bytes are exactly
    orjson's sorted encoding of their value, within every limit, so orjson's parse of them is
    the value the strict reading gave; bytes not known so must be read by
    :func:`decode_signed`."""
    return orjson.loads(data), data[span[0]:span[1]]
