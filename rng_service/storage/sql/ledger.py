"""The ledger: postings between two accounts and their entries, written once for both
databases (:mod:`rng_service.storage.sql.dialect`).

A posting is three statements: both balances read (locked ``FOR UPDATE`` in holder order on
PostgreSQL, so two postings on one pair of accounts cannot deadlock), both written in one
``UPDATE``, the entry inserted. On SQLite the two accounts are read by one ``UNION ALL`` of two
key look-ups and written by one statement run for each, not through an ``IN`` list, for which
SQLite builds a temporary B-tree every run (about 25,000 instructions a statement, counted).

On SQLite (no row locks: one writer at a time) a posting does not read an account whose balance
it knows: one that an earlier posting of the same transaction wrote, or that a committed
transaction of this storage left (:class:`rng_service.storage.known.Balance`). Its write is
then the check, ``UPDATE ... WHERE balance`` is the known one; if that matches no row (another
process posted, or a transaction of the same group commit), the accounts are read and the
posting is made from what they hold, as without a known balance. A refusal (too little money,
the balance limit) computed from known balances is made again from read ones. Every entry and
balance written is what reading first would have written. PostgreSQL reads (and locks) both
accounts, as above.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, Final

from rng_service.core.errors import IllegalState
from rng_service.service.ports import (
    AccountKey,
    AccountKind,
    EntryKind,
    LedgerEntry,
    MissingAccount,
    Mode,
    Posting,
    utc_now,
)
from rng_service.storage.known import Balance
from rng_service.storage.sql.dialect import SharedSql, SqlDialect

ENTRY_COLUMNS: Final = (
    "entry_id, operator, currency, mode, source, target, amount, kind, round_id, wager_id, "
    "request_id, source_balance_after, target_balance_after, created_at, reference, public_id"
)
#: the columns an INSERT gives (``entry_id`` is the database's: a counter)
_INSERTED_COLUMNS: Final = ENTRY_COLUMNS.removeprefix("entry_id, ")

#: the largest balance either side of a posting may reach: both databases store a balance as a
#: 64-bit integer, so a posting past it is refused as a state the ledger cannot take, before the
#: database would fail with an overflow (a bug's INTERNAL, and for every player of that currency
#: once the operator's cash account is at the bound)
BALANCE_LIMIT: Final = 2**63 - 1
#: ``entry_id < before`` when no ``before`` is given: past every id (a 64-bit counter)
_NO_BOUND: Final = 2**63 - 1


class LedgerSql:
    """The ledger's statements in one dialect."""

    __slots__ = ("by_key", "checked_writes", "entries", "entries_of_round", "entry_position",
                 "in_play", "insert_entry", "lock_accounts", "round_entries", "set_balance",
                 "set_balance_if", "set_balances")

    def __init__(self, d: SqlDialect) -> None:
        #: a posting's two accounts read and written one key at a time (SQLite: an ``IN``
        #: list costs a temporary B-tree per run, more than a second look-up or write)
        self.by_key = d.in_list_table
        if self.by_key:  # parameters: (operator, currency, mode, holder) of each account
            one = ("SELECT holder, kind, balance FROM accounts WHERE operator = ? "
                   "AND currency = ? AND mode = ? AND holder = ?")
            self.lock_accounts = d.q(f"{one} UNION ALL {one}")
        else:
            self.lock_accounts = d.q(
                "SELECT holder, kind, balance FROM accounts WHERE operator = ? AND currency = ? "
                f"AND mode = ? AND holder IN (?, ?){d.locked(order_by='holder')}")
        #: parameters: (source holder, source balance after, target balance after, operator,
        #: currency, mode, source holder, target holder), see :func:`balances_params`
        self.set_balances = d.q(
            "UPDATE accounts SET balance = CASE holder WHEN ? THEN ? ELSE ? END "
            "WHERE operator = ? AND currency = ? AND mode = ? AND holder IN (?, ?)")
        #: one account's balance (``by_key``): (balance, operator, holder, currency, mode)
        self.set_balance = d.q("UPDATE accounts SET balance = ? WHERE operator = ? AND holder = ? "
                               "AND currency = ? AND mode = ?")
        #: without row locks (SQLite's one writer), a known balance is checked by its write:
        #: (balance, operator, holder, currency, mode, the balance known)
        self.checked_writes = not d.row_locks
        self.set_balance_if = d.q(f"{self.set_balance} AND balance = ?")
        self.insert_entry = (f"INSERT INTO ledger_entries ({_INSERTED_COLUMNS}) "
                             f"VALUES ({d.params(15)}){d.returning('entry_id')}")
        self.in_play = d.q(
            "SELECT COALESCE(SUM(CASE WHEN e.source = ? THEN e.amount ELSE -e.amount END), 0) "
            "FROM ledger_entries e JOIN rounds r "
            "ON r.operator = e.operator AND r.round_id = e.round_id AND r.status = 'open' "
            "WHERE e.operator = ? AND e.currency = ? AND e.mode = ? AND (e.source = ? "
            "OR e.target = ?)")
        self.round_entries = d.q(f"SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE operator = ? "
                                 "AND round_id = ? ORDER BY entry_id")
        self.entries = d.q(_touching(""))
        self.entries_of_round = d.q(_touching(" AND round_id = ?"))
        self.entry_position = d.q(
            "SELECT entry_id FROM ledger_entries WHERE operator = ? AND public_id = ? "
            "AND currency = ? AND mode = ? AND ? IN (source, target)")


