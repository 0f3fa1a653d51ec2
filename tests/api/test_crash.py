"""Crash test: a real `fairshoe serve` (production, OS-seeded shoes) SIGKILLed at random moments
under concurrent play, restarted on the same data, and checked after every restart and at the end.

Design. ``PLAYERS`` client threads (tests/support/crash_players.py) each play as their own player:
complete rounds of all four games (real money mostly, demo too) with a random legal choice from the
round view's legal actions, deposits and withdrawals between rounds. Every request carries a
request id; a call that fails because the server went away (UNAVAILABLE, CANCELLED, a closed
channel: anything while the server is down or after it was restarted) is sent again, the same
request with the same request id, once the server is back. Each acknowledged answer goes into a
client-side log.

The main thread lets the players play for a random 20-300 ms, SIGKILLs the server, checks the
database file (while the server restarts: the checks hold after a crash and recovery must keep
them, and the restart is mostly imports) and checks the recovered rounds over gRPC before the
players resume. ``KILLS`` times (``FAIRSHOE_CRASH_KILLS``, default 200). Checked:

* the ledger balances to the cent: every account's balance is the sum of its entries, each
  operator/currency/mode sums to zero, each round's house result is its stakes less its returns,
  each finished round's record has the ledger's totals; no wager has two stake or two return
  entries and no deposit or withdrawal request id two entries;
* every acknowledged answer is stored: a started round exists, an acknowledged Act's round is at
  that version or later with the same decisions in the same order, an acknowledged deposit or
  withdrawal is its ledger entry;
* after a restart every open round awaits the player (a turn and legal actions), its wagers'
  stakes are in the ledger exactly once, and no finished shoe lacks its reveal;
* at the end: no open round, every real balance is what the player's acknowledged answers add up
  to (deposits - withdrawals - stakes + returns), and the database's records, exported by
  ``fairshoe audit export``, pass ``fairshoe audit verify`` (the players first play their
  double-exposure shoes to the cut card, so every record's shoe is revealed).

Restarts dominate the run time: the summary printed at the end (``pytest -s``) gives the restart
times.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support.crash_players import PLAY_SECONDS, Harness, Player, stored_action
from support.live_server import Client, ServerProcess, audit_with_checkpoint

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.crypto.signing import decode_envelope

pytestmark = [pytest.mark.slow, pytest.mark.processes]

KILLS = int(os.environ.get("FAIRSHOE_CRASH_KILLS", "200"))
PLAYERS = 4


class Checker:
    """The checks, read straight from the database file (incremental over what is new)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.server = harness.server
        self.checked_acks = 0
        self.records_seen = 0  # records are written once: each is checked once
        self.acked_actions: dict[str, dict[int, tuple[Any, ...]]] = defaultdict(dict)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.server.sql(query, *params)

    def ledger(self) -> None:
        wrong = self.sql(
            "SELECT a.holder, a.mode, a.balance, "
            " COALESCE((SELECT SUM(amount) FROM ledger_entries e WHERE e.operator = a.operator "
            "  AND e.currency = a.currency AND e.mode = a.mode AND e.target = a.holder), 0) - "
            " COALESCE((SELECT SUM(amount) FROM ledger_entries e WHERE e.operator = a.operator "
            "  AND e.currency = a.currency AND e.mode = a.mode AND e.source = a.holder), 0) "
            " AS entries FROM accounts a WHERE a.balance != entries")
        assert not wrong, f"balances that are not the sum of their entries: {wrong}"
        unbalanced = self.sql("SELECT operator, currency, mode, SUM(balance) FROM accounts "
                              "GROUP BY operator, currency, mode HAVING SUM(balance) != 0")
        assert not unbalanced, unbalanced
        houses = self.sql(
            "SELECT round_id, SUM(CASE kind WHEN 'stake' THEN amount ELSE 0 END) "
            " - SUM(CASE kind WHEN 'return' THEN amount ELSE 0 END) AS result, "
            " SUM(CASE WHEN substr(target, 1, 6) = '@house' THEN amount ELSE -amount END) AS house "
            "FROM ledger_entries WHERE round_id IS NOT NULL GROUP BY round_id "
            "HAVING result != house")
        assert not houses, f"rounds whose house result is not stakes - returns: {houses}"
        twice = self.sql("SELECT round_id, wager_id, kind, COUNT(*) FROM ledger_entries "
                         "WHERE round_id IS NOT NULL GROUP BY round_id, wager_id, kind "
                         "HAVING COUNT(*) > 1")
        assert not twice, f"wagers staked or returned twice: {twice}"
        twice = self.sql("SELECT request_id, COUNT(*) FROM ledger_entries WHERE kind IN "
                         "('deposit', 'withdrawal') GROUP BY request_id HAVING COUNT(*) > 1")
        assert not twice, f"deposits or withdrawals booked twice: {twice}"
        unrecorded = self.sql("SELECT round_id, status FROM rounds WHERE status != 'open' AND "
                              "round_id NOT IN (SELECT round_id FROM records)")
        assert not unrecorded, f"finished rounds without a record: {unrecorded}"
        orphans = self.sql("SELECT DISTINCT e.round_id FROM ledger_entries e LEFT JOIN rounds r "
                           "ON r.round_id = e.round_id WHERE e.round_id IS NOT NULL AND "
                           "r.round_id IS NULL")
        assert not orphans, f"round money without its round: {orphans}"
        for rowid, round_id, envelope in self.sql(
                "SELECT rowid, round_id, envelope FROM records WHERE rowid > ? ORDER BY rowid",
                self.records_seen):
            self.records_seen = rowid
            payload = decode_envelope(bytes(envelope))["payload"]
            (stakes, returns), = self.sql(
                "SELECT COALESCE(SUM(CASE kind WHEN 'stake' THEN amount END), 0), "
                "COALESCE(SUM(CASE kind WHEN 'return' THEN amount END), 0) FROM ledger_entries "
                "WHERE round_id = ?", round_id)
            assert (payload["total_staked"], payload["total_returned"]) == (stakes, returns), (
                round_id, payload["total_staked"], payload["total_returned"], stakes, returns)

    def acknowledged(self, *, everything: bool = False) -> None:
        """Every acknowledged answer not yet checked (all of them with ``everything``)."""
        with self.harness.lock:
            new = self.harness.acks[0 if everything else self.checked_acks:]
            self.checked_acks = len(self.harness.acks)
        touched: set[str] = set()
        for ack in new:
            if ack.kind in ("start", "act"):
                touched.add(ack.ident)
                if ack.kind == "act":
                    self.acked_actions[ack.ident][ack.version] = ack.action
                else:
                    self.acked_actions.setdefault(ack.ident, {})
            else:
                rows = self.sql("SELECT kind, request_id, amount FROM ledger_entries "
                                "WHERE public_id = ?", ack.ident)
                assert rows == [(ack.kind, ack.request_id, abs(ack.amount))], (ack, rows)
        for round_id in touched:
            rows = self.sql("SELECT version, state FROM rounds WHERE round_id = ?", round_id)
            assert rows, f"acknowledged round {round_id} is not stored"
            (version, state), = rows
            acked = self.acked_actions[round_id]
            newest = max(acked, default=1)
            assert version >= newest, (round_id, version, newest)
            stored = [stored_action(a) for a in json.loads(state)["actions"]]
            assert len(stored) == version - 1, (round_id, version, stored)
            for acked_version, action in acked.items():
                assert stored[acked_version - 2] == action, (round_id, acked_version, stored,
                                                             action)

    def recovered(self, conn: Client) -> int:
        """After a restart: every open round awaits the player, its stakes are in the ledger
        once each; no finished shoe lacks its reveal. Returns how many rounds are open."""
        unrevealed = self.sql("SELECT shoe_id FROM shoes WHERE status = 'finished'")
        assert not unrevealed, f"finished shoes without a reveal: {unrevealed}"
        open_rounds = self.sql("SELECT player, round_id FROM rounds WHERE status = 'open'")
        for player, round_id in open_rounds:
            view = conn.get(player, round_id)
            assert view.status == rt.ROUND_STATUS_AWAITING_PLAYER, (round_id, view.status)
            assert view.legal_actions and view.turn.decision != rt.DECISION_UNSPECIFIED, view
            ledger = dict(((w, k), a) for w, k, a in self.sql(
                "SELECT wager_id, kind, SUM(amount) FROM ledger_entries WHERE round_id = ? "
                "GROUP BY wager_id, kind", round_id))
            for wager in view.wagers:
                assert ledger.get((wager.wager_id, "stake")) == wager.staked_minor, (
                    round_id, wager, ledger)
            assert sum(a for (_, k), a in ledger.items() if k == "stake") == (
                view.total_staked_minor), (round_id, ledger)
        return len(open_rounds)


