"""One typed reader for untrusted JSON: a bounded parse, then typed fields named by their path.

:func:`parse_json` turns bytes (or text) from outside into Python values, or raises
:class:`~rng_service.core.errors.InvalidInput` with a short message; it never lets through what
the rest of the code cannot hold safely:

- at most ``limits.max_bytes`` bytes, strict UTF-8, one JSON value;
- no duplicate member (two parsers would disagree on which one wins), no ``NaN``/``Infinity``;
- integers of at most ``limits.max_int_digits`` digits (Python refuses 4300 only after the work,
  and a long integer makes later arithmetic slow), numbers with a fraction or an exponent of at
  most ``limits.max_float_chars`` characters;
- strings (and member names) of at most ``limits.max_string_chars`` characters, none holding a
  lone surrogate (an escape such as ``"\\ud800"`` parses to one, which no UTF-8 encoder, terminal
  or signature accepts);
- nesting at most ``limits.max_depth`` levels deep (``None``: only as deep as the parser goes).

:class:`JsonObject` reads an object's members by type (``get_int``, ``get_str``, ``get_list``,
...): a missing member or a wrong type raises ``InvalidInput`` whose ``field`` is the dotted path
(``shoe.start``, ``actions[2].hand``) and whose message echoes the value only through
:func:`~rng_service.core.errors.quote`.

>>> doc = JsonObject(parse_json(b'{"shoe": {"start": 3, "id": "s"}}'))
>>> doc.get_obj("shoe").get_int("start")
3
>>> doc.get_obj("shoe").get_int("id")
Traceback (most recent call last):
...
rng_service.core.errors.InvalidInput: shoe.id: must be an integer, got 's'
>>> parse_json(b'{"n": ' + b'9' * 30 + b'}')
Traceback (most recent call last):
...
rng_service.core.errors.InvalidInput: not JSON: an integer has more than 20 digits
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import orjson

from rng_service.core.errors import InvalidInput, quote

_deeper: Callable[[object, int], bool] | None
try:  # the nesting test in C, built with the package (pyproject's ext-modules)
    from rng_service.core._nesting import deeper as _built_deeper
except ImportError:  # pragma: no cover - a build without a compiler counts the brackets
    _deeper = None
else:
    _deeper = _built_deeper

_sorted_form: Callable[[bytes, int], bool | tuple[int, int]] | None
_sorted_members: Callable[[bytes, int, tuple[bytes, ...], tuple[str, ...], int, bytes],
                          bool | tuple[int, int, dict[str, Any] | None, Any]] | None
try:  # the sorted-encoding test from the bytes in C, built with the package
    from rng_service.core._sorted_json import sorted_form as _built_sorted_form
    from rng_service.core._sorted_json import sorted_members as _built_sorted_members
except ImportError:  # pragma: no cover - a build without a compiler encodes and compares
    _sorted_form = _sorted_members = None
else:
    _sorted_form = _built_sorted_form
    _sorted_members = _built_sorted_members

__all__ = ["DEFAULT_LIMITS", "JsonLimits", "JsonObject", "parse_json", "parse_json_sorted",
           "parse_json_spanned", "sorted_members"]


@dataclass(frozen=True)
class JsonLimits:
    """The bounds :func:`parse_json` holds a document to."""

    max_bytes: int = 1 << 20
    max_depth: int | None = 64
    max_int_digits: int = 20
    max_float_chars: int = 32
    max_string_chars: int = 1 << 16


DEFAULT_LIMITS: Final = JsonLimits()

#: an escape that may parse to a surrogate; without one in the text, no string can hold one
_SURROGATE_ESCAPES: Final = ("\\ud", "\\uD")


def _refuse(message: str) -> NoReturn:
    raise InvalidInput(None, f"not JSON: {message}")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            _refuse(f"duplicate member {quote(key)}")
        result[key] = value
    return result


def _reject_constant(name: str) -> NoReturn:
    _refuse(f"non-JSON number {name}")


def _float_parser(limits: JsonLimits) -> Callable[[str], float]:
    def parse_float(text: str) -> float:
        if len(text) > limits.max_float_chars:
            _refuse(f"a number has more than {limits.max_float_chars} characters")
        return float(text)
    return parse_float


def _decode_text(data: bytes | str, limits: JsonLimits) -> str:
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > limits.max_bytes:
        _refuse(f"{size} bytes, more than {limits.max_bytes}")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(None, "not UTF-8") from None


def parse_json(data: bytes | str, limits: JsonLimits = DEFAULT_LIMITS) -> Any:
    """The JSON value of ``data`` within ``limits`` (module docstring); InvalidInput if not.

    The checks cost little on ordinary input: integers and nesting are checked in one walk over
    the containers after the parse (Python itself refuses more than 4300 digits, in linear time),
    and strings are walked only if one could be too long or hold a surrogate. Bytes that are
    exactly orjson's sorted encoding of what they hold (a signed envelope, a log line) take the
    fast path, :func:`_parse_canonical`; everything else, and every refusal, the path below.
    """
    if type(data) is bytes and len(data) <= limits.max_bytes:
        value = _parse_canonical(data, limits)[0]
        if value is not _NOT_CANONICAL:
            return value
    return _parse_strict(data, limits)


def parse_json_sorted(data: bytes | str, limits: JsonLimits = DEFAULT_LIMITS) -> tuple[Any, bool]:
    """:func:`parse_json`'s value, and True if ``data`` (less a trailing newline) is exactly
    ``orjson.dumps(value, option=OPT_SORT_KEYS)``: a reader that needs the sorted encoding of a
    part of the value (a signed payload's) can then slice it from ``data`` rather than encode
    it again."""
    value, is_sorted, _ = parse_json_spanned(data, limits)
    return value, is_sorted


def parse_json_spanned(data: bytes | str, limits: JsonLimits = DEFAULT_LIMITS
                       ) -> tuple[Any, bool, tuple[int, int] | None]:
    """:func:`parse_json_sorted`'s value and answer, and, if the bytes' sorted form was told
    from the bytes themselves (``_sorted_json.sorted_form``) and the value is an object of
    three members, where the second member's value lies in ``data`` (``data[start:end]``);
    else None, which says nothing (the caller finds it itself if it needs it)."""
    if type(data) is bytes and len(data) <= limits.max_bytes:
        value, middle = _parse_canonical(data, limits)
        if value is not _NOT_CANONICAL:
            return value, True, middle
    return _parse_strict(data, limits), False, None


def sorted_members(data: bytes, names: tuple[bytes, ...], keys: tuple[str, ...],
                   chosen: tuple[int, bytes], limits: JsonLimits = DEFAULT_LIMITS
                   ) -> bool | tuple[int, int, dict[str, Any] | None, Any]:
    """Whether :func:`parse_json_spanned` would find ``data`` exactly the sorted encoding of its
    value from the bytes alone (the same test in C, ``_sorted_json.sorted_members``, under the
    same limits), without parsing it: False if not known so (the parse decides, as it always
    does); True if so; and if so and the value is an object of three members, where the middle
    one's value lies (``start``, ``end``), and if that value is an object whose member
    ``names[chosen[0]]`` is spelled exactly ``chosen[1]`` (its schema, say), its members
    ``names`` (spelled as the bytes spell them, strictly increasing) that it has, each under
    its key in ``keys``, and the third member's value, each as the parse would give it (else
    None and None): a reader that needs a few members of a large value (the audit's first
    pass, of a round it parses in full later) builds them alone."""
    depth = limits.max_depth
    if (_sorted_members is None or depth is None or not 1 <= depth <= _SORTED_FORM_DEPTH
            or limits.max_int_digits < _ORJSON_INT_DIGITS
            or len(data) > min(limits.max_bytes, limits.max_string_chars)):
        return False
    return _sorted_members(data, depth, names, keys, *chosen)


def _parse_strict(data: bytes | str, limits: JsonLimits) -> Any:
    """The strict parse of :func:`parse_json`, for what its fast path leaves (every refusal)."""
    text = _decode_text(data, limits)
    try:
        value = json.loads(text, object_pairs_hook=_unique_members,
                           parse_constant=_reject_constant, parse_float=_float_parser(limits))
    except json.JSONDecodeError as exc:
        _refuse(f"{exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        _refuse("nested too deeply")
    except ValueError:  # an integer of more than 4300 digits, which Python will not convert
        _refuse(f"an integer has more than {limits.max_int_digits} digits")
    surrogates = any(e in text for e in _SURROGATE_ESCAPES)
    if surrogates or len(text) > limits.max_string_chars:
        _check_tree(value, limits, surrogates)
    _check_containers(value, limits)
    return value


#: what :func:`_parse_canonical` returns for bytes it leaves to the strict parse
_NOT_CANONICAL: Final = object()
_SORTED: Final = orjson.OPT_SORT_KEYS
#: every byte but the brackets that open a container: deleted, the brackets are counted in one
#: pass over the bytes (two ``count`` calls cost half as much again)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"{[")
#: the most digits of an integer orjson reads as one (within 64 bits; a longer one is a float)
_ORJSON_INT_DIGITS: Final = 20
#: the deepest nesting limit under which the sorted form is told from the bytes in C: orjson
#: encodes no value nested 255 levels deep, so past some such depth the encoding test refuses
#: what the bytes' own test would accept (the default limit is 64)
_SORTED_FORM_DEPTH: Final = 128


def _parse_canonical(data: bytes, limits: JsonLimits) -> tuple[Any, tuple[int, int] | None]:
    """The value of ``data`` if its bytes are exactly ``orjson.dumps(value, sorted keys)`` (a
    trailing newline allowed) and it is within every limit; else :data:`_NOT_CANONICAL`, and the
    strict parse decides, with its own messages.

    It accepts nothing that parse refuses nor yields a different value: bytes equal to the
    value's own encoding hold no duplicate member (the encoding has each member once), no NaN,
    no number orjson would spell otherwise (an integer past 64 bits parses to a float, which
    encodes differently), no byte-order mark and no whitespace; a string is never longer than the
    bytes. No string holds a lone surrogate: orjson refuses its escape when it parses and the
    character when it encodes, and a pair of escapes is encoded as its one character, so never
    as the bytes it was read from (each goes to the strict parse, which names the surrogate). What
    remains is checked without a walk in Python (a third of the time): an integer orjson read
    has at most 20 digits, and the nesting by a walk of the containers in C
    (:func:`_too_deep`). Any limit the value
    fails goes to the strict parse, so the refusal reads as it always has
    (tests/core/test_json_input.py compares both paths).

    Whether the bytes are that encoding, and nest within the limit, is first asked of the bytes
    themselves, in C (``_sorted_json.sorted_form``: one pass, nothing built; the encoding made
    again and compared cost 26,000 instructions of a round record's 93,000): its True is never
    wrong, and what it leaves undecided (an escape, a float, a long integer, bytes not so laid
    out) is decided by encoding and comparing, as before (tests/core/test_sorted_json.py holds
    the two to each other). With the value, where the middle member's value of a three-member
    object lies if that test found it (:func:`parse_json_spanned`)."""
    depth = limits.max_depth
    if len(data) > limits.max_string_chars or (depth is not None and depth < 1):
        return _NOT_CANONICAL, None
    try:
        if (_sorted_form is not None and depth is not None and depth <= _SORTED_FORM_DEPTH
                and limits.max_int_digits >= _ORJSON_INT_DIGITS):
            known = _sorted_form(data, depth)
            if known is not False:
                return orjson.loads(data), None if known is True else known
        value = orjson.loads(data)
        body = data[:-1] if data.endswith(b"\n") else data
        if orjson.dumps(value, option=_SORTED) != body:
            return _NOT_CANONICAL, None
        if limits.max_int_digits < _ORJSON_INT_DIGITS:
            _check_containers(value, limits)
        elif depth is not None and _too_deep(data, value, depth):
            return _NOT_CANONICAL, None
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, InvalidInput, RecursionError):
        return _NOT_CANONICAL, None
    return value, None


def _too_deep(data: bytes, value: Any, depth: int) -> bool:
    """True if ``value``, parsed from ``data``, holds a container inside ``depth`` or more
    containers (the strict parse's refusal, :func:`_check_containers`): asked of every value
    the fast path reads, so in C (``_nesting.deeper``: the containers walked, a few dozen in a
    round record). Without the C build, a quick test that may only say True more often (the
    strict parse then decides): an element nested ``depth`` levels down is indented by
    2 * depth spaces in the value's indented encoding (a raw newline is never in a string's
    encoding, only between members), and it is inside ``depth`` containers,
    each opened by a bracket: with fewer brackets in the bytes (in strings too, which only
    counts more), none is that deep, and the indented encoding is not made."""
    if _deeper is not None:
        return _deeper(value, depth)
    return (type(value) in (dict, list)
            and len(data.translate(None, _NOT_BRACKETS)) >= depth
            and b"\n" + b"  " * depth in orjson.dumps(value, option=orjson.OPT_INDENT_2))


def _check_string(text: str, limits: JsonLimits, surrogates: bool) -> None:
    if len(text) > limits.max_string_chars:
        _refuse(f"a string has {len(text)} characters, more than {limits.max_string_chars}")
    if surrogates:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            _refuse(f"a string holds a lone surrogate (not Unicode text): {quote(text)}")


def _check_tree(value: Any, limits: JsonLimits, surrogates: bool) -> None:
    """Depth and strings of a parsed value, iteratively (a deep value cannot overflow the stack)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            _check_string(item, limits, surrogates)
        elif kind is dict or kind is list:
            if limits.max_depth is not None and depth >= limits.max_depth:
                _refuse(f"nested more than {limits.max_depth} levels deep")
            if kind is dict:
                for key in item:
                    _check_string(key, limits, surrogates)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)