def _touching(of_round: str) -> str:
    """The entries touching an account, newest first: two index range scans (as source, as
    target) merged, no OR across the two indexes."""
    return (f"SELECT {ENTRY_COLUMNS} FROM ("
            f" SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE operator = ? AND currency = ?"
            f"  AND mode = ? AND source = ? AND entry_id < ?{of_round}"
            " UNION ALL"
            f" SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE operator = ? AND currency = ?"
            f"  AND mode = ? AND target = ? AND entry_id < ?{of_round}"
            ") AS touching ORDER BY entry_id DESC LIMIT ?")


class LedgerTables(SharedSql):
    """Postings and ledger entries: a part of the unit of work."""

    def in_play(self, account: AccountKey) -> int:
        """What ``account`` has staked in its open rounds, less what they already
        returned."""
        row = self._one(self._sql.ledger.in_play,
                        (account.holder, account.operator, account.currency, str(account.mode),
                         account.holder, account.holder))
        return max(0, int(row[0])) if row is not None else 0

    def post(self, posting: Posting) -> LedgerEntry:
        """Move the money and append the entry. Both accounts must exist. A player account
        that would go below zero raises ``IllegalState(reason="INSUFFICIENT_FUNDS")``. Three
        statements: both balances read (and locked, see the module docstring), both written,
        the entry inserted; on SQLite no read where both balances are known (the module's
        docstring), each write checking its own."""
        source, target, amount = posting.source, posting.target, posting.amount
        if (source.operator, source.currency, source.mode) != (
                target.operator, target.currency, target.mode):
            raise ValueError("a posting moves money within one operator, currency and mode")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise ValueError(f"a posting's amount is a positive integer, got {amount!r}")
        self._write_check()
        sql = self._sql.ledger
        operator, currency, mode = source.operator, source.currency, str(source.mode)
        src_key = (operator, source.holder, currency, mode)
        dst_key = (operator, target.holder, currency, mode)
        src = dst = None
        if sql.checked_writes and src_key != dst_key:  # known balances, checked by the writes
            src, dst = self._known_balance(src_key), self._known_balance(dst_key)
        if src is not None and dst is not None:
            try:
                source_after, target_after = balances_after(src.kind, src.balance, dst.balance,
                                                            amount)
            except IllegalState:  # refused on known balances: decided again on read ones
                src = dst = None
            else:  # the target first: nothing of this posting is written if it is not known
                if not self._set_if_known(dst, target_after):
                    src = dst = None
                elif not self._set_if_known(src, source_after):
                    # the target is written from its confirmed balance; the source moved
                    src = self._read_accounts(src_key, dst_key)[0]
                    try:
                        source_after, target_after = balances_after(src.kind, src.balance,
                                                                    dst.balance, amount)
                    except IllegalState:  # a refused posting leaves both balances as they were
                        self._write(sql.set_balance, (dst.balance, *dst_key))
                        raise
                    self._write(sql.set_balance, (source_after, *src_key))
        if src is None or dst is None:
            src, dst = self._read_accounts(src_key, dst_key)
            source_after, target_after = balances_after(src.kind, src.balance, dst.balance,
                                                        amount)
            if sql.by_key:  # the source last: the one row of a posting to itself ends as the
                # CASE of ``set_balances`` leaves it
                self._write_many(sql.set_balance, [(target_after, *dst_key),
                                                   (source_after, *src_key)])
            else:
                self._write(sql.set_balances, balances_params(posting, source_after,
                                                              target_after))
        if sql.checked_writes:
            if src_key == dst_key:  # not a balance to start from (the posting moved nothing)
                self._balances.pop(src_key, None)
            else:
                self._know(Balance(dst_key, dst.kind, target_after))
                self._know(Balance(src_key, src.kind, source_after))
        created_at, public_id = utc_now(), new_public_id()
        entry_id = self._insert_id(sql.insert_entry, entry_values(
            posting, source_after, target_after, created_at, public_id))
        return posted_entry(entry_id, posting, source_after, target_after, created_at,
                            public_id=public_id)

    def _read_accounts(self, src_key: tuple[str, str, str, str],
                       dst_key: tuple[str, str, str, str]) -> tuple[Balance, Balance]:
        """A posting's two accounts as stored (locked ``FOR UPDATE`` on PostgreSQL), source
        first; MissingAccount if either does not exist."""
        sql = self._sql.ledger
        operator, source, currency, mode = src_key
        target = dst_key[1]
        found = {holder: (kind, int(balance)) for holder, kind, balance in self._all(
            sql.lock_accounts,
            (operator, currency, mode, source, operator, currency, mode, target)
            if sql.by_key else (operator, currency, mode, source, target))}
        src, dst = found.get(source), found.get(target)
        if src is None or dst is None:
            raise MissingAccount(f"posting between missing accounts {source}, {target}")
        return Balance(src_key, *src), Balance(dst_key, *dst)

    def _known_balance(self, key: tuple[str, str, str, str]) -> Balance | None:
        """The account's balance as this transaction wrote it, or as a committed transaction
        left it (:class:`Balance`), or None; either is checked by the write that uses it."""
        known = self._balances.get(key)
        if known is None and self._committed is not None:
            known = self._committed.balance(key)
        return known

    def _set_if_known(self, known: Balance, after: int) -> bool:
        """Write ``after`` over the account's balance if it is still ``known``; whether it
        was (nothing written if not)."""
        return bool(self._write(self._sql.ledger.set_balance_if,
                                (after, *known.key, known.balance)).rowcount == 1)

    def _know(self, fact: Balance) -> None:
        """A balance this transaction wrote: its next posting starts from it, and the storage
        knows it once the transaction commits."""
        self._balances[fact.key] = fact
        self.seen.append(fact)

    def round_entries(self, operator: str, round_id: str) -> list[LedgerEntry]:
        """The ledger entries of round ``round_id``, oldest first."""
        return [entry_row(r) for r in self._all(self._sql.ledger.round_entries,
                                                (operator, round_id))]

    def list_entries(self, account: AccountKey, limit: int, before: int | None, *,
                     round_id: str | None = None) -> list[LedgerEntry]:
        """Entries touching ``account``, newest first, with ``entry_id < before`` if
        given (and of round ``round_id`` only, if given)."""
        key = (account.operator, account.currency, str(account.mode), account.holder,
               before if before is not None else _NO_BOUND)
        if round_id is None:
            rows = self._all(self._sql.ledger.entries, (*key, *key, limit))
        else:
            rows = self._all(self._sql.ledger.entries_of_round,
                             (*key, round_id, *key, round_id, limit))
        return [entry_row(r) for r in rows]

    def entry_position(self, account: AccountKey, public_id: str) -> int | None:
        """The ``entry_id`` of the entry ``public_id`` touching ``account``, or None."""
        row = self._one(self._sql.ledger.entry_position,
                        (account.operator, public_id, account.currency, str(account.mode),
                         account.holder))
        return None if row is None else int(row[0])


