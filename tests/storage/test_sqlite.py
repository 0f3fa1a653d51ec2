"""What only the SQLite storage has: its migrations and pragmas (WAL, synchronous=FULL, foreign
keys), and that an acknowledged write survives a SIGKILL of the writer. What both databases do
is in test_storage.py."""

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

from rng_service.core.errors import Unavailable
from rng_service.service.wallet import WalletService
from rng_service.storage.schema import history
from rng_service.storage.sqlite import SqliteStorage, migrations


def test_migrations_apply_once_and_are_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "db" / "fairshoe.db"
    first = SqliteStorage(path)
    assert first.applied_migrations == [v for v, _, _ in migrations()] == [1, 2, 3]
    first.close()
    again = SqliteStorage(path)
    assert again.applied_migrations == []
    conn = again._connection()
    assert conn.execute("SELECT version, name FROM schema_version ORDER BY version"
                        ).fetchall() == history("sqlite") == [
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
