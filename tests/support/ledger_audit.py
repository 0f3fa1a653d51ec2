"""The money in a SQLite database, checked as an auditor would, straight from the file: the
fuzzing of every RPC (tests/api/test_fuzz.py, bench/fuzz_rpcs.py) requires it after writing."""

from __future__ import annotations

import contextlib
import sqlite3
from collections import defaultdict
from pathlib import Path

from rng_service.crypto.signing import decode_envelope


def ledger_problems(database: Path) -> list[str]:
    """What is wrong with the money in ``database`` (nothing: an empty list), read in one
    snapshot straight from the file, as an auditor would:

    * every entry moves a positive amount, and its balances-after are its accounts' running
      sums of the entries so far;
    * every account's balance is the sum of its entries; no player's is negative;
    * the balances of each (operator, currency, mode) sum to zero;
    * every signed round record's stakes and returns are its round's ledger entries.
    """
    problems: list[str] = []
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        conn.execute("BEGIN")
        running: dict[tuple[str, ...], int] = defaultdict(int)
        for (entry_id, op, cur, mode, source, target, amount, source_after,
             target_after) in conn.execute(
                "SELECT entry_id, operator, currency, mode, source, target, amount, "
                "source_balance_after, target_balance_after FROM ledger_entries "
                "ORDER BY entry_id"):
            if amount <= 0:
                problems.append(f"entry {entry_id}: amount {amount}")
            running[(op, source, cur, mode)] -= amount
            running[(op, target, cur, mode)] += amount
            if (running[(op, source, cur, mode)], running[(op, target, cur, mode)]) != (
                    source_after, target_after):
                problems.append(f"entry {entry_id}: balances after do not follow the entries")
        totals: dict[tuple[str, ...], int] = defaultdict(int)
        for op, holder, cur, mode, kind, balance in conn.execute(
                "SELECT operator, holder, currency, mode, kind, balance FROM accounts"):
            if running[(op, holder, cur, mode)] != balance:
                problems.append(f"{holder} {cur} {mode}: balance {balance}, entries sum to "
                                f"{running[(op, holder, cur, mode)]}")
            if kind == "player" and balance < 0:
                problems.append(f"{holder} {cur} {mode}: negative balance {balance}")
            totals[(op, cur, mode)] += balance
        problems += [f"{key}: balances sum to {total}" for key, total in totals.items() if total]
        for round_id, envelope in conn.execute("SELECT round_id, envelope FROM records"):
            payload = decode_envelope(bytes(envelope))["payload"]
            (stakes, returns), = conn.execute(
                "SELECT COALESCE(SUM(CASE kind WHEN 'stake' THEN amount END), 0), "
                "COALESCE(SUM(CASE kind WHEN 'return' THEN amount END), 0) "
                "FROM ledger_entries WHERE round_id = ?", (round_id,))
            if (payload["total_staked"], payload["total_returned"]) != (stakes, returns):
                problems.append(f"round {round_id}: record and ledger disagree")
    return problems