# --- rows --------------------------------------------------------------------------------------


def balances_after(source_kind: str, source_balance: int, target_balance: int, amount: int
                   ) -> tuple[int, int]:
    """The two balances a posting of ``amount`` leaves; IllegalState when the source is a
    player who cannot cover it (INSUFFICIENT_FUNDS) or a balance would leave the 64-bit range
    (BALANCE_LIMIT)."""
    source_after, target_after = source_balance - amount, target_balance + amount
    if source_kind == str(AccountKind.PLAYER) and source_after < 0:
        raise IllegalState(f"{amount} needed, balance is {source_balance}",
                           reason="INSUFFICIENT_FUNDS",
                           metadata={"amount_minor": amount, "balance_minor": source_balance})
    if source_after < -BALANCE_LIMIT or target_after > BALANCE_LIMIT:
        raise IllegalState(f"a balance would pass the ledger's limit of {BALANCE_LIMIT} minor "
                           "units", reason="BALANCE_LIMIT")
    return source_after, target_after


def balances_params(posting: Posting, source_after: int, target_after: int) -> tuple[Any, ...]:
    """The parameters of :attr:`LedgerSql.set_balances` for ``posting``."""
    source, target = posting.source, posting.target
    return (source.holder, source_after, target_after, source.operator, source.currency,
            str(source.mode), source.holder, target.holder)


