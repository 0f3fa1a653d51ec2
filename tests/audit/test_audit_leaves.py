"""An envelope's leaf (what the log checks match ``leaves.jsonl`` against) is made and kept only
if a log check may ask for it: :func:`~rng_service.audit.walk.may_hold_log` tells, before the
walk, whether the walk may find a collection's ``log/``, and may say so wrongly only one way
(True for none); without a log the audit's lines are those it printed keeping every leaf, and a
``log/`` the walk finds after all stops the audit rather than be judged without leaves."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from support.audit_labs import cli, verify

from rng_service.audit import verifier
from rng_service.audit.failures import AuditInputError
from rng_service.audit.spill import KeyedValues
from rng_service.audit.verifier import AuditOptions, Auditor
from rng_service.audit.walk import MAX_DIR_DEPTH, may_hold_log, walk_paths
from rng_service.crypto.keys import load_trusted_public_keys
from rng_service.records.schema import LOG_SUBDIR

_NAMES = ["rounds", "reveals", "rules", "shoes", "keys", "log", "a", "b.json"]


def _walk_finds_log(path: Path) -> bool:
    return any(entry.log for entry in walk_paths([path]))


def _tree(rng: random.Random, root: Path, depth: int) -> None:
    """A random directory tree: directories and files of the names a collection has, nested."""
    for name in rng.sample(_NAMES, rng.randint(0, 4)):
        child = root / name
        kind = rng.random()
        if kind < 0.5 and depth < 4:
            child.mkdir()
            _tree(rng, child, depth + 1)
        elif kind < 0.6:
            child.symlink_to(root)  # a link is never followed
        else:
            child.write_text("{}")


@pytest.mark.parametrize("seed", range(300))
def test_may_hold_log_when_the_walk_finds_one(tmp_path: Path, seed: int) -> None:
    """Never False where the walk finds a log/; False where no log is named at all."""
    rng = random.Random(seed)
    _tree(rng, tmp_path, 0)
    if _walk_finds_log(tmp_path):
        assert may_hold_log([tmp_path])
    if not any(path.name == LOG_SUBDIR for path in tmp_path.rglob("*")):
        assert not may_hold_log([tmp_path])


def test_the_layouts_a_log_lies_in(tmp_path: Path) -> None:
    root = tmp_path / "c"
    (root / "rounds").mkdir(parents=True)
    (root / "rounds" / "r.json").write_text("{}")
    assert not may_hold_log([root]) and not _walk_finds_log(root)
    assert not may_hold_log([root / "rounds" / "r.json", tmp_path / "missing"])
    deep = root.joinpath(*["d"] * (MAX_DIR_DEPTH - 1), "inner")
    (deep / "reveals").mkdir(parents=True)
    (deep / LOG_SUBDIR).mkdir()
    assert _walk_finds_log(root) and may_hold_log([root])  # as deep as the walk goes
    shutil.rmtree(root / "d")
    (root / "rounds" / "inner" / "rules").mkdir(parents=True)  # a collection inside records
    (root / "rounds" / "inner" / LOG_SUBDIR).symlink_to(tmp_path)  # a log/ of any type
    assert _walk_finds_log(root) and may_hold_log([root])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Six snap rounds made by ``collect rounds`` (``logged``, its log/ kept) and a copy without
    its log/ (``bare``), and the keys that signed them."""
    root = tmp_path_factory.mktemp("leaves")
    store, logged = root / "keystore", root / "logged"
    code, out = cli("collect", "rounds", "--game", "snap", "--rounds", "6", "--out", str(logged),
                    "--key-store", str(store))
    assert code == 0, out
    assert cli("keys", "export", "--dir", str(store), "--out", str(root / "trusted.json"))[0] == 0
    shutil.copytree(logged, root / "bare", ignore=shutil.ignore_patterns(LOG_SUBDIR))
    return {"logged": logged, "bare": root / "bare", "keys": root / "trusted.json"}


@pytest.mark.parametrize("workers", [1, 2])
def test_leaves_kept_only_where_a_log_is(lab: dict[str, Path], workers: int,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """No leaf row without a log, every envelope's with one; the lines the same as when every
    leaf is kept (the leaves are kept in the audit's own process: the count is of its rows)."""
    kept: list[str] = []
    put = KeyedValues.put_pickled

    def counted(self: KeyedValues[object], key: str, data: bytes) -> None:
        kept.append(key)
        put(self, key, data)

    monkeypatch.setattr(KeyedValues, "put_pickled", counted)
    trusted = load_trusted_public_keys(lab["keys"])
    options = AuditOptions(workers=workers)
    bare = Auditor(trusted, options).run([lab["bare"]])
    assert bare.passed and not kept
    Auditor(trusted, options).run([lab["logged"]])
    # every envelope's leaf (the log checks keep rows of their own too)
    assert {Path(key).name for key in kept} >= {
        path.name for path in lab["logged"].rglob("*.json")
        if path.parent.name in ("rounds", "reveals", "shoes", "keys")}
    code, out = verify(lab, workers, str(lab["bare"]))
    monkeypatch.setattr(verifier, "may_hold_log", lambda paths: True)
    kept.clear()
    every = Auditor(trusted, options).run([lab["bare"]])
    assert kept  # kept, and the same findings
    assert [(f, f.check) for f in every.findings] == [(f, f.check) for f in bare.findings]
    assert every.summary() == bare.summary()
    assert verify(lab, workers, str(lab["bare"])) == (code, out)


def test_a_log_found_after_the_leaves_were_not_kept_stops_the_audit(
        lab: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A log/ that was not there as the audit began (here: said so) is not judged without the
    leaves of the files read before it."""
    monkeypatch.setattr(verifier, "may_hold_log", lambda paths: False)
    trusted = load_trusted_public_keys(lab["keys"])
    with pytest.raises(AuditInputError, match="appeared during the audit"):
        Auditor(trusted, AuditOptions()).run([lab["logged"]])
    assert Auditor(trusted, AuditOptions()).run([lab["bare"]]).passed
