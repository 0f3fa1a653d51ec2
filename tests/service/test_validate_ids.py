"""The request id's check takes exactly what its pattern takes (``validate._REQUEST_ID``: 1-128
printable ASCII characters, no space), refusing the rest with the pattern's error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rng_service.core.errors import InvalidInput
from rng_service.service import validate


def _taken(value: object) -> bool:
    try:
        assert validate.request_id(value) == value
    except InvalidInput as err:
        assert err.field == "request_id"
        return False
    return True


def _pattern_takes(value: object) -> bool:
    return isinstance(value, str) and validate._REQUEST_ID.match(value) is not None


@pytest.mark.parametrize("code", range(0x300))
def test_each_character_alone_and_at_the_ends(code: int) -> None:
    for value in (chr(code), "a" + chr(code), chr(code) * 128, chr(code) * 129):
        assert _taken(value) == _pattern_takes(value), repr(value)


@given(st.text(max_size=140) | st.text(st.characters(max_codepoint=0x7F), max_size=140))
def test_any_text_as_the_pattern(value: str) -> None:
    assert _taken(value) == _pattern_takes(value)


@pytest.mark.parametrize("value", ["", None, 7, b"r-1", "\u00e9", "a\nb", "x" * 129])
def test_what_is_refused_is_refused_as_before(value: object) -> None:
    with pytest.raises(InvalidInput) as err:
        validate.request_id(value)
    with pytest.raises(InvalidInput) as before:
        validate._match(validate._REQUEST_ID, value, "request_id",
                        "1-128 printable ASCII characters")
    assert str(err.value) == str(before.value)
