"""Reading and editing a collection of signed records, and reading what `fairshoe audit verify`
prints: shared by the audit's tests (tests/audit/)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from game_math.round import Action, Round
from rng_service.cli.main import main
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import decode_envelope, sign_payload
from rng_service.records.schema import ROUNDS_SUBDIR, write_envelope

LINE = re.compile(r"^(OK|FAIL|UNREVEALED) +(round|shoe|rules|file) (\S+?):? (?:(\S+) )?(.*)$")
#: a finding's (or a skipped file's) line: what the summary lines never start with
FINDING = re.compile(r"^(OK  |FAIL |OPEN |UNREVEALED |SKIP )")

Envelope = dict[str, Any]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    return int(info.value.code or 0), capsys.readouterr().out


def summary(out: str) -> str:
    """The summary the audit prints after its findings: a few lines, the verdict last."""
    lines = out.strip().splitlines()
    tail: list[str] = []
    for line in reversed(lines):
        if FINDING.match(line):
            break
        tail.insert(0, line)
    return "\n".join(tail)
def simple_player(rnd: Round) -> Action:
    """A cheap stand-in for basic strategy (the audit does not depend on the strategy): it
    splits, doubles and hits often enough that the records hold every kind of decision."""
    legal = {la.action: la for la in rnd.legal_actions()}
    if "even_money" in legal:
        return Action("even_money", accept=False)
    if "insurance" in legal:
        return Action("insurance", 0)
    hand = rnd.hand(rnd.turn.hand or 0)
    values = {min(10, c % 13 + 1) for c in hand.cards}
    if "split" in legal and values & {1, 8}:
        return Action("split")
    if "double" in legal and hand.total in (10, 11):
        return Action("double", legal["double"].max_stake)
    return Action("hit" if hand.total < 17 and "hit" in legal else "stand")


def findings(out: str) -> dict[tuple[str, str], tuple[str, str | None, str]]:
    """(kind, id) -> (status, field, message) for each record line."""
    result = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m and not line.startswith("audit "):
            status, kind, ident, field, message = m.groups()
            result[kind, ident] = (status, field if status != "OK" else None, message)
    return result



def load(path: Path) -> Envelope:
    return decode_envelope(path.read_bytes())


def save(path: Path, envelope: Envelope, key: SigningKey | None) -> None:
    """Write ``envelope``, re-signed with ``key`` if given (else its old signature is kept)."""
    if key is not None:
        envelope = sign_payload(envelope["payload"], key)
    write_envelope(path, envelope)


def pick_round(game_dir: Path, wanted: Callable[[dict[str, Any]], bool]) -> tuple[Path, Envelope]:
    for path in sorted((game_dir / ROUNDS_SUBDIR).iterdir()):
        env = load(path)
        if wanted(env["payload"]):
            return path, env
    raise AssertionError("no collected round has what the test needs")

