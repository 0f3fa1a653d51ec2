"""The rebuilt record's comparison with the signed one (rng_service/audit/round_checks.py,
``_same``): given the recorded payload's signed canonical bytes, a replay is the same only if
it is equal as a value and in its JSON types, as without them; its common case in C
(``_same_value``) answers only what the Python reference (``_same_reference``) answers."""

from __future__ import annotations

import enum
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.audit import round_checks
from rng_service.audit._same_value import same_value
from rng_service.audit.round_checks import _same, _same_reference
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


# --- the comparison's common case in C (rng_service/audit/_same_value.c) ------------------------


class _Text(str):
    pass


class _Number(int):
    pass


class _Word(enum.StrEnum):
    WIN = "win"


class _Count(enum.IntEnum):
    ONE = 1


def test_the_c_walk_is_the_one_in_use() -> None:
    assert round_checks._same_value is same_value


_leaves = (
    st.none() | st.booleans() | st.integers(min_value=-(2**63) - 2, max_value=2**64 + 2)
    | st.integers() | st.text() | st.floats(allow_nan=False)
    | st.sampled_from(["\ud800", "a\udfff", "\U0001f600", "é", _Text("x"), _Number(1),
                       _Word.WIN, _Count.ONE, -0.0, 0.0, 2**63, -(2**63) - 1])
)
_keys = st.text() | st.sampled_from(["\U0001f600", "\uffff", "\ud800", "", "a"])


def _values() -> st.SearchStrategy[Any]:
    return st.recursive(
        _leaves,
        lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_keys, inner, max_size=4)
        | st.dictionaries(_keys | st.sampled_from([_Text("k"), 1]), inner, max_size=3),
        max_leaves=25,
    )


def _retyped(value: Any, data: st.DataObject) -> Any:
    """A copy of ``value`` with perhaps a node swapped for one equal in Python but of another
    type (a tuple for a list, True for 1, 1.0 for 1, a subclass, an Enum) or changed."""
    swap = data.draw(st.integers(0, 9))
    if isinstance(value, dict):
        out = {k: _retyped(v, data) for k, v in value.items()}
        if swap == 0 and out:
            key = next(iter(out))
            out[_Text(key) if isinstance(key, str) else key] = out.pop(key)
        return out
    if isinstance(value, (list, tuple)):
        out_list = [_retyped(v, data) for v in value]
        return tuple(out_list) if swap == 0 else out_list if type(value) is list else tuple(
            out_list)
    if swap == 0:
        return data.draw(st.sampled_from([
            True if value == 1 else value, float(value) if type(value) is int else value,
            _Text(value) if type(value) is str else value,
            _Word.WIN if value == "win" else _Count.ONE if value == 1 else value,
            int(value) if type(value) is bool else value, [value], None]))
    return value


@settings(max_examples=1500, deadline=None)
@given(_values().filter(lambda v: isinstance(v, dict)), st.data())
def test_the_c_walk_decides_same_only_where_the_reference_does(
        recorded: dict[str, Any], data: st.DataObject) -> None:
    """Same by the C walk implies same by the reference, and the comparison in use answers
    exactly what the reference does, with the recorded bytes or without them."""
    replay = _retyped(recorded, data)
    try:
        signed = orjson.dumps(recorded, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        signed = b""
    reference = _same_reference(recorded, replay, signed)
    if same_value(recorded, replay):
        assert reference and _same_reference(recorded, replay)
    assert _same(recorded, replay, signed) == reference
    assert _same(recorded, replay) == _same_reference(recorded, replay)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.text().filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t)),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text().filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF
                                                          for c in t)), inner, max_size=4),
    max_leaves=25)


@settings(max_examples=500, deadline=None)
@given(_json)
def test_the_c_walk_finds_a_json_value_the_same_as_its_copy(value: Any) -> None:
    """A value of JSON's types and its copy (parsed back from its encoding: no object shared)
    are found the same by the C walk itself, so the reference is not asked."""
    assert same_value(value, orjson.loads(orjson.dumps(value)))


@pytest.mark.parametrize(("recorded", "replay"), [
    ({"a": "win"}, {"a": _Word.WIN}),  # the reference finds these the same: C leaves it to it
    ({"a": 1}, {"a": _Count.ONE}),
    ({"a": [1]}, {"a": (1,)}),
    ({"a": 1}, {"a": True}),
    ({"a": 0.0}, {"a": 0.0}),
    ({"a": "\ud800"}, {"a": "\ud800"}),  # orjson cannot encode a lone surrogate
    ({"a": 2**64}, {"a": 2**64}),  # nor an integer past 64 bits
    ({"a": 1}, {_Text("a"): 1}),  # nor a key of a subclass of str
    ({_Text("a"): 1}, {"a": 1}),
    ({"a": {"b": 1}}, {"a": {"c": 1}}),
    ({"a": [1, 2]}, {"a": [1]}),
])
def test_the_c_walk_leaves_to_the_reference_what_is_not_exactly_alike(
        recorded: dict[str, Any], replay: dict[str, Any]) -> None:
    assert not same_value(recorded, replay)
    assert _same(recorded, replay) == _same_reference(recorded, replay)


def test_the_c_walk_refuses_a_nesting_deeper_than_it_looks() -> None:
    deep: Any = 1
    for _ in range(80):
        deep = [deep]
    assert not same_value(deep, orjson.loads(orjson.dumps(deep)))
    assert same_value([[1]], [[1]])


class _Meddling(str):
    """A key equal to its text whose comparison, were it run, empties the dict it is compared
    against and says so: the walk holds borrowed references into that dict."""

    calls: list[str] = []  # noqa: RUF012 (the class's own record of its calls)
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        _Meddling.calls.append(str(self))
        if _Meddling.victim is not None:
            _Meddling.victim.clear()
        return str.__eq__(self, other)

    victim: dict[str, Any] | None = None


def test_the_c_walk_runs_no_comparison_of_a_replay_key_of_a_subclass_of_str() -> None:
    """A replay key of a subclass of str whose hash is its text's is found by the dict look-up
    of the recorded key, whose comparison would run the subclass's __eq__ (Python code in the
    walk: here it frees the recorded value the walk reads next, a use after free under ASan).
    The walk sees the subclass first and leaves the pair to the reference."""
    _Meddling.calls.clear()
    recorded: dict[str, Any] = {"x": [1, 2, "a" * 50]}
    _Meddling.victim = recorded
    try:
        assert not same_value(recorded, {_Meddling("x"): [1, 2, "a" * 50]})
        assert _Meddling.calls == []
        assert not same_value({"y": 1, "x": 2}, {"y": 1, _Meddling("x"): 2})
        assert _Meddling.calls == []
    finally:
        _Meddling.victim = None
