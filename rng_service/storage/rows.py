"""Rows as both databases store them: column lists in table order, the mapping between a
row's values and the port's dataclasses (a driver may give ``memoryview`` for bytes), and the
envelope sources the audit export pages through."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, Final

from rng_service.core.errors import IllegalState
from rng_service.service.ports import (
    AccountKind,
    EntryKind,
    EnvelopeKind,
    LedgerEntry,
    Mode,
    Posting,
    RoundRow,
    RoundStatus,
    ShoeRow,
    ShoeStatus,
    StoredEnvelope,
)

SHOE_COLUMNS: Final = (
    "operator, shoe_id, player, game, rules_digest, decks, cut, commitment, sealed_seed, "
    "client_seed, position, rounds_started, status, version, created_at, updated_at, mode"
)
ROUND_COLUMNS: Final = (
    "operator, round_id, player, game, rules_digest, level, mode, currency, status, version, "
    "state, shoe_id, created_at, updated_at"
)
ENTRY_COLUMNS: Final = (
    "entry_id, operator, currency, mode, source, target, amount, kind, round_id, wager_id, "
    "request_id, source_balance_after, target_balance_after, created_at, reference, public_id"
)

#: (kind, table, id column, envelope column) of each stored envelope, in EnvelopeKind order
ENVELOPE_SOURCES: Final = (
    (EnvelopeKind.ROUND, "records", "round_id", "envelope"),
    (EnvelopeKind.SHOE_REVEAL, "reveals", "shoe_id", "envelope"),
    (EnvelopeKind.RNG, "rng_draws", "draw_id", "record"),
    (EnvelopeKind.RNG_REVEAL, "rng_draws", "draw_id", "reveal"),
)


#: the largest balance either side of a posting may reach: both databases store a balance as a
#: 64-bit integer, so a posting past it is refused as a state the ledger cannot take, before the
#: database would fail with an overflow (a bug's INTERNAL, and for every player of that currency
#: once the operator's cash account is at the bound)
BALANCE_LIMIT: Final = 2**63 - 1


def balances_after(source_kind: str, source_balance: int, target_balance: int, amount: int
                   ) -> tuple[int, int]:
    """The two balances a posting of ``amount`` leaves; IllegalState when the source is a
    player who cannot cover it (INSUFFICIENT_FUNDS) or a balance would leave the 64-bit range
    (BALANCE_LIMIT)."""
    source_after, target_after = source_balance - amount, target_balance + amount
    if source_kind == str(AccountKind.PLAYER) and source_after < 0:
        raise IllegalState(f"{amount} needed, balance is {source_balance}",
                           reason="INSUFFICIENT_FUNDS")
    if source_after < -BALANCE_LIMIT or target_after > BALANCE_LIMIT:
        raise IllegalState(f"a balance would pass the ledger's limit of {BALANCE_LIMIT} minor "
                           "units", reason="BALANCE_LIMIT")
    return source_after, target_after


def envelope_after(kind: EnvelopeKind, id_column: str, cursor: StoredEnvelope | None,
                   placeholder: str) -> tuple[str, tuple[Any, ...]]:
    """The condition "after ``cursor``" on one envelope source, in (created_at, kind, id) order:
    a plain range on the source's (operator, created_at, id) index. ``placeholder`` is the
    driver's parameter marker (``?`` or ``%s``)."""
    p = placeholder
    if cursor is None:
        return "TRUE", ()
    if kind.rank > cursor.kind.rank:
        return f"created_at >= {p}", (cursor.created_at,)
    if kind.rank < cursor.kind.rank:
        return f"created_at > {p}", (cursor.created_at,)
    return f"(created_at, {id_column}) > ({p}, {p})", (cursor.created_at, cursor.ident)


def shoe_row(row: Sequence[Any]) -> ShoeRow:
    """A :class:`ShoeRow` from a row of the shoe columns, in table order."""
    (operator, shoe_id, player, game, digest, decks, cut, commitment, sealed, client_seed,
     position, rounds_started, status, version, created, updated, mode) = row
    return ShoeRow(operator, shoe_id, player, game, digest, decks, cut, commitment, bytes(sealed),
                   bytes(client_seed), position, rounds_started, ShoeStatus(status), version,
                   created, updated, Mode(mode))


def round_row(row: Sequence[Any]) -> RoundRow:
    """A :class:`RoundRow` from a row of the round columns, in table order."""
    (operator, round_id, player, game, digest, level, mode, currency, status, version, state,
     shoe_id, created, updated) = row
    return RoundRow(operator, round_id, player, game, digest, level, Mode(mode), currency,
                    RoundStatus(status), version, bytes(state), shoe_id, created, updated)


def entry_row(row: Sequence[Any]) -> LedgerEntry:
    """A :class:`LedgerEntry` from a row of the ledger entry columns, in
    table order."""
    (entry_id, operator, currency, mode, source, target, amount, kind, round_id, wager_id,
     request_id, source_after, target_after, created, reference, public_id) = row
    return LedgerEntry(entry_id, operator, currency, Mode(mode), source, target, amount,
                       EntryKind(kind), round_id, wager_id, request_id, source_after,
                       target_after, created, reference, public_id)


def set_balances_sql(placeholder: str) -> str:
    """One ``UPDATE`` setting both balances of a posting: parameters (source holder, source
    balance after, target balance after, operator, currency, mode, source holder, target
    holder). ``placeholder`` is the driver's parameter marker."""
    p = placeholder
    return (f"UPDATE accounts SET balance = CASE holder WHEN {p} THEN {p} ELSE {p} END "
            f"WHERE operator = {p} AND currency = {p} AND mode = {p} AND holder IN ({p}, {p})")


def balances_params(posting: Posting, source_after: int, target_after: int) -> tuple[Any, ...]:
    """The parameters of :func:`set_balances_sql` for ``posting``."""
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


def shoe_values(row: ShoeRow) -> tuple[Any, ...]:
    """The column values of a shoe, in table order, for an ``INSERT``."""
    return (row.operator, row.shoe_id, row.player, row.game, row.rules_digest, row.decks, row.cut,
            row.commitment, row.sealed_seed, row.client_seed, row.position, row.rounds_started,
            str(row.status), row.version, row.created_at, row.updated_at, str(row.mode))


def round_values(row: RoundRow) -> tuple[Any, ...]:
    """The column values of a round, in table order, for an ``INSERT``."""
    return (row.operator, row.round_id, row.player, row.game, row.rules_digest, row.level,
            str(row.mode), row.currency, str(row.status), row.version, row.state, row.shoe_id,
            row.created_at, row.updated_at)