def new_public_id() -> str:
    """A fresh public id for a ledger entry: 128 random bits in hex. Clients see it instead of
    ``entry_id``, a counter all operators share, which would tell one operator how many entries
    the others posted between two of its own."""
    return secrets.token_hex(16)


def entry_values(posting: Posting, source_after: int, target_after: int, created_at: str,
                 public_id: str) -> tuple[Any, ...]:
    """The column values of the ledger entry of ``posting``, in table order after
    ``entry_id``, for an ``INSERT``."""
    source = posting.source
    return (source.operator, source.currency, str(source.mode), source.holder,
            posting.target.holder, posting.amount, str(posting.kind), posting.round_id,
            posting.wager_id, posting.request_id, source_after, target_after, created_at,
            posting.reference, public_id)


def posted_entry(entry_id: int, posting: Posting, source_after: int, target_after: int,
                 created_at: str, *, public_id: str) -> LedgerEntry:
    """The :class:`LedgerEntry` stored for ``posting`` (what reading it back would give)."""
    source = posting.source
    return LedgerEntry(entry_id, source.operator, source.currency, source.mode, source.holder,
                       posting.target.holder, posting.amount, posting.kind, posting.round_id,
                       posting.wager_id, posting.request_id, source_after, target_after,
                       created_at, posting.reference, public_id)


def entry_row(row: Sequence[Any]) -> LedgerEntry:
    """A :class:`LedgerEntry` from a row of the ledger entry columns, in table order."""
    (entry_id, operator, currency, mode, source, target, amount, kind, round_id, wager_id,
     request_id, source_after, target_after, created, reference, public_id) = row
    return LedgerEntry(entry_id, operator, currency, Mode(mode), source, target, amount,
                       EntryKind(kind), round_id, wager_id, request_id, source_after,
                       target_after, created, reference, public_id)
