"""Replaying a scripted round: the use case behind ``fairshoe replay`` and the ReplayRound RPC.

A script is JSON from an untrusted caller. Every fault is a :class:`FairshoeError` whose ``field``
is a path into the script (``hands[0].bet``, ``shoe[3]``, ``actions[1]``); the caller's text is
echoed only through :func:`quote`, so a message stays short whatever was sent.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from game_math.cards import Card, CardError, card_code, parse_card
from game_math.errors import BetError, GameMathError, IllegalAction
from game_math.round import HandBet, Round, action_from_json
from game_math.rules import GAME_IDS, Rules
from rng_service.core.errors import IllegalState, InvalidInput, NotFound, quote
from rng_service.service.rules import load_rules

SCRIPT_KEYS: Final = frozenset(
    {"game", "rules", "level", "balance", "hands", "side_bets", "shoe", "actions"})
# a key or side-bet name shown as a field must be a plain short name: anything else is quoted in
# the message instead, so a field never carries raw client text
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def decode_script(text: str) -> Any:
    """The JSON value of a script; InvalidInput (no field) if it is not JSON Python can hold."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(None, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                           ) from None
    except ValueError:  # an integer of more than 4300 digits
        raise InvalidInput(None, "not JSON: a number is too long") from None
    except RecursionError:
        raise InvalidInput(None, "not JSON: nested too deeply") from None


def play_script(script: Any, *, rules_files: bool = False) -> Round:
    """Builds and plays the round a replay script describes.

    ``rules_files`` allows the script's ``rules`` key (a TOML file path): only for a local user,
    never for a remote caller. Raises InvalidInput, NotFound (an unknown game) or IllegalState (an
    action the round refuses), each naming the script field at fault.
    """
    if not isinstance(script, Mapping):
        raise InvalidInput(None, "the script must be a JSON object")
    _check_keys(script, rules_files)
    rules = _rules(script)
    hands = _hand_bets(_field(script, "hands", list, None))
    round_bets = _side_bets(_field(script, "side_bets", dict, {}), "side_bets")
    shoe = _shoe(_field(script, "shoe", list, None), rules)
    actions = _field(script, "actions", list, [])
    try:
        rnd = Round(rules, shoe, hands, round_bets, level=_optional(script, "level", str),
                    balance=script.get("balance"))
    except BetError as exc:
        raise InvalidInput(exc.field, exc.detail) from None
    except GameMathError as exc:
        raise InvalidInput(exc.field, exc.detail) from None
    for i, item in enumerate(actions):
        _fail_if_void(rnd)
        _act(rnd, i, item)
    _fail_if_void(rnd)
    return rnd


def _check_keys(script: Mapping[str, Any], rules_files: bool) -> None:
    unknown = sorted(set(script) - SCRIPT_KEYS)
    if unknown:
        known = ", ".join(sorted(SCRIPT_KEYS))
        key = unknown[0]
        if _NAME.fullmatch(key):
            raise InvalidInput(key, f"unknown key (known: {known})")
        raise InvalidInput(None, f"unknown key {quote(key)} (known: {known})")
    if "rules" in script and not rules_files:
        # a server never opens files named by a client
        raise InvalidInput("rules", "not accepted: a rules file is read only by the command line")


def _rules(script: Mapping[str, Any]) -> Rules:
    game = _optional(script, "game", str)
    rules_file = _optional(script, "rules", str)
    if rules_file is None and game not in GAME_IDS:
        known = ", ".join(GAME_IDS)
        raise NotFound("game", f"no game {quote(game)} (known: {known})")
    return load_rules(game, rules_file)


def _field(script: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = script.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidInput(key, f"must be {_TYPE_NAMES.get(kind, kind.__name__)}, "
                                f"got {quote(value)}")
    return value


_TYPE_NAMES: Final[dict[type, str]] = {list: "a list", dict: "an object", str: "a string"}


def _optional(script: Mapping[str, Any], key: str, kind: type) -> Any:
    return _field(script, key, kind, None) if script.get(key) is not None else None


def _hand_bets(items: list[Any]) -> list[HandBet]:
    out = []
    for i, item in enumerate(items):
        try:
            bet = HandBet.from_json(item, f"hands[{i}]")
        except BetError as exc:
            raise InvalidInput(exc.field, exc.detail) from None
        out.append(HandBet(bet.bet, _side_bets(bet.side_bets, f"hands[{i}].side_bets")))
    return out


def _side_bets(bets: Mapping[str, Any], where: str) -> dict[str, Any]:
    for name in bets:
        if not _NAME.fullmatch(name):
            raise InvalidInput(where, f"no side bet {quote(name)}")
    return dict(bets)


def _shoe(items: list[Any], rules: Rules) -> list[Card]:
    """The script's cards, at most ``rules.decks`` copies of each: a shoe the game could deal."""
    cards: list[Card] = []
    seen: Counter[Card] = Counter()
    for i, code in enumerate(items):
        if not isinstance(code, str):
            raise InvalidInput(f"shoe[{i}]", f"must be a card code string, got {quote(code)}")
        try:
            card = parse_card(code)
        except CardError as exc:
            raise InvalidInput(f"shoe[{i}]", exc.detail) from None
        seen[card] += 1
        if seen[card] > rules.decks:
            raise InvalidInput(f"shoe[{i}]", f"a {rules.decks}-deck shoe holds only "
                                             f"{rules.decks} {card_code(card)}")
        cards.append(card)
    return cards


def _act(rnd: Round, i: int, item: Any) -> None:
    try:
        rnd.act(action_from_json(item))
    except IllegalAction as exc:
        raise IllegalState(exc.detail, field=f"actions[{i}]", reason=exc.reason) from None
    except (GameMathError, ValueError) as exc:
        raise InvalidInput(f"actions[{i}]", str(exc)) from None


def _fail_if_void(rnd: Round) -> None:
    # a script's round is void only when its shoe is too short: the script is at fault
    if rnd.void_reason is not None:
        raise InvalidInput("shoe", f"round void: {rnd.void_reason}")
