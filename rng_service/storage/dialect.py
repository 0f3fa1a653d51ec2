"""SQL written once for both databases: the host unit of work provides the driver calls, and
shared text with ``?`` placeholders becomes the driver's (``%s`` on PostgreSQL) through
:meth:`SharedSql._q`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rng_service.service.ports import RngDrawRow, utc_now


class SharedSql:
    """What a mixin of shared SQL needs from the unit of work it is mixed into (the host
    class's own methods come first in the MRO)."""

    PARAM: str = "?"

    def _write(self, sql: str, params: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _q(self, sql: str) -> str:
        """``sql`` with the driver's placeholders (the shared text uses ``?``)."""
        return sql if self.PARAM == "?" else sql.replace("?", self.PARAM)


class EnvelopeTables(SharedSql):
    """The signed envelopes' tables (records, reveals, RNG draws): stored once, read by id."""

    def put_record(self, operator: str, round_id: str, envelope: bytes) -> None:
        """Store the signed record of a finished round."""
        self._write(self._q("INSERT INTO records VALUES (?, ?, ?, ?)"),
                    (operator, round_id, envelope, utc_now()))

    def get_record(self, operator: str, round_id: str) -> bytes | None:
        """The signed record of round ``round_id``, or None if none is stored."""
        row = self._one(self._q("SELECT envelope FROM records WHERE operator = ? AND "
                                "round_id = ?"), (operator, round_id))
        return None if row is None else bytes(row[0])

    def put_reveal(self, operator: str, shoe_id: str, envelope: bytes) -> None:
        """Store the signed reveal of a finished shoe."""
        self._write(self._q("INSERT INTO reveals VALUES (?, ?, ?, ?)"),
                    (operator, shoe_id, envelope, utc_now()))

    def get_reveal(self, operator: str, shoe_id: str) -> bytes | None:
        """The signed reveal of shoe ``shoe_id``, or None if none is stored yet."""
        row = self._one(self._q("SELECT envelope FROM reveals WHERE operator = ? AND "
                                "shoe_id = ?"), (operator, shoe_id))
        return None if row is None else bytes(row[0])

    def put_rng_draw(self, row: RngDrawRow) -> None:
        """Store a certified draw's record and reveal."""
        self._write(self._q("INSERT INTO rng_draws (operator, draw_id, kind, commitment, "
                            "record, reveal, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                    (row.operator, row.draw_id, row.kind, row.commitment, row.record,
                     row.reveal, row.created_at))
