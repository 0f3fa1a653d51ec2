"""The seamless wallet's tables: each operator's wallet settings and the outbox of money
movements, written once for both databases (:mod:`rng_service.storage.sql.dialect`).

A movement changes state only by a compare-and-set (``WHERE state = ? AND attempts = ?``): a
round's transaction, the call that sent the movement and any replica's dispatcher may race to
record an answer, and exactly one of them wins. A dispatcher claims a due movement before it
sends it by the same kind of compare-and-set on its next attempt's time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from rng_service.core.errors import Conflict
from rng_service.service.ports import (
    Movement,
    MovementKind,
    MovementState,
    MovementUpdate,
    WalletConfig,
    WalletKind,
    utc_now,
)
from rng_service.storage.sql.dialect import SharedSql, SqlDialect

MOVEMENT_COLUMNS: Final = (
    "operator, transaction_id, round_id, player, currency, game, kind, purpose, amount, "
    "reference, request_id, request_hash, state, reason, balance_after, attempts, "
    "next_attempt_at, created_at, updated_at"
)


class WalletSql:
    """The wallet tables' statements in one dialect."""

    __slots__ = ("by_request", "claim", "config", "due", "get", "insert", "put_config", "round",
                 "unsettled", "unsettled_after", "unsettled_count", "unsettled_of", "update")

    def __init__(self, d: SqlDialect) -> None:
        self.config = d.q("SELECT operator, kind, endpoint, timeout_ms, credentials, ca, "
                          "hmac_secret FROM operator_wallets WHERE operator = ?")
        self.put_config = d.q(
            "INSERT INTO operator_wallets (operator, kind, endpoint, timeout_ms, credentials, "
            "ca, hmac_secret, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (operator) "
            "DO UPDATE SET "
            "kind = excluded.kind, endpoint = excluded.endpoint, timeout_ms = "
            "excluded.timeout_ms, credentials = excluded.credentials, ca = excluded.ca, "
            "hmac_secret = excluded.hmac_secret, updated_at = excluded.updated_at")
        self.insert = d.q(f"INSERT INTO wallet_movements ({MOVEMENT_COLUMNS}) "
                          f"VALUES ({d.params(19)})")
        self.get = d.q(f"SELECT {MOVEMENT_COLUMNS} FROM wallet_movements WHERE operator = ? "
                       "AND transaction_id = ?")
        self.by_request = d.q(f"SELECT {MOVEMENT_COLUMNS} FROM wallet_movements "
                              "WHERE operator = ? AND request_id = ?")
        self.round = d.q(f"SELECT {MOVEMENT_COLUMNS} FROM wallet_movements WHERE operator = ? "
                         "AND round_id = ? ORDER BY created_at, transaction_id")
        self.update = d.q(
            "UPDATE wallet_movements SET state = ?, reason = ?, balance_after = ?, "
            "attempts = ?, next_attempt_at = ?, updated_at = ? WHERE operator = ? "
            "AND transaction_id = ? AND state = ? AND attempts = ?")
        self.claim = d.q(
            "UPDATE wallet_movements SET next_attempt_at = ?, updated_at = ? WHERE operator = ? "
            "AND transaction_id = ? AND state = 'pending' AND attempts = ? "
            "AND next_attempt_at = ?")
        self.due = d.q(f"SELECT {MOVEMENT_COLUMNS} FROM wallet_movements WHERE state = "
                       "'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?")
        self.unsettled = (f"SELECT {MOVEMENT_COLUMNS} FROM wallet_movements WHERE state IN "
                          "('pending', 'uncertain') ORDER BY created_at, transaction_id")
        self.unsettled_of = d.q(f"SELECT {MOVEMENT_COLUMNS} FROM wallet_movements WHERE "
                                "operator = ? AND state IN ('pending', 'uncertain') "
                                "ORDER BY created_at, transaction_id")
        # a page of them after a cursor (both databases compare row values in order)
        self.unsettled_after = d.q(
            f"SELECT {MOVEMENT_COLUMNS} FROM wallet_movements WHERE operator = ? AND state IN "
            "('pending', 'uncertain') AND (created_at, transaction_id) > (?, ?) "
            "ORDER BY created_at, transaction_id LIMIT ?")
        self.unsettled_count = d.q(
            "SELECT count(*), min(created_at) FROM wallet_movements WHERE operator = ? AND "
            "state IN ('pending', 'uncertain')")


