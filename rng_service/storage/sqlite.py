"""SQLite behind the service's storage ports: the embedded default for one host.

Durability: WAL journal with ``synchronous=FULL``, so a transaction that returned from COMMIT
survives a SIGKILL or a power cut; a use case answers only after its COMMIT, so nothing
acknowledged is lost.

Concurrency and group commit. Writes go through one writer connection, taken in turn by the
threads of the gRPC pool (a Python lock: a waiting writer is woken when the lock is free, not by
SQLite's busy handler, which sleeps up to 100 ms between tries). Each write transaction runs
inside the writer's open SQLite transaction (``BEGIN IMMEDIATE``), in a SAVEPOINT of it unless it
is the first (then nothing precedes it in the SQLite transaction), and the thread that finds no
other writer waiting COMMITs it: the transactions of concurrent requests share one COMMIT, so one
fsync, instead of one each. Every :meth:`SqliteStorage.transaction` returns (or raises its own
error) only once the COMMIT that holds it has returned, so an answer is still given only after
its data is durable; a body that raises rolls back its changes alone (to its savepoint; the first
rolls back the SQLite transaction, which then holds nothing else, and the next writer begins
another), and if the shared COMMIT fails every transaction in it fails with
``Unavailable`` and none is acknowledged. At most :data:`MAX_GROUP` transactions share a COMMIT.
Rows are still updated ``WHERE version = ?``, and other processes may write the same file
(``BEGIN IMMEDIATE`` waits for them up to the busy timeout). Readers use one connection per
thread in deferred transactions and see one WAL snapshot, never uncommitted rows.

The schema lives in ``migrations/sqlite/NNNN_name.sql`` (:mod:`rng_service.storage.schema`: the
same history as PostgreSQL's), applied once each, in order, at open, and recorded in
``schema_version``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rng_service.core import config
from rng_service.core.errors import Conflict, Unavailable
from rng_service.service.ports import (
    AccountKey,
    AccountKind,
    EnvelopeKind,
    LedgerEntry,
    MissingAccount,
    Mode,
    Posting,
    RoundCursor,
    RoundRow,
    ShoeRow,
    StoredEnvelope,
    StoredResponse,
    utc_now,
)
from rng_service.storage import schema
from rng_service.storage.dialect import EnvelopeTables
from rng_service.storage.known import Committed
from rng_service.storage.rows import ENTRY_COLUMNS as _ENTRY_COLUMNS
from rng_service.storage.rows import ENVELOPE_SOURCES as _ENVELOPE_SOURCES
from rng_service.storage.rows import ROUND_COLUMNS as _ROUND_COLUMNS
from rng_service.storage.rows import SHOE_COLUMNS as _SHOE_COLUMNS
from rng_service.storage.rows import (
    balances_after,
    balances_params,
    entry_values,
    envelope_after,
    new_public_id,
    posted_entry,
    set_balances_sql,
)
from rng_service.storage.rows import entry_row as _entry
from rng_service.storage.rows import round_row as _round
from rng_service.storage.rows import round_values as _round_values
from rng_service.storage.rows import shoe_row as _shoe
from rng_service.storage.rows import shoe_values as _shoe_values
from rng_service.storage.translog import LogTables

BUSY_TIMEOUT_MS: Final = 10_000
_SET_BALANCES: Final = set_balances_sql("?")
#: the most write transactions one COMMIT holds (it bounds what the first of them waits for)
MAX_GROUP: Final = 32
#: failed batches kept unread at most (only members that died before reading leave one behind)
MAX_FAILED: Final = 10_000


# --- migrations ------------------------------------------------------------------------------


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every bundled SQLite migration, in version order."""
    return [(m.version, m.name, m.sql) for m in schema.migrations("sqlite")]


