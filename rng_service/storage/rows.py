"""Rows as both databases store them: column lists in table order and the mapping between a
row's values and the port's dataclasses (a driver may give ``memoryview`` for bytes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from rng_service.service.ports import (
    EntryKind,
    LedgerEntry,
    Mode,
    RoundRow,
    RoundStatus,
    ShoeRow,
    ShoeStatus,
)

SHOE_COLUMNS: Final = (
    "operator, shoe_id, player, game, rules_digest, decks, cut, commitment, sealed_seed, "
    "client_seed, position, rounds_started, status, version, created_at, updated_at"
)
ROUND_COLUMNS: Final = (
    "operator, round_id, player, game, rules_digest, level, mode, currency, status, version, "
    "state, shoe_id, created_at, updated_at"
)
ENTRY_COLUMNS: Final = (
    "entry_id, operator, currency, mode, source, target, amount, kind, round_id, wager_id, "
    "request_id, source_balance_after, target_balance_after, created_at"
)


def shoe_row(row: Sequence[Any]) -> ShoeRow:
    (operator, shoe_id, player, game, digest, decks, cut, commitment, sealed, client_seed,
     position, rounds_started, status, version, created, updated) = row
    return ShoeRow(operator, shoe_id, player, game, digest, decks, cut, commitment, bytes(sealed),
                   bytes(client_seed), position, rounds_started, ShoeStatus(status), version,
                   created, updated)


def round_row(row: Sequence[Any]) -> RoundRow:
    (operator, round_id, player, game, digest, level, mode, currency, status, version, state,
     shoe_id, created, updated) = row
    return RoundRow(operator, round_id, player, game, digest, level, Mode(mode), currency,
                    RoundStatus(status), version, bytes(state), shoe_id, created, updated)


def entry_row(row: Sequence[Any]) -> LedgerEntry:
    (entry_id, operator, currency, mode, source, target, amount, kind, round_id, wager_id,
     request_id, source_after, target_after, created) = row
    return LedgerEntry(entry_id, operator, currency, Mode(mode), source, target, amount,
                       EntryKind(kind), round_id, wager_id, request_id, source_after,
                       target_after, created)


def shoe_values(row: ShoeRow) -> tuple[Any, ...]:
    return (row.operator, row.shoe_id, row.player, row.game, row.rules_digest, row.decks, row.cut,
            row.commitment, row.sealed_seed, row.client_seed, row.position, row.rounds_started,
            str(row.status), row.version, row.created_at, row.updated_at)


def round_values(row: RoundRow) -> tuple[Any, ...]:
    return (row.operator, row.round_id, row.player, row.game, row.rules_digest, row.level,
            str(row.mode), row.currency, str(row.status), row.version, row.state, row.shoe_id,
            row.created_at, row.updated_at)
