"""What only the SQLite storage has: its migrations and pragmas (WAL, synchronous=FULL, foreign
keys), and that an acknowledged write survives a SIGKILL of the writer. What both databases do
is in test_storage.py."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.service_helpers import EUR, OP
from support.storage_helpers import shoe
from support.waits import wait_until

from rng_service.core.errors import IllegalState, Unavailable
from rng_service.service.ports import (
    AccountKey,
    AccountKind,
    EntryKind,
    LeafKind,
    Mode,
    NewLeaf,
    Posting,
)
from rng_service.service.wallet import WalletService
from rng_service.storage.schema import history
from rng_service.storage.sqlite import (
    SqliteStorage,
    SqliteUnitOfWork,
    migrations,
    statements,
)


def test_migrations_apply_once_and_are_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "db" / "fairshoe.db"
    first = SqliteStorage(path)
    assert first.applied_migrations == [v for v, _, _ in migrations()] == list(range(1, 11))
    first.close()
    again = SqliteStorage(path)
    assert again.applied_migrations == []
    conn = again._connection()
    assert conn.execute("SELECT version, name FROM schema_version ORDER BY version"
                        ).fetchall() == history("sqlite") == [
        (1, "0001_initial.sql"), (2, "0002_export_and_rng_draws.sql"),
        (3, "0003_ledger_reference.sql"), (4, "0004_transparency_log.sql"),
        (5, "0005_shoe_mode.sql"), (6, "0006_ledger_public_id.sql"),
        (7, "0007_seamless_wallet.sql"), (8, "0008_wallet_http.sql"),
        (9, "0009_log_queue.sql"), (10, "0010_checks_without_lists.sql")]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
    again.close()


def test_the_checks_rewritten_without_lists_keep_a_databases_rows_and_refusals(
        tmp_path: Path) -> None:
    """Migration 10 edits four tables' CHECK constraints in sqlite_schema (an IN list becomes
    comparisons joined by OR): a database at version 9 keeps its rows, passes the integrity
    check, and a connection opened before the migration reads the new constraints (the schema
    cookie moved on), which refuse a value outside the list as the old ones did."""
    path = tmp_path / "fairshoe.db"
    leaf = _LEAF
    with contextlib.closing(_at_version_9(path)) as old:
        old.execute(leaf, (0, "round"))
        assert " IN (" in _check_text(old, "log_leaves")
        storage = SqliteStorage(path)
        assert storage.applied_migrations == [10]
        storage.close()
        for table in ("rounds", "shoes", "ledger_entries", "log_leaves"):
            assert " IN (" not in _check_text(old, table).split("mode")[0], table
        assert old.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert old.execute("SELECT leaf_index, kind FROM log_leaves").fetchall() == [(0, "round")]
        old.execute(leaf, (1, "rng_reveal"))
        with pytest.raises(sqlite3.IntegrityError, match="kind = 'key' OR"):
            old.execute(leaf, (2, "bogus"))


_KILLED_IN_MIGRATION = textwrap.dedent("""
    import os, signal, sys
    from rng_service.storage import sqlite
    from rng_service.storage.sqlite import SqliteStorage
    steps, plain = int(sys.argv[2]), sqlite.statements

    def statements(script):  # killed once migration 10 has run ``steps`` of its statements
        ran = 0
        for statement in plain(script):
            if script.startswith("-- Fairshoe schema v10") and ran == steps:
                os.kill(os.getpid(), signal.SIGKILL)
            yield statement
            ran += 1
        if script.startswith("-- Fairshoe schema v10") and ran == steps:  # before its COMMIT
            os.kill(os.getpid(), signal.SIGKILL)
    sqlite.statements = statements
    SqliteStorage(sys.argv[1])
