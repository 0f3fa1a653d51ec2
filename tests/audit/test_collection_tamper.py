"""A collected collection (``collect rounds``, with its log) tampered with every way an operator
hiding rounds might: each fails ``audit verify --checkpoint`` with a FAIL line and a FAIL
verdict, and none ends in a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import FINDING, run

from rng_service.cli.main import main
from rng_service.records.schema import LOG_SUBDIR, ROUNDS_SUBDIR


def _main(*argv: str) -> tuple[int, str]:
    """``fairshoe ARGV``'s exit code and stdout (for the module's fixture: no capsys there)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        main(list(argv))
    return int(info.value.code or 0), out.getvalue()


def _collect(root: Path, name: str, store: Path) -> tuple[Path, Path, str]:
    lab, apart = root / name, root / f"{name}.checkpoint"
    code, out = _main("collect", "rounds", "--game", "double-exposure", "--rounds", "12",
                      "--out", str(lab), "--key-store", str(store), "--checkpoint-out",
                      str(apart))
    assert code == 0, out
    found = re.search(r"--operator (\S+)", out)
    assert found is not None, out
    return lab, apart, found.group(1)


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("tamper")
    store = root / "keys"
    a, b = _collect(root, "a", store), _collect(root, "b", store)
    trusted = root / "trusted.jwks.json"
    assert _main("keys", "export", "--dir", str(store), "--out", str(trusted))[0] == 0
    return {"a": a, "b": b, "keys": trusted}


def _rounds(lab: Path) -> list[Path]:
    return sorted((lab / ROUNDS_SUBDIR).glob("*.json"))


def _leaves(lab: Path) -> Path:
    return lab / LOG_SUBDIR / "leaves.jsonl"


def _swap(a: Path, b: Path) -> None:
    data = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(data)


def _drop_round_and_line(lab: Path) -> None:
    victim = _rounds(lab)[-1]
    rel = f"{ROUNDS_SUBDIR}/{victim.name}"
    victim.unlink()
    lines = _leaves(lab).read_text().splitlines()
    _leaves(lab).write_text("".join(line + "\n" for line in lines
                                    if json.loads(line)["path"] != rel))


def _edit_line(lab: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    lines = [json.loads(line) for line in _leaves(lab).read_text().splitlines()]
    edit(lines[len(lines) // 2])
    _leaves(lab).write_text("".join(json.dumps(line) + "\n" for line in lines))


def _swap_lines(lab: Path) -> None:
    lines = _leaves(lab).read_text().splitlines()
    lines[2], lines[3] = lines[3], lines[2]
    _leaves(lab).write_text("".join(line + "\n" for line in lines))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


TAMPERS: dict[str, Callable[[Path, Path], object]] = {
    "delete a round": lambda lab, other: _rounds(lab)[0].unlink(),
    "delete a round and its leaf line": lambda lab, other: _drop_round_and_line(lab),
    "swap two rounds": lambda lab, other: _swap(*_rounds(lab)[:2]),
    "swap two leaf lines": lambda lab, other: _swap_lines(lab),
    "a proof edited": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("proof", ["00" * 32] * len(line["proof"]))),
    "a proof not hex": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("proof", ["zz"])),
    "a proof not a list": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("proof", 7)),
    "an index edited": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("index", 10**30)),
    "an index negative": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("index", -1)),
    "an index a string": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("index", "3")),
    "a path outside": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("path", "../../../etc/passwd")),
    "a path absolute": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("path", "/etc/hostname")),
    "a path that is a directory": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("path", ROUNDS_SUBDIR)),
    "a path not a string": lambda lab, other: _edit_line(
        lab, lambda line: line.__setitem__("path", None)),
    "a leaf line not JSON": lambda lab, other: _leaves(lab).write_text(
        _leaves(lab).read_text() + "{not json\n"),
    "a leaf line a list": lambda lab, other: _leaves(lab).write_text(
        _leaves(lab).read_text() + "[1, 2]\n"),
    "a leaf line not UTF-8": lambda lab, other: _leaves(lab).write_bytes(
        _leaves(lab).read_bytes() + b'{"index": 99, "path": "\xff"}\n'),
    "leaves.jsonl truncated": lambda lab, other: _truncate(_leaves(lab)),
    "leaves.jsonl emptied": lambda lab, other: _leaves(lab).write_text(""),
    "leaves.jsonl deleted": lambda lab, other: _leaves(lab).unlink(),
    "a round truncated": lambda lab, other: _truncate(_rounds(lab)[0]),
    "a round emptied": lambda lab, other: _rounds(lab)[0].write_bytes(b""),
    "a round not UTF-8": lambda lab, other: _rounds(lab)[0].write_bytes(b"\xff\xfe{"),
    "the log's checkpoint from another collection": lambda lab, other: shutil.copy(
        other / LOG_SUBDIR / "checkpoint", lab / LOG_SUBDIR / "checkpoint"),
    "the whole log from another collection": lambda lab, other: (
        shutil.rmtree(lab / LOG_SUBDIR), shutil.copytree(other / LOG_SUBDIR, lab / LOG_SUBDIR)),
    "the log's checkpoint truncated": lambda lab, other: _truncate(
        lab / LOG_SUBDIR / "checkpoint"),
    "the log deleted": lambda lab, other: shutil.rmtree(lab / LOG_SUBDIR),
    "the frontier garbage": lambda lab, other: (lab / LOG_SUBDIR / "frontier.json").write_text(
        '{"size": 5, "hashes": ["zz"]}'),
    "the frontier not an object": lambda lab, other: (
        lab / LOG_SUBDIR / "frontier.json").write_text("[]"),
    "the key record deleted": lambda lab, other: [p.unlink() for p in (lab / "keys").glob("*")],
    "a shoe commitment deleted": lambda lab, other: next((lab / "shoes").glob("*")).unlink(),
    "another collection's round added": lambda lab, other: shutil.copy(
        _rounds(other)[0], lab / ROUNDS_SUBDIR / _rounds(other)[0].name),
}


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_every_tampering_fails_with_a_line_and_no_traceback(
        collections: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        tamper: str) -> None:
    source, apart, operator = collections["a"]
    other = collections["b"][0]
    lab = tmp_path / "lab"
    shutil.copytree(source, lab)
    args = ("audit", "verify", str(lab), "--keys", str(collections["keys"]), "--checkpoint",
            str(apart), "--operator", operator)
    code, out = run(capsys, *args)
    assert code == 0, out  # untouched, it passes
    TAMPERS[tamper](lab, other)
    code, out = run(capsys, *args)
    lines = out.strip().splitlines()
    assert code == 1, out
    assert "Traceback" not in out
    assert lines and lines[-1].startswith("audit FAIL"), out
    assert any(line.startswith("FAIL ") for line in lines if FINDING.match(line)), out


def test_the_checkpoint_of_another_collection_fails(
        collections: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    lab, _, operator = collections["a"]
    other_apart = collections["b"][1]
    code, out = run(capsys, "audit", "verify", str(lab), "--keys", str(collections["keys"]),
                    "--checkpoint", str(other_apart), "--operator", operator)
    assert code == 1 and "Traceback" not in out, out
    assert out.strip().splitlines()[-1].startswith("audit FAIL"), out
    assert "is a checkpoint of the log" in out, out
