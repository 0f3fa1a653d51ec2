"""Migration 0002 (time indexes, rng_draws), the envelope listing the export pages through, and
opening a database read-only: on SQLite and PostgreSQL (the ``storage`` fixture) but for the
SQLite file's own migration from version 1."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest
from support.pg_server import PgServer

from rng_service.core.errors import Conflict, Unavailable
from rng_service.service.ports import (
    DEFAULT_OPERATOR,
    EnvelopeKind,
    RngDrawRow,
    Storage,
    StoredEnvelope,
)
from rng_service.storage import open_storage
from rng_service.storage.sqlite import SqliteStorage, migrate, migrations, statements

OP = DEFAULT_OPERATOR


def test_a_version_1_database_is_migrated_to_the_latest(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT "
                     "NOT NULL, applied_at TEXT NOT NULL)")
        conn.execute("BEGIN")
        version, name, sql = migrations()[0]
        for statement in statements(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, ?, 'then')", (version, name))
        conn.execute("COMMIT")
    db = SqliteStorage(path)
    assert db.applied_migrations == list(range(2, len(migrations()) + 1))
    db.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert migrate(conn) == []


def draw_row(draw_id: str, at: str) -> RngDrawRow:
    return RngDrawRow(OP, draw_id, "shuffle", f"c-{draw_id}", b"rec-" + draw_id.encode(),
                      b"rev-" + draw_id.encode(), at)


def fill(storage: Storage) -> None:
    with storage.transaction() as uow:
        for i, at in enumerate(("2024-01-01T00:00:00.000002Z", "2024-01-01T00:00:00.000001Z",
                                "2024-01-01T00:00:00.000002Z", "2024-01-02T00:00:00.000000Z")):
            uow.put_rng_draw(draw_row(f"{i:032x}", at))


def listed(storage: Storage, start: str, end: str, after: StoredEnvelope | None,
           limit: int) -> list[StoredEnvelope]:
    with storage.snapshot() as uow:
        return uow.list_envelopes(OP, start, end, after, limit)


def test_envelopes_in_time_then_kind_then_id_order(storage: Storage) -> None:
    fill(storage)
    items = listed(storage, "2024-01-01", "2025", None, 100)
    assert [(e.kind, e.ident[-1]) for e in items] == [
        (EnvelopeKind.RNG, "1"), (EnvelopeKind.RNG_REVEAL, "1"),
        (EnvelopeKind.RNG, "0"), (EnvelopeKind.RNG, "2"),
        (EnvelopeKind.RNG_REVEAL, "0"), (EnvelopeKind.RNG_REVEAL, "2"),
        (EnvelopeKind.RNG, "3"), (EnvelopeKind.RNG_REVEAL, "3")]
    assert items[0].envelope == b"rec-" + items[0].ident.encode()
    paged: list[StoredEnvelope] = []
    after = None
    while page := listed(storage, "2024-01-01", "2025", after, 3):
        paged += page
        after = page[-1]
    assert paged == items


def test_time_bounds_are_start_inclusive_end_exclusive(storage: Storage) -> None:
    fill(storage)
    assert len(listed(storage, "2024-01-01T00:00:00.000002Z", "2024-01-02T00:00:00.000000Z",
                      None, 100)) == 4
    assert listed(storage, "2024-01-03", "2025", None, 100) == []
    with storage.snapshot() as uow:
        assert uow.list_envelopes("other", "2024", "2025", None, 100) == []


def test_a_commitment_serves_one_draw(storage: Storage) -> None:
    # SQLite reports the unique index as an IntegrityError; PostgreSQL's unique violation is
    # a Conflict (as for any unique index there)
    with pytest.raises((sqlite3.IntegrityError, Conflict)), storage.transaction() as uow:
        uow.put_rng_draw(draw_row("a" * 32, "2024"))
        uow.put_rng_draw(RngDrawRow(OP, "b" * 32, "shuffle", f"c-{'a' * 32}", b"", b"", "2024"))


def test_read_only_storage_reads_and_never_writes(storage: Storage, database_url: str) -> None:
    fill(storage)
    reader = open_storage(database_url, read_only=True)
    try:
        assert reader.applied_migrations == []  # type: ignore[attr-defined]
        assert len(listed(reader, "2024", "2025", None, 100)) == 8
        with pytest.raises(RuntimeError, match="read-only"), reader.transaction():
            pass
        # the database itself refuses: SQLite's read-only file handle, PostgreSQL's
        # default_transaction_read_only (reported as Unavailable, as a standby's refusal is)
        with pytest.raises((sqlite3.OperationalError, Unavailable), match=r"read-?only"), \
                reader.snapshot() as uow:
            uow._conn.execute("DELETE FROM rng_draws")  # type: ignore[attr-defined]
    finally:
        reader.close()
    assert len(listed(storage, "2024", "2025", None, 100)) == 8


def test_read_only_refuses_a_missing_or_old_database(tmp_path: Path) -> None:
    with pytest.raises(Unavailable):
        SqliteStorage(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    old = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(old)) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT, "
                     "applied_at TEXT)")
        conn.execute("INSERT INTO schema_version VALUES (1, '0001_initial.sql', 'then')")
        conn.commit()
    with pytest.raises(Unavailable) as err:
        SqliteStorage(old, read_only=True)
    assert err.value.reason == "SCHEMA_TOO_OLD"


def test_read_only_refuses_a_missing_or_old_postgresql_database(pg_server: PgServer,
                                                                pg_empty_url: str) -> None:
    with pytest.raises(Unavailable) as err:
        open_storage(pg_server.url("no_such_database"), read_only=True)
    assert err.value.reason == "DATABASE_UNAVAILABLE"
    with pytest.raises(Unavailable, match="not a Fairshoe database"):
        open_storage(pg_empty_url, read_only=True)
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT, "
                     "applied_at TEXT)")
        conn.execute("INSERT INTO schema_version VALUES (1, '0001_initial.sql', 'then')")
    with pytest.raises(Unavailable) as err:
        open_storage(pg_empty_url, read_only=True)
    assert err.value.reason == "SCHEMA_TOO_OLD"
    with psycopg.connect(pg_empty_url) as conn:  # nothing was created or migrated
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                              ).fetchall()
    assert tables == [("schema_version",)]
