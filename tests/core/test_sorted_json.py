"""The sorted-form test of JSON bytes in C (rng_service/core/_sorted_json.c) held to the one it
answers for: orjson's sorted encoding of the parsed value made again and compared, with the
nesting walk (json_input's reference). Its True must never be wrong; its False only sends the
bytes to that test. Where it gives the middle member's span, that span must hold the member's
sorted encoding (an envelope's payload: signing.payload_span's answer). ``sorted_members``, the
same scan that also builds a few members of that middle object, answers as ``sorted_form`` and
builds them as orjson's parse of the whole has them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rng_service.core import json_input
from rng_service.core._sorted_json import sorted_form, sorted_members
from rng_service.core.errors import InvalidInput
from rng_service.core.json_input import DEFAULT_LIMITS, JsonLimits, parse_json_spanned

Judge = Callable[[bytes, int], "bool | tuple[int, int]"]


def reference(data: bytes, depth: int) -> bool:
    """What sorted_form answers for: orjson parses the bytes, its sorted encoding of the value is
    the bytes (less one trailing newline), and no container lies inside ``depth`` others."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    body = data[:-1] if data.endswith(b"\n") else data
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return False
    return encoded == body and not _deeper(value, 0, depth)


def _deeper(value: Any, level: int, depth: int) -> bool:
    if type(value) not in (dict, list):
        return False
    if level >= depth:
        return True
    items = value.values() if type(value) is dict else value
    return any(_deeper(item, level + 1, depth) for item in items)


def held(judge: Judge, data: bytes, depth: int = 64) -> bool:
    """``judge``'s answer on ``data`` is sound (True only where the reference says so; a span
    only where the value has three members, the middle one's encoding there). Returns whether
    it vouched for the bytes."""
    answer = judge(data, depth)
    if answer is False:
        return False
    assert reference(data, depth), data
    value = orjson.loads(data)
    if answer is not True:
        start, end = answer
        assert type(value) is dict and len(value) == 3
        middle = list(value.values())[1]
        assert data[start:end] == orjson.dumps(middle, option=orjson.OPT_SORT_KEYS)
    else:
        assert not (type(value) is dict and len(value) == 3)
    return True


#: JSON values of the canonical domain's shape: text with escapes and astral characters, ints
#: to 64 bits and past, floats, nesting
texts = st.text(st.characters(codec="utf-8"), max_size=12)  # orjson encodes no lone surrogate
plain_texts = st.text(st.characters(codec="utf-8", min_codepoint=0x20, exclude_characters='"\\'),
                      max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), texts,
                    st.floats(allow_nan=False, allow_infinity=False))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(texts, inner, max_size=5)), max_leaves=30)
plain_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**18) + 1, 10**18 - 1),
                          plain_texts)
plain_values = st.recursive(plain_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(plain_texts, inner, max_size=5)),
    max_leaves=30)