def statements(script: str) -> Iterator[str]:
    """The SQL statements of a script. ``executescript`` would COMMIT the migration's
    transaction before running, so statements run one by one inside it instead."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer
            buffer = ""
    if buffer.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in buffer.splitlines()
    ):
        raise ValueError(f"incomplete SQL statement at the end of a migration: {buffer[:60]!r}")


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply the migrations ``conn``'s database lacks; returns the versions applied now.

    Each runs in one transaction with its ``schema_version`` row, so a crash leaves it wholly
    applied or not at all, and concurrent starters serialise on the write lock.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    known = migrations()
    applied_now: list[int] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_version")}
        newest = max(applied, default=0)
        if newest > len(known):
            raise Unavailable(f"the database has schema version {newest}; this service knows "
                              f"up to {len(known)}", reason="SCHEMA_TOO_NEW")
        for version, name, sql in known:
            if version in applied:
                continue
            for statement in statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (version, name, utc_now()))
            applied_now.append(version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied_now


def _require_current_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Unavailable unless the database has exactly the bundled migrations applied."""
    try:
        (newest,) = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
    except sqlite3.Error as exc:
        raise Unavailable(f"{path} is not a Fairshoe database: {exc}",
                          reason="DATABASE_UNAVAILABLE") from None
    known = len(migrations())
    if newest != known:
        raise Unavailable(f"{path} has schema version {newest}; this code reads version {known} "
                          "(the service migrates a database when it opens it)",
                          reason="SCHEMA_TOO_NEW" if newest > known else "SCHEMA_TOO_OLD")


# --- the storage -----------------------------------------------------------------------------

#: SQLite's primary result codes that mean "the database cannot be used now" (the file is locked
#: past the busy timeout, unreadable, full or gone), not a bug in a statement
_UNAVAILABLE_CODES: Final = {
    5: "DATABASE_BUSY",  # SQLITE_BUSY
    6: "DATABASE_BUSY",  # SQLITE_LOCKED
    7: "DATABASE_UNAVAILABLE",  # SQLITE_NOMEM
    10: "DATABASE_UNAVAILABLE",  # SQLITE_IOERR
    13: "DATABASE_UNAVAILABLE",  # SQLITE_FULL
    14: "DATABASE_UNAVAILABLE",  # SQLITE_CANTOPEN
    15: "DATABASE_UNAVAILABLE",  # SQLITE_PROTOCOL
}


