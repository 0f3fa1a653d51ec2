"""`fairshoe rules show` and `fairshoe replay`: the engine from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from game_math.cards import CardError, parse_card
from game_math.errors import BetError, GameMathError, IllegalAction, RulesError
from game_math.games import game_rules
from game_math.round import HandBet, Round, action_from_json
from game_math.rules import GAME_IDS, Rules, rules_from_toml
from rng_service.cli.main import CommandError


class ScriptError(CommandError):
    """A replay script that cannot be played: ``field`` names the offending part (or None for
    the whole script) and ``kind`` says how: ``invalid``, ``not_found`` or ``precondition`` (an
    action the round refuses in its state)."""

    def __init__(self, field: str | None, message: str, kind: str = "invalid") -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.detail = message
        self.kind = kind


def load_rules(game: str | None, rules_file: str | None) -> Rules:
    """A built-in game's rules, or a custom combination from a TOML file."""
    if rules_file is not None:
        try:
            text = Path(rules_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read rules file {rules_file}: {exc.strerror}") from None
        try:
            rules = rules_from_toml(text)
        except RulesError as exc:
            raise CommandError(f"{rules_file}: {exc}") from None
        if game is not None and rules.game != game:
            raise CommandError(f"{rules_file} is for game {rules.game!r}, not {game!r}")
        return rules
    if game is None:
        raise CommandError("name a game or pass --rules FILE")
    try:
        return game_rules(game)
    except KeyError:
        raise CommandError(f"unknown game {game!r} (known: {', '.join(GAME_IDS)})") from None


def add_rules_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", metavar="FILE", help="a TOML rules file (custom combination)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = subparsers.add_parser("rules", help="show a game's rules as TOML")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True, metavar="SUBCOMMAND")
    show = rules_sub.add_parser("show", help="print a game's rules (the keys of a rules file)")
    show.add_argument("game", nargs="?", help=f"one of {', '.join(GAME_IDS)}")
    add_rules_option(show)
    show.set_defaults(func=_rules_show)

    replay = subparsers.add_parser("replay", help="play a scripted round and print it as JSON")
    replay.add_argument("file", help="the script (JSON), or - for standard input")
    replay.set_defaults(func=_replay)


def _rules_show(args: argparse.Namespace) -> int:
    sys.stdout.write(load_rules(args.game, args.rules).to_toml())
    return 0


def _read_script(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from None


_SCRIPT_KEYS = {"game", "rules", "level", "balance", "hands", "side_bets", "shoe", "actions"}


def _field(script: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = script.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ScriptError(key, f"must be {kind.__name__}, got {value!r}")
    return value


def _hand_bets(items: list[Any]) -> list[HandBet]:
    try:
        return [HandBet.from_json(item, f"hands[{i}]") for i, item in enumerate(items)]
    except BetError as exc:
        raise ScriptError(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None


def _shoe(items: list[Any]) -> list[int]:
    cards = []
    for i, code in enumerate(items):
        try:
            cards.append(parse_card(str(code)))
        except CardError as exc:
            raise ScriptError(f"shoe[{i}]", str(exc)) from None
    return cards


def play_script(script: Any) -> Round:
    """Builds and plays the round a replay script describes; CommandError names any fault."""
    if not isinstance(script, Mapping):
        raise ScriptError(None, "the script must be a JSON object")
    unknown = sorted(set(script) - _SCRIPT_KEYS)
    if unknown:
        raise ScriptError(unknown[0], f"unknown key (known: {', '.join(sorted(_SCRIPT_KEYS))})")
    game = script.get("game")
    if script.get("rules") is None and game not in GAME_IDS:
        known = ", ".join(GAME_IDS)
        raise ScriptError("game", f"no game {game!r} (known: {known})", "not_found")
    rules = load_rules(game, script.get("rules"))
    hands = _hand_bets(_field(script, "hands", list, None))
    round_bets = _field(script, "side_bets", dict, {})
    shoe = _shoe(_field(script, "shoe", list, None))
    actions = _field(script, "actions", list, [])
    balance = script.get("balance")
    try:
        rnd = Round(rules, shoe, hands, round_bets, level=script.get("level"), balance=balance)
    except BetError as exc:
        raise ScriptError(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None
    except GameMathError as exc:
        raise ScriptError(None, str(exc)) from None
    for i, item in enumerate(actions):
        _fail_if_void(rnd)
        try:
            rnd.act(action_from_json(item))
        except ValueError as exc:
            raise ScriptError(f"actions[{i}]", str(exc)) from None
        except IllegalAction as exc:
            raise ScriptError(f"actions[{i}]", str(exc), "precondition") from None
    _fail_if_void(rnd)
    return rnd


def _fail_if_void(rnd: Round) -> None:
    # a script's round is void only when its shoe is too short: the script is at fault
    if rnd.void_reason is not None:
        raise ScriptError("shoe", f"round void: {rnd.void_reason}")


def _replay(args: argparse.Namespace) -> int:
    rnd = play_script(_read_script(args.file))
    json.dump(rnd.summary(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
