"""The examples in the log package's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["__init__", "hashing", "tree", "compact", "nodes", "proofs", "note", "checkpoint"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module("rng_service.log" + ("" if name == "__init__" else f".{name}"))
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
