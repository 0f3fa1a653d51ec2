"""What an auditor trying the live service met (issue 18), each fixed:

2. A live export passes: shoes still in play (rounds dealt, reveal not due yet; the next shoe,
   committed only) neither fail the audit nor count as discarded.
3. ``fairshoe collect rounds`` writes its log and a signed checkpoint, so deleting rounds from
   the collection fails against that checkpoint.
4. The verdict says what it judged in its first words, and the summary is a few short lines.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from support.audit_kit import run, simple_player
from support.audit_kit import summary as audit_summary
from support.log_export_helpers import (
    logged_collection,
    payload_of,
    read_lines,
    signed_checkpoint,
    write_lines,
    write_log,
)

from rng_service.crypto.keys import SigningKey, export_jwk
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
    """The summary's lines (test_audit's summary, the lines after the last finding line)."""
    return audit_summary(out).splitlines()


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
    # the last round of every shoe deleted, with its leaf line: the shoes still tile from card
    # 0, so only the checkpoint shows what is missing
    lines = read_lines(lab)
    last: dict[str, tuple[int, dict[str, object]]] = {}
    for line in lines:
        if str(line["path"]).startswith(ROUNDS_SUBDIR):
            shoe = payload_of(lab / str(line["path"]))["shoe"]
            if shoe["start"] >= last.get(shoe["id"], (-1, line))[0]:
                last[shoe["id"]] = (shoe["start"], line)
    gone = [line for _, line in last.values()]
    assert len(gone) >= 2
    for line in gone:
        (lab / str(line["path"])).unlink()
    write_lines(lab, [line for line in lines if line not in gone])
    code, out = verify(capsys, trusted, lab, *args)
    assert code == 1, out
    assert summary(out)[-1].startswith("audit FAIL, NOT complete against checkpoint"), out
    # without the checkpoint the deletion is not seen, and the verdict says it was not judged
    code, out = verify(capsys, trusted, lab, "--operator", operator.group(1))
    assert code == 0, out
    assert summary(out)[-1].startswith("audit PASS, completeness not judged"), out
