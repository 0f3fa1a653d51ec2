"""The round's API contract: malformed actions are refused, settled rounds stay settled."""

from __future__ import annotations

import dataclasses
import json

import pytest
from support.engine_helpers import random_play

from game_math.cards import parse_cards
from game_math.errors import BetError, IllegalAction
from game_math.games import game_rules
from game_math.round import Action, HandBet, Round
from game_math.rules import DealerCards, InsuranceRule, rules_from_dict


def _snap_round(cards: str) -> Round:
    return Round(game_rules("snap"), parse_cards(cards.split()), [HandBet(1000)])


@pytest.mark.parametrize("action", [Action("hit", 500), Action("stand", 0),
                                    Action("stand", accept=True)])
def test_hit_and_stand_refuse_amounts(action: Action) -> None:
    rnd = _snap_round("TS 6D 5H TD 8C 9C")
    before = rnd.to_bytes()
    with pytest.raises(IllegalAction, match="takes no amount"):
        rnd.act(action)
    assert rnd.to_bytes() == before


def test_even_money_refuses_an_amount_and_insurance_refuses_accept() -> None:
    # player blackjack against an ace: snap offers even money
    rnd = _snap_round("AS AD KH 9C")
    with pytest.raises(IllegalAction, match="no amount"):
        rnd.act(Action("even_money", 1000, accept=True))
    # a second hand without blackjack is offered insurance, which takes an amount
    two = Round(game_rules("snap"), parse_cards(["AS", "9S", "AD", "KH", "9H", "9C"]),
                [HandBet(1000), HandBet(1000)])
    two.act(Action("even_money", accept=False))
    with pytest.raises(IllegalAction, match="not accept"):
        two.act(Action("insurance", accept=True))


def test_a_finished_round_cannot_be_voided() -> None:
    rnd = _snap_round("TS 6D 9H TD 8C")
    rnd.act(Action("stand"))
    assert rnd.phase == "finished" and rnd.total_returned == 2000
    with pytest.raises(IllegalAction, match="cannot be voided"):
        rnd.void("operator pressed the wrong button")
    assert rnd.total_returned == 2000


def test_no_insurance_when_both_dealer_cards_show_no_blackjack() -> None:
    # a custom combination: both dealer cards exposed, insurance nominally offered
    base = game_rules("double-deck")
    rules = dataclasses.replace(
        base, dealer=dataclasses.replace(base.dealer, cards=DealerCards.BOTH_EXPOSED),
        insurance=InsuranceRule(offered=True, partial=True),
    )
    rnd = Round(rules, parse_cards(["TS", "AD", "7H", "9C", "5C"]), [HandBet(1000)])
    assert rnd.turn.phase == "play"
    assert "insurance" not in {la.action for la in rnd.legal_actions()}


def test_stored_state_holds_no_undealt_card_and_resumes_only_on_its_shoe() -> None:
    shoe = parse_cards(["TS", "6D", "5H", "TD", "8C", "9C", "2H", "3H", "4H"])
    rnd = _snap_round("TS 6D 5H TD 8C 9C 2H 3H 4H")
    data = rnd.to_bytes()
    # the undealt cards (8C onwards) are as secret as the seed: not in the stored state
    doc = json.loads(data)
    assert doc["dealt"] == shoe[:4] and "shoe" not in doc and doc["shoe_size"] == len(shoe)
    with pytest.raises(ValueError, match="pass shoe="):
        Round.from_bytes(data)
    with pytest.raises(ValueError, match="not the one"):
        Round.from_bytes(data, parse_cards(["TS", "6D", "5H", "TH", "8C", "9C", "2H", "3H", "4H"]))
    resumed = Round.from_bytes(data, shoe)
    for r in (rnd, resumed):
        r.act(Action("hit"))  # 15 + 8 = 23: bust, and the round ends
    assert resumed.summary() == rnd.summary() and rnd.finished
    # a finished round restores from its own bytes alone, and writes the same bytes again
    done = Round.from_bytes(rnd.to_bytes())
    assert done.summary() == rnd.summary() and done.to_bytes() == rnd.to_bytes()