def _check_int(value: int, bound: int, limits: JsonLimits) -> None:
    if not -bound < value < bound:
        _refuse(f"an integer has more than {limits.max_int_digits} digits")


def _check_containers(value: Any, limits: JsonLimits) -> None:
    """The nesting and the integers of a parsed value, iteratively, over its containers."""
    bound = 10**limits.max_int_digits
    if type(value) is int:
        _check_int(value, bound, limits)
    stack: list[tuple[Any, int]] = [(value, 0)] if type(value) in (dict, list) else []
    max_depth = limits.max_depth
    while stack:
        item, depth = stack.pop()
        if max_depth is not None and depth >= max_depth:
            _refuse(f"nested more than {max_depth} levels deep")
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is int:
                if not -bound < child < bound:
                    _check_int(child, bound, limits)
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))


# --- typed fields ----------------------------------------------------------------------------


_MISSING: Final = object()
_TYPE_NAMES: Final[dict[type, str]] = {
    int: "an integer", str: "a string", bool: "a boolean", list: "a list", dict: "an object",
}

#: how a reader reports a bad field: (field path, message) -> the exception to raise
ErrorFactory = Callable[[str, str], Exception]


class JsonObject:
    """A JSON object whose members are read with their type checked and their path named.

    ``error`` makes the exception (default :class:`InvalidInput`); a caller whose bad input means
    something else (the audit: a record that fails) passes its own.
    """

    error: ErrorFactory = InvalidInput

    def __init__(self, data: object, path: str = "") -> None:
        self.path = path
        if type(data) is not dict:
            self._bad(path, f"must be an object, got {quote(data)}")
        self.data: dict[str, Any] = data

    def _bad(self, field: str, message: str) -> NoReturn:
        raise type(self).error(field, message)

    def at(self, name: str) -> str:
        """The path of member ``name``."""
        return f"{self.path}.{name}" if self.path else name

    def has(self, name: str) -> bool:
        """True if the object has member ``name`` (null counts as present)."""
        return name in self.data

    def get(self, name: str, default: Any = _MISSING) -> Any:
        """The member's value, of any type; missing: ``default`` if given, else an error."""
        if name in self.data:
            return self.data[name]
        if default is _MISSING:
            self._bad(self.at(name), "is missing")
        return default

    def typed(self, name: str, kind: type, default: Any = _MISSING) -> Any:
        """The member, which must be exactly of ``kind`` (a bool is not an int); ``default`` if
        it is absent and a default is given."""
        value = self.data.get(name, _MISSING)
        if type(value) is kind:  # the common case first, in one lookup: a record reads dozens
            return value
        return self._untyped(name, kind, value, default)

    def _untyped(self, name: str, kind: type, value: Any, default: Any) -> Any:
        """:meth:`typed` of a member that is absent, or not of ``kind``."""
        if value is _MISSING:
            if default is not _MISSING:
                return default
            self._bad(self.at(name), "is missing")
        self._bad(self.at(name), f"must be {_TYPE_NAMES.get(kind, kind.__name__)}, "
                  f"got {quote(value)}")

    def get_int(self, name: str, default: Any = _MISSING) -> int:
        """An integer member (a bool is not one); see :meth:`typed`."""
        value = self.data.get(name, _MISSING)  # typed's common case, inline
        if type(value) is int:
            return value
        result: int = self._untyped(name, int, value, default)
        return result

    def get_str(self, name: str, default: Any = _MISSING) -> str:
        """A string member; see :meth:`typed`."""
        value = self.data.get(name, _MISSING)  # typed's common case, inline
        if type(value) is str:
            return value
        result: str = self._untyped(name, str, value, default)
        return result

    def get_bool(self, name: str, default: Any = _MISSING) -> bool:
        """A boolean member; see :meth:`typed`."""
        value: bool = self.typed(name, bool, default)
        return value

    def get_list(self, name: str, default: Any = _MISSING) -> list[Any]:
        """An array member; see :meth:`typed`."""
        value: list[Any] = self.typed(name, list, default)
        return value

    def get_opt_str(self, name: str) -> str | None:
        """A string or null (the member must be present)."""
        return None if self.get(name) is None else self.get_str(name)

    def get_hex(self, name: str) -> bytes:
        """A string member of hexadecimal digits, as bytes."""
        try:
            return bytes.fromhex(self.get_str(name))
        except ValueError:
            self._bad(self.at(name), "is not hexadecimal")

    def get_obj(self, name: str, default: Any = _MISSING) -> JsonObject:
        """The member as a reader of the same class, its path under this one's."""
        return type(self)(self.get(name, default), self.at(name))

    def get_int_map(self, name: str) -> dict[str, int]:
        """An object whose every member is an integer."""
        doc = self.get_obj(name)
        return {key: doc.get_int(key) for key in doc.data}