""")


@pytest.mark.processes
def test_a_migration_to_10_killed_at_any_statement_leaves_version_9_whole(
        tmp_path: Path) -> None:
    """SIGKILL after each of migration 10's statements (the sqlite_schema edits with
    writable_schema on, the index made and dropped, before the check and the COMMIT): the
    database is still at version 9 with its old constraints and rows, passes the integrity
    check, and the next start migrates it."""
    count = len(list(statements(migrations()[9][2])))
    for steps in range(1, count + 1):
        path = tmp_path / f"v9-{steps}.db"
        with contextlib.closing(_at_version_9(path)) as old:
            old.execute(_LEAF, (0, "round"))
        proc = subprocess.run([sys.executable, "-c", _KILLED_IN_MIGRATION, str(path),
                               str(steps)], check=False)
        assert proc.returncode == -signal.SIGKILL, steps
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], steps
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (9,)
            assert " IN (" in _check_text(conn, "log_leaves"), steps
            with pytest.raises(sqlite3.IntegrityError, match="kind IN"):
                conn.execute(_LEAF, (1, "bogus"))
        storage = SqliteStorage(path)
        assert storage.applied_migrations == [10], steps
        storage.close()
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], steps
            assert conn.execute("SELECT leaf_index, kind FROM log_leaves").fetchall() == [
                (0, "round")]


_LEAF = ("INSERT INTO log_leaves (operator, leaf_index, kind, ident, leaf_hash, entry, "
         "created_at) VALUES ('default', ?, ?, 'i', zeroblob(32), NULL, 't')")


def _at_version_9(path: Path) -> sqlite3.Connection:
    """A connection to a new database at ``path`` migrated by the first nine migrations."""
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT "
                "NULL, applied_at TEXT NOT NULL)")
    for version, name, sql in migrations()[:9]:
        for statement in statements(sql):
            old.execute(statement)
        old.execute("INSERT INTO schema_version VALUES (?, ?, 'then')", (version, name))
    return old


def _check_text(conn: sqlite3.Connection, table: str) -> str:
    (sql,), = conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?",
                           (table,)).fetchall()
    return str(sql)


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


@pytest.mark.processes
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


# ----- group commit ----------------------------------------------------------------------------


def _wait_until(condition: Callable[[], bool]) -> None:
    # polled, bounded only against a hung thread (10 s once: a loaded machine can outlast it)
    wait_until(condition, "the other writer's step")


def _accounts(uow: SqliteUnitOfWork, holder: str) -> AccountKey:
    key = AccountKey(OP, holder, EUR, Mode.REAL)
    uow.open_account(key, AccountKind.PLAYER)
    uow.open_account(key.other("@cash"), AccountKind.SYSTEM)
    return key


def _two_writers(storage: SqliteStorage, second_fails: bool) -> list[str]:
    """Writer 1 holds its transaction open until writer 2 waits for the write lock, so both
    share one batch; returns what happened, in order."""
    steps: list[str] = []

    def first() -> None:
        with storage.transaction() as uow:
            ann = _accounts(uow, "ann")
            uow.post(Posting(ann.other("@cash"), ann, 100, EntryKind.DEPOSIT))
            steps.append("1 wrote")
            _wait_until(lambda: storage._group.queued == 1)
        steps.append("1 returned")

    def second() -> None:
        try:
            with storage.transaction() as uow:
                bob = _accounts(uow, "bob")
                uow.post(Posting(bob.other("@cash"), bob, 200, EntryKind.DEPOSIT))
                steps.append("2 wrote")
                if second_fails:
                    raise IllegalState("refused after writing", reason="TEST")
        except IllegalState:
            steps.append("2 refused")
        else:
            steps.append("2 returned")

    one = threading.Thread(target=first)
    one.start()
    _wait_until(lambda: "1 wrote" in steps)
    two = threading.Thread(target=second)
    two.start()
    one.join()
    two.join()
    return steps


def test_concurrent_transactions_share_one_commit_and_return_after_it(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    commits = storage.commits
    steps = _two_writers(storage, second_fails=False)
    assert storage.commits - commits == 1  # one COMMIT (one fsync) for both
    # writer 1 answers only once the COMMIT that holds it is done, after writer 2's body
    assert steps.index("2 wrote") < steps.index("1 returned")
    with storage.snapshot() as uow:
        for holder, amount in (("ann", 100), ("bob", 200)):
            assert uow.get_balance(AccountKey(OP, holder, EUR, Mode.REAL)) == amount
    storage.close()


def test_a_failing_transaction_in_a_group_rolls_back_only_itself(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    steps = _two_writers(storage, second_fails=True)
    assert "2 refused" in steps and "1 returned" in steps
    with storage.snapshot() as uow:
        assert uow.get_balance(AccountKey(OP, "ann", EUR, Mode.REAL)) == 100
        assert uow.get_balance(AccountKey(OP, "bob", EUR, Mode.REAL)) is None  # rolled back
    storage.close()


def test_the_first_transaction_of_a_group_failing_rolls_back_only_itself(tmp_path: Path
                                                                          ) -> None:
    """The first transaction of a batch fails after writing, while another waits to join: its
    changes alone are rolled back, it raises its own error, and the other commits."""
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    steps: list[str] = []

    def first() -> None:
        try:
            with storage.transaction() as uow:
                ann = _accounts(uow, "ann")
                uow.post(Posting(ann.other("@cash"), ann, 100, EntryKind.DEPOSIT))
                steps.append("1 wrote")
                _wait_until(lambda: storage._group.queued == 1)
                raise IllegalState("refused after writing", reason="TEST")
        except IllegalState:
            steps.append("1 refused")

    def second() -> None:
        with storage.transaction() as uow:
            bob = _accounts(uow, "bob")
            uow.post(Posting(bob.other("@cash"), bob, 200, EntryKind.DEPOSIT))
        steps.append("2 returned")

    one = threading.Thread(target=first)
    one.start()
    _wait_until(lambda: "1 wrote" in steps)
    two = threading.Thread(target=second)
    two.start()
    one.join()
    two.join()
    assert sorted(steps) == ["1 refused", "1 wrote", "2 returned"]
    with storage.snapshot() as uow:
        assert uow.get_balance(AccountKey(OP, "ann", EUR, Mode.REAL)) is None  # rolled back
        assert uow.get_balance(AccountKey(OP, "bob", EUR, Mode.REAL)) == 200
    with storage.transaction() as uow:  # and a failing transaction alone changes nothing
        _accounts(uow, "cy")
    with pytest.raises(IllegalState), storage.transaction() as uow:
        cy = AccountKey(OP, "cy", EUR, Mode.REAL)
        uow.post(Posting(cy.other("@cash"), cy, 300, EntryKind.DEPOSIT))
        raise IllegalState("refused after writing", reason="TEST")
    with storage.snapshot() as uow:
        assert uow.get_balance(AccountKey(OP, "cy", EUR, Mode.REAL)) == 0
    storage.close()


def test_a_failed_group_commit_fails_every_transaction_in_it(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    with storage.transaction() as uow:  # the schema and the writer connection exist
        _accounts(uow, "ann")
    writer = storage._writer
    assert writer is not None
    # a deferred foreign key violation fails the COMMIT itself
    with pytest.raises(Unavailable), storage.transaction() as uow:
        writer.execute("PRAGMA defer_foreign_keys=ON")
        writer.execute("INSERT INTO rounds (operator, round_id, player, game, rules_digest, "
                       "level, mode, currency, status, version, state, shoe_id, created_at, "
                       "updated_at) VALUES ('default', 'r', 'ann', 'snap', 'd', 'l', 'REAL', "
                       "'EUR', 'open', 1, x'', 'no-such-shoe', 't', 't')")
    with storage.snapshot() as uow:
        assert uow.get_round(OP, "r") is None
    with storage.transaction() as uow:  # the writer is usable again
        uow.open_account(AccountKey(OP, "bob", EUR, Mode.REAL), AccountKind.PLAYER)
    storage.close()


_THREADED_WRITER = textwrap.dedent("""
    import sys, threading
    from rng_service.storage.sqlite import SqliteStorage
    from rng_service.service.wallet import WalletService
    wallet = WalletService(SqliteStorage(sys.argv[1]))
    lock = threading.Lock()
    def deposits(t):
        n = 0
        while True:
            n += 1
            wallet.deposit("default", f"p{t}", "EUR", 1, request_id=f"dep-{t}-{n}")
            with lock:
                print(t, n, flush=True)  # acknowledged only after its group's COMMIT
    for t in range(8):
        threading.Thread(target=deposits, args=(t,)).start()
