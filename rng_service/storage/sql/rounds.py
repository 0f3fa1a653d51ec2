"""Rounds: their statements and rows, written once for both databases
(:mod:`rng_service.storage.sql.dialect`). On PostgreSQL a write transaction reads its round
``FOR UPDATE``, so two calls on one round queue as they do on SQLite's single writer."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any, Final

from rng_service.core.errors import Conflict
from rng_service.service.ports import Mode, RoundCursor, RoundRow, RoundStatus, RoundWallet
from rng_service.storage.sql.dialect import SharedSql, SqlDialect

ROUND_COLUMNS: Final = (
    "operator, round_id, player, game, rules_digest, level, mode, currency, status, version, "
    "state, shoe_id, created_at, updated_at, wallet"
)


class RoundSql:
    """The rounds' statements in one dialect."""

    __slots__ = ("flag", "get", "insert", "listing", "open", "open_ids", "update", "update_from")

    def __init__(self, d: SqlDialect) -> None:
        self.insert = f"INSERT INTO rounds ({ROUND_COLUMNS}) VALUES ({d.params(15)})"
        self.get = d.q(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE operator = ? "
                       f"AND round_id = ?{d.locked()}")
        self.open = d.q(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE operator = ? "
                        f"AND player = ? AND game = ? AND status = 'open'{d.locked()}")
        self.update = d.q("UPDATE rounds SET status = ?, version = ?, state = ?, updated_at = ? "
                          "WHERE operator = ? AND round_id = ? AND version = ?")
        # ... and only from the state the writer holds, byte for byte (a row it did not read)
        self.update_from = d.q("UPDATE rounds SET status = ?, version = ?, state = ?, "
                               "updated_at = ? WHERE operator = ? AND round_id = ? "
                               "AND version = ? AND state = ?")
        self.open_ids = ("SELECT operator, round_id FROM rounds WHERE status = 'open' "
                         "ORDER BY created_at")
        #: a listing's statement by (mode given, is_open given, cursor given)
        self.listing = {key: d.q(_listing(*key)) for key in product((False, True), repeat=3)}
        self.flag = d.flag


def _listing(by_mode: bool, by_open: bool, after: bool) -> str:
    where = "operator = ? AND player = ?"
    if by_mode:
        where += " AND mode = ?"
    if by_open:
        where += " AND (status = 'open') = ?"
    if after:
        where += " AND ((status = 'open'), created_at, round_id) < (?, ?, ?)"
    return (f"SELECT {ROUND_COLUMNS} FROM rounds WHERE {where} "
            "ORDER BY (status = 'open') DESC, created_at DESC, round_id DESC LIMIT ?")


class RoundTables(SharedSql):
    """Rounds: a part of the unit of work."""

    def insert_round(self, row: RoundRow) -> None:
        """A new round; a second open round for one player and game raises
        ``Conflict``."""
        try:
            self._write(self._sql.rounds.insert, round_values(row))
        except self._duplicate:
            raise Conflict(f"player {row.player} already has an open {row.game} round",
                           reason="ROUND_IN_PROGRESS") from None

    def get_round(self, operator: str, round_id: str) -> RoundRow | None:
        """The round ``round_id`` of ``operator``, or None; locked ``FOR UPDATE`` in a
        PostgreSQL write transaction."""
        row = self._one(self._sql.rounds.get, (operator, round_id))
        return None if row is None else round_row(row)

    def open_round(self, operator: str, player: str, game: str) -> RoundRow | None:
        """The player's open round of ``game``, or None (at most one exists); locked
        ``FOR UPDATE`` in a PostgreSQL write transaction."""
        row = self._one(self._sql.rounds.open, (operator, player, game))
        return None if row is None else round_row(row)

    def update_round(self, row: RoundRow, expected_version: int, *,
                     expected_state: bytes | None = None) -> None:
        """As :meth:`ShoeTables.update_shoe`, for a round (and, with ``expected_state``, only
        if the stored state is those bytes)."""
        values = (str(row.status), row.version, row.state, row.updated_at, row.operator,
                  row.round_id, expected_version)
        if expected_state is None:
            cur = self._write(self._sql.rounds.update, values)
        else:
            cur = self._write(self._sql.rounds.update_from, (*values, expected_state))
        if cur.rowcount != 1:
            raise Conflict(f"round {row.round_id} changed concurrently (expected version "
                           f"{expected_version})", reason="CONCURRENT_UPDATE")

    def list_rounds(self, operator: str, player: str, limit: int, after: RoundCursor | None,
                    *, mode: Mode | None = None, is_open: bool | None = None) -> list[RoundRow]:
        """Open rounds first, then the others, each group newest first, after
        ``after``; filtered by ``mode`` and ``is_open`` when given."""
        sql = self._sql.rounds
        params: list[object] = [operator, player]
        if mode is not None:
            params.append(str(mode))
        if is_open is not None:
            params.append(sql.flag(is_open))
        if after is not None:
            params += [sql.flag(after.is_open), after.created_at, after.round_id]
        params.append(limit)
        statement = sql.listing[mode is not None, is_open is not None, after is not None]
        return [round_row(r) for r in self._all(statement, params)]

    def open_round_ids(self) -> list[tuple[str, str]]:
        """(operator, round id) of every open round, oldest first."""
        return [(r[0], r[1]) for r in self._all(self._sql.rounds.open_ids)]


def round_values(row: RoundRow) -> tuple[Any, ...]:
    """The column values of a round, in table order, for an ``INSERT``."""
    return (row.operator, row.round_id, row.player, row.game, row.rules_digest, row.level,
            str(row.mode), row.currency, str(row.status), row.version, row.state, row.shoe_id,
            row.created_at, row.updated_at, str(row.wallet))


def round_row(row: Sequence[Any]) -> RoundRow:
    """A :class:`RoundRow` from a row of the round columns, in table order."""
    (operator, round_id, player, game, digest, level, mode, currency, status, version, state,
     shoe_id, created, updated, wallet) = row
    return RoundRow(operator, round_id, player, game, digest, level, Mode(mode), currency,
                    RoundStatus(status), version, bytes(state), shoe_id, created, updated,
                    RoundWallet(wallet))
