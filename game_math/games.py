"""The four games as the operator's rule documents define them (the documents are the operator's,
not in this repository: docs/games.md describes the games in the project's own words).

Each is written with exactly the keys of a rules TOML file (``fairshoe rules show GAME`` prints it),
so a custom combination is the same document with other values. Amounts are minor units: the seeds
give currency units, and one unit is 100 minor units here.
"""

from __future__ import annotations

from typing import Any

from game_math.rules import Rules, rules_from_dict

UNIT = 100  # minor units per currency unit

SNAP: dict[str, Any] = {
    "game": "snap",
    "name": "Double Deck Blackjack Snap",
    "decks": 2,
    "shuffle": {"policy": "every_round"},
    "dealer": {"cards": "hole_card", "peek": True, "hits_soft_17": False},
    "payouts": {"blackjack": "3:2", "ties": "push", "blackjack_vs_blackjack": "push"},
    "double": {"on": "any", "soft": True, "after_split": True, "for_less": False},
    "split": {"max_hands": 2, "resplit_aces": False, "split_aces_one_card": True},
    "insurance": {
        "offered": True, "pays": "2:1", "fraction": "1/2", "partial": False,
        "even_money": True, "to_blackjack": False,
    },
    "hands": {"counts": [1, 2], "labels": ["right", "left"]},
    # The rule document names three stake levels but gives no amounts: these are ours.
    "levels": {
        "low": {"min_bet": 1 * UNIT, "max_bet": 100 * UNIT},
        "medium": {"min_bet": 5 * UNIT, "max_bet": 500 * UNIT},
        "high": {"min_bet": 25 * UNIT, "max_bet": 2_500 * UNIT},
    },
    "default_level": "medium",
    # The rule document's paytable is missing; 1000/25/5 for 1 reproduces its 95.84 %.
    "side_bets": {
        "snap": {
            "kind": "snap",
            "scope": "round",
            "paytable": {
                "matching_pair_both_hands": "1000 for 1",
                "pair_in_any_hand": "25 for 1",
                "matching_pair_anywhere": "5 for 1",
            },
        },
    },
    "published_return": "998/1000",
}

DOUBLE_DECK: dict[str, Any] = {
    "game": "double-deck",
    "name": "Double Deck (land-based rules)",
    "decks": 2,
    "shuffle": {"policy": "every_round"},
    "dealer": {"cards": "hole_card", "peek": True, "hits_soft_17": True},
    "payouts": {"blackjack": "3:2", "ties": "push", "blackjack_vs_blackjack": "push"},
    "double": {"on": "10-11", "soft": True, "after_split": True, "for_less": True},
    "split": {"max_hands": 4, "resplit_aces": False, "split_aces_one_card": True},
    "insurance": {
        "offered": True, "pays": "2:1", "fraction": "1/2", "partial": True,
        "even_money": False, "to_blackjack": True,
    },
    "hands": {"counts": [1, 2], "multi_hand_min_multiple": 2},
    "levels": {"table": {"min_bet": 5 * UNIT, "max_bet": 1_000 * UNIT}},
    "default_level": "table",
}

DOUBLE_EXPOSURE: dict[str, Any] = {
    "game": "double-exposure",
    "name": "Double Exposure Blackjack",
    "decks": 6,
    "shuffle": {"policy": "cut_card", "cut_card": "1/2"},
    "dealer": {"cards": "both_exposed", "peek": False, "hits_soft_17": True},
    "payouts": {"blackjack": "1:1", "ties": "dealer_wins", "blackjack_vs_blackjack": "player_wins"},
    "double": {"on": "9-11", "soft": False, "after_split": True, "for_less": False},
    "split": {"max_hands": 4, "resplit_aces": True, "split_aces_one_card": True},
    "insurance": {"offered": False},
    "hands": {"counts": [1, 2, 3, 4, 5]},
    "levels": {"table": {"min_bet": 1 * UNIT, "max_bet": 200 * UNIT}},
    "default_level": "table",
}