def sorted_bytes(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@settings(max_examples=400, deadline=None)
@given(values, st.integers(1, 8), st.booleans())
def test_never_vouches_for_what_the_encoding_test_refuses(value: object, depth: int,
                                                         newline: bool) -> None:
    held(sorted_form, sorted_bytes(value) + (b"\n" if newline else b""), depth)


@settings(max_examples=400, deadline=None)
@given(plain_values, st.booleans())
def test_vouches_for_plain_values_in_their_sorted_encoding(value: object, newline: bool) -> None:
    """No escape, no float, no integer past 18 digits: the bytes' own test decides them, the
    span of a three-member object's middle member given."""
    assert held(sorted_form, sorted_bytes(value) + (b"\n" if newline else b""))


@settings(max_examples=300, deadline=None)
@given(values, st.data())
def test_mutated_bytes(value: object, data: st.DataObject) -> None:
    """Each byte changed, deleted or doubled, and bytes inserted: never vouched for wrongly."""
    encoded = sorted_bytes({"format": "f", "payload": value, "signature": [value]})
    at = data.draw(st.integers(0, len(encoded) - 1))
    byte = data.draw(st.sampled_from(list(b'{}[]",:-0123456789 \\\n\x00\x1f\x7f\x80\xc0\xed'
                                          b"\xf4\xf5\xff abtnul.eE")))
    for mutated in (encoded[:at] + bytes([byte]) + encoded[at + 1:],
                    encoded[:at] + encoded[at + 1:],
                    encoded[:at] + encoded[at:at + 1] * 2 + encoded[at + 1:],
                    encoded[:at] + bytes([byte]) + encoded[at:]):
        held(sorted_form, mutated, data.draw(st.integers(1, 6)))


@pytest.mark.parametrize("data", [
    b'{"a":1,"a":2}', b'{"b":1,"a":2}', b'{"ab":1,"a":2}', b'{"a":1,"a":1}', b'{"a":{},"a":[]}',
    b'{"\xc3\xa9":1,"z":2}', b"-0", b"00", b"01", b"-01", b"1.0", b"1e5", b"1E5", b"-",
    b"9" * 19, b"-" + b"9" * 19, b"18446744073709551616", b'"\\u0041"', b'"\\/"',
    b'"\\ud83d\\ude00"', b'"\\ud800"', b'"\xed\xa0\x80"', b'"\xc0\xaf"', b'"\xe0\x80\xaf"',
    b'"\xf0\x80\x80\xaf"', b'"\xf4\x90\x80\x80"', b'"\xc3"', b'"\xe2\x82"', b'"\x00"', b'"\x1f"',
    b'"\x7f"', b'"a', b"[1,]", b"[,1]", b"{,}", b'{"a"}', b'{"a":}', b"[1 ]", b" [1]", b"[1]\n\n",
    b"[1]\r\n", b"\n", b"", b"tru", b"nul", b"falsey", b"[true,false,null]", b"\xef\xbb\xbf{}",
    b"[" * 64 + b"]" * 64, b"[" * 65 + b"]" * 65, b"[" * 200 + b"]" * 200,
    b'{"a":1,"b":2,"c":3}', b'{"a":1,"b":{"x":[1,2]},"c":3}\n', b'{"a":1,"b":2}', b'[1,2,3]',
    b'{"a":1,"b":2,"c":3,"d":4}', b'{"format":"x","payload":{},"signature":{}}',
])
def test_adversarial_bytes(data: bytes) -> None:
    held(sorted_form, data)
    held(sorted_form, data, 1)


def test_what_it_decides() -> None:
    """Vouched for, and left to the encoding test (which may still say yes)."""
    assert sorted_form(b'{"a":1,"b":[1,2,{}],"c":"\xc3\xa9"}', 3) == (11, 19)
    assert sorted_form(b'{"b":[1,2,{}],"c":"\xc3\xa9"}', 3) is True
    assert sorted_form(b'{"b":[1,2,{}],"c":"\xc3\xa9"}', 2) is False  # {} at level 2
    assert sorted_form(b'{"a":1,"b":[2],"c":3}\n', 64) == (11, 14)
    assert sorted_form(b'{"a":"\\n"}', 64) is False and reference(b'{"a":"\\n"}', 64)
    assert sorted_form(b"[1.5]", 64) is False and reference(b"[1.5]", 64)
    assert sorted_form(b"9" * 18, 64) is True and sorted_form(b"9" * 19, 64) is False


def test_it_vouches_for_no_nesting_orjson_cannot_encode() -> None:
    """orjson encodes no value nested 255 levels deep, so no bytes nested so deep are its
    sorted encoding: a depth that would let them through is refused, not answered True (the
    reading asks with 128 at most, json_input._SORTED_FORM_DEPTH)."""
    deepest = b"[" * 254 + b"]" * 254
    assert sorted_form(deepest, 254) is True and reference(deepest, 254)
    too_deep = b"[" * 255 + b"]" * 255
    assert not reference(too_deep, 1024)
    for depth in (255, 256, 1024):
        with pytest.raises(ValueError, match=r"^sorted_form: depth must be 0\.\.254$"):
            sorted_form(too_deep, depth)


def test_a_judge_that_vouches_wrongly_is_caught() -> None:
    """The oracle the tests above hold the C test to: a judge that says yes to unsorted
    members, a duplicate, -0 or too deep a nesting fails it."""
    def always(data: bytes, depth: int) -> bool:
        return True
    for data in (b'{"b":1,"a":2}', b'{"a":1,"a":2}', b"-0", b"[[1]]"):
        with pytest.raises(AssertionError):
            held(always, data, 1)


@settings(max_examples=200, deadline=None)
@given(values, st.booleans())
def test_the_fast_path_reads_as_it_did(value: object, newline: bool) -> None:
    """parse_json_spanned with the C test and without it (encode and compare): the same value,
    the same answer, and a span only with the C test."""
    data = sorted_bytes(value) + (b"\n" if newline else b"")
    limits = JsonLimits(max_depth=4)
    for chosen in (limits, DEFAULT_LIMITS):
        try:
            with_c = parse_json_spanned(data, chosen)
        except InvalidInput as exc:  # refused alike, with the same message
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(json_input, "_sorted_form", None)
                with pytest.raises(InvalidInput, match=f"^{re.escape(str(exc))}$"):
                    parse_json_spanned(data, chosen)
            continue
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(json_input, "_sorted_form", None)
            without = parse_json_spanned(data, chosen)
        assert with_c[:2] == without[:2] and without[2] is None
        assert orjson.dumps(with_c[0]) == orjson.dumps(without[0])


@example(b'{"a":1}')
@given(st.binary(max_size=40))
def test_random_bytes(data: bytes) -> None:
    held(sorted_form, data)
    held(sorted_form, data, 1)


# --- sorted_members: sorted_form's answer, and some members of the middle object -------------


def spelled(name: str) -> bytes:
    return orjson.dumps(name)[1:-1]


def held_members(data: bytes, wanted: list[str], depth: int = 64) -> bool:
    """sorted_members answers as sorted_form does, and with a span gives exactly the members
    ``wanted`` that the middle value has, each as orjson's parse of the whole has it (its type
    too: ``true`` is not ``1``), and the third member's value, if the middle value is an object
    whose first wanted member is spelled as asked (asked as what it is, and as something
    else); else None and None. Returns whether it built any."""
    names = sorted(set(wanted), key=spelled) or [""]
    form = sorted_form(data, depth)
    value = orjson.loads(data) if form is not False else None
    middle = list(value.values())[1] if type(value) is dict and len(value) == 3 else None
    there = type(middle) is dict and names[0] in middle
    spelled_as = sorted_bytes(middle[names[0]]) if there else b"x"  # type: ignore[index]
    built = False
    for asked in (spelled_as, b"1" if spelled_as != b"1" else b"2"):
        answer = sorted_members(data, depth, tuple(map(spelled, names)), tuple(names), 0,
                                asked)
        if type(answer) is not tuple:
            assert answer is form
            continue
        start, end, members, third = answer
        assert form == (start, end)
        if not (there and asked == spelled_as):
            assert (members, third) == (None, None)
            continue
        assert type(middle) is dict and type(value) is dict
        assert sorted_bytes(third) == sorted_bytes(list(value.values())[2])
        expected = {name: middle[name] for name in names if name in middle}
        assert members is not None
        assert sorted_bytes(members) == sorted_bytes(expected), (data, names)
        built = True
    return built


def envelope_of(value: object, extra: object = 0) -> bytes:
    return sorted_bytes({"format": "f", "payload": value, "signature": extra})


@settings(max_examples=400, deadline=None)
@given(plain_values, st.lists(plain_texts, max_size=6), st.data())
def test_members_built_as_the_parse_has_them(value: object, others: list[str],
                                             data: st.DataObject) -> None:
    """Members of the payload, some of its names and others, in a sorted three-member object
    (and the value alone, and the bytes mutated: answered as sorted_form answers)."""
    names = [*others]
    if type(value) is dict and value:
        names += data.draw(st.lists(st.sampled_from(sorted(value)), max_size=4))
    encoded = envelope_of(value, value)
    held_members(encoded, names)
    held_members(encoded + b"\n", names, data.draw(st.integers(1, 6)))
    held_members(sorted_bytes(value), names)
    at = data.draw(st.integers(0, len(encoded) - 1))
    held_members(encoded[:at] + encoded[at + 1:], names)


@settings(max_examples=200, deadline=None)
@given(values, st.lists(texts, max_size=4))
def test_members_of_any_value(value: object, names: list[str]) -> None:
    held_members(envelope_of(value), names)
    held_members(envelope_of({"a": value, "b": [value]}), [*names, "a", "b"])


@pytest.mark.parametrize("data", [
    b'{"a":1,"b":{"x":true,"y":false,"z":null},"c":3}',
    b'{"a":1,"b":{"n":-123456789012345678,"o":0,"p":-1,"q":"\xc3\xa9\xf0\x9f\x98\x80"},"c":3}',
    b'{"a":{"x":1},"b":{"y":{"x":2}},"c":{"x":3}}', b'{"a":1,"b":[{"x":1}],"c":3}',
    b'{"a":1,"b":{"x":1,"x":2},"c":3}', b'{"a":1,"b":{"y":1,"x":2},"c":3}',
    b'{"a":1,"b":{"x":"\\n"},"c":3}', b'{"a":1,"b":{"x":1.5},"c":3}', b'{"a":1,"b":{},"c":3}',
    b'{"a":1,"b":{"x":[],"xy":{},"y":[1,[2]]},"c":3}', b'{"a":1,"b":{"x":1}}',
    b'{"a":1,"b":{"x":1},"c":3,"d":4}', b'{"b":{"x":1},"c":3,"d":4}',
])
def test_members_of_adversarial_bytes(data: bytes) -> None:
    for names in ([], ["x"], ["x", "xy", "y", "z"], ["n", "o", "p", "q"], ["", "x", "\U0001f600"]):
        held_members(data, names)
        held_members(data, names, 1)


def test_members_it_builds() -> None:
    data = b'{"a":1,"b":{"s":"t","x":-7,"y":[1]},"c":{"d":[true]}}'
    assert sorted_members(data, 64, (b"s", b"w", b"y"), ("s", "w", "y"), 0, b'"t"') == (
        11, 35, {"s": "t", "y": [1]}, {"d": [True]})
    assert sorted_members(data, 64, (b"s", b"w", b"y"), ("s", "w", "y"), 0, b'"u"') == (
        11, 35, None, None)
    assert sorted_members(data, 64, (b"s", b"w", b"y"), ("s", "w", "y"), 1, b"null") == (
        11, 35, None, None)  # no member w: not chosen
    assert sorted_members(b'{"a":1,"b":[1],"c":3}', 64, (b"s",), ("s",), 0, b"1") == (
        11, 14, None, None)
    assert sorted_members(b'{"b":{"s":1},"c":3}', 64, (b"s",), ("s",), 0, b"1") is True
    assert sorted_members(b'{"a":1,"b":{"s":1.5},"c":3}', 64, (b"s",), ("s",), 0,
                          b"1.5") is False


def test_members_a_wrong_builder_is_caught() -> None:
    """The oracle holds the builder to the parse: a member given as another's value, or an
    integer as a bool, fails it."""
    data = b'{"a":1,"b":{"x":1,"y":true},"c":3}'
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(globals(), "sorted_members",
                      lambda *args: (11, 27, {"x": True, "y": True}, 3))
        with pytest.raises(AssertionError):
            held_members(data, ["x", "y"])
        patch.setitem(globals(), "sorted_members",
                      lambda *args: (11, 27, {"x": 1}, 3))
        with pytest.raises(AssertionError):
            held_members(data, ["x", "y"])


@pytest.mark.parametrize(("args", "error"), [
    ((b"{}", 64, (b"b", b"a"), ("b", "a"), 0, b""), ValueError),
    ((b"{}", 64, (b"a", b"a"), ("a", "a"), 0, b""), ValueError),
    ((b"{}", 64, (b"a",), (), 0, b""), TypeError),
    ((b"{}", 64, ("a",), ("a",), 0, b""), TypeError),
    ((b"{}", 64, (b"a",), (b"a",), 0, b""), TypeError),
    ((b"{}", 64, [b"a"], ("a",), 0, b""), TypeError),
    ((b"{}", 64, (b"a",) * 17, ("a",) * 17, 0, b""), TypeError),
    ((b"{}", 64, (b"a",), ("a",), 1, b""), ValueError),
    ((b"{}", 64, (b"a",), ("a",), -1, b""), ValueError),
    ((b"{}", 64, (b"a",), ("a",), 0, ""), ValueError),
    ((b"{}", 64, (), (), 0, b""), ValueError),
    (("{}", 64, (b"a",), ("a",), 0, b""), TypeError),
    ((b"{}", -1, (b"a",), ("a",), 0, b""), ValueError),
    ((b"{}", 255, (b"a",), ("a",), 0, b""), ValueError),
    ((b"{}", 64, (b"a",), ("a",), 0), TypeError),
])
def test_members_refuses_bad_arguments(args: tuple[Any, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        sorted_members(*args)
