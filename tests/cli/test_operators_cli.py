"""`fairshoe operators add|list` on a SQLite database file (the storage suite runs the same
provisioning on PostgreSQL too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run


def test_add_then_list(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    database = str(tmp_path / "f.db")
    assert run(["operators", "add", "op-a", "op-b", "--database", database]) == 0
    assert capsys.readouterr().out.splitlines() == ["added op-a", "added op-b"]
    assert run(["operators", "add", "op-a", "--database", database]) == 0
    assert capsys.readouterr().out == "exists op-a\n"
    monkeypatch.setenv("FAIRSHOE_DATABASE", database)  # the server's database by default
    monkeypatch.delenv("FAIRSHOE_DATABASE_URL", raising=False)
    assert run(["operators", "list"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["default", "op-a", "op-b"]


def test_a_bad_name_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["operators", "add", "op a", "--database", str(tmp_path / "f.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fairshoe operators: operator: must be"), err


def test_one_bad_name_adds_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All or nothing: a typo among the names used to leave the names before it added."""
    database = str(tmp_path / "f.db")
    assert run(["operators", "add", "op-a", "op/b", "--database", database]) == 2
    assert "'op/b'" in capsys.readouterr().err
    assert run(["operators", "list", "--database", database]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["default"]
