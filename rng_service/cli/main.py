"""The `fairshoe` command line.

Each area of the product registers its own subcommands from a module in ``rng_service.cli``;
this file only assembles them, so areas can grow without touching one another.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from rng_service.core.errors import FairshoeError, InvalidInput

# Each module defines ``register(subparsers)``; a registered parser sets ``func(args) -> int``.
# Every command, --help included, imports all of them: at top level they import only the stdlib
# and light project modules, and each handler imports the heavy ones it uses (numpy, scipy, grpc,
# cryptography, matplotlib) itself. tests/cli/test_cli_imports.py holds them to it.
COMMAND_MODULES: tuple[str, ...] = (
    "rng_service.cli.game",
    "rng_service.cli.serve",
    "rng_service.cli.health",
    "rng_service.cli.keys",
    "rng_service.cli.operators",
    "rng_service.cli.wallet",
    "rng_service.cli.rngtest",
    "rng_service.cli.rng",
    "rng_service.cli.audit",
    "rng_service.cli.analysis",
    "rng_service.cli.play",
    "rng_service.cli.log",
)


class CommandError(InvalidInput):
    """A user-facing failure in a command's arguments: printed as one line to stderr, exit 2."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(field, message)


def usage_error(prog: str, message: str) -> NoReturn:
    """Report a fault in the arguments as one line, ``PROG: MESSAGE (see PROG --help)``, and
    exit 2: the usage text argparse would print runs to several lines and buries the fault;
    ``--help`` is where to read it."""
    print(f"{prog}: {' '.join(message.split())} (see {prog} --help)", file=sys.stderr)
    raise SystemExit(2)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are :func:`usage_error`'s one line; add_subparsers makes
    every subcommand's parser of this class too, so every command reports alike."""

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as :func:`usage_error`'s one line and exit 2."""
        usage_error(self.prog, message)


def build_parser() -> argparse.ArgumentParser:
    """The ``fairshoe`` parser, each command module registering its own subcommands."""
    parser = Parser(
        prog="fairshoe", description="Certified RNG and game math for online blackjack.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``fairshoe`` and exit: a deliberate error (the error tree, or game_math's) is one
    line on stderr, ``fairshoe COMMAND: message``, and exit status 2.
    """
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        prog = f"fairshoe {args.command}"
        usage_error(prog, f"unrecognized arguments: {' '.join(extra)}")
    try:
        status = int(args.func(args))
    except FairshoeError as exc:  # the engine's errors included: one root
        # one line whatever the message holds: scripts parse stderr
        print(f"fairshoe {args.command}: {_message(exc, args.command)}", file=sys.stderr)
        status = 2
    raise SystemExit(status)


def _message(exc: Exception, command: str) -> str:
    """The error's text on one line, without a leading field that only repeats the command's
    name (``rules: cannot read ...`` under ``fairshoe rules``)."""
    text = " ".join(str(exc).splitlines())
    return text.removeprefix(f"{command}: ") if getattr(exc, "field", None) == command else text
