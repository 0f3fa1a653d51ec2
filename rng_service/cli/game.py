"""`fairshoe rules show` and `fairshoe replay`: the engine from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from game_math.rules import GAME_IDS
from rng_service.cli.main import CommandError
from rng_service.service.replay import decode_script, play_script
from rng_service.service.rules import load_rules

# load_rules moved to rng_service.service.rules; other command modules import it from here
__all__ = ["add_rules_option", "load_rules", "register"]


def add_rules_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--rules FILE`` (a custom rules file) to a command."""
    parser.add_argument("--rules", metavar="FILE", help="a TOML rules file (custom combination)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rules show`` and ``replay`` to the command line."""
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
    return decode_script(text)


def _replay(args: argparse.Namespace) -> int:
    rnd = play_script(_read_script(args.file), rules_files=True)
    json.dump(rnd.summary(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
