"""The one typed JSON reader (rng_service/core/json_input.py) and the text escaping
(rng_service/core/text.py): bounded parse, typed fields named by path, one printable line."""

from __future__ import annotations

import contextlib
import doctest
import time

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.core import json_input, text, times
from rng_service.core.errors import InvalidInput
from rng_service.core.json_input import (
    DEFAULT_LIMITS,
    JsonLimits,
    JsonObject,
    parse_json,
    parse_json_sorted,
)
from rng_service.core.text import escape, token


@pytest.mark.parametrize("module", [json_input, text, times])
def test_docstring_examples_hold(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize(("data", "message"), [
    (b"\xff", "not UTF-8"),
    (b'{"a": 1, "a": 2}', "not JSON: duplicate member 'a'"),
    (b'{"a": NaN}', "not JSON: non-JSON number NaN"),
    (b'{"a": ' + b"9" * 5000 + b"}", "not JSON: an integer has more than 20 digits"),
    (b'{"a": -' + b"9" * 21 + b"}", "not JSON: an integer has more than 20 digits"),
    (b'{"a": 1' + b"0" * 40 + b'.5}', "not JSON: a number has more than 32 characters"),
    (b'{"a": "\\ud800"}', "not JSON: a string holds a lone surrogate"),
    (b'{"\\udc00": 1}', "not JSON: a string holds a lone surrogate"),
    (b"[" * 65 + b"]" * 65, "not JSON: nested more than 64 levels deep"),
    (b"[" * 100_000 + b"]" * 100_000, "not JSON: "),
    (b'{"a": "' + b"x" * 70_000 + b'"}', "not JSON: a string has 70000 characters"),
    (b"{} x", "not JSON: Extra data"),
])
def test_malformed_input_is_one_invalid_input(data: bytes, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_json(data)
    assert str(info.value).startswith(message)
    assert info.value.field is None


@pytest.mark.parametrize(("data", "message"), [
    (b'{"a":1,"a":2}', "not JSON: duplicate member 'a'"),
    (b'{"a":1,"a":1}\n', "not JSON: duplicate member 'a'"),
    (b'{"a":"\\ud800"}', "not JSON: a string holds a lone surrogate"),
    (b'{"a":' + b"9" * 21 + b"}", "not JSON: an integer has more than 20 digits"),
    (b"[" * 65 + b"]" * 65, "not JSON: nested more than 64 levels deep"),
    (b"[" * 1000 + b"]" * 1000, "not JSON: "),
    (b"\xef\xbb\xbf{}", "not JSON: Unexpected UTF-8 BOM"),
])
def test_canonical_bytes_are_refused_as_the_strict_parse_refuses(data: bytes,
                                                                 message: str) -> None:
    """Bytes laid out as orjson writes them take the fast path (_parse_canonical): whatever it
    cannot vouch for is refused by the strict parse, with its message."""
    with pytest.raises(InvalidInput) as info:
        parse_json(data)
    assert str(info.value).startswith(message)
    with pytest.raises(InvalidInput) as strict:
        parse_json(data.decode("utf-8", "surrogatepass"))  # text: always the strict parse
    assert str(strict.value) == str(info.value)


def test_an_integer_past_64_bits_stays_exact() -> None:
    """orjson reads it as a float, whose encoding differs: the strict parse reads it exactly."""
    value = parse_json(b'{"a":18446744073709551616}')
    assert value == {"a": 2**64} and type(value["a"]) is int


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**21), max_value=10**21)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES, st.sampled_from([b"", b"\n"]), st.integers(min_value=1, max_value=6))
def test_the_fast_path_gives_what_the_strict_parse_gives(value: object, tail: bytes,
                                                         depth: int) -> None:
    """The bytes orjson writes for a value (sorted, maybe a trailing newline), parsed as bytes
    (the fast path, when it can vouch for them) and as text (the strict parse): the same value,
    or the same refusal, under tight limits too."""
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS) + tail
    except TypeError:  # a lone surrogate, or an integer past 64 bits: orjson refuses it
        return
    tight = JsonLimits(max_depth=depth, max_string_chars=64)
    few_digits = JsonLimits(max_depth=depth, max_int_digits=3)
    for bounds in (DEFAULT_LIMITS, tight, few_digits, JsonLimits(max_depth=None)):
        outcomes = []
        for given_as in (data, data.decode("utf-8")):
            try:
                outcomes.append(("value", repr(parse_json(given_as, bounds))))
            except InvalidInput as exc:
                outcomes.append(("refused", str(exc)))
        assert outcomes[0] == outcomes[1]


