"""What an auditor trying the live service met (issue 18), each fixed:

1. ``--since`` across a shoe: a cut-card shoe that began before the earlier checkpoint is checked
   with what the earlier audit established, carried forward in the state file it wrote
   (``--save-state``), itself verified (its checkpoint is the one the export continues from, every
   carried leaf is signed and proven in that checkpoint's tree); tampering with it fails.
2. A live export passes: shoes still in play (rounds dealt, reveal not due yet; the next shoe,
   committed only) neither fail the audit nor count as discarded.
3. ``fairshoe collect rounds`` writes its log and a signed checkpoint, so deleting rounds from
   the collection fails against that checkpoint.
4. The verdict says what it judged in its first words, and the summary is a few short lines.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import pytest
from log_export_helpers import (
    logged_collection,
    payload_of,
    read_lines,
    signed_checkpoint,
    tree_of,
    write_lines,
    write_log,
)
from test_audit import FINDING, run, simple_player

from rng_service.crypto.keys import SigningKey, export_jwk
from rng_service.crypto.signing import sign_and_encode
from rng_service.records.schema import LOG_SUBDIR, ROUNDS_SUBDIR, RULES_SUBDIR

KEY = SigningKey.generate()
GAMES = (("snap", 3), ("double-exposure", 8))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("live") / "lab"
    return root, logged_collection(root, KEY, GAMES, simple_player, discarded=1)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auditor") / "operator.jwks.json"
    path.write_text(export_jwk({KEY.key_id: KEY.public_key}))
    return path


@pytest.fixture
def lab(base: tuple[Path, list[str]], tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "lab"
    shutil.copytree(base[0], root)
    return root, list(base[1])


def kept(tmp_path: Path, note: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(note, encoding="utf-8")
    return path


def verify(capsys: pytest.CaptureFixture[str], keys: Path, root: Path, *extra: str | Path
           ) -> tuple[int, str]:
    return run(capsys, "audit", "verify", str(root), "--keys", str(keys), *map(str, extra))


def summary(out: str) -> list[str]:
    """The summary: the lines after the last finding line."""
    lines = out.strip().splitlines()
    tail: list[str] = []
    for line in reversed(lines):
        if FINDING.match(line):
            break
        tail.insert(0, line)
    return tail


def last_shoe(order: list[str], root: Path) -> tuple[int, str]:
    """The leaf index of the double-exposure shoe's commitment, and the shoe's id."""
    for i, rel in enumerate(order):
        if rel.startswith("shoes/") and payload_of(root / rel)["game"] == "double-exposure":
            return i, payload_of(root / rel)["shoe_id"]
    raise AssertionError("no double-exposure shoe")


# --- 4. the verdict ------------------------------------------------------------------------------


def test_the_verdict_says_what_it_judged_in_a_few_short_lines(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    store = write_log(root, order, KEY)
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY), "cp")
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 0, out
    lines = summary(out)
    assert lines[-1].startswith(f"audit PASS, complete against checkpoint {store.size}"), lines
    assert 2 <= len(lines) <= 10 and all(len(line) <= 100 for line in lines), lines
    code, out = verify(capsys, keys, root)
    assert code == 0, out
    assert summary(out)[-1].startswith("audit PASS, completeness not judged"), out
    # a round deleted with its leaf line: not complete, said first
    victim = next(line for line in read_lines(root) if line["path"].startswith(ROUNDS_SUBDIR))
    (root / victim["path"]).unlink()
    write_lines(root, [line for line in read_lines(root) if line != victim])
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1
    assert summary(out)[-1].startswith(f"audit FAIL, NOT complete against checkpoint "
                                       f"{store.size}"), out


# --- 2. a live export ----------------------------------------------------------------------------


def test_a_live_export_with_shoes_in_play_passes(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The double-exposure shoe is still in play (rounds logged, no reveal yet) and the next
    shoe is committed only, as a live export holds them."""
    root, order = lab
    _, shoe_id = last_shoe(order, root)
    reveal = f"reveals/{shoe_id}.json"
    (root / reveal).unlink()
    order.remove(reveal)
    store = write_log(root, order, KEY)
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY), "cp")
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 0, out
    assert re.search(rf"^OPEN round \S+: shoe.id {shoe_id} is in play", out, re.M), out
    text = "\n".join(summary(out))
    assert "2 shoes in play" in text, text
    assert "discarded" not in out and "never revealed" not in out
    assert summary(out)[-1].startswith(f"audit PASS, complete against checkpoint {store.size}")
    # without the checkpoint the shoes are in play too; completeness is said not judged
    code, out = verify(capsys, keys, root)
    assert code == 0 and summary(out)[-1].startswith("audit PASS, completeness not judged"), out


