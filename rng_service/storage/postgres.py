"""PostgreSQL behind the service's storage ports: several replicas on one database.

Driver: psycopg 3 with a ``psycopg_pool.ConnectionPool``. The gRPC server is a synchronous
thread pool, so a synchronous driver whose pool hands each thread its own connection for one
transaction fits it; asyncpg would need an event loop in every handler.

Isolation: ``READ COMMITTED`` for write transactions, with the rows a write depends on locked.
A write transaction reads a round ``FOR UPDATE``, so two calls on one round queue as they do on
SQLite's single writer, and the second sees the first's result (a stale ``expected_version`` is
then ``STALE_VERSION`` with the current version, on either database). Rounds are the only rows
locked at read besides balances: every use case reads its round before its shoe, and a shoe is
written only by the calls of its one player and game, whose versioned update catches any race.
Every write of a round or shoe is ``UPDATE ... WHERE version = %s``: under READ COMMITTED such an
UPDATE waits for a concurrent writer of the row and then re-checks the version on the committed
row, so the loser updates 0 rows and raises ``Conflict(reason="CONCURRENT_UPDATE")``. A posting
reads both balances ``SELECT ... FOR UPDATE`` (in a fixed order, so two postings cannot deadlock
on one pair), so balances are never computed from a stale read. The unique partial indexes
("one open round per player and game", "one current shoe") make a concurrent second insert wait
for the first and then fail; that failure is the same ``Conflict`` SQLite gives. REPEATABLE READ
was rejected: every round posts to the operator's house account, so under it any two concurrent
rounds of one operator would abort one with a serialization failure instead of queueing on the
house row; READ COMMITTED queues them and still loses no update. Read-only snapshots use
``REPEATABLE READ READ ONLY``: one consistent view for a whole listing, and a read-only
transaction never fails to serialise.

The transparency log: a transaction queues its leaves (``log_queue``) and locks nothing of the
log, and each replica's :class:`~rng_service.storage.sequencer.LogSequencer` integrates the
queue in batches (:mod:`rng_service.storage.sql.log`), so the transactions of one operator do
not take turns on its log's one sequencer row from their append to their COMMIT.

Idempotency across replicas: a request's answer is inserted ``ON CONFLICT DO NOTHING`` at the
end of its transaction, so a concurrent duplicate's insert waits on the primary key of
``idempotency (operator, request_id)`` for the first transaction to end, then inserts nothing,
and the duplicate rolls back and returns the first one's answer
(:mod:`rng_service.service.idempotency`). A write transaction that looks a request id up first
(the seamless wallet's start) takes a transaction-scoped advisory lock on (operator, request id),
so a concurrent duplicate waits for the first to end and then reads its stored answer, exactly as
SQLite's single writer does.

Errors: whatever the database says is translated at the transaction boundary. A lost race
(versioned update, unique index, serialization failure, deadlock) is ``Conflict`` (retryable); a
lock wait beyond ``lock_timeout`` or a cancelled statement is ``Unavailable`` ``DATABASE_BUSY``;
a refused or broken connection, a server shut down, or no pooled connection within the pool
timeout is ``Unavailable`` ``DATABASE_UNAVAILABLE``. The pool checks each connection before
handing it out and replaces broken ones, so the storage recovers by itself when the server is
back (:func:`check_idle`: a round trip only when the idle connection's socket has something to
read). A connection lost during COMMIT leaves the outcome unknown; the client's retry with the
same request id then returns the stored answer or does the work once.

Migrations: ``migrations/postgresql/NNNN_name.sql`` (the same history as SQLite's, see
:mod:`rng_service.storage.schema`), applied at open over a dedicated connection holding a
session advisory lock, so replicas starting together apply each migration exactly once.
"""

from __future__ import annotations

import hashlib
import logging
import select
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Final

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from rng_service.core import config
from rng_service.core.errors import Conflict, FairshoeError, Unavailable
from rng_service.service.ports import StoredResponse, utc_now
from rng_service.storage import schema
from rng_service.storage.known import Committed
from rng_service.storage.sequencer import MERGE_INTERVAL_S, LogSequencer
from rng_service.storage.sql import SqlUnitOfWork, Statements
from rng_service.storage.sql.dialect import POSTGRES, POSTGRES_READ
from rng_service.storage.sql.envelopes import ENVELOPE_SOURCES
from rng_service.storage.sql.log import MERGE_BATCH

Connection = psycopg.Connection[TupleRow]