def test_limits_are_the_callers() -> None:
    with pytest.raises(InvalidInput, match="2000 bytes, more than 1000"):
        parse_json(b'"' + b"x" * 1998 + b'"', JsonLimits(max_bytes=1000))
    deep = "[" * 500 + "]" * 500
    assert parse_json(deep, JsonLimits(max_depth=None)) == parse_json(deep,
                                                                      JsonLimits(max_depth=600))
    assert parse_json('"\\ud83d\\ude00"') == "\U0001f600"  # a pair of escapes is one character


def test_typed_fields_name_their_path() -> None:
    doc = JsonObject(parse_json(b'{"a": {"b": [1], "n": true, "h": "zz", "m": {"x": "1"}}}'))
    a = doc.get_obj("a")
    assert a.get_list("b") == [1] and a.at("b") == "a.b"
    cases = [(lambda: a.get_int("n"), "a.n: must be an integer, got True"),
             (lambda: a.get_str("missing"), "a.missing: is missing"),
             (lambda: a.get_hex("h"), "a.h: is not hexadecimal"),
             (lambda: a.get_int_map("m"), "a.m.x: must be an integer, got '1'"),
             (lambda: a.get_obj("b"), "a.b: must be an object, got [1]")]
    for call, message in cases:
        with pytest.raises(InvalidInput) as info:
            call()
        assert str(info.value) == message
    assert a.get_int("absent", None) is None and a.get_bool("n") is True


def test_a_reader_raises_its_callers_error() -> None:
    class Failed(Exception):
        def __init__(self, field: str, message: str) -> None:
            super().__init__(f"{field} {message}")

    class Strict(JsonObject):
        error = Failed

    with pytest.raises(Failed, match=r"x\.y must be a string"):
        Strict({"x": {"y": 1}}).get_obj("x").get_str("y")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8",
                                                                               "surrogatepass")))
def test_any_bytes_parse_or_fail_as_invalid_input(data: bytes) -> None:
    with contextlib.suppress(InvalidInput):
        parse_json(data)


def test_huge_numbers_are_refused_fast() -> None:
    # this process's CPU time, not the wall clock: a loaded machine stretches the one, not the
    # other (a quadratic conversion takes seconds of CPU, these take milliseconds)
    started = time.process_time()
    for data in (b"1e999999999", b"[" + b"9" * 4000 + b"]", b'"' + b"1" * 60_000 + b'"'):
        with contextlib.suppress(InvalidInput):
            parse_json(data)
    assert time.process_time() - started < 1


@pytest.mark.parametrize(("raw", "shown"), [
    ("plain.json", "plain.json"),
    ("x\naudit PASS", '"x\\naudit PASS"'),
    ("\u202egnp.json", '"\\u202egnp.json"'),
    ("a\ud800", '"a\\ud800"'),
    ('q"b\\', '"q\\"b\\\\"'),
    ("\x1b[2J", '"\\x1b[2J"'),
])
def test_token_is_one_printable_line(raw: str, shown: str) -> None:
    assert token(raw) == shown
    assert token(raw).isprintable()


@given(st.text())
def test_escape_is_always_printable(raw: str) -> None:
    assert escape(raw).isprintable() and token(raw).isprintable()
    token(raw).encode("utf-8")


def test_a_typed_field_takes_its_default_only_when_absent() -> None:
    """The typed getters' one-lookup path: a member present with another type (null included)
    is refused, never replaced by the default; a bool is not an integer, an integer not a
    string."""
    doc = JsonObject({"n": None, "b": True, "i": 7, "s": "x"})
    assert doc.get_int("absent", 3) == 3 and doc.get_str("absent", "d") == "d"
    assert doc.typed("absent", list, None) is None
    cases = [(lambda: doc.get_int("n", 3), "n: must be an integer, got None"),
             (lambda: doc.get_str("n", "d"), "n: must be a string, got None"),
             (lambda: doc.get_int("b"), "b: must be an integer, got True"),
             (lambda: doc.get_str("i"), "i: must be a string, got 7"),
             (lambda: doc.get_int("s", 0), "s: must be an integer, got 'x'"),
             (lambda: doc.typed("i", list), "i: must be a list, got 7"),
             (lambda: doc.get_int("absent"), "absent: is missing"),
             (lambda: doc.get_str("absent"), "absent: is missing")]
    for call, message in cases:
        with pytest.raises(InvalidInput) as info:
            call()
        assert str(info.value) == message


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_the_depth_limit_holds_whatever_the_brackets_in_strings(depth: int) -> None:
    """The fast path skips its depth test when the bytes hold fewer brackets than the limit:
    a value nested past the limit is refused as the strict parse refuses it, and brackets in
    strings (counted, though they nest nothing) change no verdict."""
    limits = JsonLimits(max_depth=depth)
    too_deep = {"a": "[{"}
    for _ in range(depth):
        too_deep = {"a": too_deep}
    fits: object = "x"
    for _ in range(depth):
        fits = {"a": fits, "s": "[[{{"}
    for value, refused in ((too_deep, True), (fits, False)):
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        outcomes = []
        for given_as in (data, data.decode("utf-8")):
            try:
                outcomes.append(("value", parse_json(given_as, limits)))
            except InvalidInput as exc:
                outcomes.append(("refused", str(exc)))
        assert outcomes[0] == outcomes[1]
        assert (outcomes[0][0] == "refused") is refused