class Checks(threading.Thread):
    """``step`` in a thread; :meth:`result` joins it and raises what it raised."""

    def __init__(self, step: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.step = step
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.step()
        except BaseException as exc:
            self.error = exc

    def result(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


class Run:
    """The crash loop: players, kills, restarts and the checks between them."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.checker = Checker(harness)
        self.players = [Player(harness, f"crash-{i}", seed=1000 + i) for i in range(PLAYERS)]
        self.rng = random.Random(7)
        self.open_after: list[int] = []
        self.phases: dict[str, float] = defaultdict(float)

    def failed(self) -> None:
        error = next((p.error for p in self.players if p.error), None)
        if error is not None:
            pytest.fail(f"a player failed:\n{error}")

    def timed(self, phase: str, step: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        try:
            return step()
        finally:
            self.phases[phase] += time.perf_counter() - began

    def crash_loop(self, kills: int) -> None:
        harness, checker = self.harness, self.checker
        harness.start()
        harness.up.set()
        for p in self.players:
            p.thread.start()
        for _ in range(kills):
            time.sleep(self.rng.uniform(*PLAY_SECONDS))
            self.timed("kill", harness.kill)
            self.failed()
            # the file is checked while the server restarts (it imports for most of that time);
            # what the checks hold after a crash, recovery must keep, so the order is immaterial
            checks = Checks(lambda: self.timed("check", lambda: (checker.ledger(),
                                                                   checker.acknowledged())))
            harness.start()
            checks.result()
            assert harness.conn is not None
            self.open_after.append(self.timed("recovered",
                                              partial(checker.recovered, harness.conn)))
            harness.up.set()
        harness.stopping.set()
        for p in self.players:
            p.thread.join(timeout=300)
            assert not p.thread.is_alive(), f"{p.name} did not finish"
        self.failed()

    def final_checks(self, tmp: Path) -> str:
        server, checker = self.harness.server, self.checker
        checker.ledger()
        checker.acknowledged(everything=True)
        still_open = server.sql("SELECT round_id FROM rounds WHERE status = 'open'")
        assert not still_open, f"rounds left open: {still_open}"
        for p in self.players:
            (balance,), = server.sql("SELECT balance FROM accounts WHERE holder = ? AND "
                                     "mode = 'REAL'", p.name)
            assert balance == p.real_expected, (p.name, balance, p.real_expected)
        summary = audit_with_checkpoint(server, server.data_dir / "keys", tmp)
        (rounds,), = server.sql("SELECT COUNT(*) FROM rounds")
        assert summary.startswith("audit PASS"), summary
        assert f"{rounds} rounds: {rounds} OK" in summary, (rounds, summary)
        return summary

    def report(self, kills: int, elapsed: float, summary: str) -> str:
        players, restarts = self.players, self.harness.restarts
        refusals: dict[str, int] = defaultdict(int)
        for p in players:
            for what, count in p.refusals.items():
                refusals[what] += count
        return (
            f"crash test: {kills} kills in {elapsed:.1f} s; restart (start to SERVING) median "
            f"{statistics.median(restarts):.3f} s, max {max(restarts):.3f} s, total "
            f"{sum(restarts):.1f} s; other phases (s): "
            f"{ {k: round(v, 1) for k, v in self.phases.items()} }; "
            f"{sum(p.rounds for p in players)} rounds, {sum(p.actions for p in players)} acts, "
            f"{len(self.harness.acks)} acknowledged answers, "
            f"{sum(p.retries for p in players)} retries; open rounds at a restart: max "
            f"{max(self.open_after, default=0)}; refusals: {dict(refusals)}; {summary}")


def test_sigkill_under_concurrent_play(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", stacked=False)
    run = Run(Harness(server))
    began = time.perf_counter()
    try:
        run.crash_loop(KILLS)
    finally:
        run.harness.stopping.set()
        run.harness.up.set()
        server.stop()
    summary = run.final_checks(tmp_path)
    print("\n" + run.report(KILLS, time.perf_counter() - began, summary))