LOCK_TIMEOUT_MS: Final = 10_000  # as SQLite's busy timeout: a lock wait longer than this is busy
IDLE_IN_TRANSACTION_TIMEOUT_MS: Final = 60_000  # a hung replica cannot hold row locks forever
CONNECT_TIMEOUT_S: Final = 5
POOL_TIMEOUT_S: Final = 5.0
# How long the pool keeps retrying (1 s, 2 s, 4 s, ... apart) to replace a connection before it
# gives up; the next request for a connection starts again at 1 s. Kept short so that after an
# outage of any length a connection is back within a few seconds of the server.
RECONNECT_TIMEOUT_S: Final = 5.0
#: how long a read-only storage waits for the replicas' sequencers to merge the log's queue
#: (their stated delay is 50 ms and a batch; this is that with a wide margin for load)
READ_ONLY_MERGE_WAIT_S: Final = 10.0
# While the last ping failed, a call waits this long for a connection instead of the pool
# timeout: during an outage it ends UNAVAILABLE at once rather than after seconds.
UNREACHABLE_POOL_TIMEOUT_S: Final = 0.5
# Advisory lock keys. Migrations use the one-bigint key space; request ids the two-int4 space
# (which PostgreSQL keeps apart from the bigint one) under a class of their own.
MIGRATION_LOCK: Final = int.from_bytes(b"FSMIGRAT", "big")
REQUEST_LOCK_CLASS: Final = int.from_bytes(b"FSRQ", "big")

BEGIN_WRITE: Final = "BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE"
BEGIN_READ: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
#: the shared statements: a write transaction's lock the rows it depends on, a snapshot's do not
WRITE_STATEMENTS: Final = Statements(POSTGRES)
READ_STATEMENTS: Final = Statements(POSTGRES_READ)
_LOCK_REQUEST: Final = "SELECT pg_advisory_xact_lock(%s, %s)"

_UNAVAILABLE: Final = "DATABASE_UNAVAILABLE"


# --- errors ----------------------------------------------------------------------------------


def translate(exc: psycopg.Error) -> FairshoeError | None:
    """The service error for a database error, or None for one that is a bug (bad SQL, a
    violated check the code should have prevented): those propagate as they are."""
    if isinstance(exc, errors.SerializationFailure | errors.DeadlockDetected):
        return Conflict(f"the transaction lost a race ({exc.sqlstate}); retry",
                        reason="CONCURRENT_UPDATE")
    if isinstance(exc, errors.UniqueViolation):
        return Conflict(f"a concurrent change won ({exc.diag.constraint_name})",
                        reason="CONCURRENT_UPDATE")
    if isinstance(exc, errors.LockNotAvailable | errors.QueryCanceled):
        return Unavailable(f"database busy: {_first_line(exc)}", reason="DATABASE_BUSY")
    if isinstance(exc, errors.ReadOnlySqlTransaction):  # e.g. a standby after a failover
        return Unavailable(f"the database is read-only: {_first_line(exc)}", reason=_UNAVAILABLE)
    if isinstance(exc, PoolClosed):
        return Unavailable("the database is closed", reason="DATABASE_CLOSED")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return Unavailable(f"the database is unavailable: {_first_line(exc)}", reason=_UNAVAILABLE)
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@contextmanager
def translated() -> Iterator[None]:
    """Raise database errors inside the block as service errors (see :func:`translate`)."""
    try:
        yield
    except psycopg.Error as exc:
        mapped = translate(exc)
        if mapped is None:
            raise
        raise mapped from exc


# --- migrations ------------------------------------------------------------------------------


def connect_kwargs(*, connect_timeout: int = CONNECT_TIMEOUT_S,
                   lock_timeout_ms: int = LOCK_TIMEOUT_MS, read_only: bool = False
                   ) -> dict[str, Any]:
    """Connection settings: autocommit (this module writes BEGIN itself), timeouts, keepalives
    so a vanished server is noticed, and a name that shows in ``pg_stat_activity``; with
    ``read_only`` the server itself refuses any write on the connection."""
    options = (f"-c lock_timeout={int(lock_timeout_ms)} "
               f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}")
    if read_only:
        options += " -c default_transaction_read_only=on"
    return {"autocommit": True, "connect_timeout": connect_timeout, "options": options,
            "application_name": "fairshoe", "keepalives": 1, "keepalives_idle": 10,
            "keepalives_interval": 5, "keepalives_count": 3}


