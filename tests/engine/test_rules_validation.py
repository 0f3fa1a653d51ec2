"""Rules files that could load but not play are refused at load time, naming the key."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from game_math.cards import parse_cards
from game_math.errors import BetError, RulesError
from game_math.games import DOUBLE_DECK, MULTI_HAND, SNAP
from game_math.round import HandBet, Round
from game_math.rules import rules_from_dict


def _edit(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    node[last] = value
    return out


@pytest.mark.parametrize(("doc", "path", "value", "key"), [
    (SNAP, "side_bets.snap.scope", "hand", "side_bets.snap.scope"),
    (SNAP, "hands.counts", [1, 2, 3], "side_bets.snap.scope"),
    (MULTI_HAND, "side_bets.perfect_pairs.scope", "round", "side_bets.perfect_pairs.scope"),
    (DOUBLE_DECK, "insurance.pays", "3:2", "insurance.pays"),
])
def test_unplayable_combinations_are_refused_naming_the_key(
    doc: dict[str, Any], path: str, value: Any, key: str
) -> None:
    with pytest.raises(RulesError) as err:
        rules_from_dict(_edit(doc, path, value))
    assert err.value.key == key


def test_a_fractional_side_bet_payout_makes_stakes_multiples_of_its_denominator() -> None:
    doc = _edit(MULTI_HAND, "side_bets.perfect_pairs.paytable",
                {"perfect_pair": "1:3", "coloured_pair": "12:1", "mixed_pair": "6:1"})
    rules = rules_from_dict(doc)
    pair = parse_cards(["QH", "9C", "QH", "TC"])  # a perfect pair of queens of hearts
    with pytest.raises(BetError, match="multiple of 3"):
        Round(rules, pair, [HandBet(1000, {"perfect_pairs": 100})])
    rnd = Round(rules, pair, [HandBet(1000, {"perfect_pairs": 300})])
    side = next(w for w in rnd.wagers if w.kind == "perfect_pairs")
    # 1:3 returns the stake plus a third of it: 300 + 100, exactly
    assert (side.line, side.returned) == ("perfect_pair", 400)


def test_insurance_ratio_joins_the_bet_multiple() -> None:
    # insurance of half the bet paying 3:2 returns 5/4 of the bet: bets must be multiples of 4
    doc = _edit(SNAP, "insurance.pays", "3:2")
    assert rules_from_dict(doc).bet_multiple == 4
