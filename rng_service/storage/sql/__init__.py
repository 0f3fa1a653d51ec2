"""The SQL of the storage port, written once for both databases, per group of tables.

Each module holds one group's statements (built once per dialect, at import) and its part of
the unit of work (a mixin on the driver's calls, :class:`~rng_service.storage.sql.dialect.
SharedSql`), with the mapping between rows and the port's dataclasses:

* :mod:`~rng_service.storage.sql.accounts`: operators, idempotent answers, accounts;
* :mod:`~rng_service.storage.sql.ledger`: postings and ledger entries;
* :mod:`~rng_service.storage.sql.shoes`, :mod:`~rng_service.storage.sql.rounds`;
* :mod:`~rng_service.storage.sql.envelopes`: records, reveals, RNG draws, the export's pages;
* :mod:`~rng_service.storage.sql.log`: the transparency log;
* :mod:`~rng_service.storage.sql.wallet`: operators' wallet settings, the seamless wallet's
  outbox.

A driver (``rng_service.storage.sqlite``, ``rng_service.storage.postgres``) derives its unit of
work from :class:`SqlUnitOfWork`, gives it the :class:`Statements` of its dialect and the few
driver calls, and keeps connections, transactions, group commit, locks, migrations and error
translation to itself.
"""

from __future__ import annotations

from rng_service.storage.sql.accounts import AccountSql, AccountTables
from rng_service.storage.sql.dialect import SqlDialect
from rng_service.storage.sql.envelopes import EnvelopeSql, EnvelopeTables
from rng_service.storage.sql.ledger import LedgerSql, LedgerTables
from rng_service.storage.sql.log import LogSql, LogTables
from rng_service.storage.sql.rounds import RoundSql, RoundTables
from rng_service.storage.sql.shoes import ShoeSql, ShoeTables
from rng_service.storage.sql.wallet import WalletSql, WalletTables


class Statements:
    """Every shared statement in one dialect, by group of tables: built once, at import."""

    __slots__ = ("accounts", "envelopes", "ledger", "log", "rounds", "shoes", "wallet")

    def __init__(self, dialect: SqlDialect) -> None:
        self.accounts = AccountSql(dialect)
        self.ledger = LedgerSql(dialect)
        self.shoes = ShoeSql(dialect)
        self.rounds = RoundSql(dialect)
        self.envelopes = EnvelopeSql(dialect)
        self.log = LogSql(dialect)
        self.wallet = WalletSql(dialect)


class SqlUnitOfWork(AccountTables, LedgerTables, ShoeTables, RoundTables, EnvelopeTables,
                    LogTables, WalletTables):
    """The :class:`~rng_service.service.ports.UnitOfWork` less its driver: every table's SQL."""

#: what the drivers use: the composed unit of work, the statements, and three modules (log for
#: its merge batch: PostgreSQL's sequencer drains its queue batch by batch); the other modules
#: (accounts, ledger, rounds, shoes, wallet) are internals composed here
__all__ = ["SqlUnitOfWork", "Statements", "dialect", "envelopes", "log"]
