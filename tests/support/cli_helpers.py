"""Running the `fairshoe` command line inside a test."""

from __future__ import annotations

import pytest

from rng_service.cli.main import main


def run(argv: list[str]) -> int:
    """The exit status of ``fairshoe ARGV`` (output is left to capsys)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    code = exited.value.code
    assert isinstance(code, int)
    return code
