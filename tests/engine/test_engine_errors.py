"""The engine's error shape and the card-code parser's refusal of look-alike text."""

from __future__ import annotations

import json

import pytest

from game_math.cards import CardError, parse_card
from game_math.errors import BetError, GameMathError, IllegalAction, RulesError, quote
from game_math.round import action_from_json


@pytest.mark.parametrize("code", [
    "Aſ",  # LATIN SMALL LETTER LONG S: upper() is "S"
    "\uff21S",  # FULLWIDTH LATIN CAPITAL LETTER A
    "\uff11\uff10S",  # fullwidth "10"
    "\u0661\u0660S",  # ARABIC-INDIC digits one, zero
    "AS\u3000",  # IDEOGRAPHIC SPACE, stripped by str.strip
    "\u2160S",  # ROMAN NUMERAL ONE
])
def test_parse_card_refuses_non_ascii_look_alikes(code: str) -> None:
    with pytest.raises(CardError, match="bad card code"):
        parse_card(code)


def test_parse_card_still_accepts_the_ascii_spellings() -> None:
    assert parse_card(" as ") == parse_card("AS") == 0
    assert parse_card("10h") == parse_card("TH")


def test_errors_carry_field_reason_and_detail() -> None:
    bet = BetError("hands[1].bet", "too small")
    assert (str(bet), bet.field, bet.detail) == ("hands[1].bet: too small", "hands[1].bet",
                                                 "too small")
    rules = RulesError("split.max_hands", "must be int")
    assert (rules.key, rules.field) == ("split.max_hands", "split.max_hands")
    assert IllegalAction("cannot split").reason == "ACTION_REFUSED"
    assert GameMathError("x", reason="R").reason == "R" and GameMathError("x").field is None
    assert isinstance(CardError("bad"), GameMathError | ValueError)


def test_quote_is_bounded_for_deep_huge_and_strange_values() -> None:
    deep = json.loads("[" * 900 + "]" * 900)
    assert quote(deep) == "[[[[...]]]]"
    assert len(quote(10**4299)) < 100 and len(quote(["x" * 10_000] * 1000)) < 100
    assert quote("\ud800") == "'\\ud800'"


def test_a_deeply_nested_action_is_refused_with_a_short_message() -> None:
    item = json.loads("[" * 900 + "]" * 900)
    with pytest.raises(ValueError, match="an action is a string or an object") as caught:
        action_from_json(item)
    assert len(str(caught.value)) < 120