""")


@pytest.mark.processes
def test_acknowledged_concurrent_writes_survive_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "fairshoe.db"
    SqliteStorage(path).close()
    proc = subprocess.Popen([sys.executable, "-c", _THREADED_WRITER, str(path)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    acked: dict[int, int] = {}
    for line in proc.stdout:
        t, n = map(int, line.split())
        acked[t] = n
        if sum(acked.values()) >= 200:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    storage = SqliteStorage(path)
    with storage.snapshot() as uow:
        for t, n in acked.items():
            assert all(uow.get_response(OP, f"dep-{t}-{k}") is not None
                       for k in range(1, n + 1)), t
            (balance,) = uow._one("SELECT balance FROM accounts WHERE holder = ?", (f"p{t}",))
            assert balance >= n
    storage.close()


def _temporary_files() -> list[str]:
    """SQLite's temporary files this process has open (``etilqs_*``, unlinked at open)."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if "etilqs_" in target:
                found.append(target)
    return found


def _hold_the_batch_open(storage: SqliteStorage) -> None:
    """A transaction that ends only once another writer waits to join its batch."""
    with storage.transaction():
        _wait_until(lambda: storage._group.queued == 1)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_write_transaction_keeps_its_savepoint_journal_in_memory(tmp_path: Path) -> None:
    """A write transaction joining a batch runs in a SAVEPOINT, whose journal (the prior content
    of every page it changes) went to a temporary file once past 64 KiB: an open, writes and a
    close per transaction, for a journal never needed after COMMIT. It stays in memory now, and a
    body that raises is still rolled back to its savepoint alone."""
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    rows = [dataclasses.replace(shoe(f"s{i}", player=f"p{i}"), client_seed=os.urandom(3000))
            for i in range(60)]  # about one row a page
    with storage.transaction() as uow:
        for row in rows:
            uow.insert_shoe(row)
    seen: list[str] = []

    def change_every_page(uow: SqliteUnitOfWork) -> None:  # about 240 KiB of changed pages
        for row in rows:
            uow.update_shoe(dataclasses.replace(row, position=row.position + 1,
                                                version=row.version + 1), row.version)
        seen.extend(_temporary_files())

    for fails in (True, False):  # each the second of its batch: in a savepoint
        holder = threading.Thread(target=_hold_the_batch_open, args=(storage,))
        holder.start()
        _wait_until(storage._write_lock.locked)
        with contextlib.suppress(RuntimeError), storage.transaction() as uow:
            assert storage._group.size == 2
            change_every_page(uow)
            if fails:
                raise RuntimeError("refused")
        holder.join()
    assert seen == []
    with storage.snapshot() as uow:  # the refused body was rolled back, the other one kept
        assert [uow.get_shoe(OP, row.shoe_id).position for row in rows] == [1] * len(rows)
    storage.close()