# --- 1. --since across a shoe --------------------------------------------------------------------


def split(lab: tuple[Path, list[str]], tmp_path: Path, at: int) -> tuple[Path, Path, Path, Path]:
    """The log cut at leaf ``at``: the first export ([0, at)) and its checkpoint, the second
    export ([at, size), continuing from it) and the latest checkpoint."""
    root, order = lab
    store = tree_of(root, order)
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(root, first)
    shutil.copytree(root, second)
    for rel in order[at:]:
        (first / rel).unlink()
    write_log(first, order[:at], KEY)
    write_log(second, order, KEY, first=at)
    for rel in order[:at]:
        (second / rel).unlink()
    return (first, kept(tmp_path, signed_checkpoint(store, at, KEY), "earlier.cp"), second,
            kept(tmp_path, signed_checkpoint(store, store.size, KEY), "latest.cp"))


def spanning(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
             capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path, Path, Path, int]:
    """The first audit, done (with its state saved), of an export cut inside the
    double-exposure shoe after its first two rounds."""
    root, order = lab
    commitment, _ = last_shoe(order, root)
    at = commitment + 3  # the commitment, two rounds: the third round opens the second export
    assert payload_of(root / order[at])["shoe"]["start"] > 0
    first, earlier, second, latest = split(lab, tmp_path, at)
    state = tmp_path / "audit.state"
    code, out = verify(capsys, keys, first, "--checkpoint", earlier, "--save-state", state)
    assert code == 0, out
    assert summary(out)[-1].startswith(f"audit PASS, complete against checkpoint {at}"), out
    assert state.exists()
    return earlier, second, latest, state, at


