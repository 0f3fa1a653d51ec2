"""`fairshoe play --currency` takes what the service takes (an active ISO 4217 code with a minor
unit, rng_service.core.currency): anything else is one line naming the value, with a hint, before
any call (issue 20, "Clients and CLI" 4). A real `fairshoe play` process, pointed at a port where
no server listens: a code that passed the check would end in "cannot play at ... UNAVAILABLE"."""

from __future__ import annotations

import subprocess

import pytest
from support.live_server import FAIRSHOE

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)


def play(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FAIRSHOE), "play", "--address", "127.0.0.1:1", "--timeout", "2",
                           *args], input="", capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("code", "why"), [
    ("XYZ", "must be an ISO 4217 currency code such as EUR, got 'XYZ'"),
    ("eur", "must be an upper-case ISO 4217 code, got 'eur' (did you mean EUR?)"),
    ("XAU", "'XAU' has no minor unit in ISO 4217 (a metal or a unit of account): use a "
            "currency code such as EUR"),
])
def test_a_bad_currency_is_one_line_naming_it(code: str, why: str) -> None:
    done = play("--currency", code)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"fairshoe play: argument --currency: {why} "
                           "(see fairshoe play --help)\n")


def test_a_good_currency_goes_on_to_connect() -> None:
    done = play("--currency", "JPY")
    assert done.returncode == 2
    assert done.stderr.startswith("fairshoe play: cannot play at 127.0.0.1:1: UNAVAILABLE")
