"""What the audit makes for every file and record, made cheaply (rng_service/audit/files.py,
walk.py, verifier.py): a file's Path made from its directory's is the Path ``directory / name``
and ``Path(text)`` make, the walk reads the files it read when it judged each by a Path, a file's
key in the scratch store is its path_key, a round id is looked up in the store only if a filter
says it may be there, and a Finding made with its members set at once is the frozen dataclass
the generated ``__init__`` made."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

from rng_service.audit import files, spill
from rng_service.audit.files import Finding, Status, child_path, text_path
from rng_service.audit.log_lines import path_key
from rng_service.audit.verifier import Auditor
from rng_service.audit.walk import walk_paths

TEXTS = ["/tmp/a/b.json", "a/b.json", "b.json", "/b.json", "//a/b.json", "//b.json", "a/..",
         "../x.json", "/tmp/a/\udcff.json", "/tmp/a/c d.json", "a/b.json#leaf3", ".", "/",
         "a\\b/c.json", "/tmp/a/.json"]


def same(made: Path, expected: Path) -> None:
    assert type(made) is type(expected)
    assert made == expected
    assert str(made) == str(expected)
    assert made.parts == expected.parts
    assert (made.name, made.suffix, made.parent) == (expected.name, expected.suffix,
                                                      expected.parent)
    assert hash(made) == hash(expected)


@pytest.mark.parametrize("fast", [True, False])
def test_a_path_made_from_text_is_the_path_of_that_text(monkeypatch: pytest.MonkeyPatch,
                                                         fast: bool) -> None:
    if not fast:  # a Python without PurePath's child constructor
        monkeypatch.setattr(files, "_CHILD", None)
    for _ in range(2):  # the second time, each directory's Path is the one remembered
        for text in TEXTS:
            same(text_path(text), Path(text))
    # files of one directory in a row, then another, then the first again
    for text in ["/d/1.json", "/d/2.json", "/e/1.json", "/d/3.json"]:
        same(text_path(text), Path(text))


@pytest.mark.parametrize("fast", [True, False])
def test_a_child_is_the_directory_joined_with_its_name(monkeypatch: pytest.MonkeyPatch,
                                                       fast: bool) -> None:
    if not fast:
        monkeypatch.setattr(files, "_CHILD", None)
    for directory in [Path("/"), Path("."), Path("a/b"), Path("/tmp/x"), Path("//x")]:
        for name in ["x.json", "a b", "\udcff.json", ".json", "..json", "x\\y", ".."]:
            same(child_path(directory, name), directory / name)


def test_the_walk_reads_what_a_paths_suffix_says(tmp_path: Path) -> None:
    """Outside a record directory only ``*.json`` files are read, judged by the name as
    ``Path.suffix`` judges it (``.json`` alone has no suffix); in one, every regular file."""
    names = ["a.json", ".json", "..json", "b.txt", "c.JSON", "d.json.bak", "e.tar.json", "f"]
    (tmp_path / "rounds").mkdir()
    for name in names:
        (tmp_path / name).write_text("{}")
        (tmp_path / "rounds" / name).write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "a.json")
    entries = list(walk_paths([tmp_path]))
    read = [(entry.path, entry.strict) for entry in entries if entry.problem is None]
    expected = sorted([(tmp_path / name, False) for name in names
                       if Path(name).suffix == ".json"]
                      + [(tmp_path / "rounds" / name, True) for name in names])
    assert sorted(read) == expected
    for path, _ in read:
        same(path, path.parent / path.name)
    assert [entry.path for entry in entries if entry.problem is not None] == [
        tmp_path / "link.json"]


def test_a_files_key_is_its_path_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    auditor = Auditor({})
    for text in ["/x.json", "x.json", "a/b/c.json", "../a.json", "a/../b.json", "/a/b.json",
                 "./a/x.json", "a/\udcff.json", "//x.json", "//a/b.json", "///a/b.json",
                 str(tmp_path / "r" / "y.json")]:
        path = Path(text)
        for _ in range(2):  # the directory's part remembered the second time
            assert auditor._file_key(path) == path_key(path), text


@dataclasses.dataclass(frozen=True)
class Generated:
    """Finding's members with the __init__ a frozen dataclass generates: the reference."""

    kind: str
    ident: str
    path: Path
    status: Status
    field: str | None = None
    message: str = ""
    void: bool = False
    check: str = dataclasses.field(default="", compare=False)


def test_a_finding_is_the_frozen_dataclass_it_was() -> None:
    base: dict[str, Any] = {"kind": "round", "ident": "r1", "path": Path("/a/r1.json"),
                            "status": Status.OK}
    cases: list[dict[str, Any]] = [
        base, {**base, "status": Status.FAIL, "field": "shoe.id", "message": "no reveal",
               "check": "round.shoe"},
        {**base, "kind": "shoe", "message": "revealed", "void": True},
        {**base, "kind": "file", "path": Path("f"), "field": None, "check": "file.read"}]
    for members in cases:
        finding, reference = Finding(**members), Generated(**members)
        positional = Finding(*(members.get(f.name, f.default)
                               for f in dataclasses.fields(Generated)))
        assert positional == finding and positional.check == finding.check
        assert dataclasses.astuple(finding) == dataclasses.astuple(reference)
        assert vars(finding) == vars(reference)
        assert repr(finding) == repr(reference).replace("Generated", "Finding", 1)
        other = Finding(**{**members, "check": "another"})
        assert other == finding and hash(other) == hash(finding)  # check is not compared
        assert Finding(**{**members, "message": "x"}) != finding
        assert pickle.loads(pickle.dumps(finding)) == finding
        changed = dataclasses.replace(finding, message="changed")
        assert (changed.message, changed.kind, changed.check) == (
            "changed", finding.kind, finding.check)
        with pytest.raises(dataclasses.FrozenInstanceError):
            finding.message = "x"  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(Finding)] == [
        f.name for f in dataclasses.fields(Generated)]


@pytest.mark.parametrize("bits", [8, 1 << 23])
def test_round_ids_are_judged_the_same_whatever_the_filter(monkeypatch: pytest.MonkeyPatch,
                                                           bits: int) -> None:
    """With 8 bits every id shares its bit with others (each looked up), with the default few
    do: the first value of each id is the one kept in memory, duplicates across batches and
    within one included."""
    monkeypatch.setattr(spill, "_SEEN_BITS", bits)
    store = spill.SpillDb()
    try:
        stored, memory = spill.FirstSeen(store), spill.FirstSeen()
        ids = [f"r{i % 37}" for i in range(0, 300, 7)] + ["r1", "\udcff", "\udcff", "r5"]
        for at in range(0, len(ids), 9):
            batch = [(round_id, f"/c/rounds/{at}-{n}.json")
                     for n, round_id in enumerate(ids[at:at + 9])]
            assert stored.first_many(batch) == memory.first_many(batch)
        assert len(stored._bits) == bits // 8
    finally:
        store.close()
