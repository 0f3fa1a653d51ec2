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
Rows are still updated ``WHERE version = ?``.

Several processes (``serve --processes N``, or a CLI command beside a server) may write the same
file. Between this storage's processes the writer's turn is a lock file beside the database
(``<database>-writer.lock``, ``flock``): a batch takes it before ``BEGIN IMMEDIATE`` and drops it
once its COMMIT or rollback is done, and a process waiting for it sleeps in the kernel until it
is free, however long the batch takes, as a thread waits for the in-process lock. Without it,
a process would wait in SQLite's busy handler, which sleeps up to 100 ms between tries and gives
up after the busy timeout: under load from another process a write could fail DATABASE_BUSY, or
wait a sleep longer than the COMMIT it waited for. The kernel drops the lock of a process that
dies. Any other writer (the ``sqlite3`` shell) is waited for up to the busy timeout, as before.
The log's sequencer state is read and written inside each write transaction
(:mod:`rng_service.storage.sql.log`), so appends from any process are sequenced by the database
alone. Readers use one connection per thread in deferred transactions and see one WAL snapshot,
never uncommitted rows.

The schema lives in ``migrations/sqlite/NNNN_name.sql`` (:mod:`rng_service.storage.schema`: the
same history as PostgreSQL's), applied once each, in order, at open, and recorded in
``schema_version``.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from rng_service.core import config, sqlite_binding
from rng_service.core.errors import Unavailable
from rng_service.service.ports import utc_now
from rng_service.storage import schema
from rng_service.storage.known import Committed
from rng_service.storage.sql import SqlUnitOfWork, Statements
from rng_service.storage.sql.dialect import SQLITE
from rng_service.storage.sql.envelopes import ENVELOPE_SOURCES

BUSY_TIMEOUT_MS: Final = 10_000
#: the shared statements in SQLite's dialect (the same for reads and writes: no row locks)
STATEMENTS: Final = Statements(SQLITE)
#: the most write transactions one COMMIT holds (it bounds what the first of them waits for)
MAX_GROUP: Final = 32
#: failed batches kept unread at most (only members that died before reading leave one behind)
MAX_FAILED: Final = 10_000


# bytes and None bound without sqlite3's adaptation protocol: see the module
sqlite_binding.bind_as_they_are()


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
        self._turn: int | None = None  # the writer lock file's descriptor (opened on first use)
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

    def transaction(self) -> AbstractContextManager[SqliteUnitOfWork]:
        """A write transaction: on normal exit committed (with the concurrent ones, see the
        module docstring) before this returns; if the body raises, its changes are rolled back
        and its error raised (an SQLite failure as ``Unavailable``), once the shared COMMIT is
        done. (:class:`_WriteTransaction`: a class, not a ``contextmanager`` generator, whose
        four Python calls a transaction would add to every transition.)"""
        if self.read_only:
            raise RuntimeError(f"{self!r} was opened read-only")
        return _WriteTransaction(self)

    def _join_batch(self) -> int:
        """The open batch (group of transactions sharing one COMMIT), begun if none is open."""
        group = self._group
        if group.open_batch is None:
            conn = self._writer_connection()
            self._take_turn()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                self._end_turn()
                raise Unavailable(f"database busy: {exc}", reason="DATABASE_BUSY") from None
            with group.lock:
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
        with group.lock:
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

    def _take_turn(self) -> None:
        """The writer's turn among this database's processes (under ``_write_lock``): wait for
        the lock file, in the kernel, until no other process has a batch open."""
        if self._turn is None:
            try:
                self._turn = os.open(self.path.with_name(self.path.name + "-writer.lock"),
                                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise Unavailable(f"cannot open the writer lock beside {self.path}: "
                                  f"{exc.strerror or exc}",
                                  reason="DATABASE_UNAVAILABLE") from None
        fcntl.flock(self._turn, fcntl.LOCK_EX)

    def _end_turn(self) -> None:
        if self._turn is not None:
            fcntl.flock(self._turn, fcntl.LOCK_UN)

    def _finish_batch(self, batch: int, error: Unavailable | None) -> None:
        self._end_turn()  # committed or rolled back: another process may write
        group = self._group
        with group.lock:
            group.open_batch = None
            if error is None:
                group.durable = batch
            else:  # kept until each of the batch's members has read it (_wait_durable)
                group.failed[batch] = _Failure(error, group.size)
                if len(group.failed) > MAX_FAILED:  # only if members died unread: drop oldest
                    del group.failed[min(group.failed)]
            if group.waiting:  # Condition.notify_all is Python: not called for no one
                group.state.notify_all()

    def _wait_durable(self, batch: int) -> None:
        """Return once ``batch`` is committed; Unavailable if its COMMIT failed."""
        group = self._group
        with group.lock:
            while group.durable < batch and batch not in group.failed:
                group.waiting += 1
                try:
                    group.state.wait()
                finally:
                    group.waiting -= 1
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
        """Row counts for the metrics, over every operator, in one snapshot: ``ledger_entries``,
        the stored signed envelopes of each :class:`EnvelopeKind` (by its value) and the log's
        queued leaves (``log_queued``, none on SQLite).

        These tables are append-only (nothing deletes from them, and a rolled-back insert leaves
        no gap: the next row takes its rowid), so the largest rowid is the row count, read in
        one index step instead of a scan: cheap enough for every scrape."""
        out = {}
        with self._begin("BEGIN", writable=False) as uow:
            conn = uow._conn
            (entries,), = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM ledger_entries")
            out["ledger_entries"] = int(entries)
            for kind, table, _, _ in ENVELOPE_SOURCES:
                (count,), = conn.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}")
                out[str(kind)] = int(count)
        out["log_queued"] = 0  # each leaf is sequenced in the transaction that logs it
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

    def integrate_log(self, operator: str | None = None) -> int:
        """Nothing to integrate: SQLite sequences each leaf in the transaction that logs it
        (:mod:`rng_service.storage.sql.log`)."""
        return 0

    def close(self) -> None:
        """Close every connection; :meth:`ping` then raises
        ``Unavailable(reason="DATABASE_CLOSED")``."""
        with self._lock:
            self._closed = True
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._writer = None
        if self._turn is not None:
            os.close(self._turn)  # drops the lock, were it held
            self._turn = None
        self._local = threading.local()


class _WriteTransaction:
    """One :meth:`SqliteStorage.transaction`: the writer's lock and the batch joined on entry,
    the body's changes kept (or rolled back) and the batch committed on exit, which returns
    once that COMMIT has (see the module docstring)."""

    __slots__ = ("_alone", "_batch", "_conn", "_storage", "_uow")

    def __init__(self, storage: SqliteStorage) -> None:
        self._storage = storage

    def __enter__(self) -> SqliteUnitOfWork:
        storage = self._storage
        if getattr(storage._local, "writing", False):
            raise RuntimeError("a transaction is already open on this thread")
        group, lock = storage._group, storage._write_lock
        if not lock.acquire(blocking=False):  # another writer holds it: wait, counted as
            with group.lock:  # queued, so that its batch stays open for this one
                group.queued += 1
            lock.acquire()
            with group.lock:
                group.queued -= 1
        try:
            self._batch = storage._join_batch()
            self._conn = conn = storage._writer_connection()
        except BaseException:
            lock.release()
            raise
        # the batch's first transaction needs no savepoint: nothing precedes it, so rolling
        # back the whole SQLite transaction undoes its changes alone (and saves a SAVEPOINT,
        # its journal of every page changed, and a RELEASE)
        self._alone = alone = group.size == 1
        storage._local.writing = True
        try:
            if not alone:
                conn.execute("SAVEPOINT request")
            self._uow = uow = SqliteUnitOfWork(conn, writable=True, committed=storage._committed)
        except BaseException as exc:
            self._end(exc)  # raises it as Unavailable (an SQLite failure), else returns it
            raise
        return uow

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc is None:
            try:
                self._uow.flush_log()  # the log's appends come last, in this transaction
            except BaseException as failed:
                self._end(failed)  # raises it as Unavailable (an SQLite failure), else returns it
                raise
            self._end(None)
            self._storage._committed.add(self._uow.seen)  # durable now: its COMMIT returned
            return
        self._end(exc)  # raises the SQLite failure as Unavailable, else returns it: the body's
        # own error goes on (None: not suppressed)

    def _end(self, error: BaseException | None) -> BaseException | None:
        """Keep the body's changes (``error`` None) or roll them back, COMMIT the batch unless
        another writer joins it, let the next writer in, and wait for the batch's COMMIT;
        ``error`` back if it is to be raised as it is, or Unavailable raised for an SQLite
        failure (the batch's failed COMMIT is raised by ``_wait_durable``)."""
        storage, conn, batch, alone = self._storage, self._conn, self._batch, self._alone
        try:
            try:
                if error is not None and conn.in_transaction:  # SQLite may have rolled back
                    conn.execute("ROLLBACK" if alone else "ROLLBACK TO request")  # everything
                    if alone:  # the batch ends with it, empty: the next writer begins one
                        storage._finish_batch(batch, None)
            finally:
                storage._local.writing = False
                if storage._group.open_batch == batch:
                    storage._end_request(conn, batch, savepoint=not alone)
        finally:
            storage._write_lock.release()
        storage._wait_durable(batch)
        if error is None:
            return None
        mapped = _unavailable(error)
        if mapped is None:
            return error
        raise mapped from error


class _Group:
    """Group commit's shared state (see the module docstring); counters under ``lock``, which
    ``state`` waits and notifies on."""

    def __init__(self) -> None:
        # the counters are read and written under ``lock`` itself (a C-level context manager):
        # ``with state`` would enter the condition through two Python calls, six times a
        # transaction; ``state`` is for waiting and waking, on the same lock
        self.lock = threading.RLock()
        self.state = threading.Condition(self.lock)
        self.queued = 0  # threads waiting for the write lock: they will join the open batch
        self.last_batch = 0  # the id of the newest batch begun
        self.open_batch: int | None = None  # begun and not yet committed or rolled back
        self.size = 0  # transactions in the open batch
        self.durable = 0  # batches are committed in order: every id up to this one is durable
        self.failed: dict[int, _Failure] = {}  # failed batches some member has yet to read
        self.waiting = 0  # members waiting on ``state`` for their batch's COMMIT


@dataclass
class _Failure:
    """A batch whose COMMIT failed, kept until each of its members has raised its error (a
    member that has not looked yet must never take the batch as durable)."""

    error: Unavailable
    unread: int


class SqliteUnitOfWork(SqlUnitOfWork):
    """The :class:`~rng_service.service.ports.UnitOfWork` of one SQLite transaction: the shared
    SQL (:mod:`rng_service.storage.sql`) on one connection."""

    _duplicate = sqlite3.IntegrityError

    def __init__(self, conn: sqlite3.Connection, *, writable: bool,
                 committed: Committed | None = None) -> None:
        self._conn = conn
        self._writable = writable
        self._sql = STATEMENTS
        self._pending_leaves = []
        self._committed = committed
        self.seen = []
        self._balances = {}

    def _write(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
        return self._conn.execute(sql, params)

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
        self._conn.executemany(sql, rows)

    def _insert_id(self, sql: str, params: Sequence[Any]) -> int:
        entry_id = self._write(sql, params).lastrowid
        assert entry_id is not None
        return entry_id

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        return self._conn.execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._conn.execute(sql, params).fetchall()