class WalletTables(SharedSql):
    """Wallet settings and the outbox: a part of the unit of work."""

    def wallet_config(self, operator: str) -> WalletConfig | None:
        """How ``operator``'s real money is kept, or None if never set."""
        row = self._one(self._sql.wallet.config, (operator,))
        if row is None:
            return None
        op, kind, endpoint, timeout_ms, credentials, ca, hmac_secret = row
        return WalletConfig(op, WalletKind(kind), endpoint, int(timeout_ms), credentials, ca,
                            hmac_secret)

    def put_wallet_config(self, config: WalletConfig) -> None:
        """Store (or replace) an operator's wallet settings."""
        self._write(self._sql.wallet.put_config,
                    (config.operator, str(config.kind), config.endpoint, config.timeout_ms,
                     config.credentials, config.ca, config.hmac_secret, utc_now()))

    def insert_movement(self, movement: Movement) -> None:
        """A new movement; a used transaction id or request id is ``Conflict``."""
        try:
            self._write(self._sql.wallet.insert, movement_values(movement))
        except self._duplicate:
            raise Conflict(f"movement {movement.transaction_id} (or its request) exists",
                           reason="CONCURRENT_UPDATE") from None

    def get_movement(self, operator: str, transaction_id: str) -> Movement | None:
        """The movement ``transaction_id``, or None."""
        row = self._one(self._sql.wallet.get, (operator, transaction_id))
        return None if row is None else movement_row(row)

    def movement_for_request(self, operator: str, request_id: str) -> Movement | None:
        """The debit made for request ``request_id``, or None."""
        row = self._one(self._sql.wallet.by_request, (operator, request_id))
        return None if row is None else movement_row(row)

    def round_movements(self, operator: str, round_id: str) -> list[Movement]:
        """The round's movements, oldest first."""
        return [movement_row(r) for r in self._all(self._sql.wallet.round, (operator, round_id))]

    def update_movement(self, movement: Movement, update: MovementUpdate) -> bool:
        """Compare-and-set on (state, attempts); True if written."""
        cur = self._write(self._sql.wallet.update,
                          (str(update.state), update.reason, update.balance_after,
                           update.attempts, update.next_attempt_at or movement.next_attempt_at,
                           utc_now(), movement.operator, movement.transaction_id,
                           str(movement.state), movement.attempts))
        return bool(cur.rowcount == 1)

    def claim_movement(self, movement: Movement, until: str) -> bool:
        """Compare-and-set of a pending movement's next attempt; True if this call won."""
        cur = self._write(self._sql.wallet.claim,
                          (until, utc_now(), movement.operator, movement.transaction_id,
                           movement.attempts, movement.next_attempt_at))
        return bool(cur.rowcount == 1)

    def due_movements(self, now: str, limit: int) -> list[Movement]:
        """Pending movements due at ``now``, the longest due first."""
        return [movement_row(r) for r in self._all(self._sql.wallet.due, (now, limit))]

    def unsettled_movements(self, operator: str | None = None) -> list[Movement]:
        """Movements still pending or uncertain, oldest first."""
        if operator is None:
            return [movement_row(r) for r in self._all(self._sql.wallet.unsettled)]
        return [movement_row(r) for r in self._all(self._sql.wallet.unsettled_of, (operator,))]

    def unsettled_page(self, operator: str, after: tuple[str, str], limit: int
                       ) -> list[Movement]:
        """At most ``limit`` of the operator's unsettled movements after ``after`` (created_at,
        transaction_id; ``("", "")`` for the first page), oldest first."""
        return [movement_row(r) for r in self._all(self._sql.wallet.unsettled_after,
                                                   (operator, *after, limit))]

    def unsettled_count(self, operator: str) -> tuple[int, str | None]:
        """How many of the operator's movements are unsettled, and the oldest one's
        ``created_at`` (None when none)."""
        count, oldest = self._one(self._sql.wallet.unsettled_count, (operator,))
        return int(count), oldest


def movement_values(m: Movement) -> tuple[Any, ...]:
    """A movement's column values, in :data:`MOVEMENT_COLUMNS` order."""
    return (m.operator, m.transaction_id, m.round_id, m.player, m.currency, m.game, str(m.kind),
            m.purpose, m.amount, m.reference, m.request_id, m.request_hash, str(m.state),
            m.reason, m.balance_after, m.attempts, m.next_attempt_at, m.created_at,
            m.updated_at)


def movement_row(row: Sequence[Any]) -> Movement:
    """A :class:`Movement` from a row of :data:`MOVEMENT_COLUMNS`."""
    (op, tx, round_id, player, currency, game, kind, purpose, amount, reference, request_id,
     request_hash, state, reason, balance_after, attempts, due, created, updated) = row
    return Movement(op, tx, round_id, player, currency, game, MovementKind(kind), purpose,
                    int(amount), reference, request_id, request_hash, MovementState(state),
                    reason, None if balance_after is None else int(balance_after),
                    int(attempts), due, created, updated)
