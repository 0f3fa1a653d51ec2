"""Operators, idempotent answers and accounts: their statements, written once for both
databases (:mod:`rng_service.storage.sql.dialect`)."""

from __future__ import annotations

from rng_service.service.ports import (
    AccountKey,
    AccountKind,
    StoredResponse,
    WalletKind,
    utc_now,
)
from rng_service.storage.sql.dialect import SharedSql, SqlDialect


class AccountSql:
    """The statements of the operators, idempotency and accounts tables in one dialect."""

    __slots__ = ("add_operator", "balance", "balance_and_wallet", "get_response",
                 "list_operators", "open_account", "operator_exists", "put_response")

    def __init__(self, d: SqlDialect) -> None:
        self.operator_exists = d.q("SELECT 1 FROM operators WHERE operator = ?")
        self.add_operator = d.q("INSERT INTO operators (operator, created_at) VALUES (?, ?) "
                                "ON CONFLICT (operator) DO NOTHING")
        self.list_operators = "SELECT operator, created_at FROM operators ORDER BY operator"
        self.get_response = d.q("SELECT operation, request_hash, response FROM idempotency "
                                "WHERE operator = ? AND request_id = ?")
        self.put_response = d.q("INSERT INTO idempotency VALUES (?, ?, ?, ?, ?, ?) "
                                "ON CONFLICT (operator, request_id) DO NOTHING")
        self.balance = d.q("SELECT balance FROM accounts WHERE operator = ? AND holder = ? "
                           "AND currency = ? AND mode = ?")
        # two look-ups in one statement (always one row): a round trip fewer a StartRound
        self.balance_and_wallet = d.q(
            "SELECT (SELECT balance FROM accounts WHERE operator = ? AND holder = ? "
            "AND currency = ? AND mode = ?), "
            "(SELECT kind FROM operator_wallets WHERE operator = ?)")
        self.open_account = d.q(
            "INSERT INTO accounts (operator, holder, currency, mode, kind, balance, created_at) "
            "VALUES (?, ?, ?, ?, ?, 0, ?) ON CONFLICT DO NOTHING")


class AccountTables(SharedSql):
    """Operators, idempotency and accounts: a part of the unit of work."""

    def operator_exists(self, operator: str) -> bool:
        """True if ``operator`` is one the database knows."""
        fact = ("operator", operator)
        if self._committed is not None and fact in self._committed:
            return True  # operators are never deleted
        found = self._one(self._sql.accounts.operator_exists, (operator,)) is not None
        if found:
            self.seen.append(fact)
        return found

    def add_operator(self, operator: str) -> bool:
        """Make ``operator`` known; False if it already was."""
        return bool(self._write(self._sql.accounts.add_operator,
                                (operator, utc_now())).rowcount == 1)

    def list_operators(self) -> list[tuple[str, str]]:
        """Every operator and when it was added, by name."""
        return [(str(name), str(created))
                for name, created in self._all(self._sql.accounts.list_operators)]

    # --- idempotency ---------------------------------------------------------------------

    def get_response(self, operator: str, request_id: str) -> StoredResponse | None:
        """The stored first answer to ``request_id``, or None if the request is new."""
        row = self._one(self._sql.accounts.get_response, (operator, request_id))
        return None if row is None else StoredResponse(row[0], row[1], bytes(row[2]))

    def put_response(self, operator: str, request_id: str, stored: StoredResponse) -> bool:
        """Store the first answer to ``request_id`` (it commits with the request's writes);
        False, writing nothing, if an answer to it is stored already (a concurrent one's is
        waited for, on PostgreSQL, until its transaction ends)."""
        return bool(self._write(self._sql.accounts.put_response,
                                (operator, request_id, stored.operation, stored.request_hash,
                                 stored.response, utc_now())).rowcount == 1)

    # --- accounts ------------------------------------------------------------------------

    def get_balance(self, account: AccountKey) -> int | None:
        """The balance, or None if the account does not exist."""
        row = self._one(self._sql.accounts.balance,
                        (account.operator, account.holder, account.currency, str(account.mode)))
        return None if row is None else int(row[0])

    def balance_and_wallet(self, account: AccountKey) -> tuple[int | None, WalletKind | None]:
        """The account's balance (None if it does not exist) and the kind of its operator's
        wallet (None if never set), in one read."""
        balance, kind = self._one(self._sql.accounts.balance_and_wallet,
                                  (account.operator, account.holder, account.currency,
                                   str(account.mode), account.operator))
        return (None if balance is None else int(balance),
                None if kind is None else WalletKind(kind))

    def open_account(self, account: AccountKey, kind: AccountKind) -> bool:
        """Create the account with balance 0 unless it exists; True if it was created. An
        account a committed transaction opened or found is not looked for again (accounts are
        never deleted): a round's house account, opened by every round that starts on it, costs
        a statement once per storage, not once a round."""
        fact = ("account", account.operator, account.holder, account.currency, account.mode)
        if self._committed is not None and fact in self._committed:
            self._write_check()
            return False
        cur = self._write(self._sql.accounts.open_account,
                          (account.operator, account.holder, account.currency,
                           str(account.mode), str(kind), utc_now()))
        self.seen.append(fact)  # exists (found, or created here) if this commits
        return bool(cur.rowcount == 1)
