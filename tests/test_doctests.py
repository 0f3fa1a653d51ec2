"""The examples in ``game_math``'s docstrings run and show what they say.

Every module of the package is imported and its doctests run (``doctest.testmod``); the examples
are documentation, so one that stops being true fails here rather than misleading a reader.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import game_math

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(game_math.__path__, prefix="game_math.")
)


def run_examples(name: str) -> doctest.TestResults:
    return doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = run_examples(name)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_the_engine_modules_teach_by_example() -> None:
    taught = {"game_math.cards", "game_math.rules", "game_math.round", "game_math.legality"}
    assert {name for name in taught if run_examples(name).attempted > 0} == taught
