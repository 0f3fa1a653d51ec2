"""Crash test: a real `fairshoe serve` (production, OS-seeded shoes) SIGKILLed at random moments
under concurrent play, restarted on the same data, and checked after every restart and at the end.

Design. ``PLAYERS`` client threads each play as their own player: complete rounds of all four
games (real money mostly, demo too) with a random legal choice from the round view's legal
actions, deposits and withdrawals between rounds. Every request carries a request id; a call
that fails because the server went away (UNAVAILABLE, CANCELLED, a closed channel: anything
while the server is down or after it was restarted) is sent again, the same request with the same
request id, once the server is back. Each acknowledged answer goes into a client-side log.

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
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from support.live_server import DEMO, EUR, REAL, Client, ServerProcess, audit_with_checkpoint

from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2
from rng_service.crypto.signing import decode_envelope

pytestmark = [pytest.mark.slow, pytest.mark.processes]

KILLS = int(os.environ.get("FAIRSHOE_CRASH_KILLS", "200"))
PLAYERS = 4
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
PLAY_SECONDS = (0.02, 0.3)
CALL_TIMEOUT = 20.0
Code = grpc.StatusCode

ACTION_NAMES = {rt.ACTION_KIND_HIT: "hit", rt.ACTION_KIND_STAND: "stand",
                rt.ACTION_KIND_DOUBLE: "double", rt.ACTION_KIND_SPLIT: "split",
                rt.ACTION_KIND_INSURANCE: "insurance", rt.ACTION_KIND_EVEN_MONEY: "even_money"}


def reason_of(err: grpc.RpcError) -> str:
    """The reason code of a refusal (google.rpc.ErrorInfo in the status details)."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    for packed in status.details if status is not None else ():
        if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            packed.Unpack(info)
            return str(info.reason)
    return ""


@dataclass(frozen=True)
class Ack:
    """One acknowledged answer: ``kind`` start/act (round id, version, the decision as the
    engine stores it) or deposit/withdrawal (transaction id, amount, request id)."""

    kind: str
    ident: str
    version: int = 0
    action: Any = None
    amount: int = 0
    request_id: str = ""


def stored_action(action: Any) -> tuple[str, int | None, bool | None]:
    """An engine action's JSON (``"hit"`` or ``{"action": ..., ...}``) as a comparable tuple."""
    if isinstance(action, str):
        return action, None, None
    return action["action"], action.get("amount"), action.get("accept")