_PERFECT_PAIRS = {"perfect_pair": "25:1", "coloured_pair": "12:1", "mixed_pair": "6:1"}
_TWENTY_ONE_PLUS_THREE = {
    "suited_trips": "100:1", "straight_flush": "40:1", "three_of_a_kind": "25:1",
    "straight": "10:1", "flush": "5:1",
}

MULTI_HAND: dict[str, Any] = {
    "game": "multi-hand",
    "name": "Multi-hand Blackjack",
    "decks": 6,
    "shuffle": {"policy": "every_round"},
    "dealer": {"cards": "no_hole_card", "peek": False, "hits_soft_17": False},
    "payouts": {"blackjack": "3:2", "ties": "push", "blackjack_vs_blackjack": "push"},
    "double": {"on": "9-11", "soft": False, "after_split": True, "for_less": False},
    "split": {"max_hands": 4, "resplit_aces": False, "split_aces_one_card": True},
    "insurance": {
        "offered": True, "pays": "2:1", "fraction": "1/2", "partial": False,
        "even_money": False, "to_blackjack": False,
    },
    "hands": {"counts": [1, 3, 5]},
    "levels": {
        "1-500": {
            "min_bet": 1 * UNIT, "max_bet": 500 * UNIT,
            "side_bet_min": 1 * UNIT, "side_bet_max": 50 * UNIT,
            "chips": [1 * UNIT, 5 * UNIT, 25 * UNIT, 100 * UNIT, 500 * UNIT],
        },
        "5-1500": {
            "min_bet": 5 * UNIT, "max_bet": 1_500 * UNIT,
            "side_bet_min": 5 * UNIT, "side_bet_max": 100 * UNIT,
            "chips": [1 * UNIT, 5 * UNIT, 25 * UNIT, 100 * UNIT, 500 * UNIT],
        },
        "10-3000": {
            "min_bet": 10 * UNIT, "max_bet": 3_000 * UNIT,
            "side_bet_min": 10 * UNIT, "side_bet_max": 100 * UNIT,
            "chips": [1 * UNIT, 10 * UNIT, 50 * UNIT, 250 * UNIT, 1_000 * UNIT],
        },
    },
    "default_level": "1-500",
    "side_bets": {
        "perfect_pairs": {"kind": "perfect_pairs", "scope": "hand", "paytable": _PERFECT_PAIRS},
        "twenty_one_plus_three": {
            "kind": "twenty_one_plus_three", "scope": "hand", "paytable": _TWENTY_ONE_PLUS_THREE,
        },
    },
    "side_bets_credited_at_round_end": True,
    "alerts": ["hit_hard_17_20", "stand_hard_under_12"],
    "published_return": "9948/10000",
}

_DOCUMENTS: dict[str, dict[str, Any]] = {
    "snap": SNAP,
    "double-deck": DOUBLE_DECK,
    "double-exposure": DOUBLE_EXPOSURE,
    "multi-hand": MULTI_HAND,
}

_CACHE: dict[str, Rules] = {}


def game_rules(game: str) -> Rules:
    """The built-in rules of ``game`` (one of ``GAME_IDS``)."""
    rules = _CACHE.get(game)
    if rules is None:
        doc = _DOCUMENTS.get(game)
        if doc is None:
            raise KeyError(f"unknown game {game!r} (known: {', '.join(_DOCUMENTS)})")
        rules = _CACHE[game] = rules_from_dict(doc)
    return rules


#: published side-bet returns, for the analysis to reconcile against
PUBLISHED_SIDE_BET_RETURNS: dict[tuple[str, str], str] = {
    ("snap", "snap"): "9584/10000",
    ("multi-hand", "perfect_pairs"): "9389/10000",
    ("multi-hand", "twenty_one_plus_three"): "9286/10000",
}
