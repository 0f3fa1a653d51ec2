"""Rows for storage tests: a committed shoe and an open round of one player, by id."""

from __future__ import annotations

from rng_service.service.ports import (
    Mode,
    RoundRow,
    RoundStatus,
    ShoeRow,
    ShoeStatus,
    utc_now,
)
from support.service_helpers import EUR, OP


def shoe(shoe_id: str = "s1", player: str = "ann", mode: Mode = Mode.REAL) -> ShoeRow:
    now = utc_now()
    return ShoeRow(OP, shoe_id, player, "snap", "d" * 64, 2, None, "c" * 64, b"sealed", b"", 0,
                   0, ShoeStatus.COMMITTED, 1, now, now, mode)


def round_row(round_id: str, shoe_id: str = "s1", player: str = "ann") -> RoundRow:
    now = utc_now()
    return RoundRow(OP, round_id, player, "snap", "d" * 64, "medium", Mode.REAL, EUR,
                    RoundStatus.OPEN, 1, b"{}", shoe_id, now, now)


def bumped(row: RoundRow, version: int) -> RoundRow:
    return RoundRow(**{**row.__dict__, "version": version})