def test_a_known_operator_is_looked_up_once_per_storage(tmp_path: Path) -> None:
    """Once a committed transaction has seen an operator, later ones do not look it up again
    (an operator is never deleted: every table refers to it)."""
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    with storage.transaction() as uow:
        assert uow.operator_exists(OP)
    statements: list[str] = []
    writer = storage._writer_connection()
    writer.set_trace_callback(statements.append)
    try:
        with storage.transaction() as uow:
            assert uow.operator_exists(OP)
    finally:
        writer.set_trace_callback(None)
    assert statements and not [s for s in statements if "operators" in s]
    storage.close()


_KEY = NewLeaf(LeafKind.KEY, "ed25519:k", b'{"key":1}')


def _commitment(n: int) -> NewLeaf:
    return NewLeaf(LeafKind.SHOE_COMMITMENT, f"shoe-{n}", f'{{"shoe":{n}}}'.encode())


def test_a_key_logged_in_a_batch_whose_commit_fails_is_logged_again(tmp_path: Path) -> None:
    """The first transaction of a batch logs the key, a second one joins and sees it logged,
    and the shared COMMIT fails: both raise, and neither leaves the key taken as logged (the
    next append logs it again, at index 0)."""
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    with storage.transaction() as uow:  # the writer connection exists
        assert uow.operator_exists(OP)
    outcome: list[str] = []

    def first() -> None:
        try:
            with storage.transaction() as uow:
                uow.append_leaf(OP, _commitment(0), prerequisite=_KEY)
                _wait_until(lambda: storage._group.queued == 1)
        except Unavailable:
            outcome.append("1 unavailable")
        else:
            outcome.append("1 returned")

    holder = threading.Thread(target=first)
    holder.start()
    _wait_until(storage._write_lock.locked)
    with pytest.raises(Unavailable), storage.transaction() as uow:
        assert storage._group.size == 2
        uow.append_leaf(OP, _commitment(1), prerequisite=_KEY)
        uow.flush_log()  # finds the first one's key leaf (uncommitted) in the batch
        _fail_at_commit(uow)
    holder.join()
    assert outcome == ["1 unavailable"]
    with storage.transaction() as uow:
        uow.append_leaf(OP, _commitment(2), prerequisite=_KEY)
    with storage.snapshot() as uow:
        assert [(leaf.index, leaf.ident) for leaf in uow.list_leaves(OP, 0, 10)] == [
            (0, "ed25519:k"), (1, "shoe-2")]
    storage.close()


