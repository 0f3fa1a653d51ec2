"""One migration history for both databases, and the backend chosen by configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from rng_service.core import config
from rng_service.storage import backend_of, describe, open_storage, sqlite_path
from rng_service.storage.schema import DIALECTS, history, migrations
from rng_service.storage.sqlite import SqliteStorage


def test_every_dialect_has_the_same_migration_history() -> None:
    histories = {dialect: history(dialect) for dialect in DIALECTS}
    assert set(DIALECTS) == {"sqlite", "postgresql"}
    assert histories["sqlite"] == histories["postgresql"]
    assert histories["sqlite"][0] == (1, "0001_initial.sql")


def test_every_migration_creates_the_same_tables_in_each_dialect() -> None:
    def tables(sql: str) -> list[str]:
        return [line.split()[2] for line in sql.splitlines()
                if line.startswith("CREATE TABLE ")]

    for sqlite_step, pg_step in zip(migrations("sqlite"), migrations("postgresql"), strict=True):
        assert tables(sqlite_step.sql) == tables(pg_step.sql), sqlite_step.name


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown SQL dialect"):
        migrations("mysql")  # type: ignore[arg-type]


def test_the_backend_follows_the_url_scheme(tmp_path: Path) -> None:
    assert backend_of("postgresql://u@h/db") == backend_of("postgres://h/db") == "postgresql"
    assert backend_of(tmp_path / "x.db") == backend_of("sqlite:///tmp/x.db") == "sqlite"
    assert sqlite_path("sqlite:///tmp/x.db") == Path("/tmp/x.db")
    with pytest.raises(config.ConfigError, match="mysql"):
        backend_of("mysql://h/db")
    opened = open_storage(f"sqlite://{tmp_path}/via-url.db")
    assert isinstance(opened, SqliteStorage) and opened.path == tmp_path / "via-url.db"
    opened.close()


def test_the_configured_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(config.DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv(config.DATABASE_ENV, str(tmp_path / "file.db"))
    assert config.database_url() == str(tmp_path / "file.db")
    monkeypatch.setenv(config.DATABASE_URL_ENV, "postgresql://fairshoe@db/fairshoe")
    assert config.database_url() == "postgresql://fairshoe@db/fairshoe"
    monkeypatch.setenv(config.DATABASE_URL_ENV, str(tmp_path / "url.db"))
    opened = open_storage()
    assert isinstance(opened, SqliteStorage) and opened.path == tmp_path / "url.db"
    opened.close()


def test_a_database_is_described_without_its_password(tmp_path: Path) -> None:
    assert describe("postgresql://fs:s3cret@db:5432/fairshoe") == (
        "postgresql://fs:***@db:5432/fairshoe")
    assert describe("postgresql://fs@db/fairshoe") == "postgresql://fs@db/fairshoe"
    assert describe(f"sqlite://{tmp_path}/x.db") == str(tmp_path / "x.db")
