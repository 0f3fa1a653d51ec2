"""The canonical domain check in C (``rng_service/crypto/_canonical.c``) decides exactly what the
Python walk (``signing._check``, the reference) decides, on values in and out of the domain."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.crypto import signing
from rng_service.crypto._canonical import check
from rng_service.crypto.signing import MAX_DEPTH, MAX_INT, CanonicalEncodingError


class _Text(str):
    pass


class _Number(int):
    pass


class _Colour(enum.IntEnum):
    RED = 1


def _python_verdict(value: object) -> int:
    """The reference's answer in C's terms: 0, 1 (a key above U+FFFF) or -1 (refused)."""
    try:
        return int(signing._check(value, 0))
    except CanonicalEncodingError:
        return -1


def test_the_c_check_is_the_one_in_use() -> None:
    assert signing._c_check is check


_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_INT - 3, max_value=MAX_INT + 3)
    | st.integers()
    | st.text()
    | st.floats(allow_nan=True)
    | st.sampled_from([_Text("x"), _Number(1), _Colour.RED, b"bytes", {1, 2}, frozenset()])
)
_keys = st.text() | st.sampled_from(["\U0001f600", "a\U0001f600", "\uffff", ""])
_odd_keys = st.integers() | st.sampled_from([_Text("k"), None, (1, 2)])


def _values() -> st.SearchStrategy[Any]:
    return st.recursive(
        _leaves,
        lambda inner: st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(_keys, inner, max_size=5)
        | st.dictionaries(_keys | _odd_keys, inner, max_size=3),
        max_leaves=30,
    )


@settings(max_examples=1500, deadline=None)
@given(_values())
def test_c_and_python_agree(value: Any) -> None:
    assert check(value) == _python_verdict(value)


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-MAX_INT, MAX_INT) | st.text(),
                    lambda inner: st.lists(inner, max_size=5)
                    | st.dictionaries(_keys, inner, max_size=5), max_leaves=30))
def test_values_in_the_domain_pass_both(value: Any) -> None:
    assert check(value) == _python_verdict(value) >= 0


@pytest.mark.parametrize("leaf", [0, "x", None, True, [], {}, 1.5, [1]])
@pytest.mark.parametrize("levels", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
def test_the_depth_limit_is_the_same(leaf: Any, levels: int) -> None:
    value: Any = leaf
    for _ in range(levels):
        value = [value] if levels % 2 else {"k": value}
    assert check(value) == _python_verdict(value)


@pytest.mark.parametrize("number", [MAX_INT, -MAX_INT, MAX_INT + 1, -MAX_INT - 1, 2**63,
                                    -(2**63) - 1, 2**200])
def test_the_integer_bounds_are_the_same(number: int) -> None:
    assert check({"a": [number]}) == _python_verdict({"a": [number]})
    assert (check(number) == 0) == (-MAX_INT <= number <= MAX_INT)


def test_a_key_above_the_bmp_asks_for_full_jcs_anywhere_in_the_value() -> None:
    assert check({"a": [{"b": {"\U0001f600": 1}}]}) == 1
    assert check({"a": [{"b": {"\uffff": 1}}]}) == 0
    assert check({"a": "\U0001f600"}) == 0  # a value above U+FFFF sorts nothing
    assert check({"\U0001f600": 1.5}) == -1  # refused, whatever the keys
