"""Shoes: their statements and rows, written once for both databases
(:mod:`rng_service.storage.sql.dialect`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from rng_service.core.errors import Conflict
from rng_service.service.ports import Mode, ShoeRow, ShoeStatus
from rng_service.storage.sql.dialect import SharedSql, SqlDialect

SHOE_COLUMNS: Final = (
    "operator, shoe_id, player, game, rules_digest, decks, cut, commitment, sealed_seed, "
    "client_seed, position, rounds_started, status, version, created_at, updated_at, mode"
)


class ShoeSql:
    """The shoes' statements in one dialect."""

    __slots__ = ("current", "finished", "get", "insert", "update")

    def __init__(self, d: SqlDialect) -> None:
        self.insert = f"INSERT INTO shoes ({SHOE_COLUMNS}) VALUES ({d.params(17)})"
        self.get = d.q(f"SELECT {SHOE_COLUMNS} FROM shoes WHERE operator = ? AND shoe_id = ?")
        self.current = d.q(f"SELECT {SHOE_COLUMNS} FROM shoes WHERE operator = ? AND player = ? "
                           "AND game = ? AND mode = ? AND status IN ('committed', 'in_play')")
        self.update = d.q(
            "UPDATE shoes SET client_seed = ?, position = ?, rounds_started = ?, status = ?, "
            "version = ?, updated_at = ? WHERE operator = ? AND shoe_id = ? AND version = ?")
        # locked when writing: a replica recovering at the same time waits, then skips the
        # shoes the first revealed (READ COMMITTED re-checks the status of a row it waited for)
        self.finished = (f"SELECT {SHOE_COLUMNS} FROM shoes WHERE status = 'finished'"
                         f"{d.locked()}")


class ShoeTables(SharedSql):
    """Shoes: a part of the unit of work."""

    def insert_shoe(self, row: ShoeRow) -> None:
        """A new shoe; a second current shoe for one player, game and mode raises
        ``Conflict``."""
        try:
            self._write(self._sql.shoes.insert, shoe_values(row))
        except self._duplicate:
            raise Conflict("the player already has a current shoe for this game and mode",
                           reason="CONCURRENT_UPDATE") from None

    def get_shoe(self, operator: str, shoe_id: str) -> ShoeRow | None:
        """The shoe ``shoe_id`` of ``operator``, or None."""
        row = self._one(self._sql.shoes.get, (operator, shoe_id))
        return None if row is None else shoe_row(row)

    def current_shoe(self, operator: str, player: str, game: str, mode: Mode) -> ShoeRow | None:
        """The player's committed or in-play shoe for ``game`` in ``mode`` (at most one
        exists)."""
        row = self._one(self._sql.shoes.current, (operator, player, game, str(mode)))
        return None if row is None else shoe_row(row)

    def update_shoe(self, row: ShoeRow, expected_version: int) -> None:
        """Write ``row`` (whose version is ``expected_version + 1``) if the stored
        version is still ``expected_version``; else ``Conflict``."""
        cur = self._write(self._sql.shoes.update,
                          (row.client_seed, row.position, row.rounds_started, str(row.status),
                           row.version, row.updated_at, row.operator, row.shoe_id,
                           expected_version))
        if cur.rowcount != 1:
            raise Conflict(f"shoe {row.shoe_id} changed concurrently", reason="CONCURRENT_UPDATE")

    def finished_unrevealed_shoes(self) -> list[ShoeRow]:
        """Every operator's shoes in status ``finished`` (recovery reveals them); locked in a
        PostgreSQL write transaction, so a replica recovering at the same time waits, then
        skips the shoes this one revealed."""
        return [shoe_row(r) for r in self._all(self._sql.shoes.finished)]


def shoe_values(row: ShoeRow) -> tuple[Any, ...]:
    """The column values of a shoe, in table order, for an ``INSERT``."""
    return (row.operator, row.shoe_id, row.player, row.game, row.rules_digest, row.decks, row.cut,
            row.commitment, row.sealed_seed, row.client_seed, row.position, row.rounds_started,
            str(row.status), row.version, row.created_at, row.updated_at, str(row.mode))


def shoe_row(row: Sequence[Any]) -> ShoeRow:
    """A :class:`ShoeRow` from a row of the shoe columns, in table order."""
    (operator, shoe_id, player, game, digest, decks, cut, commitment, sealed, client_seed,
     position, rounds_started, status, version, created, updated, mode) = row
    return ShoeRow(operator, shoe_id, player, game, digest, decks, cut, commitment, bytes(sealed),
                   bytes(client_seed), position, rounds_started, ShoeStatus(status), version,
                   created, updated, Mode(mode))
