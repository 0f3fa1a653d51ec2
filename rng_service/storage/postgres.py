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

Idempotency across replicas: a write transaction that looks up a request id first takes a
transaction-scoped advisory lock on (operator, request id), so a concurrent duplicate waits for
the first to end and then reads its stored answer, exactly as SQLite's single writer does. The
primary key on ``idempotency (operator, request_id)`` stays the backstop (``Conflict``).

Errors: whatever the database says is translated at the transaction boundary. A lost race
(versioned update, unique index, serialization failure, deadlock) is ``Conflict`` (retryable); a
lock wait beyond ``lock_timeout`` or a cancelled statement is ``Unavailable`` ``DATABASE_BUSY``;
a refused or broken connection, a server shut down, or no pooled connection within the pool
timeout is ``Unavailable`` ``DATABASE_UNAVAILABLE``. The pool checks each connection before
handing it out and replaces broken ones, so the storage recovers by itself when the server is
back. A connection lost during COMMIT leaves the outcome unknown; the client's retry with the
same request id then returns the stored answer or does the work once.

Migrations: ``migrations/postgresql/NNNN_name.sql`` (the same history as SQLite's, see
:mod:`rng_service.storage.schema`), applied at open over a dedicated connection holding a
session advisory lock, so replicas starting together apply each migration exactly once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
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
from rng_service.storage.rows import (
    ENTRY_COLUMNS,
    ENVELOPE_SOURCES,
    ROUND_COLUMNS,
    SHOE_COLUMNS,
    balances_after,
    balances_params,
    entry_row,
    entry_values,
    envelope_after,
    new_public_id,
    posted_entry,
    round_row,
    round_values,
    set_balances_sql,
    shoe_row,
    shoe_values,
)
from rng_service.storage.translog import LogTables

Connection = psycopg.Connection[TupleRow]

LOCK_TIMEOUT_MS: Final = 10_000  # as SQLite's busy timeout: a lock wait longer than this is busy
IDLE_IN_TRANSACTION_TIMEOUT_MS: Final = 60_000  # a hung replica cannot hold row locks forever
CONNECT_TIMEOUT_S: Final = 5
POOL_TIMEOUT_S: Final = 5.0
# How long the pool keeps retrying (1 s, 2 s, 4 s, ... apart) to replace a connection before it
# gives up; the next request for a connection starts again at 1 s. Kept short so that after an
# outage of any length a connection is back within a few seconds of the server.
RECONNECT_TIMEOUT_S: Final = 5.0
# While the last ping failed, a call waits this long for a connection instead of the pool
# timeout: during an outage it ends UNAVAILABLE at once rather than after seconds.
UNREACHABLE_POOL_TIMEOUT_S: Final = 0.5
# Advisory lock keys. Migrations use the one-bigint key space; request ids the two-int4 space
# (which PostgreSQL keeps apart from the bigint one) under a class of their own.
MIGRATION_LOCK: Final = int.from_bytes(b"FSMIGRAT", "big")
REQUEST_LOCK_CLASS: Final = int.from_bytes(b"FSRQ", "big")

BEGIN_WRITE: Final = "BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE"
BEGIN_READ: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
_SET_BALANCES: Final = set_balances_sql("%s")

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
            open=False, name="fairshoe", check=ConnectionPool.check_connection,
            reconnect_timeout=reconnect_timeout,
            kwargs=connect_kwargs(connect_timeout=connect_timeout,
                                  lock_timeout_ms=lock_timeout_ms, read_only=read_only))
        self._pool.open(wait=False)
        self._local = threading.local()
        self._unreachable = False  # the last ping failed (set and cleared by ping only)
        self._committed = Committed()  # what committed transactions saw (storage/known.py)

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
        """Row counts for the metrics, over every operator, in one snapshot: ``ledger_entries``
        and the stored signed envelopes of each :class:`EnvelopeKind` (by its value). Exact
        counts (PostgreSQL keeps no row count; the tables are append-only and a scrape is rare
        next to the writes)."""
        out = {}
        with self.snapshot() as uow:
            out["ledger_entries"] = int(uow._one("SELECT COUNT(*) FROM ledger_entries", ())[0])
            for kind, table, _, _ in ENVELOPE_SOURCES:
                out[str(kind)] = int(uow._one(f"SELECT COUNT(*) FROM {table}", ())[0])
        return out

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
                        uow.flush_log()  # the log's sequencer lock is the last one taken
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
        """Close the connection pool and every connection in it."""
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


