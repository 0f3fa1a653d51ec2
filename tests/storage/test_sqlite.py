"""The SQLite storage: migrations, durability settings, versioned writes, constraints, and that
an acknowledged write survives a SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from service_helpers import EUR, OP

from rng_service.core.errors import Conflict, IllegalState, Unavailable
from rng_service.service.ports import (
    AccountKey,
    AccountKind,
    EntryKind,
    Mode,
    Posting,
    RoundRow,
    RoundStatus,
    ShoeRow,
    ShoeStatus,
    utc_now,
)
from rng_service.service.wallet import WalletService
from rng_service.storage.sqlite import SqliteStorage, migrations


def test_migrations_apply_once_and_are_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "db" / "fairshoe.db"
    first = SqliteStorage(path)
    assert first.applied_migrations == [v for v, _, _ in migrations()] == [1, 2, 3]
    first.close()
    again = SqliteStorage(path)
    assert again.applied_migrations == []
    conn = again._connection()
    assert conn.execute("SELECT version, name FROM schema_version").fetchall() == [
        (1, "0001_initial.sql"), (2, "0002_export_and_rng_draws.sql"),
        (3, "0003_ledger_reference.sql")]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
    again.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fairshoe.db"
    SqliteStorage(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO schema_version VALUES (99, 'future', 'now')")
    with pytest.raises(Unavailable, match="schema version 99"):
        SqliteStorage(path)


def _shoe(shoe_id: str = "s1") -> ShoeRow:
    now = utc_now()
    return ShoeRow(OP, shoe_id, "ann", "snap", "d" * 64, 2, None, "c" * 64, b"sealed", b"", 0, 0,
                   ShoeStatus.COMMITTED, 1, now, now)


def _round(round_id: str, shoe_id: str = "s1") -> RoundRow:
    now = utc_now()
    return RoundRow(OP, round_id, "ann", "snap", "d" * 64, "medium", Mode.REAL, EUR,
                    RoundStatus.OPEN, 1, b"{}", shoe_id, now, now)


def test_versioned_updates_refuse_a_stale_writer(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    with storage.transaction() as uow:
        uow.insert_shoe(_shoe())
        uow.insert_round(_round("r1"))
    row = _round("r1")
    with storage.transaction() as uow:
        uow.update_round(RoundRow(**{**row.__dict__, "version": 2}), expected_version=1)
    with pytest.raises(Conflict) as info, storage.transaction() as uow:
        uow.update_round(RoundRow(**{**row.__dict__, "version": 2}), expected_version=1)
    assert info.value.reason == "CONCURRENT_UPDATE"
    with pytest.raises(Conflict) as info, storage.transaction() as uow:
        uow.insert_round(_round("r2"))  # a second open round of one player and game
    assert info.value.reason == "ROUND_IN_PROGRESS"
    with pytest.raises(Conflict), storage.transaction() as uow:
        uow.insert_shoe(_shoe("s2"))  # a second current shoe of one player and game
    storage.close()


def test_a_failed_transaction_leaves_nothing_and_snapshots_are_read_only(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    ann = AccountKey(OP, "ann", EUR, Mode.REAL)
    cash = ann.other("@cash")
    with storage.transaction() as uow:
        uow.open_account(ann, AccountKind.PLAYER)
        uow.open_account(cash, AccountKind.SYSTEM)
        uow.post(Posting(cash, ann, 500, EntryKind.DEPOSIT))
    with pytest.raises(IllegalState) as info, storage.transaction() as uow:
        uow.post(Posting(cash, ann, 100, EntryKind.DEPOSIT))  # applied, then rolled back
        uow.post(Posting(ann, cash, 1000, EntryKind.WITHDRAWAL))
    assert info.value.reason == "INSUFFICIENT_FUNDS"
    with storage.snapshot() as uow:
        assert uow.get_balance(ann) == 500 and uow.get_balance(cash) == -500
        assert len(uow.list_entries(ann, 10, None)) == 1
        with pytest.raises(RuntimeError):
            uow.open_account(ann.other("bob"), AccountKind.PLAYER)
    storage.close()


_WRITER = textwrap.dedent("""
    import sys
    from rng_service.storage.sqlite import SqliteStorage
    from rng_service.service.wallet import WalletService
    wallet = WalletService(SqliteStorage(sys.argv[1]))
    n = 0
    while True:
        n += 1
        wallet.deposit("default", "ann", "EUR", 1, request_id=f"dep-{n}")
        print(n, flush=True)  # acknowledged only after COMMIT returned
""")


def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "fairshoe.db"
    SqliteStorage(path).close()
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    acked = 0
    for line in proc.stdout:
        acked = int(line)
        if acked >= 40:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    storage = SqliteStorage(path)
    balance = WalletService(storage).get_balance(OP, "ann", EUR).balance
    assert balance >= acked  # every acknowledged deposit is there (one more may have committed)
    with storage.snapshot() as uow:
        assert all(uow.get_response(OP, f"dep-{n}") is not None for n in range(1, acked + 1))
    storage.close()
