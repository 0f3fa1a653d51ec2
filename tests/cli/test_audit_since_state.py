"""`fairshoe audit verify --save-state` then `--since STATE`: a cut-card shoe spanning two audits.

A double-exposure table dealt by the service (RoundService, production shoes, a SQLite database)
is audited twice from exports of its log: the first export is taken while a shoe is in play (its
first rounds dealt, no reveal yet, the next shoe committed); the second, from the first audit's
checkpoint on, holds the rest of the shoe, its reveal and the next shoe's first rounds. With only
the earlier checkpoint as ``--since`` the second audit cannot know the shoe's first rounds and
fails them (issue 18); with the state the first audit saved, it checks the shoe whole, the first
rounds included, now that the seed is revealed. A state altered, or of another log or checkpoint,
fails naming the state.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli_helpers import run
from support.record_helpers import OP, Dealer

from rng_service.audit import spill
from rng_service.crypto.keys import KeyStore
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.ports import Mode
from rng_service.storage import open_storage

GAME = "double-exposure"
STATE_SCHEMA = "fairshoe.audit-state/v1"


@dataclass
class Audits:
    """Four exports of one table's log, each from the checkpoint of the one before, and the
    checkpoints the auditor kept of them: 0 while shoe A is in play (three rounds dealt), 1 once
    A is finished and shoe B committed (not dealt yet), 2 while B is in play, 3 once B is
    finished."""

    trusted: Path
    exports: list[Path]
    checkpoints: list[Path]
    shoe: str  # A, spanning the audits 0 and 1
    early_rounds: list[str]  # A's rounds in the export 0
    next_shoe: str  # B, committed before checkpoint 1, dealt after it, finished by 3


def _export(database: str, keys: Path, out: Path, since: Path | None) -> Path:
    extra = ["--since", str(since)] if since is not None else []
    assert run(["audit", "export", "--out", str(out), "--database", database, "--key-store",
                str(keys), *extra]) == 0
    kept = out.parent / f"{out.name}.checkpoint"  # apart from the export, as an auditor keeps it
    shutil.copy(out / "log" / "checkpoint", kept)
    return kept


def _play_out(dealer: Dealer, shoe: str) -> None:
    """Rounds until ``shoe`` is finished (and revealed, the next shoe committed)."""
    while dealer.rounds.get_next_shoe(OP, dealer.player, GAME, mode=Mode.REAL).shoe_id == shoe:
        dealer.play(GAME)


@pytest.fixture(scope="module")
def audits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audits]:
    root = tmp_path_factory.mktemp("table")
    store = KeyStore(root / "keys")
    store.create()
    database = str(root / "fairshoe.db")
    storage = open_storage(database)
    dealer = Dealer(storage, store.load_signing_key(), SeedVault(secrets.token_bytes(32)))
    exports: list[Path] = []
    checkpoints: list[Path] = []

    def audit_point() -> None:
        out = root / f"export{len(exports)}"
        checkpoints.append(_export(database, store.root, out,
                                   checkpoints[-1] if checkpoints else None))
        exports.append(out)

    early = [dealer.play(GAME) for _ in range(3)]
    shoe = early[0].shoe.shoe_id
    assert {v.shoe.shoe_id for v in early} == {shoe}
    audit_point()
    _play_out(dealer, shoe)
    next_shoe = dealer.rounds.get_next_shoe(OP, dealer.player, GAME, mode=Mode.REAL).shoe_id
    audit_point()
    for _ in range(2):
        assert dealer.play(GAME).shoe.shoe_id == next_shoe
    audit_point()
    _play_out(dealer, next_shoe)
    audit_point()
    storage.close()
    trusted = root / "trusted.jwks.json"
    assert run(["keys", "export", "--dir", str(store.root), "--out", str(trusted)]) == 0
    yield Audits(trusted, exports, checkpoints, shoe, [v.round_id for v in early], next_shoe)


def verify(capsys: pytest.CaptureFixture[str], audits: Audits, n: int, *extra: str | Path
           ) -> tuple[int, str]:
    """``audit verify`` of export ``n`` against its checkpoint."""
    capsys.readouterr()
    code = run(["audit", "verify", str(audits.exports[n]), "--keys", str(audits.trusted),
                "--checkpoint", str(audits.checkpoints[n]), *map(str, extra)])
    return code, capsys.readouterr().out


def chain(capsys: pytest.CaptureFixture[str], audits: Audits, tmp_path: Path, upto: int
          ) -> Path:
    """The state saved by the audits 0 to ``upto``, each from the state of the one before."""
    state: Path | None = None
    for n in range(upto + 1):
        since = ["--since", state] if state is not None else []
        state = tmp_path / f"state{n}.json"
        code, out = verify(capsys, audits, n, *since, "--save-state", state)
        assert code == 0, out
    assert state is not None
    return state


def verdict(out: str) -> str:
    return out.strip().splitlines()[-1]


def edit(state: Path, change: Callable[[dict[str, Any]], None], name: str = "edited.json"
         ) -> Path:
    """A copy of the state with ``change(doc)`` applied."""
    doc = json.loads(state.read_text())
    change(doc)
    path = state.parent / name
    path.write_text(json.dumps(doc))
    return path


def test_a_checkpoint_alone_cannot_judge_a_shoe_that_began_before_it(
        audits: Audits, capsys: pytest.CaptureFixture[str]) -> None:
    """The case of the issue: the shoe's later rounds cannot be placed without its first ones;
    the failure says what would judge them."""
    code, out = verify(capsys, audits, 1, "--since", audits.checkpoints[0])
    assert code == 1
    assert re.search(r"^FAIL round \S+: shoe.start is \d+: the first round of a shoe starts at "
                     r"card 0 \(no record of a round before it", out, re.M), out
    assert "--save-state" in out


def test_the_state_carries_the_shoe_across_the_audits(
        audits: Audits, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = chain(capsys, audits, tmp_path, 0)
    text = state.read_text()
    doc = json.loads(text)
    assert doc["schema"] == STATE_SCHEMA
    # canonical: sorted keys, no spaces, one line
    assert text == json.dumps(doc, sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False) + "\n"
    assert doc["checkpoint"] == audits.checkpoints[0].read_text()
    [carried] = doc["shoes"]
    assert carried["shoe_id"] == audits.shoe and carried["next_card"] > 0
    assert len(carried["leaves"]) == 1 + len(audits.early_rounds)  # its commitment, its rounds
    code, out = verify(capsys, audits, 1, "--since", state)
    assert code == 0, out
    assert verdict(out).startswith("audit PASS, complete against checkpoint"), out
    # the shoe's first rounds, in play at the first audit, are checked now that it is revealed
    for round_id in audits.early_rounds:
        assert re.search(rf"^OK   round {round_id}  {GAME} shoe {audits.shoe} ", out, re.M), out
    assert re.search(rf"^OK   shoe {audits.shoe}  revealed", out, re.M), out
    assert "carried from the earlier audit" in out


def test_a_state_is_carried_on_over_further_audits(
        audits: Audits, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Shoe B, committed before checkpoint 1 and dealt after it, is carried by state 1 (its
    commitment alone), then by state 2 (its commitment proven anew in checkpoint 2's tree, and
    its first rounds) into the last audit, which finds it finished."""
    state1 = chain(capsys, audits, tmp_path, 1)
    [carried] = json.loads(state1.read_text())["shoes"]
    assert (carried["shoe_id"], carried["next_card"], len(carried["leaves"])) == (
        audits.next_shoe, 0, 1)
    state2 = chain(capsys, audits, tmp_path, 2)
    doc = json.loads(state2.read_text())
    assert doc["checkpoint"] == audits.checkpoints[2].read_text()
    [carried] = doc["shoes"]
    assert carried["shoe_id"] == audits.next_shoe and len(carried["leaves"]) == 3
    code, out = verify(capsys, audits, 3, "--since", state2)
    assert code == 0, out
    assert re.search(rf"^OK   shoe {audits.next_shoe}  revealed", out, re.M), out
    # state 1 alone does not reach export 3: the export continues from checkpoint 2
    code, out = verify(capsys, audits, 3, "--since", state1)
    assert code == 1 and "does not start where it ends" in out, out


