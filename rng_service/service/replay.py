"""Replaying a scripted round: the use case behind ``fairshoe replay`` and the ReplayRound RPC.

A script is JSON from an untrusted caller. Every fault is a :class:`FairshoeError` whose ``field``
is a path into the script (``hands[0].bet``, ``shoe[3]``, ``actions[1]``); the caller's text is
echoed only through :func:`quote`, so a message stays short whatever was sent.

:func:`play_script` reads the script into a :class:`Replay` (the engine's types) and plays it with
:func:`play`; the typed ReplayRound builds its ``Replay`` straight from the request's messages and
plays it with the same function, naming the bets its own way (``bet_field``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from game_math.cards import Card, CardError, card_code, parse_card
from game_math.errors import BetError, GameMathError, IllegalAction
from game_math.round import Action, HandBet, Round, action_from_json
from game_math.rules import GAME_IDS, Rules
from rng_service.core.errors import IllegalState, InvalidInput, NotFound, quote
from rng_service.core.json_input import JsonLimits, JsonObject, parse_json
from rng_service.service.rules import load_rules

SCRIPT_KEYS: Final = frozenset(
    {"game", "rules", "level", "balance", "hands", "side_bets", "shoe", "actions"})
# a key or side-bet name shown as a field must be a plain short name: anything else is quoted in
# the message instead, so a field never carries raw client text
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


#: a script is parsed by the one bounded reader; its nesting is left to the parser and its
#: integers to Python's own 4300 digits (a deep value or a huge bet is refused where it is read,
#: with its field named and the value quoted and cut)
SCRIPT_LIMITS: Final = JsonLimits(max_depth=None, max_int_digits=4300)


def decode_script(text: str) -> Any:
    """The JSON value of a script; InvalidInput (no field) if it is not JSON Python can hold
    (:func:`rng_service.core.json_input.parse_json`: a number too long, a lone surrogate...)."""
    return parse_json(text, SCRIPT_LIMITS)


@dataclass(frozen=True)
class Replay:
    """A round to replay, in the engine's types: the rules, the bets, the shoe's cards in
    order, and the actions (read as they are reached: a script's malformed action is refused
    only once the round gets to it, after any refusal of an earlier one)."""

    rules: Rules
    hands: list[HandBet]
    side_bets: dict[str, int]
    shoe: list[Card]
    actions: Iterable[Action]
    level: str | None = None
    balance: int | None = None


def play_script(script: Any, *, rules_files: bool = False) -> Round:
    """Builds and plays the round a replay script describes.

    ``rules_files`` allows the script's ``rules`` key (a TOML file path): only for a local user,
    never for a remote caller. Raises InvalidInput, NotFound (an unknown game) or IllegalState (an
    action the round refuses), each naming the script field at fault.
    """
    return play(read_script(script, rules_files=rules_files))


def read_script(script: Any, *, rules_files: bool = False) -> Replay:
    """The :class:`Replay` a script describes (see :func:`play_script`)."""
    if not isinstance(script, Mapping):
        raise InvalidInput(None, "the script must be a JSON object")
    _check_keys(script, rules_files)
    doc = JsonObject(dict(script))
    rules = _rules(doc)
    hands = _hand_bets(doc.get_list("hands"))
    round_bets = _side_bets(doc.typed("side_bets", dict, {}), "side_bets")
    shoe = shoe_cards(doc.get_list("shoe"), rules)
    actions = _script_actions(doc.get_list("actions", []))
    return Replay(rules, hands, round_bets, shoe, actions, level=_optional(doc, "level", str),
                  balance=doc.get("balance", None))


def _script_field(exc: BetError) -> str:
    return exc.field


def play(replay: Replay, *, bet_field: Callable[[BetError], str] = _script_field) -> Round:
    """Deals and plays ``replay``; a bet the rules refuse is InvalidInput naming
    ``bet_field(error)`` (by default the script's path, ``hands[0].bet``), an action the round
    refuses IllegalState naming ``actions[i]``, a shoe too short for the round InvalidInput
    ``shoe``."""
    try:
        rnd = Round(replay.rules, replay.shoe, replay.hands, replay.side_bets,
                    level=replay.level, balance=replay.balance)
    except BetError as exc:
        raise InvalidInput(bet_field(exc), exc.detail) from None
    except GameMathError as exc:
        raise InvalidInput(exc.field, exc.detail) from None
    _fail_if_void(rnd)
    for i, action in enumerate(replay.actions):  # read after the check before it
        _act(rnd, i, action)
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


def _rules(doc: JsonObject) -> Rules:
    game = _optional(doc, "game", str)
    rules_file = _optional(doc, "rules", str)
    if rules_file is None and game not in GAME_IDS:
        known = ", ".join(GAME_IDS)
        raise NotFound("game", f"no game {quote(game)} (known: {known})")
    return load_rules(game, rules_file)


def _optional(doc: JsonObject, key: str, kind: type) -> Any:
    """The member ``key`` of type ``kind``, or None if it is absent or null."""
    return None if doc.get(key, None) is None else doc.typed(key, kind)


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


def shoe_cards(items: Iterable[Any], rules: Rules) -> list[Card]:
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


def _script_actions(items: list[Any]) -> Iterator[Action]:
    """A script's actions, each read when the round reaches it."""
    for i, item in enumerate(items):
        try:
            yield action_from_json(item)
        except ValueError as exc:
            raise InvalidInput(f"actions[{i}]", str(exc)) from None


def _act(rnd: Round, i: int, action: Action) -> None:
    try:
        rnd.act(action)
    except IllegalAction as exc:
        raise IllegalState(exc.detail, field=f"actions[{i}]", reason=exc.reason) from None
    except (GameMathError, ValueError) as exc:
        raise InvalidInput(f"actions[{i}]", str(exc)) from None


def _fail_if_void(rnd: Round) -> None:
    # a script's round is void only when its shoe is too short: the script is at fault
    if rnd.void_reason is not None:
        raise InvalidInput("shoe", f"round void: {rnd.void_reason}")
