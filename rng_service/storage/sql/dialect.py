"""What differs between the two databases' SQL, in one small object, and what the shared SQL
needs from a driver's unit of work.

The statements of :mod:`rng_service.storage.sql` are written once, with ``?`` placeholders, and
built at import for each :class:`SqlDialect` (never per call: a round transition runs a dozen of
them). The differences are few:

* placeholders: ``?`` on SQLite, ``%s`` on PostgreSQL (:meth:`SqlDialect.q`);
* row locks: a PostgreSQL write transaction reads the rows it depends on ``FOR UPDATE``
  (``rng_service.storage.postgres``); SQLite's one writer needs none (:meth:`SqlDialect.locked`);
* the id of an inserted row: SQLite's ``lastrowid``, PostgreSQL's ``RETURNING``;
* booleans as parameters: SQLite compares ``(status = 'open')`` with 0 or 1, PostgreSQL with a
  boolean (:attr:`SqlDialect.flag`);
* a page over a ``UNION ALL``: SQLite orders and limits the compound as a whole (it merges the
  sources' index scans), PostgreSQL limits each source too (:attr:`SqlDialect.limit_each`);
* a key looked up in a list (``holder IN (?, ?)``): SQLite builds a temporary B-tree of the
  list each time the statement runs, dearer than the look-ups themselves, so a pair of rows is
  read by two look-ups and written by two (:attr:`SqlDialect.in_list_table`).

Blobs need nothing: both drivers take ``bytes``, and a row's bytes are read back with ``bytes()``
(a driver may give a ``memoryview``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rng_service.storage.known import Balance, Committed

if TYPE_CHECKING:
    from rng_service.storage.sql import Statements


@dataclass(frozen=True)
class SqlDialect:
    """How one database spells what the shared SQL leaves open."""

    #: the driver's parameter marker
    param: str
    #: whether statements built for it lock the rows they read (``FOR UPDATE``)
    row_locks: bool
    #: the suffix of an INSERT that returns the new row's id (``RETURNING <column>``)
    returns_id: bool
    #: a boolean as a parameter compared with a boolean expression
    flag: Callable[[bool], object]
    #: a text literal's cast where a UNION needs its type (``'round'::text``)
    text_cast: str
    #: each source of a paged UNION ALL ordered and limited on its own as well
    limit_each: bool
    #: whether an ``IN (?, ?)`` list on an indexed column costs a temporary table per run
    in_list_table: bool = False

    def q(self, sql: str) -> str:
        """``sql`` (written with ``?``) with this dialect's placeholders."""
        return sql if self.param == "?" else sql.replace("?", self.param)

    def params(self, n: int) -> str:
        """``n`` placeholders, comma separated (an INSERT's VALUES)."""
        return ", ".join([self.param] * n)

    def locked(self, order_by: str = "") -> str:
        """The suffix that locks the rows a write depends on (in ``order_by`` order, so two
        transactions lock a pair of rows in one order and cannot deadlock), or nothing."""
        if not self.row_locks:
            return ""
        return (f" ORDER BY {order_by}" if order_by else "") + " FOR UPDATE"

    def returning(self, column: str) -> str:
        """`` RETURNING column`` where the driver reads a new id that way, else nothing."""
        return f" RETURNING {column}" if self.returns_id else ""


SQLITE = SqlDialect(param="?", row_locks=False, returns_id=False, flag=int, text_cast="",
                    limit_each=False, in_list_table=True)
#: PostgreSQL's write transactions (rows locked as read); read-only snapshots lock nothing
POSTGRES = SqlDialect(param="%s", row_locks=True, returns_id=True, flag=bool,
                      text_cast="::text", limit_each=True)
POSTGRES_READ = SqlDialect(param="%s", row_locks=False, returns_id=True, flag=bool,
                           text_cast="::text", limit_each=True)


class SharedSql:
    """What the shared tables need from the unit of work they are mixed into: the driver's
    calls (the host class's own methods come first in the MRO) and its attributes."""

    #: the statements of the driver's dialect (chosen per transaction: read or write)
    _sql: Statements
    _writable: bool
    #: the driver's error for a violated unique index (an insert that lost a race)
    _duplicate: ClassVar[type[Exception]]
    #: what the storage's committed transactions saw (None: nothing is remembered)
    _committed: Committed | None
    #: what this transaction saw in the database or wrote (known once it commits)
    seen: list[Hashable]
    #: the balances this transaction's postings wrote, by account (see ``ledger.py``)
    _balances: dict[tuple[str, str, str, str], Balance]

    def _write(self, sql: str, params: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def _insert_id(self, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT built with :meth:`SqlDialect.returning` and return the new row's id."""
        raise NotImplementedError

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _write_check(self) -> None:
        if not self._writable:
            raise RuntimeError("write through a read-only snapshot")
