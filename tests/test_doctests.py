"""The examples in the docstrings of ``game_math`` and ``rng_service`` run and show what they say.

Every module of ``game_math`` is imported and its doctests run (``doctest.testmod``); of
``rng_service``, every module whose source holds an example (the generated gRPC stubs have
none), so that modules without examples cost no import here. The examples are documentation:
one that stops being true fails here rather than misleading a reader.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import game_math
import rng_service

GAME_MATH_MODULES = sorted(
    info.name for info in pkgutil.walk_packages(game_math.__path__, prefix="game_math.")
)


def _modules_with_examples(package: Path, prefix: str) -> list[str]:
    names = []
    for path in sorted(package.rglob("*.py")):
        if "proto_gen" in path.parts or ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(package).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        names.append(".".join((prefix, *parts)))
    return names


RNG_SERVICE_MODULES = _modules_with_examples(Path(rng_service.__file__).parent, "rng_service")


def run_examples(name: str) -> doctest.TestResults:
    return doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)


@pytest.mark.parametrize("name", GAME_MATH_MODULES + RNG_SERVICE_MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = run_examples(name)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0 or name.startswith("game_math"), f"no example ran in {name}"


def test_the_engine_modules_teach_by_example() -> None:
    taught = {"game_math.cards", "game_math.rules", "game_math.round", "game_math.legality"}
    assert {name for name in taught if run_examples(name).attempted > 0} == taught


def test_the_conventions_an_auditor_recomputes_teach_by_example() -> None:
    taught = {"rng_service.core.errors", "rng_service.rng.shoe", "rng_service.rng.drbg",
              "rng_service.crypto.signing", "rng_service.records.schema",
              "rng_service.log.hashing", "rng_service.api.errors"}
    assert taught <= set(RNG_SERVICE_MODULES)
