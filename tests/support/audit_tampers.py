"""Ways to tamper with a round record's payload, each with the field the audit must then name
and the rounds it applies to: shared by the audit's tests (tests/audit/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from game_math.games import game_rules
from game_math.rules import Rules, rules_from_dict


def other_card(code: str) -> str:
    return ("2S" if code != "2S" else "3S")


def tamper_card(p: dict[str, Any]) -> str:
    p["cards"][2] = other_card(p["cards"][2])
    return "cards[2]"


def tamper_payout(p: dict[str, Any]) -> str:
    i = next(i for i, w in enumerate(p["wagers"]) if w["returned"])
    p["wagers"][i]["returned"] *= 2
    return f"wagers[{i}].returned"


def tamper_action(p: dict[str, Any]) -> str:
    entry = p["actions"][0]
    entry["action"] = "stand" if entry["action"] == "hit" else "hit"
    return "actions"


def tamper_illegal_action(p: dict[str, Any]) -> str:
    p["actions"][0]["action"] = {"action": "double", "amount": 10**6}
    return "actions[0].action"


def six_to_five(game: str) -> Rules:
    """``game``'s rules, blackjack paying 6:5: a custom rule set the audit is not given."""
    data = game_rules(game).to_dict()
    data["payouts"]["blackjack"] = "6:5"
    return rules_from_dict(data)


def tamper_rules(p: dict[str, Any]) -> str:
    p["rules_digest"] = six_to_five(p["game"]).digest()
    return "rules_digest"


def tamper_commitment(p: dict[str, Any]) -> str:
    p["shoe"]["commitment"] = "0" * 64
    return "shoe.commitment"


def tamper_bet(p: dict[str, Any]) -> str:
    p["bets"]["hands"][0]["bet"] *= 2
    return "wagers[0].staked"


def tamper_start(p: dict[str, Any]) -> str:
    p["shoe"]["start"] += 1
    return "shoe.start"


def tamper_decks(p: dict[str, Any]) -> str:
    p["shoe"]["decks"] -= 1
    return "shoe.decks"


def has_actions(p: dict[str, Any]) -> bool:
    return bool(p["actions"]) and p["actions"][0]["action"] in ("hit", "stand")


def pays(p: dict[str, Any]) -> bool:
    return any(w["returned"] for w in p["wagers"])


def bet_can_double(p: dict[str, Any]) -> bool:
    """Doubling the first bet still replays, so the stake comparison is what fails: the bet stays
    within the limit, and no recorded double or insurance names an amount tied to the old bet."""
    level = game_rules(p["game"]).level(p["level"])
    return (2 * p["bets"]["hands"][0]["bet"] <= level.max_bet
            and not any(isinstance(e["action"], dict) and e["action"].get("amount")
                        for e in p["actions"]))


Tamper = tuple[str, Callable[[dict[str, Any]], str], Callable[[dict[str, Any]], bool]]
TAMPERS: list[Tamper] = [
    ("card", tamper_card, lambda p: True),
    ("payout", tamper_payout, pays),
    ("action", tamper_action, has_actions),
    ("illegal action", tamper_illegal_action, has_actions),
    ("rules", tamper_rules, lambda p: True),
    ("commitment", tamper_commitment, lambda p: True),
    ("bet", tamper_bet, bet_can_double),
    ("shoe start", tamper_start, lambda p: True),
    ("shoe decks", tamper_decks, lambda p: True),
]

