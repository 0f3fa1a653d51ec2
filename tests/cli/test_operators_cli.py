"""`fairshoe operators add|list` on a SQLite database file (the storage suite runs the same
provisioning on PostgreSQL too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_helpers import run


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


def test_an_operators_wallet_is_set_and_listed_without_its_credentials(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    database = str(tmp_path / "f.db")
    creds, ca = tmp_path / "secret-client.pem", tmp_path / "secret-ca.pem"
    creds.write_text("x")
    ca.write_text("y")
    assert run(["operators", "add", "casino", "--database", database]) == 0
    capsys.readouterr()
    assert run(["operators", "wallet", "casino", "--kind", "grpc", "--endpoint",
                "wallet.casino:443", "--timeout-ms", "1500", "--credentials", str(creds),
                "--ca", str(ca), "--database", database]) == 0
    out = capsys.readouterr().out
    assert out == "casino: wallet grpc wallet.casino:443 (mutual TLS, 1500 ms)\n"
    assert run(["operators", "list", "--database", database]) == 0
    listing = capsys.readouterr().out
    rows = {line.split("\t")[0]: line.split("\t")[2] for line in listing.splitlines()}
    assert rows == {"casino": "grpc wallet.casino:443", "default": "internal"}
    assert "secret" not in listing
    assert run(["operators", "wallet", "casino", "--kind", "internal",
                "--database", database]) == 0
    assert capsys.readouterr().out == "casino: wallet internal\n"


def test_an_http_wallet_is_set_with_its_secret_files_path_never_its_content(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    database = str(tmp_path / "f.db")
    key = tmp_path / "hmac.key"
    key.write_text("open-sesame-" * 4)
    assert run(["operators", "wallet", "default", "--kind", "http", "--endpoint",
                "https://wallet.casino/fairshoe/v1", "--hmac-secret-file", str(key),
                "--database", database]) == 0
    assert capsys.readouterr().out == (
        f"default: wallet http https://wallet.casino/fairshoe/v1 (TLS, HMAC secret from "
        f"{key}, 2000 ms)\n")
    assert run(["operators", "list", "--database", database]) == 0
    listing = capsys.readouterr().out
    assert listing.split("\t")[2] == "http https://wallet.casino/fairshoe/v1\n"
    assert "sesame" not in listing


@pytest.mark.parametrize(("argv", "field"), [
    (["--kind", "http", "--endpoint", "wallet.casino:443", "--hmac-secret-file", __file__],
     "endpoint"),
    (["--kind", "http", "--endpoint", "https://wallet.casino/w"], "hmac_secret"),
    (["--kind", "http", "--endpoint", "https://wallet.casino/w", "--hmac-secret-file",
      "/nonexistent/secret.key"], "hmac_secret"),
    (["--kind", "grpc", "--endpoint", "h:1", "--hmac-secret-file", __file__], "hmac_secret"),
    (["--kind", "grpc"], "endpoint"),
    (["--kind", "grpc", "--endpoint", "h:1", "--timeout-ms", "0"], "timeout_ms"),
    (["--kind", "grpc", "--endpoint", "h:1", "--timeout-ms", "10001"], "timeout_ms"),
    (["--kind", "grpc", "--endpoint", "h:1", "--ca", "/nonexistent/secret-ca.pem"], "ca"),
])
def test_a_bad_wallet_setting_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], field: str) -> None:
    database = str(tmp_path / "f.db")
    assert run(["operators", "wallet", "default", *argv, "--database", database]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f": {field}: " in err, err
    assert "/nonexistent/" not in err and "test_operators_cli" not in err, err  # no path
    assert run(["operators", "list", "--database", database]) == 0
    assert capsys.readouterr().out.split("\t")[2] == "internal\n"


def test_an_unknown_operators_wallet_is_not_found(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["operators", "wallet", "nobody", "--kind", "internal",
                "--database", str(tmp_path / "f.db")]) == 2
    assert "operator: no operator 'nobody'" in capsys.readouterr().err