@pytest.mark.parametrize("balance", [1500.5, "lots", -1, True])
def test_balance_must_be_whole_minor_units(balance: object) -> None:
    with pytest.raises(BetError, match="balance"):
        Round(game_rules("double-deck"), parse_cards(["TS", "6D", "5H", "TD"]), [HandBet(1000)],
              balance=balance)  # type: ignore[arg-type]


@pytest.mark.parametrize("balance", [1500.5, "lots", -1, True, 999])
def test_a_round_is_funded_only_with_whole_minor_units_covering_its_stake(balance: object) -> None:
    rnd = Round(game_rules("double-deck"), parse_cards(["TS", "6D", "5H", "TD"]), [HandBet(1000)])
    with pytest.raises(BetError, match="balance" if balance != 999 else "exceeds the balance"):
        rnd.fund(balance)  # type: ignore[arg-type]
    assert rnd.balance is None and rnd.available is None


def test_a_round_is_funded_once_and_before_any_action() -> None:
    cards = parse_cards(["6S", "6D", "5H", "TD", "2C", "3C", "4C"])  # 11 against a 6
    for balance in (1500, 5000):  # a double the balance covers in part, in full
        rnd = Round(game_rules("double-deck"), cards, [HandBet(1000)])
        rnd.fund(balance)
        assert rnd.available == balance - 1000
        assert rnd.legal_actions() == Round(game_rules("double-deck"), cards, [HandBet(1000)],
                                            balance=balance).legal_actions()
    with pytest.raises(ValueError, match="funded"):
        rnd.fund(5000)
    acted = Round(game_rules("double-deck"), cards, [HandBet(1000)])
    acted.act(Action("hit"))
    with pytest.raises(ValueError, match="funded"):
        acted.fund(5000)


def test_stored_state_is_canonical_json_at_every_transition() -> None:
    """Whatever the round holds (side bets, staked actions, even money, a void), its stored
    bytes are those of ``json.dumps`` of the whole document, and they restore it."""
    for seed in range(200):
        for rnd in random_play(seed):
            data = rnd.to_bytes()
            assert data == json.dumps(json.loads(data), separators=(",", ":"),
                                      sort_keys=True).encode(), seed
        assert Round.from_bytes(data).to_bytes() == data


@pytest.mark.parametrize("reason", ["shoe fault", "caf\u00e9 \u2028 \U0001f600", "del \x7f",
                                    "ctl \x01\n\"\\", "lone \ud800"])
def test_stored_state_is_jsons_bytes_whatever_its_text(reason: str) -> None:
    """The state's bytes are ``json.dumps``'s even where a faster encoder would write others
    (non-ASCII text, DEL, control characters, a lone surrogate in a void reason)."""
    rnd = Round(game_rules("double-deck"), parse_cards(["TS", "6D", "5H", "TD"] * 3),
                [HandBet(1000)], balance=5000)
    rnd.void(reason)
    data = rnd.to_bytes()
    assert data == json.dumps(json.loads(data), separators=(",", ":"), sort_keys=True).encode()
    assert Round.from_bytes(data).void_reason == reason


@pytest.mark.parametrize("game", ["snap", "double-deck", "double-exposure", "multi-hand"])
def test_stored_state_is_canonical_json_and_its_rules_are_parsed_once(game: str) -> None:
    """``to_bytes`` splices the rules' cached canonical JSON into the document: the bytes are
    exactly those of dumping the whole document; restoring reuses one rules object per rule
    set (rules are frozen), equal to the rules parsed afresh."""
    rules = game_rules(game)
    cards = parse_cards(["TS", "6D", "5H", "TD", "8C", "9C", "2H", "3H", "4H"] * 3)
    rnd = Round(rules, cards, [HandBet(1000)], balance=50_000)
    rnd.act(Action("hit"))
    data = rnd.to_bytes()
    doc = json.loads(data)
    assert data == json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    assert doc["rules"] == rules.to_dict()
    first, second = Round.from_bytes(data, cards), Round.from_bytes(data, cards)
    assert first.rules is second.rules and first.rules == rules_from_dict(doc["rules"])
    assert first.rules.digest() == rules.digest() and second.to_bytes() == data