class PostgresUnitOfWork(LogTables, EnvelopeTables):
    """The :class:`~rng_service.service.ports.UnitOfWork` of one PostgreSQL transaction."""

    PARAM = "%s"

    def __init__(self, conn: Connection, *, writable: bool,
                 committed: Committed | None = None) -> None:
        self._conn = conn
        self._writable = writable
        self._pending_leaves = []
        self._committed = committed
        self.seen = []

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

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        return self._conn.execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[TupleRow]:
        return self._conn.execute(sql, params).fetchall()

    def operator_exists(self, operator: str) -> bool:
        """True if ``operator`` is one the database knows."""
        fact = ("operator", operator)
        if self._committed is not None and fact in self._committed:
            return True  # operators are never deleted
        found = self._one("SELECT 1 FROM operators WHERE operator = %s", (operator,)) is not None
        if found:
            self.seen.append(fact)
        return found

    def add_operator(self, operator: str) -> bool:
        """Make ``operator`` known; False if it already was."""
        cur = self._write("INSERT INTO operators (operator, created_at) VALUES (%s, %s) "
                          "ON CONFLICT (operator) DO NOTHING", (operator, utc_now()))
        return cur.rowcount == 1

    def list_operators(self) -> list[tuple[str, str]]:
        """Every operator and when it was added, by name."""
        rows = self._conn.execute("SELECT operator, created_at FROM operators ORDER BY operator")
        return [(str(name), str(created)) for name, created in rows.fetchall()]

    # --- idempotency ---------------------------------------------------------------------

    def get_response(self, operator: str, request_id: str) -> StoredResponse | None:
        """The stored first answer to ``request_id``, or None if the request is new. In a write
        transaction it first takes an advisory lock on the request, so a concurrent duplicate
        waits here until the first one commits or rolls back."""
        if self._writable:  # a concurrent duplicate waits here until the first one ends
            self._conn.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                               (REQUEST_LOCK_CLASS, _request_key(operator, request_id)))
        row = self._one("SELECT operation, request_hash, response FROM idempotency "
                        "WHERE operator = %s AND request_id = %s", (operator, request_id))
        return None if row is None else StoredResponse(row[0], row[1], bytes(row[2]))

    def put_response(self, operator: str, request_id: str, stored: StoredResponse) -> None:
        """Store the first answer to ``request_id`` (it commits with the request's
        writes)."""
        self._write("INSERT INTO idempotency VALUES (%s, %s, %s, %s, %s, %s)",
                    (operator, request_id, stored.operation, stored.request_hash,
                     stored.response, utc_now()))

    # --- accounts and the ledger -----------------------------------------------------------

    def get_balance(self, account: AccountKey) -> int | None:
        """The balance, or None if the account does not exist."""
        row = self._one("SELECT balance FROM accounts WHERE operator = %s AND holder = %s "
                        "AND currency = %s AND mode = %s", _account_params(account))
        return None if row is None else int(row[0])

    def in_play(self, account: AccountKey) -> int:
        """What ``account`` has staked in its open rounds, less what they already
        returned."""
        row = self._one(
            "SELECT COALESCE(SUM(CASE WHEN e.source = %s THEN e.amount ELSE -e.amount END), 0) "
            "FROM ledger_entries e JOIN rounds r "
            "ON r.operator = e.operator AND r.round_id = e.round_id AND r.status = 'open' "
            "WHERE e.operator = %s AND e.currency = %s AND e.mode = %s AND (e.source = %s "
            "OR e.target = %s)",
            (account.holder, account.operator, account.currency, str(account.mode),
             account.holder, account.holder))
        return max(0, int(row[0])) if row is not None else 0

    def open_account(self, account: AccountKey, kind: AccountKind) -> bool:
        """Create the account with balance 0 unless it exists; True if it was created."""
        cur = self._write(
            "INSERT INTO accounts (operator, holder, currency, mode, kind, balance, created_at) "
            "VALUES (%s, %s, %s, %s, %s, 0, %s) ON CONFLICT DO NOTHING",
            (*_account_params(account), str(kind), utc_now()))
        return cur.rowcount == 1

    def _lock_accounts(self, source: AccountKey, target: AccountKey
                       ) -> dict[str, tuple[str, int]]:
        """holder -> (kind, balance) of both accounts, locked in holder order (no deadlock
        between two postings on one pair of accounts)."""
        rows = self._all(
            "SELECT holder, kind, balance FROM accounts WHERE operator = %s AND currency = %s "
            "AND mode = %s AND holder IN (%s, %s) ORDER BY holder FOR UPDATE",
            (source.operator, source.currency, str(source.mode), source.holder, target.holder))
        return {holder: (kind, int(balance)) for holder, kind, balance in rows}

    def post(self, posting: Posting) -> LedgerEntry:
        """Move the money and append the entry. Both accounts must exist. A player account
        that would go below zero raises ``IllegalState(reason="INSUFFICIENT_FUNDS")``. Both
        account rows are locked ``FOR UPDATE`` first, in holder order (no deadlock)."""
        source, target, amount = posting.source, posting.target, posting.amount
        if (source.operator, source.currency, source.mode) != (
                target.operator, target.currency, target.mode):
            raise ValueError("a posting moves money within one operator, currency and mode")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise ValueError(f"a posting's amount is a positive integer, got {amount!r}")
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
        locked = self._lock_accounts(source, target)
        src, dst = locked.get(source.holder), locked.get(target.holder)
        if src is None or dst is None:
            raise MissingAccount(f"posting between missing accounts {source.holder}, "
                                 f"{target.holder}")
        source_after, target_after = balances_after(src[0], src[1], dst[1], amount)
        self._write(_SET_BALANCES, balances_params(posting, source_after, target_after))
        created_at, public_id = utc_now(), new_public_id()
        cur = self._write(
            f"INSERT INTO ledger_entries ({ENTRY_COLUMNS}) VALUES (DEFAULT, "
            "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING entry_id",
            entry_values(posting, source_after, target_after, created_at, public_id))
        entry_id = int(_fetched(cur.fetchone())[0])
        return posted_entry(entry_id, posting, source_after, target_after, created_at,
                            public_id=public_id)

    def round_entries(self, operator: str, round_id: str) -> list[LedgerEntry]:
        """The ledger entries of round ``round_id``, oldest first."""
        rows = self._all(f"SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE operator = %s "
                         "AND round_id = %s ORDER BY entry_id", (operator, round_id))
        return [entry_row(r) for r in rows]

    def list_entries(self, account: AccountKey, limit: int, before: int | None, *,
                     round_id: str | None = None) -> list[LedgerEntry]:
        """Entries touching ``account``, newest first, with ``entry_id < before`` if
        given (and of round ``round_id`` only, if given)."""
        key = (account.operator, account.currency, str(account.mode))
        bound = before if before is not None else 2**63 - 1
        of_round = " AND round_id = %s" if round_id is not None else ""
        extra = (round_id,) if round_id is not None else ()
        # two index range scans (as source, as target) merged: no OR across the two indexes
        rows = self._all(
            f"SELECT {ENTRY_COLUMNS} FROM ("
            f" SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE operator = %s AND currency = %s"
            f"  AND mode = %s AND source = %s AND entry_id < %s{of_round}"
            " UNION ALL"
            f" SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE operator = %s AND currency = %s"
            f"  AND mode = %s AND target = %s AND entry_id < %s{of_round}"
            ") AS touching ORDER BY entry_id DESC LIMIT %s",
            (*key, account.holder, bound, *extra, *key, account.holder, bound, *extra, limit))
        return [entry_row(r) for r in rows]

    def entry_position(self, account: AccountKey, public_id: str) -> int | None:
        """The ``entry_id`` of the entry ``public_id`` touching ``account``, or None."""
        row = self._one(
            "SELECT entry_id FROM ledger_entries WHERE operator = %s AND public_id = %s "
            "AND currency = %s AND mode = %s AND %s IN (source, target)",
            (account.operator, public_id, account.currency, str(account.mode),
             account.holder))
        return None if row is None else int(row[0])

    # --- shoes ---------------------------------------------------------------------------

    def insert_shoe(self, row: ShoeRow) -> None:
        """A new shoe; a second current shoe for one player, game and mode raises
        ``Conflict``."""
        try:
            self._write(f"INSERT INTO shoes ({SHOE_COLUMNS}) VALUES "
                        f"({_placeholders(17)})", shoe_values(row))
        except errors.UniqueViolation:
            raise Conflict("the player already has a current shoe for this game and mode",
                           reason="CONCURRENT_UPDATE") from None

    def get_shoe(self, operator: str, shoe_id: str) -> ShoeRow | None:
        """The shoe ``shoe_id`` of ``operator``, or None."""
        row = self._one(f"SELECT {SHOE_COLUMNS} FROM shoes WHERE operator = %s "
                        "AND shoe_id = %s", (operator, shoe_id))
        return None if row is None else shoe_row(row)

    def current_shoe(self, operator: str, player: str, game: str, mode: Mode) -> ShoeRow | None:
        """The player's committed or in-play shoe for ``game`` in ``mode`` (at most one
        exists)."""
        row = self._one(f"SELECT {SHOE_COLUMNS} FROM shoes WHERE operator = %s AND player = %s "
                        "AND game = %s AND mode = %s AND status IN ('committed', 'in_play')",
                        (operator, player, game, str(mode)))
        return None if row is None else shoe_row(row)

    def update_shoe(self, row: ShoeRow, expected_version: int) -> None:
        """Write ``row`` (whose version is ``expected_version + 1``) if the stored
        version is still ``expected_version``; else ``Conflict``."""
        cur = self._write(
            "UPDATE shoes SET client_seed = %s, position = %s, rounds_started = %s, "
            "status = %s, version = %s, updated_at = %s "
            "WHERE operator = %s AND shoe_id = %s AND version = %s",
            (row.client_seed, row.position, row.rounds_started, str(row.status), row.version,
             row.updated_at, row.operator, row.shoe_id, expected_version))
        if cur.rowcount != 1:
            raise Conflict(f"shoe {row.shoe_id} changed concurrently", reason="CONCURRENT_UPDATE")

    def finished_unrevealed_shoes(self) -> list[ShoeRow]:
        """Every operator's shoes in status ``finished``; locked in a write transaction, so a
        replica recovering at the same time waits, then skips the shoes this one revealed."""
        # locked when writing: a replica recovering at the same time waits, then skips the shoes
        # the first revealed (READ COMMITTED re-checks the status of a row it waited for)
        rows = self._all(f"SELECT {SHOE_COLUMNS} FROM shoes WHERE status = 'finished'"
                         f"{self._lock()}")
        return [shoe_row(r) for r in rows]

    # --- rounds --------------------------------------------------------------------------

    def insert_round(self, row: RoundRow) -> None:
        """A new round; a second open round for one player and game raises
        ``Conflict``."""
        try:
            self._write(f"INSERT INTO rounds ({ROUND_COLUMNS}) VALUES "
                        f"({_placeholders(14)})", round_values(row))
        except errors.UniqueViolation:
            raise Conflict(f"player {row.player} already has an open {row.game} round",
                           reason="ROUND_IN_PROGRESS") from None

    def _lock(self) -> str:
        """`` FOR UPDATE`` in a write transaction (see the module docstring), else nothing."""
        return " FOR UPDATE" if self._writable else ""

    def get_round(self, operator: str, round_id: str) -> RoundRow | None:
        """The round ``round_id`` of ``operator``, or None; locked
        ``FOR UPDATE`` in a write transaction."""
        row = self._one(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE operator = %s "
                        f"AND round_id = %s{self._lock()}", (operator, round_id))
        return None if row is None else round_row(row)

    def open_round(self, operator: str, player: str, game: str) -> RoundRow | None:
        """The player's open round of ``game``, or None; locked
        ``FOR UPDATE`` in a write transaction."""
        row = self._one(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE operator = %s "
                        f"AND player = %s AND game = %s AND status = 'open'{self._lock()}",
                        (operator, player, game))
        return None if row is None else round_row(row)

    def update_round(self, row: RoundRow, expected_version: int) -> None:
        """As :meth:`update_shoe`, for a round."""
        cur = self._write(
            "UPDATE rounds SET status = %s, version = %s, state = %s, updated_at = %s "
            "WHERE operator = %s AND round_id = %s AND version = %s",
            (str(row.status), row.version, row.state, row.updated_at, row.operator,
             row.round_id, expected_version))
        if cur.rowcount != 1:
            raise Conflict(f"round {row.round_id} changed concurrently (expected version "
                           f"{expected_version})", reason="CONCURRENT_UPDATE")

    def list_rounds(self, operator: str, player: str, limit: int, after: RoundCursor | None,
                    *, mode: Mode | None = None, is_open: bool | None = None) -> list[RoundRow]:
        """Open rounds first, then the others, each group newest first, after
        ``after``; filtered by ``mode`` and ``is_open`` when given."""
        where = "operator = %s AND player = %s"
        params: list[object] = [operator, player]
        if mode is not None:
            where += " AND mode = %s"
            params.append(str(mode))
        if is_open is not None:
            where += " AND (status = 'open') = %s"
            params.append(bool(is_open))
        if after is not None:
            where += " AND ((status = 'open'), created_at, round_id) < (%s, %s, %s)"
            params += [after.is_open, after.created_at, after.round_id]
        rows = self._all(
            f"SELECT {ROUND_COLUMNS} FROM rounds WHERE {where} "
            "ORDER BY (status = 'open') DESC, created_at DESC, round_id DESC LIMIT %s",
            (*params, limit))
        return [round_row(r) for r in rows]

    def open_round_ids(self) -> list[tuple[str, str]]:
        """(operator, round id) of every open round, oldest first."""
        rows = self._all("SELECT operator, round_id FROM rounds WHERE status = 'open' "
                         "ORDER BY created_at")
        return [(r[0], r[1]) for r in rows]

    # --- signed records --------------------------------------------------------------------

    def list_envelopes(self, operator: str, start: str, end: str,
                       after: StoredEnvelope | None, limit: int) -> list[StoredEnvelope]:
        """At most ``limit`` signed envelopes stored at ``start <= created_at < end``,
        ordered by (created_at, kind, id), strictly after ``after`` if given."""
        # each source's page is one range scan of its (operator, created_at, id) index, at most
        # ``limit`` rows; the page of the whole listing is the first ``limit`` of their union
        selects, params = [], []
        for kind, table, id_column, column in ENVELOPE_SOURCES:
            condition, values = envelope_after(kind, id_column, after, "%s")
            selects.append(
                f"(SELECT '{kind}'::text AS kind, {kind.rank} AS rank, {id_column} AS ident, "
                f"{column} AS envelope, created_at FROM {table} WHERE operator = %s "
                f"AND created_at >= %s AND created_at < %s AND {condition} "
                f"ORDER BY created_at, {id_column} LIMIT %s)")
            params += [operator, start, end, *values, limit]
        rows = self._all(" UNION ALL ".join(selects) + " ORDER BY 5, 2, 3 LIMIT %s",
                         (*params, limit))
        return [StoredEnvelope(EnvelopeKind(k), ident, bytes(env), created)
                for k, _, ident, env, created in rows]


def _account_params(account: AccountKey) -> tuple[str, str, str, str]:
    return account.operator, account.holder, account.currency, str(account.mode)


def _placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)


def _fetched(row: TupleRow | None) -> TupleRow:
    if row is None:
        raise RuntimeError("INSERT ... RETURNING returned no row")
    return row