def migrate(url: str, *, connect_timeout: int = CONNECT_TIMEOUT_S) -> list[int]:
    """Apply the migrations the database lacks; returns the versions applied now.

    One replica at a time: the work runs on its own connection holding
    ``pg_advisory_lock(MIGRATION_LOCK)``, so others wait and then find nothing to do. Each
    migration commits in one transaction with its ``schema_version`` row (PostgreSQL's DDL is
    transactional), so a crash leaves it wholly applied or not at all.
    """
    with translated(), psycopg.connect(url, **connect_kwargs(connect_timeout=connect_timeout,
                                                             lock_timeout_ms=0)) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            return _apply_migrations(conn)
        finally:
            if not conn.closed:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def require_current_schema(url: str, *, connect_timeout: int = CONNECT_TIMEOUT_S) -> None:
    """``Unavailable`` unless the database has exactly the bundled migrations applied (what a
    read-only opening needs: it never migrates)."""
    known = len(schema.migrations("postgresql"))
    with translated(), psycopg.connect(url, **connect_kwargs(connect_timeout=connect_timeout,
                                                             read_only=True)) as conn:
        try:
            (newest,) = _fetched(conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone())
        except errors.UndefinedTable:
            raise Unavailable(f"{describe(url)} is not a Fairshoe database (no schema_version)",
                              reason=_UNAVAILABLE) from None
    if newest != known:
        raise Unavailable(f"{describe(url)} has schema version {newest}; this code reads "
                          f"version {known} (the service migrates a database when it opens it)",
                          reason="SCHEMA_TOO_NEW" if newest > known else "SCHEMA_TOO_OLD")


def describe(url: str) -> str:
    """host, port, database and user of ``url``: never its password."""
    info = conninfo_to_dict(url)
    shown = {k: info[k] for k in ("host", "port", "dbname", "user") if k in info}
    return "postgresql " + " ".join(f"{k}={v}" for k, v in shown.items())


def _apply_migrations(conn: Connection) -> list[int]:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                 " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_version")}
    known = schema.migrations("postgresql")
    newest = max(applied, default=0)
    if newest > len(known):
        raise Unavailable(f"the database has schema version {newest}; this service knows up to "
                          f"{len(known)}", reason="SCHEMA_TOO_NEW")
    applied_now = []
    for migration in known:
        if migration.version in applied:
            continue
        with conn.transaction():
            conn.execute(migration.sql)  # several statements: no parameters, simple protocol
            conn.execute("INSERT INTO schema_version VALUES (%s, %s, %s)",
                         (migration.version, migration.name, utc_now()))
        applied_now.append(migration.version)
    return applied_now


# --- the storage -----------------------------------------------------------------------------