class Harness:
    """The server process, the current connection to it, and the client-side log."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.up = threading.Event()
        self.stopping = threading.Event()
        self.generation = 0
        self.conn: Client | None = None
        self.lock = threading.Lock()
        self.acks: list[Ack] = []
        self.restarts: list[float] = []

    def start(self) -> None:
        began = time.perf_counter()
        self.server.start()
        self.restarts.append(time.perf_counter() - began)
        self.conn = self.server.client()
        self.generation += 1

    def kill(self) -> None:
        self.up.clear()  # before the kill: every failure it causes finds the server down
        self.server.kill()

    def connection(self) -> tuple[int, Client]:
        if not self.up.wait(timeout=120):
            raise TimeoutError("the server stayed down")
        generation, conn = self.generation, self.conn
        assert conn is not None
        return generation, conn

    def interrupted(self, generation: int) -> bool:
        return not self.up.is_set() or self.generation != generation

    def ack(self, entry: Ack) -> None:
        with self.lock:
            self.acks.append(entry)


class Player:
    """One client thread playing as ``name`` (see the module docstring)."""

    def __init__(self, harness: Harness, name: str, seed: int) -> None:
        self.harness = harness
        self.name = name
        self.rng = random.Random(seed)
        self.ids = 0
        self.error: str | None = None
        self.retries = 0
        self.refusals: dict[str, int] = defaultdict(int)
        self.rounds = 0
        self.actions = 0
        self.real_expected = 0  # the real balance the acknowledged answers add up to
        # the double-exposure shoe of the last such round, per mode (demo and real money never
        # share a shoe)
        self.de_shoes: dict[int, str] = {}
        self.thread = threading.Thread(target=self.run, name=name, daemon=True)

    def rid(self) -> str:
        self.ids += 1
        return f"{self.name}-{self.ids}"

    def call(self, service: str, method: str, request: Any) -> Any:
        """``request`` until it is answered: sent again, as it is, whenever the server was
        killed under it (or refuses with UNAVAILABLE)."""
        busy = 0
        while True:
            generation, conn = self.harness.connection()
            stub = getattr(conn, service)
            try:
                return getattr(stub, method)(request, timeout=CALL_TIMEOUT)
            except grpc.RpcError as exc:
                if self.harness.interrupted(generation):
                    self.retries += 1
                    continue
                if exc.code() is Code.UNAVAILABLE and busy < 50:  # e.g. the database busy
                    busy += 1
                    self.retries += 1
                    time.sleep(0.02)
                    continue
                raise
            except ValueError:  # "Cannot invoke RPC on closed channel!"
                if self.harness.interrupted(generation):
                    self.retries += 1
                    continue
                raise

    def run(self) -> None:
        try:
            self.deposit(self.rng.randrange(20_000, 100_000, 100))
            while not self.harness.stopping.is_set():
                draw = self.rng.random()
                if draw < 0.08:
                    self.deposit(self.rng.randrange(1_000, 50_000, 100))
                elif draw < 0.14:
                    self.withdraw(self.rng.randrange(1_000, 30_000, 100))
                else:
                    self.play_round(self.rng.choice(GAMES))
            # every double-exposure shoe played to its cut card, so each record's shoe is revealed
            for mode, shoe_id in self.de_shoes.items():
                while shoe_id == self.next_shoe("double-exposure", mode):
                    self.play_round("double-exposure", mode=mode)
        except BaseException:
            self.error = traceback.format_exc()

    # --- the wallet ----------------------------------------------------------------------

    def deposit(self, amount: int) -> None:
        rid = self.rid()
        request = wallet_pb2.DepositRequest(account=Client.account(self.name),
                                            amount_minor=amount, request_id=rid)
        tx = self.call("wallet", "Deposit", request).transaction
        assert tx.amount_minor == amount and tx.request_id == rid, tx
        self.real_expected += amount
        assert tx.balance_after_minor == self.real_expected, (tx, self.real_expected)
        self.harness.ack(Ack("deposit", tx.transaction_id, amount=amount, request_id=rid))

    def withdraw(self, amount: int) -> None:
        rid = self.rid()
        request = wallet_pb2.WithdrawRequest(account=Client.account(self.name),
                                             amount_minor=amount, request_id=rid)
        try:
            tx = self.call("wallet", "Withdraw", request).transaction
        except grpc.RpcError as exc:
            if exc.code() is Code.FAILED_PRECONDITION and reason_of(exc) == "INSUFFICIENT_FUNDS":
                assert amount > self.real_expected, (amount, self.real_expected)
                self.refusals["withdraw INSUFFICIENT_FUNDS"] += 1
                return
            raise
        assert tx.amount_minor == -amount and tx.request_id == rid, tx
        self.real_expected -= amount
        assert tx.balance_after_minor == self.real_expected, (tx, self.real_expected)
        self.harness.ack(Ack("withdrawal", tx.transaction_id, amount=-amount, request_id=rid))

    def next_shoe(self, game: str, mode: int) -> str:
        request = round_pb2.GetNextShoeRequest(player_id=self.name, game=game,
                                               mode=mode)  # type: ignore[arg-type]
        return str(self.call("rounds", "GetNextShoe", request).shoe.shoe_id)

    # --- rounds --------------------------------------------------------------------------

    def bets(self, game: str) -> tuple[list[rt.HandBet], list[rt.SideBetStake]]:
        rng = self.rng
        bet = rng.choice((1000, 2000))
        if game == "snap":
            count = rng.choice((1, 2))
            side = ([rt.SideBetStake(name="snap", stake_minor=500)]
                    if count == 2 and rng.random() < 0.5 else [])
            return [rt.HandBet(bet_minor=bet) for _ in range(count)], side
        if game == "multi-hand":
            hands = []
            for _ in range(rng.choice((1, 3))):
                sides = [rt.SideBetStake(name=name, stake_minor=100)
                         for name in ("perfect_pairs", "twenty_one_plus_three")
                         if rng.random() < 0.3]
                hands.append(rt.HandBet(bet_minor=bet, side_bets=sides))
            return hands, []
        count = rng.choice((1, 2))
        return [rt.HandBet(bet_minor=bet) for _ in range(count)], []

    def play_round(self, game: str, mode: int | None = None) -> None:
        if mode is None:
            mode = REAL if self.rng.random() < 0.8 else DEMO
        hands, side_bets = self.bets(game)
        request = round_pb2.StartRoundRequest(
            player_id=self.name, game=game, mode=mode, currency=EUR,  # type: ignore[arg-type]
            hands=hands, side_bets=side_bets, request_id=self.rid())
        try:
            view = self.call("rounds", "StartRound", request).round
        except grpc.RpcError as exc:
            if exc.code() is Code.FAILED_PRECONDITION and reason_of(exc) == "INSUFFICIENT_FUNDS":
                self.refusals["start INSUFFICIENT_FUNDS"] += 1
                self.deposit(50_000)
                return
            raise
        assert view.version == 1, view
        self.harness.ack(Ack("start", view.round_id, 1))
        if game == "double-exposure":
            self.de_shoes[mode] = view.shoe.shoe_id
        while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            view = self.act(view)
        assert view.status in (rt.ROUND_STATUS_FINISHED, rt.ROUND_STATUS_VOID), view.status
        self.rounds += 1
        if mode == REAL:
            self.real_expected += view.total_returned_minor - view.total_staked_minor
            assert view.balance_after_minor == self.real_expected, (view, self.real_expected)

    def act(self, view: rt.RoundView) -> rt.RoundView:
        action, stored = self.choose(view)
        request = round_pb2.ActRequest(player_id=self.name, round_id=view.round_id,
                                       hand_id=view.turn.hand_id, action=action,
                                       expected_version=view.version, request_id=self.rid())
        try:
            after = self.call("rounds", "Act", request).round
        except grpc.RpcError as exc:
            # a stake the balance cannot cover (a legal action's range is the rules', not the
            # wallet's): refused, nothing changed; decide again on the same view
            if exc.code() is Code.FAILED_PRECONDITION and reason_of(exc) == "INSUFFICIENT_FUNDS":
                self.refusals["act INSUFFICIENT_FUNDS"] += 1
                narrowed = rt.RoundView()
                narrowed.CopyFrom(view)
                plain = [la for la in view.legal_actions if la.action in (
                    rt.ACTION_KIND_STAND, rt.ACTION_KIND_EVEN_MONEY) or (
                    la.action == rt.ACTION_KIND_INSURANCE and 0 in la.stakes_minor)]
                assert plain, view
                for la in plain:  # declines only: insurance 0
                    if la.action == rt.ACTION_KIND_INSURANCE:
                        la.any_amount, la.max_stake_minor = False, 0
                        del la.stakes_minor[:]
                        la.stakes_minor.append(0)
                del narrowed.legal_actions[:]
                narrowed.legal_actions.extend(plain)
                return self.act(narrowed)
            raise
        assert after.round_id == view.round_id and after.version == view.version + 1, after
        self.actions += 1
        self.harness.ack(Ack("act", after.round_id, after.version, stored))
        return after

    def choose(self, view: rt.RoundView) -> tuple[rt.PlayerAction, tuple[Any, ...]]:
        """A random legal action (standing more likely on a high total, to keep rounds short),
        and the decision as the engine stores it."""
        hand = next((h for h in view.hands if h.hand_id == view.turn.hand_id), None)
        legal = list(view.legal_actions)
        assert legal, view
        kinds = {la.action: la for la in legal}
        if (hand is not None and hand.total >= 17 and rt.ACTION_KIND_STAND in kinds
                and self.rng.random() < 0.85):
            pick = kinds[rt.ACTION_KIND_STAND]
        else:
            pick = self.rng.choice(legal)
        name = ACTION_NAMES[pick.action]
        if pick.action == rt.ACTION_KIND_HIT:
            return rt.PlayerAction(hit=rt.PlayerAction.Hit()), (name, None, None)
        if pick.action == rt.ACTION_KIND_STAND:
            return rt.PlayerAction(stand=rt.PlayerAction.Stand()), (name, None, None)
        if pick.action == rt.ACTION_KIND_SPLIT:
            return rt.PlayerAction(split=rt.PlayerAction.Split()), (name, None, None)
        if pick.action == rt.ACTION_KIND_EVEN_MONEY:
            accept = self.rng.random() < 0.5
            return (rt.PlayerAction(even_money=rt.PlayerAction.EvenMoney(accept=accept)),
                    (name, None, accept))
        amount = self.stake(pick)
        if pick.action == rt.ACTION_KIND_DOUBLE:
            return (rt.PlayerAction(double=rt.PlayerAction.Double(amount_minor=amount)),
                    (name, amount, None))
        return (rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=amount)),
                (name, amount, None))

    def stake(self, legal: rt.LegalAction) -> int:
        if legal.any_amount:
            return self.rng.choice((legal.min_stake_minor, legal.max_stake_minor))
        return int(self.rng.choice(list(legal.stakes_minor)))


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