def _unavailable(exc: BaseException) -> Unavailable | None:
    """The ``Unavailable`` for a SQLite error raised inside a transaction that says the database
    cannot be used now (busy, I/O, disk full), or None (a bug: it propagates as it is)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    reason = _UNAVAILABLE_CODES.get(code & 0xFF) if isinstance(code, int) else None
    if reason is None:
        return None
    return Unavailable(f"the database failed: {exc}", reason=reason)



class SqliteStorage:
    """The ports on one SQLite file; safe to share between threads (one connection each)."""

    def __init__(self, path: Path | str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                 read_only: bool = False) -> None:
        """Open (creating and migrating) the database; with ``read_only``, open an existing one
        that must already have this code's schema, for snapshots only (an export, an audit):
        nothing is created or written, not even a migration."""
        self.path = Path(path)
        self.read_only = read_only
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        self._writer: sqlite3.Connection | None = None
        self._write_lock = threading.Lock()  # held while a transaction body runs on the writer
        self._group = _Group()
        self._committed = Committed()  # what committed transactions saw (storage/known.py)
        #: COMMITs and write transactions so far (group commit: commits <= transactions)
        self.commits = 0
        self.transactions = 0
        if read_only:
            _require_current_schema(self._connection(), self.path)
            self.applied_migrations: list[int] = []
        else:
            self.applied_migrations = migrate(self._connection())

    @classmethod
    def from_config(cls) -> SqliteStorage:
        """The database named by ``FAIRSHOE_DATABASE`` (default ``<data dir>/fairshoe.db``)."""
        return cls(config.database_path())

    def __repr__(self) -> str:
        return f"SqliteStorage({str(self.path)!r})"

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise Unavailable("the database is closed", reason="DATABASE_CLOSED")
        # isolation_level=None: this module issues BEGIN/COMMIT itself (BEGIN IMMEDIATE).
        # check_same_thread=False only so close() can close every thread's connection.
        if self.read_only:
            return self._remember(self._read_only_connection())
        return self._remember(self._open_connection())

    def _open_connection(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=self._busy_timeout_ms / 1000)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.close()
            raise Unavailable(f"cannot put {self.path} in WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        return conn

    def _open_writer(self) -> sqlite3.Connection:
        """The writer: an ordinary connection whose temporary files stay in memory. Each write
        transaction runs in a SAVEPOINT, whose journal (the prior content of every page the
        transaction changes, a few dozen pages for a round transition) SQLite writes to a
        temporary file once past 64 KiB: an open, a write per page and a close per transition,
        for a journal that only a rollback to the savepoint reads and that is gone at COMMIT.
        Durability is the WAL's alone (``synchronous=FULL``), so this changes none of it."""
        conn = self._open_connection()
        conn.execute("PRAGMA temp_store=MEMORY")
        return conn

    def _remember(self, conn: sqlite3.Connection, *, local: bool = True
                  ) -> sqlite3.Connection:
        if local:
            self._local.conn = conn
        with self._lock:
            if self._closed:
                conn.close()
                raise Unavailable("the database is closed", reason="DATABASE_CLOSED")
            self._connections.append(conn)
        return conn

    def _writer_connection(self) -> sqlite3.Connection:
        """The one connection every write transaction runs on (only under ``_write_lock``)."""
        if self._writer is None:
            if self._closed:
                raise Unavailable("the database is closed", reason="DATABASE_CLOSED")
            self._writer = self._remember(self._open_writer(), local=False)
        return self._writer

    def _read_only_connection(self) -> sqlite3.Connection:
        uri = self.path.absolute().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                                   timeout=self._busy_timeout_ms / 1000)
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        except sqlite3.Error as exc:
            raise Unavailable(f"cannot open {self.path} read-only: {exc}",
                              reason="DATABASE_UNAVAILABLE") from None
        return conn

    @contextmanager
    def transaction(self) -> Iterator[SqliteUnitOfWork]:
        """A write transaction: on normal exit committed (with the concurrent ones, see the
        module docstring) before this returns; if the body raises, its changes are rolled back
        and its error raised (an SQLite failure as ``Unavailable``), once the shared COMMIT is
        done."""
        if self.read_only:
            raise RuntimeError(f"{self!r} was opened read-only")
        if getattr(self._local, "writing", False):
            raise RuntimeError("a transaction is already open on this thread")
        group = self._group
        with group.state:
            group.queued += 1
        self._write_lock.acquire()
        error: BaseException | None = None
        try:
            with group.state:
                group.queued -= 1
            batch = self._join_batch()
            conn = self._writer_connection()
            # the batch's first transaction needs no savepoint: nothing precedes it, so rolling
            # back the whole SQLite transaction undoes its changes alone (and saves a SAVEPOINT,
            # its journal of every page changed, and a RELEASE)
            alone = self._group.size == 1
            self._local.writing = True
            try:
                if not alone:
                    conn.execute("SAVEPOINT request")
                uow = SqliteUnitOfWork(conn, writable=True, committed=self._committed)
                yield uow
                uow.flush_log()  # the log's appends come last, in this transaction
            except BaseException as exc:
                error = exc
                if conn.in_transaction:  # SQLite may have rolled back everything (I/O errors)
                    conn.execute("ROLLBACK" if alone else "ROLLBACK TO request")
                    if alone:  # the batch ends with it, empty: the next writer begins one
                        self._finish_batch(batch, None)
            finally:
                self._local.writing = False
                if self._group.open_batch == batch:
                    self._end_request(conn, batch, savepoint=not alone)
        finally:
            self._write_lock.release()
        self._wait_durable(batch)
        if error is not None:
            mapped = _unavailable(error)
            if mapped is None:
                raise error
            raise mapped from error
        self._committed.add(uow.seen)  # durable now: its COMMIT returned

    def _join_batch(self) -> int:
        """The open batch (group of transactions sharing one COMMIT), begun if none is open."""
        group = self._group
        if group.open_batch is None:
            conn = self._writer_connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise Unavailable(f"database busy: {exc}", reason="DATABASE_BUSY") from None
            with group.state:
                group.last_batch += 1
                group.open_batch = group.last_batch
            group.size = 0
        group.size += 1
        self.transactions += 1
        return group.open_batch

    def _end_request(self, conn: sqlite3.Connection, batch: int, *, savepoint: bool) -> None:
        """After a body (under ``_write_lock``): keep its changes (its savepoint, if it has
        one), and COMMIT the batch if no other writer is waiting to join it (or it is full)."""
        group = self._group
        if not conn.in_transaction:  # rolled back as a whole by SQLite: the batch is lost
            self._finish_batch(batch, Unavailable("the write transaction was rolled back",
                                                  reason="DATABASE_BUSY"))
            return
        try:
            if savepoint:
                conn.execute("RELEASE request")
        except sqlite3.Error as exc:
            self._rollback_batch(conn, batch, exc)
            return
        with group.state:
            last = group.queued == 0
        if last or group.size >= MAX_GROUP:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback_batch(conn, batch, exc)
                return
            self.commits += 1
            self._finish_batch(batch, None)

    def _rollback_batch(self, conn: sqlite3.Connection, batch: int, exc: sqlite3.Error) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:  # whatever ROLLBACK does, no member of the batch waits for it forever
            self._finish_batch(batch, Unavailable(f"commit failed: {exc}",
                                                  reason="DATABASE_BUSY"))

    def _finish_batch(self, batch: int, error: Unavailable | None) -> None:
        group = self._group
        with group.state:
            group.open_batch = None
            if error is None:
                group.durable = batch
            else:  # kept until each of the batch's members has read it (_wait_durable)
                group.failed[batch] = _Failure(error, group.size)
                if len(group.failed) > MAX_FAILED:  # only if members died unread: drop oldest
                    del group.failed[min(group.failed)]
            group.state.notify_all()

    def _wait_durable(self, batch: int) -> None:
        """Return once ``batch`` is committed; Unavailable if its COMMIT failed."""
        group = self._group
        with group.state:
            while group.durable < batch and batch not in group.failed:
                group.state.wait()
            failure = group.failed.get(batch)
            if failure is not None:
                failure.unread -= 1
                if failure.unread <= 0:
                    del group.failed[batch]
        if failure is not None:
            raise Unavailable(str(failure.error), reason="DATABASE_BUSY")

    @contextmanager
    def snapshot(self) -> Iterator[SqliteUnitOfWork]:
        """A read-only transaction on one consistent snapshot."""
        with self._begin("BEGIN", writable=False) as uow:
            yield uow

    @contextmanager
    def _begin(self, begin: str, *, writable: bool) -> Iterator[SqliteUnitOfWork]:
        conn = self._connection()
        if conn.in_transaction:
            raise RuntimeError("a transaction is already open on this thread")
        try:
            conn.execute(begin)
        except sqlite3.OperationalError as exc:
            raise Unavailable(f"database busy: {exc}", reason="DATABASE_BUSY") from None
        uow = SqliteUnitOfWork(conn, writable=writable, committed=self._committed)
        try:
            yield uow
        except BaseException as exc:
            if conn.in_transaction:  # SQLite may already have rolled back (e.g. on I/O errors)
                conn.execute("ROLLBACK")
            mapped = _unavailable(exc)
            if mapped is None:
                raise
            raise mapped from exc
        try:
            conn.execute("COMMIT" if writable else "ROLLBACK")
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise Unavailable(f"commit failed: {exc}", reason="DATABASE_BUSY") from None
        self._committed.add(uow.seen)  # committed rows only (a snapshot sees no other)

    def sizes(self) -> dict[str, int]:
        """Row counts for the metrics, over every operator, in one snapshot: ``ledger_entries``
        and the stored signed envelopes of each :class:`EnvelopeKind` (by its value).

        These tables are append-only (nothing deletes from them, and a rolled-back insert leaves
        no gap: the next row takes its rowid), so the largest rowid is the row count, read in
        one index step instead of a scan: cheap enough for every scrape."""
        out = {}
        with self._begin("BEGIN", writable=False) as uow:
            conn = uow._conn
            (entries,), = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM ledger_entries")
            out["ledger_entries"] = int(entries)
            for kind, table, _, _ in _ENVELOPE_SOURCES:
                (count,), = conn.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}")
                out[str(kind)] = int(count)
        return out

    def ping(self, timeout: float = 2.0) -> None:
        """Raise ``Unavailable`` unless the database answers ``SELECT 1`` (a health check).
        ``timeout`` is not needed here: an embedded file answers or fails at once."""
        del timeout
        if self._closed:
            raise Unavailable("the database is closed", reason="DATABASE_CLOSED")
        try:
            self._connection().execute("SELECT 1").fetchone()
        except sqlite3.Error as exc:
            raise Unavailable(f"the database does not answer: {exc}",
                              reason="DATABASE_UNAVAILABLE") from None

    def describe(self) -> str:
        """What the logs say about the database."""
        return f"sqlite {self.path}"

    def close(self) -> None:
        """Close every connection; :meth:`ping` then raises
        ``Unavailable(reason="DATABASE_CLOSED")``."""
        with self._lock:
            self._closed = True
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._writer = None
        self._local = threading.local()