class PostgresStorage:
    """The ports on one PostgreSQL database, through a pool; safe to share between threads."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10,
                 pool_timeout: float = POOL_TIMEOUT_S, connect_timeout: int = CONNECT_TIMEOUT_S,
                 lock_timeout_ms: int = LOCK_TIMEOUT_MS,
                 reconnect_timeout: float = RECONNECT_TIMEOUT_S, read_only: bool = False) -> None:
        """Open (migrating) the database, with a pool of up to ``max_size`` connections (one
        per server worker thread is enough: a thread holds one for one transaction). With
        ``read_only``, open a database that must already have this code's schema, for snapshots
        only (an export, an audit): nothing is migrated or written."""
        self.url = url
        self.read_only = read_only
        if read_only:
            require_current_schema(url, connect_timeout=connect_timeout)
            self.applied_migrations: list[int] = []
        else:
            self.applied_migrations = migrate(url, connect_timeout=connect_timeout)
        # the pool logs every checkout at INFO: keep its warnings (failed connects) only
        logging.getLogger("psycopg.pool").setLevel(logging.WARNING)
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url, min_size=min(min_size, max_size), max_size=max_size, timeout=pool_timeout,
            open=False, name="fairshoe", check=check_idle,
            reconnect_timeout=reconnect_timeout,
            kwargs=connect_kwargs(connect_timeout=connect_timeout,
                                  lock_timeout_ms=lock_timeout_ms, read_only=read_only))
        self._pool.open(wait=False)
        self._local = threading.local()
        self._unreachable = False  # the last ping failed (set and cleared by ping only)
        self._committed = Committed()  # what committed transactions saw (storage/known.py)
        # this replica's share of sequencing the log's queue (storage/sequencer.py)
        self._sequencer = None if read_only else LogSequencer(
            lambda: self._integrate(None, wait=False))
        if self._sequencer is not None:
            self._sequencer.start()

    @classmethod
    def from_config(cls) -> PostgresStorage:
        """The database named by ``FAIRSHOE_DATABASE_URL``."""
        return cls(config.database_url())

    def __repr__(self) -> str:
        info = conninfo_to_dict(self.url)
        shown = {k: info[k] for k in ("host", "port", "dbname", "user") if k in info}
        return f"PostgresStorage({shown!r})"  # never the password

    def describe(self) -> str:
        """What the logs say about the database: never the password."""
        return describe(self.url)

    def sizes(self) -> dict[str, int]:
        """Row counts for the metrics, over every operator, in one snapshot: ``ledger_entries``,
        the stored signed envelopes of each :class:`EnvelopeKind` (by its value) and the log's
        queued leaves (``log_queued``). Exact
        counts (PostgreSQL keeps no row count; the tables are append-only and a scrape is rare
        next to the writes)."""
        out = {}
        with self.snapshot() as uow:
            out["ledger_entries"] = int(uow._one("SELECT COUNT(*) FROM ledger_entries", ())[0])
            for kind, table, _, _ in ENVELOPE_SOURCES:
                out[str(kind)] = int(uow._one(f"SELECT COUNT(*) FROM {table}", ())[0])
            out["log_queued"] = int(uow._one("SELECT COUNT(*) FROM log_queue", ())[0])
        return out

    def integrate_log(self, operator: str | None = None) -> int:
        """Sequence the queued leaves of ``operator`` (None: of all), waiting for a sequencer
        at work; how many left the queue. A read-only storage cannot merge: it waits until a
        replica's sequencer has merged every leaf queued when it was called (0)."""
        if self.read_only:
            self._await_merged(operator)
            return 0
        return self._integrate(operator, wait=True)

    def _await_merged(self, operator: str | None) -> None:
        """Until no leaf queued before now is left (a read-only export's checkpoint then covers
        every envelope it read), polling at the sequencers' interval; Unavailable after
        :data:`READ_ONLY_MERGE_WAIT_S` (no replica runs: the leaves wait for the next start)."""
        deadline = time.monotonic() + READ_ONLY_MERGE_WAIT_S
        newest: int | None = None
        while True:
            with self.snapshot() as uow:
                if newest is None:
                    newest = uow.newest_queued(operator)
                    if newest is None:
                        return
                left = uow.queued_up_to(operator, newest)
            if not left:
                return
            if time.monotonic() >= deadline:
                raise Unavailable(
                    f"{left} log leaves{'' if operator is None else ' of ' + operator} are "
                    f"still queued after {READ_ONLY_MERGE_WAIT_S:g} s: no replica's sequencer "
                    "merges them (start one: it merges them at once), so a read of the log "
                    "would miss them", reason="LOG_NOT_MERGED")
            time.sleep(MERGE_INTERVAL_S)

    def _integrate(self, operator: str | None, *, wait: bool) -> int:
        if operator is None:
            with self.snapshot() as uow:
                operators = uow.queued_operators()
        else:
            operators = [operator]
        merged = 0
        for name in operators:
            while True:
                with self.transaction() as uow:
                    taken = uow.integrate_queue(name, wait=wait)
                if taken is None:  # another replica's sequencer is at it
                    break
                merged += taken
                if taken < MERGE_BATCH:
                    break
        return merged

    @contextmanager
    def transaction(self) -> Iterator[PostgresUnitOfWork]:
        """A READ COMMITTED write transaction: committed on normal exit, else rolled back."""
        if self.read_only:
            raise RuntimeError(f"{self!r} was opened read-only")
        with self._begin(BEGIN_WRITE, writable=True) as uow:
            yield uow

    @contextmanager
    def snapshot(self) -> Iterator[PostgresUnitOfWork]:
        """A read-only transaction on one consistent snapshot (REPEATABLE READ, READ ONLY)."""
        with self._begin(BEGIN_READ, writable=False) as uow:
            yield uow

    @contextmanager
    def _connection(self, timeout: float | None = None) -> Iterator[Connection]:
        """A checked connection from the pool, returned to it afterwards (a broken one is
        replaced by the pool). While the last ping failed, waits at most
        ``UNREACHABLE_POOL_TIMEOUT_S`` unless told otherwise."""
        if timeout is None and self._unreachable:
            timeout = UNREACHABLE_POOL_TIMEOUT_S
        try:
            conn = self._pool.getconn(timeout)
        except PoolClosed:
            raise Unavailable("the database is closed", reason="DATABASE_CLOSED") from None
        except PoolTimeout as exc:
            raise Unavailable(f"no database connection: {exc}", reason=_UNAVAILABLE) from None
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    @contextmanager
    def _begin(self, begin: str, *, writable: bool) -> Iterator[PostgresUnitOfWork]:
        if getattr(self._local, "active", False):
            raise RuntimeError("a transaction is already open on this thread")
        self._local.active = True
        try:
            with self._connection() as conn, translated():
                conn.execute(begin)
                try:
                    uow = PostgresUnitOfWork(conn, writable=writable, committed=self._committed)
                    yield uow
                    if writable:
                        uow.flush_log()  # queues the transaction's leaves (no lock)
                except BaseException:
                    _rollback(conn)
                    raise
                conn.execute("COMMIT" if writable else "ROLLBACK")
                self._committed.add(uow.seen)  # its COMMIT returned
        finally:
            self._local.active = False

    def ping(self, timeout: float = 2.0) -> None:
        """``SELECT 1`` on a pooled connection, waiting at most ``timeout`` seconds for one;
        ``Unavailable(reason="DATABASE_UNAVAILABLE")`` while the server cannot answer. Calls
        made while the last ping failed wait less for a connection (see :meth:`_connection`)."""
        try:
            with self._connection(timeout) as conn, translated():
                conn.execute("SELECT 1").fetchone()
        except Unavailable as exc:
            self._unreachable = exc.reason != "DATABASE_CLOSED"
            raise
        self._unreachable = False

    def close(self) -> None:
        """Stop the sequencer, merge what is still queued if the database answers (a command
        that logged something and exits leaves nothing waiting), and close the connection pool
        and every connection in it."""
        if self._sequencer is not None:
            self._sequencer.stop()
            with suppress(FairshoeError, psycopg.Error):  # best effort: the next start merges
                self._integrate(None, wait=False)
        self._pool.close()


