"""Where a collection lies must not change its audit: directory roles are judged from the
collection's own layout, never from a directory name somewhere above it.

``fairshoe collect rounds --out rounds`` is a natural name for a collection, and a collection may
well be kept under a directory called ``reveals`` or ``rules``. In each case the documented
``fairshoe audit verify DIR --keys ...`` must pass genuine records, pass the ``keys.jwks.json``
copy over, and still hold every file inside the collection's own ``rounds/`` and ``reveals/`` to
being a signed envelope.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.audit_kit import summary as summary_of
from support.cli_helpers import run

from rng_service.records.schema import KEYS_FILE, REVEALS_SUBDIR, ROUNDS_SUBDIR

ROUNDS = 3


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A collection written by the command itself, and the operator's keys exported apart."""
    base = tmp_path_factory.mktemp("collection")
    out, store = base / "collection", base / "keystore"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAIRSHOE_DATA_DIR", str(base / "data"))
        assert run(["collect", "rounds", "--game", "snap", "--rounds", str(ROUNDS),
                    "--out", str(out), "--key-store", str(store)]) == 0
        operator_keys = base / "operator.jwks.json"
        assert run(["keys", "export", "--dir", str(store), "--out", str(operator_keys)]) == 0
    return out, operator_keys


def place(collection: tuple[Path, Path], target: Path) -> Path:
    """A copy of the collection at ``target`` (parents created)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(collection[0], target)
    return target


def verify(capsys: pytest.CaptureFixture[str], keys: Path, path: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = run(["audit", "verify", str(path), "--keys", str(keys)])
    return code, capsys.readouterr().out


def summary(out: str) -> str:
    """The summary: a few lines after the findings, the verdict last."""
    return summary_of(out)


# (where the collection is copied, relative to tmp_path; what is passed to audit verify)
LAYOUTS = {
    "collection named rounds": ("rounds", "rounds"),
    "collection named reveals": ("reveals", "reveals"),
    "collection named rules": ("rules", "rules"),
    "under a parent named reveals": ("reveals/lab", "reveals/lab"),
    "under a parent named rules": ("rules/lab", "rules/lab"),
    "under a parent named rounds": ("rounds/lab", "rounds/lab"),
    "parent named reveals passed": ("reveals/lab", "reveals"),
    "parent named rounds passed": ("rounds/lab", "rounds"),
    "grandparent of a collection named rounds": ("audits/rounds", "audits"),
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=list(LAYOUTS))
def test_genuine_collection_passes_wherever_it_lies(
        collection: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        layout: tuple[str, str]) -> None:
    where, passed = layout
    place(collection, tmp_path / where)
    code, out = verify(capsys, collection[1], tmp_path / passed)
    assert code == 0, out
    assert summary(out).startswith(f"{ROUNDS} rounds: {ROUNDS} OK, 0 FAIL")
    assert summary(out).splitlines()[-1].startswith("audit PASS, completeness not judged")
    assert "1 keys files not used" in summary(out)


@pytest.mark.parametrize("name", ["rounds", "reveals"])
def test_record_directory_passed_by_itself_is_still_strict(
        collection: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        name: str) -> None:
    """``DIR/rounds`` or ``DIR/reveals`` given alone: each of its files must be an envelope."""
    root = place(collection, tmp_path / "lab")
    records = root / name
    stray = records / "notes.txt"
    stray.write_text("looked fine", encoding="utf-8")
    code, out = verify(capsys, collection[1], records)
    assert code == 1
    assert f"FAIL file {stray}" in out


@pytest.mark.parametrize("where", ["rounds", "reveals/lab", "audits/rounds"])
def test_record_directories_of_a_collection_named_rounds_stay_strict(
        collection: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        where: str) -> None:
    """Judging roles from the collection root keeps its own record directories strict: a keys
    copy or a note inside them fails, while the one at the root is passed over."""
    root = place(collection, tmp_path / where)
    strays = [root / ROUNDS_SUBDIR / "notes.txt", root / REVEALS_SUBDIR / KEYS_FILE]
    strays[0].write_text("looked fine", encoding="utf-8")
    shutil.copy(root / KEYS_FILE, strays[1])
    code, out = verify(capsys, collection[1], tmp_path / Path(where).parts[0])
    assert code == 1
    for stray in strays:
        assert f"FAIL file {stray}" in out
    assert "1 keys files not used" in summary(out)