class _Group:
    """Group commit's shared state (see the module docstring); counters under ``state``."""

    def __init__(self) -> None:
        self.state = threading.Condition()
        self.queued = 0  # threads waiting for the write lock: they will join the open batch
        self.last_batch = 0  # the id of the newest batch begun
        self.open_batch: int | None = None  # begun and not yet committed or rolled back
        self.size = 0  # transactions in the open batch
        self.durable = 0  # batches are committed in order: every id up to this one is durable
        self.failed: dict[int, _Failure] = {}  # failed batches some member has yet to read


@dataclass
class _Failure:
    """A batch whose COMMIT failed, kept until each of its members has raised its error (a
    member that has not looked yet must never take the batch as durable)."""

    error: Unavailable
    unread: int


class SqliteUnitOfWork(LogTables, EnvelopeTables):
    """The :class:`~rng_service.service.ports.UnitOfWork` of one SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection, *, writable: bool,
                 committed: Committed | None = None) -> None:
        self._conn = conn
        self._writable = writable
        self._pending_leaves = []
        self._committed = committed
        self.seen = []

    def _write(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
        return self._conn.execute(sql, params)

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
        self._conn.executemany(sql, rows)

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        return self._conn.execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._conn.execute(sql, params).fetchall()

    def _lock(self) -> str:
        """Nothing: SQLite's one writer already serialises the log's appends."""
        return ""

    def operator_exists(self, operator: str) -> bool:
        """True if ``operator`` is one the database knows."""
        fact = ("operator", operator)
        if self._committed is not None and fact in self._committed:
            return True  # operators are never deleted
        found = self._one("SELECT 1 FROM operators WHERE operator = ?", (operator,)) is not None
        if found:
            self.seen.append(fact)
        return found

    def add_operator(self, operator: str) -> bool:
        """Make ``operator`` known; False if it already was."""
        cur = self._write("INSERT INTO operators (operator, created_at) VALUES (?, ?) "
                          "ON CONFLICT (operator) DO NOTHING", (operator, utc_now()))
        return cur.rowcount == 1

    def list_operators(self) -> list[tuple[str, str]]:
        """Every operator and when it was added, by name."""
        rows = self._conn.execute("SELECT operator, created_at FROM operators ORDER BY operator")
        return [(str(name), str(created)) for name, created in rows.fetchall()]

    # --- idempotency ---------------------------------------------------------------------

    def get_response(self, operator: str, request_id: str) -> StoredResponse | None:
        """The stored first answer to ``request_id``, or None if the request is new."""
        row = self._one("SELECT operation, request_hash, response FROM idempotency "
                        "WHERE operator = ? AND request_id = ?", (operator, request_id))
        return None if row is None else StoredResponse(row[0], row[1], bytes(row[2]))

    def put_response(self, operator: str, request_id: str, stored: StoredResponse) -> None:
        """Store the first answer to ``request_id`` (it commits with the request's
        writes)."""
        self._write("INSERT INTO idempotency VALUES (?, ?, ?, ?, ?, ?)",
                    (operator, request_id, stored.operation, stored.request_hash,
                     stored.response, utc_now()))

    # --- accounts and the ledger -----------------------------------------------------------

    def _account(self, key: AccountKey) -> tuple[str, int] | None:
        row = self._one("SELECT kind, balance FROM accounts WHERE operator = ? AND holder = ? "
                        "AND currency = ? AND mode = ?",
                        (key.operator, key.holder, key.currency, str(key.mode)))
        return None if row is None else (row[0], row[1])

    def get_balance(self, account: AccountKey) -> int | None:
        """The balance, or None if the account does not exist."""
        found = self._account(account)
        return None if found is None else found[1]

    def in_play(self, account: AccountKey) -> int:
        """What ``account`` has staked in its open rounds, less what they already
        returned."""
        row = self._one(
            "SELECT COALESCE(SUM(CASE WHEN e.source = ? THEN e.amount ELSE -e.amount END), 0) "
            "FROM ledger_entries e JOIN rounds r "
            "ON r.operator = e.operator AND r.round_id = e.round_id AND r.status = 'open' "
            "WHERE e.operator = ? AND e.currency = ? AND e.mode = ? AND (e.source = ? "
            "OR e.target = ?)",
            (account.holder, account.operator, account.currency, str(account.mode),
             account.holder, account.holder))
        return max(0, int(row[0])) if row is not None else 0

    def open_account(self, account: AccountKey, kind: AccountKind) -> bool:
        """Create the account with balance 0 unless it exists; True if it was created."""
        cur = self._write(
            "INSERT INTO accounts (operator, holder, currency, mode, kind, balance, created_at) "
            "VALUES (?, ?, ?, ?, ?, 0, ?) ON CONFLICT DO NOTHING",
            (account.operator, account.holder, account.currency, str(account.mode), str(kind),
             utc_now()))
        return cur.rowcount == 1

    def post(self, posting: Posting) -> LedgerEntry:
        """Move the money and append the entry. Both accounts must exist. A player account
        that would go below zero raises ``IllegalState(reason="INSUFFICIENT_FUNDS")``. Three
        statements: both balances read, both written, the entry inserted."""
        source, target, amount = posting.source, posting.target, posting.amount
        if (source.operator, source.currency, source.mode) != (
                target.operator, target.currency, target.mode):
            raise ValueError("a posting moves money within one operator, currency and mode")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise ValueError(f"a posting's amount is a positive integer, got {amount!r}")
        found = {holder: (kind, balance) for holder, kind, balance in self._conn.execute(
            "SELECT holder, kind, balance FROM accounts WHERE operator = ? AND currency = ? "
            "AND mode = ? AND holder IN (?, ?)",
            (source.operator, source.currency, str(source.mode), source.holder, target.holder))}
        src, dst = found.get(source.holder), found.get(target.holder)
        if src is None or dst is None:
            raise MissingAccount(f"posting between missing accounts {source.holder}, "
                                 f"{target.holder}")
        source_after, target_after = balances_after(src[0], src[1], dst[1], amount)
        self._write(_SET_BALANCES, balances_params(posting, source_after, target_after))
        created_at, public_id = utc_now(), new_public_id()
        cur = self._write(
            f"INSERT INTO ledger_entries ({_ENTRY_COLUMNS}) "
            "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            entry_values(posting, source_after, target_after, created_at, public_id))
        entry_id = cur.lastrowid
        assert entry_id is not None
        return posted_entry(entry_id, posting, source_after, target_after, created_at,
                            public_id=public_id)

    def round_entries(self, operator: str, round_id: str) -> list[LedgerEntry]:
        """The ledger entries of round ``round_id``, oldest first."""
        rows = self._conn.execute(
            f"SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE operator = ? AND round_id = ? "
            "ORDER BY entry_id", (operator, round_id))
        return [_entry(r) for r in rows]

    def list_entries(self, account: AccountKey, limit: int, before: int | None, *,
                     round_id: str | None = None) -> list[LedgerEntry]:
        """Entries touching ``account``, newest first, with ``entry_id < before`` if
        given (and of round ``round_id`` only, if given)."""
        key = (account.operator, account.currency, str(account.mode))
        bound = before if before is not None else 2**63 - 1
        of_round = " AND round_id = ?" if round_id is not None else ""
        extra = (round_id,) if round_id is not None else ()
        # two index range scans (as source, as target) merged: no OR across the two indexes
        rows = self._conn.execute(
            f"SELECT {_ENTRY_COLUMNS} FROM ("
            f" SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE operator = ? AND currency = ?"
            f"  AND mode = ? AND source = ? AND entry_id < ?{of_round}"
            " UNION ALL"
            f" SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE operator = ? AND currency = ?"
            f"  AND mode = ? AND target = ? AND entry_id < ?{of_round}"
            ") ORDER BY entry_id DESC LIMIT ?",
            (*key, account.holder, bound, *extra, *key, account.holder, bound, *extra, limit))
        return [_entry(r) for r in rows]

    def entry_position(self, account: AccountKey, public_id: str) -> int | None:
        """The ``entry_id`` of the entry ``public_id`` touching ``account``, or None."""
        row = self._conn.execute(
            "SELECT entry_id FROM ledger_entries WHERE operator = ? AND public_id = ? "
            "AND currency = ? AND mode = ? AND ? IN (source, target)",
            (account.operator, public_id, account.currency, str(account.mode),
             account.holder)).fetchone()
        return None if row is None else int(row[0])

    # --- shoes ---------------------------------------------------------------------------

    def insert_shoe(self, row: ShoeRow) -> None:
        """A new shoe; a second current shoe for one player, game and mode raises
        ``Conflict``."""
        try:
            self._write(f"INSERT INTO shoes ({_SHOE_COLUMNS}) VALUES "
                        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _shoe_values(row))
        except sqlite3.IntegrityError:
            raise Conflict("the player already has a current shoe for this game and mode",
                           reason="CONCURRENT_UPDATE") from None

    def get_shoe(self, operator: str, shoe_id: str) -> ShoeRow | None:
        """The shoe ``shoe_id`` of ``operator``, or None."""
        row = self._one(f"SELECT {_SHOE_COLUMNS} FROM shoes WHERE operator = ? AND shoe_id = ?",
                        (operator, shoe_id))
        return None if row is None else _shoe(row)

    def current_shoe(self, operator: str, player: str, game: str, mode: Mode) -> ShoeRow | None:
        """The player's committed or in-play shoe for ``game`` in ``mode`` (at most one
        exists)."""
        row = self._one(f"SELECT {_SHOE_COLUMNS} FROM shoes WHERE operator = ? AND player = ? "
                        "AND game = ? AND mode = ? AND status IN ('committed', 'in_play')",
                        (operator, player, game, str(mode)))
        return None if row is None else _shoe(row)

    def update_shoe(self, row: ShoeRow, expected_version: int) -> None:
        """Write ``row`` (whose version is ``expected_version + 1``) if the stored
        version is still ``expected_version``; else ``Conflict``."""
        cur = self._write(
            "UPDATE shoes SET client_seed = ?, position = ?, rounds_started = ?, status = ?, "
            "version = ?, updated_at = ? WHERE operator = ? AND shoe_id = ? AND version = ?",
            (row.client_seed, row.position, row.rounds_started, str(row.status), row.version,
             row.updated_at, row.operator, row.shoe_id, expected_version))
        if cur.rowcount != 1:
            raise Conflict(f"shoe {row.shoe_id} changed concurrently", reason="CONCURRENT_UPDATE")

    def finished_unrevealed_shoes(self) -> list[ShoeRow]:
        """Every operator's shoes in status ``finished`` (recovery
        reveals them)."""
        rows = self._conn.execute(f"SELECT {_SHOE_COLUMNS} FROM shoes WHERE status = 'finished'")
        return [_shoe(r) for r in rows]

    # --- rounds --------------------------------------------------------------------------

    def insert_round(self, row: RoundRow) -> None:
        """A new round; a second open round for one player and game raises
        ``Conflict``."""
        try:
            self._write(f"INSERT INTO rounds ({_ROUND_COLUMNS}) VALUES "
                        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _round_values(row))
        except sqlite3.IntegrityError:
            raise Conflict(f"player {row.player} already has an open {row.game} round",
                           reason="ROUND_IN_PROGRESS") from None

    def get_round(self, operator: str, round_id: str) -> RoundRow | None:
        """The round ``round_id`` of ``operator``, or None."""
        row = self._one(f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE operator = ? AND round_id = ?",
                        (operator, round_id))
        return None if row is None else _round(row)

    def open_round(self, operator: str, player: str, game: str) -> RoundRow | None:
        """The player's open round of ``game``, or None (at most one exists)."""
        row = self._one(f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE operator = ? AND player = ? "
                        "AND game = ? AND status = 'open'", (operator, player, game))
        return None if row is None else _round(row)

    def update_round(self, row: RoundRow, expected_version: int) -> None:
        """As :meth:`update_shoe`, for a round."""
        cur = self._write(
            "UPDATE rounds SET status = ?, version = ?, state = ?, updated_at = ? "
            "WHERE operator = ? AND round_id = ? AND version = ?",
            (str(row.status), row.version, row.state, row.updated_at, row.operator, row.round_id,
             expected_version))
        if cur.rowcount != 1:
            raise Conflict(f"round {row.round_id} changed concurrently (expected version "
                           f"{expected_version})", reason="CONCURRENT_UPDATE")

    def list_rounds(self, operator: str, player: str, limit: int, after: RoundCursor | None,
                    *, mode: Mode | None = None, is_open: bool | None = None) -> list[RoundRow]:
        """Open rounds first, then the others, each group newest first, after
        ``after``; filtered by ``mode`` and ``is_open`` when given."""
        where = "operator = ? AND player = ?"
        params: list[object] = [operator, player]
        if mode is not None:
            where += " AND mode = ?"
            params.append(str(mode))
        if is_open is not None:
            where += " AND (status = 'open') = ?"
            params.append(int(is_open))
        if after is not None:
            where += " AND ((status = 'open'), created_at, round_id) < (?, ?, ?)"
            params += [int(after.is_open), after.created_at, after.round_id]
        rows = self._conn.execute(
            f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE {where} "
            "ORDER BY (status = 'open') DESC, created_at DESC, round_id DESC LIMIT ?",
            (*params, limit))
        return [_round(r) for r in rows]

    def open_round_ids(self) -> list[tuple[str, str]]:
        """(operator, round id) of every open round, oldest first."""
        rows = self._conn.execute("SELECT operator, round_id FROM rounds WHERE status = 'open' "
                                  "ORDER BY created_at")
        return [(r[0], r[1]) for r in rows]

    # --- signed records --------------------------------------------------------------------

    def list_envelopes(self, operator: str, start: str, end: str,
                       after: StoredEnvelope | None, limit: int) -> list[StoredEnvelope]:
        """At most ``limit`` signed envelopes stored at ``start <= created_at < end``,
        ordered by (created_at, kind, id), strictly after ``after`` if given."""
        # a compound SELECT ordered as a whole: SQLite merges the sources' index scans, so a page
        # reads about ``limit`` rows of each source, never a whole table
        selects, params = [], []
        for kind, table, id_column, column in _ENVELOPE_SOURCES:
            condition, values = envelope_after(kind, id_column, after, "?")
            selects.append(
                f"SELECT '{kind}', {kind.rank}, {id_column}, {column}, created_at FROM {table} "
                f"WHERE operator = ? AND created_at >= ? AND created_at < ? AND {condition}")
            params += [operator, start, end, *values]
        rows = self._conn.execute(
            " UNION ALL ".join(selects) + " ORDER BY 5, 2, 3 LIMIT ?", (*params, limit))
        return [StoredEnvelope(EnvelopeKind(k), ident, bytes(env), created)
                for k, _, ident, env, created in rows]