def test_since_a_state_file_checks_a_shoe_that_spans_audits(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    earlier, second, latest, state, at = spanning(lab, tmp_path, keys, capsys)
    size = len(lab[1])
    # the bare checkpoint cannot show where the shoe's earlier rounds were: a FAIL that says so
    code, out = verify(capsys, keys, second, "--checkpoint", latest, "--since", earlier)
    assert code == 1
    assert "--save-state" in out, out
    # the state the earlier audit wrote carries the shoe's first rounds: checked again, passes
    code, out = verify(capsys, keys, second, "--checkpoint", latest, "--since", state)
    assert code == 0, out
    assert summary(out)[-1].startswith(f"audit PASS, complete against checkpoint {size}"), out
    assert "carried" in out


def _state_lines(state: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in state.read_text().splitlines()]


def _write_state(state: Path, lines: list[dict[str, object]]) -> None:
    state.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_tampered_state_file_fails(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    earlier, second, latest, state, _ = spanning(lab, tmp_path, keys, capsys)
    good = _state_lines(state)
    header, carried = good[0], good[1:]
    rounds = [i for i, line in enumerate(carried)
              if b'"fairshoe.round/v1"' in base64.b64decode(str(line["entry"]))]
    assert len(rounds) == 2, carried

    def audit(lines: list[dict[str, object]]) -> tuple[int, str]:
        _write_state(state, lines)
        return verify(capsys, keys, second, "--checkpoint", latest, "--since", state)

    # a carried round left out: the shoe no longer tiles from card 0
    code, out = audit([header, *(c for i, c in enumerate(carried) if i != rounds[0])])
    assert code == 1 and "shoe.start" in out, out
    # a carried round changed (keyless): its proof in the earlier checkpoint no longer holds
    entry = base64.b64decode(str(carried[rounds[1]]["entry"]))
    forged = entry.replace(b'"total_returned":', b'"total_returned": ', 1)
    changed = [dict(c) for c in carried]
    changed[rounds[1]]["entry"] = base64.b64encode(forged).decode()
    code, out = audit([header, *changed])
    assert code == 1 and "FAIL state" in out, out
    # the same round re-signed by another key: neither trusted nor proven
    other = SigningKey.generate()
    resigned = [dict(c) for c in carried]
    resigned[rounds[1]]["entry"] = base64.b64encode(sign_and_encode(
        json.loads(entry)["payload"], other)).decode()
    code, out = audit([header, *resigned])
    assert code == 1 and "FAIL state" in out, out
    # the shoe left out of the state altogether: its later rounds and reveal are of no open shoe
    code, out = audit([header])
    assert code == 1, out
    # a state established against another checkpoint than the one the export continues from
    code, out = audit([{**header, "checkpoint": latest.read_text()}, *carried])
    assert code == 1 and "frontier.json" in out, out
    # a state that is not one at all
    state.write_text("not json\n")
    code, out = verify(capsys, keys, second, "--checkpoint", latest, "--since", state)
    assert code == 1 and "FAIL state" in out, out


def test_save_state_needs_a_checkpoint(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = lab
    code, _ = verify(capsys, keys, root, "--save-state", tmp_path / "s")
    assert code == 2


# --- 3. lab collections carry their log ----------------------------------------------------------


def test_a_lab_collection_carries_its_log_so_deletions_fail(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab, store = tmp_path / "lab", tmp_path / "keys"
    checkpoint = tmp_path / "apart" / "checkpoint"
    code, out = run(capsys, "collect", "rounds", "--game", "double-exposure", "--rounds", "40",
                    "--out", str(lab), "--key-store", str(store), "--checkpoint-out",
                    str(checkpoint))
    assert code == 0, out
    assert checkpoint.exists() and (lab / LOG_SUBDIR / "checkpoint").exists()
    hint = next(line for line in out.splitlines() if line.startswith("verify with:"))
    operator = re.search(r"--operator (\S+)", hint)
    assert operator is not None and "--checkpoint" in hint, hint
    trusted = tmp_path / "trusted.jwks.json"
    assert run(capsys, "keys", "export", "--dir", str(store), "--out", str(trusted))[0] == 0
    args = ("--checkpoint", checkpoint, "--operator", operator.group(1))
    code, out = verify(capsys, trusted, lab, *args)
    assert code == 0, out
    assert summary(out)[-1].startswith("audit PASS, complete against checkpoint"), out
    assert (lab / RULES_SUBDIR).is_dir()
    # the three biggest wins deleted, with their leaf lines: the checkpoint misses them
    lines = read_lines(lab)
    rounds = [line for line in lines if line["path"].startswith(ROUNDS_SUBDIR)]

    def won(line: dict[str, object]) -> int:
        payload = payload_of(lab / str(line["path"]))
        return int(payload["total_returned"]) - int(payload["total_staked"])

    biggest = sorted(rounds, key=won)[-3:]
    for line in biggest:
        (lab / str(line["path"])).unlink()
    write_lines(lab, [line for line in lines if line not in biggest])
    code, out = verify(capsys, trusted, lab, *args)
    assert code == 1, out
    assert summary(out)[-1].startswith("audit FAIL, NOT complete against checkpoint"), out
    # without the checkpoint the verdict says completeness was not judged
    code, out = verify(capsys, trusted, lab, "--operator", operator.group(1))
    assert summary(out)[-1].startswith("audit PASS, completeness not judged"), out
