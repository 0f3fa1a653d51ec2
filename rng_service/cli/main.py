"""The `fairshoe` command line.

Each area of the product registers its own subcommands from a module in ``rng_service.cli``;
this file only assembles them, so areas can grow without touching one another.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module defines ``register(subparsers)``; a registered parser sets ``func(args) -> int``.
# Every command, --help included, imports all of them: at top level they import only the stdlib
# and light project modules, and each handler imports the heavy ones it uses (numpy, scipy, grpc,
# cryptography, matplotlib) itself. tests/cli/test_cli_imports.py holds them to it.
COMMAND_MODULES: tuple[str, ...] = (
    "rng_service.cli.game",
    "rng_service.cli.serve",
    "rng_service.cli.keys",
    "rng_service.cli.rngtest",
    "rng_service.cli.rng",
    "rng_service.cli.audit",
    "rng_service.cli.analysis",
)


class CommandError(Exception):
    """A user-facing failure: printed as one line to stderr, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairshoe", description="Certified RNG and game math for online blackjack."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args))
    except CommandError as exc:
        print(f"fairshoe {args.command}: {exc}", file=sys.stderr)
        status = 2
    raise SystemExit(status)