def _rollback(conn: Connection) -> None:
    """Roll back whatever is open; a broken connection has nothing left to roll back."""
    if conn.closed:
        return
    with suppress(psycopg.Error):  # a connection that broke: the server rolled back already
        conn.execute("ROLLBACK")


def _request_key(operator: str, request_id: str) -> int:
    """A signed 32-bit key of (operator, request id) for the advisory lock: two different
    requests sharing one only wait for each other, which is harmless."""
    digest = hashlib.sha256(f"{operator}\n{request_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


class PostgresUnitOfWork(SqlUnitOfWork):
    """The :class:`~rng_service.service.ports.UnitOfWork` of one PostgreSQL transaction: the
    shared SQL (:mod:`rng_service.storage.sql`) on one pooled connection, its reads locking
    ``FOR UPDATE`` in a write transaction (see the module docstring)."""

    _duplicate = errors.UniqueViolation
    sequence_at_commit = False  # leaves are queued: replicas do not take turns on the log's row

    def __init__(self, conn: Connection, *, writable: bool,
                 committed: Committed | None = None) -> None:
        self._conn = conn
        self._writable = writable
        self._sql = WRITE_STATEMENTS if writable else READ_STATEMENTS
        self._pending_leaves = []
        self._committed = committed
        self.seen = []
        self._balances = {}

    def _write(self, sql: str, params: Sequence[Any]) -> psycopg.Cursor[TupleRow]:
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
        return self._conn.execute(sql, params)

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
        if rows:
            with self._conn.cursor() as cur:
                cur.executemany(sql, rows)

    def _insert_id(self, sql: str, params: Sequence[Any]) -> int:
        return int(_fetched(self._write(sql, params).fetchone())[0])

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        return self._conn.execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[TupleRow]:
        return self._conn.execute(sql, params).fetchall()

    def get_response(self, operator: str, request_id: str) -> StoredResponse | None:
        """The stored first answer to ``request_id``, or None if the request is new. In a write
        transaction it first takes an advisory lock on the request, so a concurrent duplicate
        waits here until the first one commits or rolls back."""
        if self._writable:
            self._conn.execute(_LOCK_REQUEST,
                               (REQUEST_LOCK_CLASS, _request_key(operator, request_id)))
        return super().get_response(operator, request_id)


def check_idle(conn: Connection) -> None:
    """The pool's check of a connection before it lends it: raises if the connection is
    broken (the pool then replaces it). An idle connection's server sends nothing unprompted
    unless it is going away (a restart, a terminated backend: its last message and the socket's
    end) or has a notice for it, so the round trip of psycopg_pool's ``check_connection`` (an
    empty query) is made only when the socket has something to read; a poll of the socket costs
    no round trip, where the empty query cost one before every transaction."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    try:
        readable = bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError, psycopg.Error):
        readable = True  # no socket to poll: let the round trip decide
    if readable:
        ConnectionPool.check_connection(conn)


def _fetched(row: TupleRow | None) -> TupleRow:
    if row is None:
        raise RuntimeError("INSERT ... RETURNING returned no row")
    return row