def test_since_audits_stream_alike(audits: Audits, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain of audits with every sort spilled to files (runs of 2: the directory listings,
    and the rounds' claims, the carried ones among them) and with 2 workers saves the same
    states and prints the same lines as one process sorting in memory."""
    (tmp_path / "whole").mkdir()
    whole = chain(capsys, audits, tmp_path / "whole", 2)
    expected = verify(capsys, audits, 3, "--since", whole, "--workers", "1")
    monkeypatch.setattr(spill, "RUN_ITEMS", 2)
    state: Path | None = None
    for n in range(3):
        since = ["--since", state] if state is not None else []
        state = tmp_path / f"spilled{n}.json"
        code, out = verify(capsys, audits, n, *since, "--save-state", state, "--workers", "2")
        assert code == 0, out
    assert state is not None and state.read_text() == whole.read_text()
    code, out = verify(capsys, audits, 3, "--since", state, "--workers", "2")
    assert (code, out.replace(str(state), str(whole))) == expected  # the state's name aside
    assert expected[0] == 0 and "carried from the earlier audit" in expected[1]


def test_a_state_altered_fails_naming_the_state(
        audits: Audits, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = chain(capsys, audits, tmp_path, 0)

    def entry(doc: dict[str, Any]) -> None:  # a byte of a carried round record
        leaf = doc["shoes"][0]["leaves"][-1]
        leaf["entry"] = leaf["entry"].replace('"start":', '"start": ', 1)

    def position(doc: dict[str, Any]) -> None:
        doc["shoes"][0]["next_card"] += 1

    def proof(doc: dict[str, Any]) -> None:
        doc["shoes"][0]["leaves"][0]["proof"][0] = "00" * 32

    def index(doc: dict[str, Any]) -> None:
        doc["shoes"][0]["leaves"][1]["index"] += 1

    def note(doc: dict[str, Any]) -> None:
        doc["checkpoint"] = doc["checkpoint"].replace("\n", "\n\n", 1)

    for change, why in ((entry, "does not prove"), (position, "next_card"),
                        (proof, "does not prove"), (index, "does not prove"),
                        (note, "checkpoint"),
                        (lambda d: d.update(schema="fairshoe.audit-state/v9"), "schema"),
                        (lambda d: d.update(extra=1), "extra")):
        code, out = verify(capsys, audits, 1, "--since", edit(state, change))
        assert code == 1, (why, out)
        assert re.search(rf"^FAIL state \S+: .*{why}", out, re.M), (why, out)
        assert verdict(out).startswith("audit FAIL"), out
    # the shoe's last round before the checkpoint left out: the shoe is not whole
    code, out = verify(capsys, audits, 1, "--since",
                       edit(state, lambda d: d["shoes"][0]["leaves"].pop()))
    assert code == 1 and re.search(r"^FAIL state \S+: .*next_card", out, re.M), out
    # ... and next_card moved to match: the shoe's next round then does not follow the state's

    def hidden(doc: dict[str, Any]) -> None:
        shoe = doc["shoes"][0]
        shoe["leaves"].pop()
        shoe["next_card"] = json.loads(shoe["leaves"][-1]["entry"])["payload"]["shoe"]["end"]

    code, out = verify(capsys, audits, 1, "--since", edit(state, hidden))
    assert code == 1 and re.search(r"^FAIL round \S+: shoe.start is \d+, but the shoe's "
                                   r"previous round \S+ ended at \d+ \(\d+ cards? burned\)",
                                   out, re.M), out
    # not JSON at all
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{" + state.read_text()[:40])
    code, out = verify(capsys, audits, 1, "--since", garbled)
    assert code == 1 and re.search(r"^FAIL state \S+: ", out, re.M), out


def test_a_state_of_another_log_or_checkpoint_is_refused(
        audits: Audits, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = chain(capsys, audits, tmp_path, 0)
    # the operator named is another: the state is of the log it names, not of that one
    code, out = verify(capsys, audits, 1, "--since", state, "--operator", "acme")
    assert code == 1 and re.search(r"^FAIL state \S+: .*not of the operator's log", out,
                                   re.M), out
    # a state of a later checkpoint (the second audit's) for the export that continues from
    # the first: the export does not start where the state ends
    state1 = chain(capsys, audits, tmp_path, 1)
    code, out = verify(capsys, audits, 1, "--since", state1)
    assert code == 1 and "does not start where it ends" in out, out


def test_save_state_needs_a_checkpoint_and_a_passing_audit(
        audits: Audits, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state.json"
    capsys.readouterr()
    code = run(["audit", "verify", str(audits.exports[0]), "--keys", str(audits.trusted),
                "--save-state", str(state)])
    assert code == 2 and not state.exists()
    assert "--save-state needs --checkpoint" in capsys.readouterr().err
    # a failing audit establishes nothing to carry forward
    code, out = verify(capsys, audits, 1, "--since", audits.checkpoints[0], "--save-state", state)
    assert code == 1 and not state.exists()
    assert "state not saved" in out


def test_an_export_continues_from_a_states_checkpoint(
        audits: Audits, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`audit export --since STATE` exports from the state's checkpoint, as from the note."""
    state = chain(capsys, audits, tmp_path, 0)
    database = str(audits.trusted.parent / "fairshoe.db")
    keys = audits.trusted.parent / "keys"
    out = tmp_path / "again"
    assert run(["audit", "export", "--out", str(out), "--database", database, "--key-store",
                str(keys), "--since", str(state)]) == 0
    frontier = json.loads((out / "log" / "frontier.json").read_text())
    assert frontier == json.loads((audits.exports[1] / "log" / "frontier.json").read_text())
    bad = edit(state, lambda d: d.update(schema="x"))
    capsys.readouterr()
    assert run(["audit", "export", "--out", str(tmp_path / "bad"), "--database", database,
                "--key-store", str(keys), "--since", str(bad)]) == 2
    assert "schema" in capsys.readouterr().err
