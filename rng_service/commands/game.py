"""`fairshoe rules show` and `fairshoe replay`: the engine from the command line."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Filled in with the engine (issue 2)."""