def test_a_base_exception_in_a_transaction_alone_rolls_it_back(tmp_path: Path) -> None:
    """A KeyboardInterrupt (or SystemExit) in the body of a batch's first transaction, which has
    no savepoint: everything it wrote is gone, nothing it saw is remembered, the next writer
    begins a batch of its own."""
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    with pytest.raises(KeyboardInterrupt), storage.transaction() as uow:
        assert uow.add_operator("op-gone") and uow.operator_exists("op-gone")
        uow.append_leaf(OP, _commitment(0), prerequisite=_KEY)
        uow.flush_log()
        raise KeyboardInterrupt
    assert storage._group.open_batch is None
    with storage.transaction() as uow:
        assert not uow.operator_exists("op-gone")
        uow.append_leaf(OP, _commitment(1), prerequisite=_KEY)
    with storage.snapshot() as uow:
        assert [(leaf.index, leaf.ident) for leaf in uow.list_leaves(OP, 0, 10)] == [
            (0, "ed25519:k"), (1, "shoe-1")]
    storage.close()


def _fail_at_commit(uow: SqliteUnitOfWork) -> None:
    """Write a row that breaks a deferred foreign key: the transaction's COMMIT fails."""
    uow._conn.execute("PRAGMA defer_foreign_keys=ON")
    uow._conn.execute(
        "INSERT INTO rounds (operator, round_id, player, game, rules_digest, level, mode, "
        "currency, status, version, state, shoe_id, created_at, updated_at) VALUES "
        "('default', 'r', 'ann', 'snap', 'd', 'l', 'REAL', 'EUR', 'open', 1, x'', "
        "'no-such-shoe', 't', 't')")


def test_a_failed_commit_is_reported_however_long_its_waiter_is_held_up(tmp_path: Path) -> None:
    """A transaction whose COMMIT failed raises however many batches (committed or failed)
    end before its thread looks (a thread held off the GIL or the CPU under load): a failure
    is kept until every member of its batch has read it, so it is never taken as durable."""
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    real_wait = storage._wait_durable
    later = 1100  # more batches than a failure record used to outlive

    def others() -> None:
        for i in range(later):
            with storage.transaction() as uow:
                uow.add_operator(f"op-{i}")
        with pytest.raises(Unavailable), storage.transaction() as uow:
            _fail_at_commit(uow)  # another failure: it used to forget the old ones

    def held_up(batch: int) -> None:
        if batch == failing:
            worker = threading.Thread(target=others)
            worker.start()
            worker.join()
        real_wait(batch)

    storage._wait_durable = held_up  # type: ignore[method-assign]
    failing = storage._group.last_batch + 1
    with pytest.raises(Unavailable), storage.transaction() as uow:
        _fail_at_commit(uow)
    assert storage._group.durable >= failing + later
    assert not storage._group.failed  # each failure's one member read it: none is kept
    storage.close()


def test_a_known_account_is_opened_without_a_statement(tmp_path: Path) -> None:
    """A round opens its house account each time it starts: after the first commit that opened
    (or found) it, that costs no statement."""
    storage = SqliteStorage(tmp_path / "fairshoe.db")
    house = AccountKey(OP, "@house/00", EUR, Mode.REAL)
    ran: list[str] = []
    try:
        with storage.transaction() as uow:
            uow.open_account(house, AccountKind.SYSTEM)
        storage._writer_connection().set_trace_callback(ran.append)
        with storage.transaction() as uow:
            assert not uow.open_account(house, AccountKind.SYSTEM)
        assert not [s for s in ran if "accounts" in s]
        assert ran  # the trace was on: BEGIN and COMMIT ran
    finally:
        storage.close()