def test_sorted_bytes_are_told_apart() -> None:
    # orjson's own sorted bytes are the fast path's (a reader may slice them); a surrogate
    # escape never is: a pair is encoded as its character, and a lone one is refused, named
    assert parse_json_sorted(b'{"a":[1,"x"],"b":null}\n') == ({"a": [1, "x"], "b": None}, True)
    assert parse_json_sorted(b'{"b":1,"a":2}') == ({"b": 1, "a": 2}, False)
    assert parse_json_sorted(b'{"a":"\\ud83d\\ude00"}') == ({"a": "\U0001f600"}, False)
    assert parse_json_sorted(b'{"a":"\\ud83d\\ude00"}'.decode()) == ({"a": "\U0001f600"}, False)
    for lone in (b'{"a":"\\ud800"}', b'{"\\uDC00":1}', b'["\\ud800\\ud800"]'):
        with pytest.raises(InvalidInput, match="lone surrogate"):
            parse_json_sorted(lone)


_CONTAINERS = st.recursive(
    st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.text(alphabet="[]{}\"\\ a", max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=25)


def _refused_as_too_deep(value: object, depth: int) -> bool:
    """The strict parse's verdict on the nesting alone (its container walk, in Python)."""
    try:
        json_input._check_containers(value, JsonLimits(max_depth=depth, max_int_digits=400))
    except InvalidInput as exc:
        assert "levels deep" in str(exc)
        return True
    return False


@settings(max_examples=400, deadline=None)
@given(_CONTAINERS, st.integers(min_value=0, max_value=7))
def test_the_nesting_test_in_c_is_the_strict_walks(value: object, depth: int) -> None:
    """The fast path's nesting test (in C, ``_nesting.deeper``) says True exactly when the
    strict parse's walk refuses the value as nested too deeply; the test without the C build
    (brackets counted, the value encoded indented) never says False when it does."""
    assert json_input._deeper is not None, "the package is built with its C extensions"
    refused = _refused_as_too_deep(value, depth)
    assert json_input._deeper(value, depth) is refused
    data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    if depth >= 1 and refused:
        saved, json_input._deeper = json_input._deeper, None
        try:
            assert json_input._too_deep(data, value, depth)
        finally:
            json_input._deeper = saved


def test_the_nesting_test_at_its_edges() -> None:
    deeper = json_input._deeper
    assert deeper is not None
    assert deeper({}, 0) and deeper([], 0) and not deeper({}, 1) and not deeper("[[", 0)
    assert deeper([[]], 1) and not deeper([[]], 2) and not deeper([[1, "x", None]], 2)
    assert deeper({"a": 1, "b": [{"c": []}]}, 3) and not deeper({"a": 1, "b": [{"c": []}]}, 4)
    # only exact dicts and lists are containers, as in the strict walk (a parse makes no other)
    assert not deeper([(1, [2])], 2) and not deeper([(), ()], 2)
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(RecursionError):  # past the interpreter's limit: the strict parse decides
        deeper(nested, 10**9)
    assert deeper(nested, 64)  # stops at the depth asked


@pytest.mark.parametrize("built", [True, False])
def test_a_wide_record_within_the_depth_takes_the_fast_path(built: bool,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """More brackets than the depth limit, nested less deep: the fast path vouches for the
    bytes (a reader may slice them), with the C test or without it; one level more is
    refused as the strict parse refuses it."""
    if not built:  # neither C test: the bytes' sorted form is told by encoding and comparing
        monkeypatch.setattr(json_input, "_deeper", None)
        monkeypatch.setattr(json_input, "_sorted_form", None)
    limits = JsonLimits(max_depth=4)
    wide: object = [{"a": [i]} for i in range(40)]  # 121 brackets, three levels
    for fits in (wide, [wide]):
        data = orjson.dumps(fits, option=orjson.OPT_SORT_KEYS)
        # the C test is exact; the one without it also leaves to the strict parse a value
        # with a scalar inside as many containers as the limit ([wide]'s numbers)
        assert parse_json_sorted(data, limits) == (fits, built or fits is wide)
    with pytest.raises(InvalidInput, match="nested more than 4 levels deep"):
        parse_json_sorted(orjson.dumps([[wide]], option=orjson.OPT_SORT_KEYS), limits)
