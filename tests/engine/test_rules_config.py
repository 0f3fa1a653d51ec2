"""Rules as data: each game's knobs as its rule document reads them, the TOML round trip, custom
combinations that need no engine code, and errors that name the offending key."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
import tomli_w
from support.engine_helpers import assert_settled, play, stack

from game_math.errors import RulesError
from game_math.games import DOUBLE_EXPOSURE, SNAP, UNIT, game_rules
from game_math.rules import (
    GAME_IDS,
    Alert,
    BlackjackVsBlackjack,
    DealerCards,
    DoubleOn,
    ShufflePolicy,
    TieRule,
    rules_from_dict,
    rules_from_toml,
)


@pytest.mark.parametrize("game", GAME_IDS)
def test_toml_dump_and_load_round_trip(game: str) -> None:
    rules = game_rules(game)
    text = rules.to_toml()
    assert rules_from_toml(text) == rules
    assert rules_from_toml(tomli_w.dumps(tomllib.loads(text))).digest() == rules.digest()


def test_digest_names_the_rule_set() -> None:
    digests = {game_rules(g).digest() for g in GAME_IDS}
    assert len(digests) == len(GAME_IDS)
    changed = rules_from_dict({**DOUBLE_EXPOSURE, "decks": 8})
    assert changed.digest() != game_rules("double-exposure").digest()


def test_unknown_game_id_is_refused() -> None:
    with pytest.raises(KeyError, match="unknown game"):
        game_rules("baccarat")


# ----- the knobs as the rule documents read them ---------------------------------------------


def test_snap_knobs() -> None:
    r = game_rules("snap")
    assert (r.decks, r.shuffle.policy) == (2, ShufflePolicy.EVERY_ROUND)
    assert (r.dealer.cards, r.dealer.peek, r.dealer.hits_soft_17) == (
        DealerCards.HOLE_CARD, True, False)
    assert (r.payouts.blackjack.returns, r.payouts.ties, r.payouts.blackjack_vs_blackjack) == (
        Fraction(5, 2), TieRule.PUSH, BlackjackVsBlackjack.PUSH)
    assert (r.double.on, r.double.after_split, r.double.for_less) == (DoubleOn.ANY, True, False)
    assert (r.split.max_hands, r.split.resplit_aces, r.split.split_aces_one_card) == (
        2, False, True)
    ins = r.insurance
    assert (ins.offered, ins.pays.returns, ins.fraction, ins.partial, ins.even_money,
            ins.to_blackjack) == (True, Fraction(3), Fraction(1, 2), False, True, False)
    assert r.hands.counts == (1, 2)
    assert [(lv.name, lv.min_bet, lv.max_bet) for lv in r.levels] == [
        ("low", 1 * UNIT, 100 * UNIT), ("medium", 5 * UNIT, 500 * UNIT),
        ("high", 25 * UNIT, 2_500 * UNIT)]
    assert r.default_level == "medium"
    snap = r.side_bet("snap")
    assert snap is not None and snap.scope == "round"
    assert [(line, p.returns) for line, p in snap.paytable] == [
        ("matching_pair_both_hands", Fraction(1000)), ("pair_in_any_hand", Fraction(25)),
        ("matching_pair_anywhere", Fraction(5))]
    assert r.published_return == Fraction(998, 1000)


def test_double_deck_knobs() -> None:
    r = game_rules("double-deck")
    assert (r.decks, r.shuffle.policy) == (2, ShufflePolicy.EVERY_ROUND)
    assert (r.dealer.cards, r.dealer.peek, r.dealer.hits_soft_17) == (
        DealerCards.HOLE_CARD, True, True)
    assert (r.payouts.blackjack.returns, r.payouts.ties, r.payouts.blackjack_vs_blackjack) == (
        Fraction(5, 2), TieRule.PUSH, BlackjackVsBlackjack.PUSH)
    assert (r.double.on, r.double.after_split, r.double.for_less) == (
        DoubleOn.TEN_OR_ELEVEN, True, True)
    assert (r.split.max_hands, r.split.resplit_aces, r.split.split_aces_one_card) == (
        4, False, True)
    assert (r.insurance.offered, r.insurance.partial, r.insurance.fraction) == (
        True, True, Fraction(1, 2))
    assert (r.hands.counts, r.hands.multi_hand_min_multiple) == ((1, 2), 2)
    assert [(lv.min_bet, lv.max_bet) for lv in r.levels] == [(5 * UNIT, 1_000 * UNIT)]
    assert r.side_bets == ()


def test_double_exposure_knobs() -> None:
    r = game_rules("double-exposure")
    assert (r.decks, r.shuffle.policy, r.shuffle.cut_card) == (
        6, ShufflePolicy.CUT_CARD, Fraction(1, 2))
    assert (r.dealer.cards, r.dealer.hits_soft_17) == (DealerCards.BOTH_EXPOSED, True)
    assert (r.payouts.blackjack.returns, r.payouts.ties, r.payouts.blackjack_vs_blackjack) == (
        Fraction(2), TieRule.DEALER_WINS, BlackjackVsBlackjack.PLAYER_WINS)
    assert (r.double.on, r.double.soft, r.double.after_split) == (
        DoubleOn.NINE_TO_ELEVEN, False, True)
    assert (r.split.max_hands, r.split.resplit_aces, r.split.split_aces_one_card) == (
        4, True, True)
    assert not r.insurance.offered
    assert r.hands.counts == (1, 2, 3, 4, 5)
    assert [(lv.min_bet, lv.max_bet) for lv in r.levels] == [(1 * UNIT, 200 * UNIT)]


def test_multi_hand_knobs() -> None:
    r = game_rules("multi-hand")
    assert (r.decks, r.shuffle.policy) == (6, ShufflePolicy.EVERY_ROUND)
    assert (r.dealer.cards, r.dealer.hits_soft_17) == (DealerCards.NO_HOLE_CARD, False)
    assert (r.payouts.blackjack.returns, r.payouts.ties, r.payouts.blackjack_vs_blackjack) == (
        Fraction(5, 2), TieRule.PUSH, BlackjackVsBlackjack.PUSH)
    assert (r.double.on, r.double.soft, r.double.after_split) == (
        DoubleOn.NINE_TO_ELEVEN, False, True)
    assert (r.split.max_hands, r.split.split_aces_one_card) == (4, True)
    ins = r.insurance
    assert (ins.offered, ins.fraction, ins.partial, ins.to_blackjack, ins.even_money) == (
        True, Fraction(1, 2), False, False, False)
    assert r.hands.counts == (1, 3, 5)
    assert [(lv.min_bet, lv.max_bet, lv.side_bet_min, lv.side_bet_max, lv.chips)
            for lv in r.levels] == [
        (100, 50_000, 100, 5_000, (100, 500, 2_500, 10_000, 50_000)),
        (500, 150_000, 500, 10_000, (100, 500, 2_500, 10_000, 50_000)),
        (1_000, 300_000, 1_000, 10_000, (100, 1_000, 5_000, 25_000, 100_000))]
    pp, tp3 = r.side_bet("perfect_pairs"), r.side_bet("twenty_one_plus_three")
    assert pp is not None and tp3 is not None
    assert {line: p.returns for line, p in pp.paytable} == {
        "perfect_pair": 26, "coloured_pair": 13, "mixed_pair": 7}
    assert {line: p.returns for line, p in tp3.paytable} == {
        "suited_trips": 101, "straight_flush": 41, "three_of_a_kind": 26, "straight": 11,
        "flush": 6}
    assert r.side_bets_credited_at_round_end
    assert r.alerts == (Alert.HIT_HARD_17_TO_20, Alert.STAND_HARD_UNDER_12)
    assert r.published_return == Fraction(9948, 10000)


# ----- a custom combination is a TOML file, not engine code ----------------------------------


def test_custom_toml_combination_plays_without_engine_code() -> None:
    doc = copy.deepcopy(DOUBLE_EXPOSURE)
    doc["game"] = "double-exposure-push"
    doc["payouts"]["ties"] = "push"  # ties push instead of losing
    doc["payouts"]["blackjack"] = "3:2"
    rules = rules_from_toml(tomli_w.dumps(doc))
    shoe = stack(rules, [["TH", "7H"], ["AS", "KS"]], ["9D", "8C"])
    rnd = play(rules, shoe, [1000, 1000], ["stand"])
    assert_settled(rnd, [("main", 0, 1000, 1000), ("main", 1, 1000, 2500)])
    with pytest.raises(Exception, match="multiple of 2"):  # 3:2 now needs even stakes
        play(rules, shoe, [1001, 1000], ["stand"])


# ----- errors name the key -------------------------------------------------------------------

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return edit


def _drop(key: str) -> Edit:
    return lambda doc: doc.pop(key)


BAD: list[tuple[Edit, str]] = [
    (_drop("game"), "game"),
    (_drop("decks"), "decks"),
    (_drop("levels"), "levels"),
    (_set("decks", True), "decks"),
    (_set("decks", 0), "decks"),
    (_set("decks", "two"), "decks"),
    (_set("colour", "red"), "colour"),
    (_set("shuffle.policy", "never"), "shuffle.policy"),
    (_set("shuffle.cut_card", "3/2"), "shuffle.cut_card"),
    (_set("dealer", "hole"), "dealer"),
    (_set("dealer.cards", "none"), "dealer.cards"),
    (_set("dealer.peek", "yes"), "dealer.peek"),
    (_set("dealer.stands_on", 17), "dealer.stands_on"),
    (_set("payouts.blackjack", "three to two"), "payouts.blackjack"),
    (_set("payouts.blackjack", "0:1"), "payouts.blackjack"),
    (_set("payouts.ties", "split"), "payouts.ties"),
    (_set("payouts.blackjack_vs_blackjack", "house"), "payouts.blackjack_vs_blackjack"),
    (_set("double.on", "8-11"), "double.on"),
    (_set("double.for_less", 1), "double.for_less"),
    (_set("split.max_hands", 0), "split.max_hands"),
    (_set("split.max_hands", "4"), "split.max_hands"),
    (_set("insurance.fraction", "half"), "insurance.fraction"),
    (_set("insurance.fraction", "3/2"), "insurance.fraction"),
    (_set("insurance.pays", "2-1"), "insurance.pays"),
    (_set("hands.counts", [0, 1]), "hands.counts"),
    (_set("hands.counts", ["1"]), "hands.counts"),
    (_set("hands.counts", []), "hands.counts"),
    (_set("levels", {}), "levels"),
    (_set("levels.medium.min_bet", "5"), "levels.medium.min_bet"),
    (_set("levels.medium.max_ber", 10), "levels.medium.max_ber"),
    (_set("levels.medium.min_bet", 0), "levels.medium"),
    (_set("levels.medium.max_bet", 100), "levels.medium"),
    (_set("levels.medium.chips", [100, 0]), "levels.medium.chips"),
    (_set("default_level", "vip"), "default_level"),
    (_set("side_bets", []), "side_bets"),
    (_set("side_bets.snap.paytable.royal_flush", "10:1"), "side_bets.snap.paytable.royal_flush"),
    (_set("side_bets.snap.paytable.pair_in_any_hand", "lots"),
     "side_bets.snap.paytable.pair_in_any_hand"),
    (_set("side_bets.snap.paytable", {}), "side_bets.snap.paytable"),
    (_set("side_bets.snap.scope", "table"), "side_bets.snap.scope"),
    (_set("side_bets.snap.kind", "keno"), "side_bets.snap.kind"),
    (_set("side_bets.mystery", {"paytable": {"flush": "5:1"}}), "side_bets.mystery.kind"),
    (_set("alerts", ["beep"]), "alerts[0]"),
    (_set("published_return", "most"), "published_return"),
]


@pytest.mark.parametrize(("edit", "key"), BAD, ids=[key for _, key in BAD])
def test_invalid_rules_name_the_key(edit: Edit, key: str) -> None:
    doc = copy.deepcopy(SNAP)
    edit(doc)
    with pytest.raises(RulesError) as info:
        rules_from_dict(doc)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")
    if key not in ("side_bets",):  # TOML cannot hold an empty array where a table goes
        with pytest.raises(RulesError) as info:
            rules_from_toml(tomli_w.dumps(doc))
        assert info.value.key == key


def test_toml_syntax_error_is_a_rules_error() -> None:
    with pytest.raises(RulesError) as info:
        rules_from_toml("game = 'snap'\ndecks = \n")
    assert info.value.key == "toml"
