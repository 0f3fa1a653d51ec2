"""Crash test on the seamless wallet: a real `fairshoe serve` (production, OS-seeded shoes) whose
operator keeps real money in its own wallet (the reference wallet, over gRPC, a process with
its own durable ledger) is SIGKILLed at random moments under concurrent real-money play of all
four games, doubles, splits, insurance and side bets included, while the wallet is slowed, loses
answers after applying calls, answers UNAVAILABLE, and is itself SIGKILLed and restarted. After
each restart and at the end the outbox, the signed records and the wallet's own statement are
checked against each other.

Design. ``PLAYERS`` client threads (``crash_players.Player``'s way of choosing legal actions and
bets) each play as their own player, funded once in the wallet. A call interrupted by the kill
is sent again, the same request under the same request id, once the server is back; a
StartRound refused with WALLET_UNCERTAIN (the stake's fate unknown: rolled back, the round void
without a card) is followed by a new round under a new request id, and an Act so refused (an
extra stake rolled back) by a new decision on the same view. Each iteration draws the wallet's
fault for the next stretch of play (none, latency, lost answers, UNAVAILABLE answers to credits
and rollbacks, or the wallet down until the next iteration), lets the players play 20-300 ms,
SIGKILLs the server, checks the two databases and restarts it. ``KILLS`` times
(``FAIRSHOE_CRASH_KILLS``, default 200). Checked:

* after each restart: no movement in the wallet that is not the outbox's (same round, kind and
  amount), no round with two credits in either, every debit not taken (uncertain, rolled back)
  has its rollback and every debit without its round is still pending (its call's retry or the
  dispatcher's grace settles it) or has its rollback; every acknowledged start's round is
  stored, every acknowledged Act's round at that version or later; every open round awaits the
  player; and for every signed round, what the wallet's statement will hold once the outbox's
  pending credits and rollbacks arrive is the record's returned minus staked;
* at the end, the wallet back and sound: every movement settles (none pending or uncertain),
  none of them a debit left pending for the dispatcher's grace (every call was retried),
  no round is open, each signed round's net in the wallet is its returned minus staked, each
  dealt round's credit is in the wallet once, for its returns; no debit stays applied without
  its round; each player's balance in the wallet is the funding plus their rounds' net; and the
  database's records pass ``fairshoe audit verify`` (which checks each record's wallet
  transaction ids and amounts against its replayed wagers).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.crash_players import GAMES, PLAY_SECONDS, Harness, Player, stored_action
from support.error_details import reason_of
from support.live_server import FAIRSHOE, REAL, ServerProcess, audit_with_checkpoint
from support.ref_wallet import RefWallet

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.crypto.signing import decode_envelope

pytestmark = [pytest.mark.slow, pytest.mark.processes]

KILLS = int(os.environ.get("FAIRSHOE_CRASH_KILLS", "200"))
PLAYERS = 4
FUNDING = 100_000_000  # no stake is refused for want of money: the faults are the point
#: past the dispatcher's grace for a debit whose call died (60 s) and its backoff
SETTLE_SECONDS = 180.0
Code = grpc.StatusCode
UNCERTAIN = "WALLET_UNCERTAIN"


class Wallet:
    """The reference wallet and the fault each stretch of play runs under."""

    FAULTS = ("none", "none", "none", "latency", "lost", "unavailable", "down")

    def __init__(self, ref: RefWallet) -> None:
        self.ref = ref
        self.drawn: Counter[str] = Counter()
        self.restarts = 0

    def draw(self, rng: random.Random) -> None:
        fault = rng.choice(self.FAULTS)
        self.drawn[fault] += 1
        if fault == "down":
            self.ref.stop()
            return
        if not self.ref.running():
            self.ref.start()
            self.restarts += 1
        if fault == "latency":
            self.ref.faults(latency_ms=rng.choice((20, 80)))
        elif fault == "lost":  # applied, its answer lost: the sender cannot tell
            self.ref.faults(lose_answer=0.3)
        elif fault == "unavailable":
            self.ref.faults(error="UNAVAILABLE", methods=["Credit", "Rollback"])
        else:
            self.ref.faults()

    def sound(self) -> None:
        if not self.ref.running():
            self.ref.start()
            self.restarts += 1
        self.ref.faults()


class SeamlessPlayer(Player):
    """A ``crash_players.Player`` whose real money is in the operator's wallet: no deposits or
    withdrawals, real money only, and the wallet's uncertainty handled as the contract says."""

    def __init__(self, harness: Harness, name: str, seed: int) -> None:
        super().__init__(harness, name, seed)
        self.void_starts = 0
        self.refused_acts = 0

    def busy(self, exc: grpc.RpcError) -> bool:
        """None: a WALLET_UNCERTAIN answer is the call's answer (raised), for sent again it is
        the same refusal."""
        return False

    def open_account(self) -> None:
        """Funded once in the wallet, by the test."""

    def step(self) -> None:
        self.play_round(self.rng.choice(GAMES))

    def pick_mode(self) -> int:
        return REAL

    def start_refused(self, exc: grpc.RpcError) -> bool:
        if exc.code() is Code.UNAVAILABLE and reason_of(exc) == UNCERTAIN:
            self.void_starts += 1  # rolled back, void without a card: play another
            time.sleep(0.02)  # after a pause, as a client would
            return True
        return False

    def settled(self, view: rt.RoundView, mode: int) -> None:
        assert view.HasField("credit"), view  # its credit named at once, pending or paid

    def act_refused(self, exc: grpc.RpcError, view: rt.RoundView) -> rt.RoundView | None:
        if exc.code() is Code.UNAVAILABLE and reason_of(exc) == UNCERTAIN:
            self.refused_acts += 1  # the extra stake rolled back: the round still waits
            return view
        return None


def _records(server: ServerProcess, after: int = 0) -> list[tuple[int, str, dict[str, Any]]]:
    return [(int(rowid), str(round_id), decode_envelope(bytes(envelope))["payload"])
            for rowid, round_id, envelope in server.sql(
                "SELECT rowid, round_id, envelope FROM records WHERE rowid > ? ORDER BY rowid",
                after)]


class Books:
    """The outbox, the signed records and the wallet's statement, read from their databases."""

    def __init__(self, server: ServerProcess, wallet: RefWallet) -> None:
        self.server, self.wallet = server, wallet
        self.records: dict[str, dict[str, Any]] = {}
        self.seen = 0

    def read(self) -> tuple[dict[str, tuple[Any, ...]], list[dict[str, Any]]]:
        for rowid, round_id, payload in _records(self.server, self.seen):
            self.seen = rowid
            self.records[round_id] = payload
        outbox = {str(tx): (str(r), str(k), int(a), str(s), str(ref)) for tx, r, k, a, s, ref in
                  self.server.sql("SELECT transaction_id, round_id, kind, amount, state, "
                                  "reference FROM wallet_movements")}
        return outbox, self.wallet.transactions()

    def consistent(self) -> None:
        """What holds at any moment, in flight or not (see the module docstring)."""
        outbox, statement = self.read()
        for t in statement:  # the wallet holds nothing the outbox did not send, as sent
            sent = outbox.get(t["transaction_id"])
            # a debit rolled back before the wallet saw it is kept as a tombstone: amount 0
            amount = sent[2] if sent is not None and t["calls"] == 0 else t["amount"]
            assert sent is not None and sent[:3] == (t["round_id"], t["kind"], amount), t
        credits = Counter(r for r, k, *_ in outbox.values() if k == "credit")
        assert not credits or max(credits.values()) == 1, credits
        paid = Counter(t["round_id"] for t in statement if t["kind"] == "credit")
        assert not paid or max(paid.values()) == 1, paid
        rollbacks = {ref: tx for tx, (_, k, _, _, ref) in outbox.items() if k == "rollback"}
        rounds = {str(r) for r, in self.server.sql("SELECT round_id FROM rounds")}
        for tx, (round_id, kind, _, state, _) in outbox.items():
            if kind != "debit":
                continue
            if state in ("uncertain", "rolled_back"):
                assert tx in rollbacks, (tx, state)
            if round_id not in rounds:
                assert state == "pending" or tx in rollbacks, (tx, state)
        self.predicted(outbox, statement)

    def predicted(self, outbox: dict[str, tuple[Any, ...]], statement: list[dict[str, Any]]
                  ) -> None:
        """Each signed round's net in the wallet once what the outbox still owes arrives."""
        in_wallet = {t["transaction_id"]: t for t in statement}
        net: Counter[str] = Counter()
        for t in statement:
            net[t["round_id"]] += int(t["applied"])
        owed: Counter[str] = Counter()
        for tx, (round_id, kind, amount, state, ref) in outbox.items():
            if state not in ("pending", "uncertain"):
                continue
            taken = in_wallet.get(tx, {}).get("state") == "accepted"
            if kind == "credit" and tx not in in_wallet:
                owed[round_id] += amount
            elif kind == "rollback" and tx not in in_wallet:
                debit = in_wallet.get(ref)
                if debit is not None and debit["state"] == "accepted":
                    owed[round_id] += amount
            elif kind == "debit" and state == "pending" and taken and round_id in self.records:
                # its round ended without it (an unrecorded round's is its call's, or its
                # retry's, to settle): the dispatcher rolls it back
                owed[round_id] += amount
        for round_id, payload in self.records.items():
            assert net[round_id] + owed[round_id] == (
                payload["total_returned"] - payload["total_staked"]), (
                round_id, net[round_id], owed[round_id], payload["total_staked"],
                payload["total_returned"])

    def settled(self) -> None:
        """The end, everything acknowledged: the books agree to the cent."""
        outbox, statement = self.read()
        assert all(s not in ("pending", "uncertain") for *_, s, _ in outbox.values())
        self.consistent()
        net: Counter[str] = Counter()
        for t in statement:
            net[t["round_id"]] += int(t["applied"])
        statuses = dict(self.server.sql("SELECT round_id, status FROM rounds"))
        assert "open" not in statuses.values() and set(statuses) == set(self.records)
        for round_id, payload in self.records.items():
            assert net[round_id] == payload["total_returned"] - payload["total_staked"], round_id
            credit = [t["amount"] for t in statement
                      if t["round_id"] == round_id and t["kind"] == "credit"]
            if payload["cards"]:
                assert credit == [payload["total_returned"]], (round_id, credit)
        applied = {t["round_id"] for t in statement if t["kind"] == "debit"
                   and t["state"] == "accepted"}
        assert applied <= set(self.records), applied - set(self.records)


class Run:
    """The crash loop: players, server kills, wallet faults and the checks between them."""

    def __init__(self, harness: Harness, wallet: Wallet) -> None:
        self.harness, self.wallet = harness, wallet
        self.books = Books(harness.server, wallet.ref)
        self.players = [SeamlessPlayer(harness, f"seamless-{i}", seed=2000 + i)
                        for i in range(PLAYERS)]
        self.rng = random.Random(11)
        self.checked_acks = 0
        self.acked: dict[str, dict[int, tuple[Any, ...]]] = defaultdict(dict)

    def failed(self) -> None:
        error = next((p.error for p in self.players if p.error), None)
        if error is not None:
            pytest.fail(f"a player failed:\n{error}")

    def acknowledged(self) -> None:
        """Every acknowledged start's round is stored, every acknowledged Act's decision in
        it, in order."""
        with self.harness.lock:
            new = self.harness.acks[self.checked_acks:]
            self.checked_acks = len(self.harness.acks)
        for ack in new:
            if ack.kind == "act":
                self.acked[ack.ident][ack.version] = ack.action
            else:
                self.acked.setdefault(ack.ident, {})
        for round_id in {a.ident for a in new}:
            rows = self.harness.server.sql("SELECT version, state FROM rounds WHERE "
                                           "round_id = ?", round_id)
            assert rows, f"acknowledged round {round_id} is not stored"
            (version, state), = rows
            stored = [stored_action(a) for a in json.loads(state)["actions"]]
            for acked_version, action in self.acked[round_id].items():
                assert version >= acked_version, (round_id, version, acked_version)
                assert stored[acked_version - 2] == action, (round_id, acked_version, stored)

    def recovered(self) -> None:
        conn = self.harness.conn
        assert conn is not None
        for player, round_id in self.harness.server.sql(
                "SELECT player, round_id FROM rounds WHERE status = 'open'"):
            view = conn.get(player, round_id)
            assert view.status == rt.ROUND_STATUS_AWAITING_PLAYER, (round_id, view.status)
            assert view.legal_actions, view

    def crash_loop(self, kills: int) -> None:
        harness = self.harness
        harness.start()
        harness.up.set()
        for p in self.players:
            p.thread.start()
        for _ in range(kills):
            self.wallet.draw(self.rng)
            time.sleep(self.rng.uniform(*PLAY_SECONDS))
            harness.kill()
            self.failed()
            # checked before the restart: the new server's dispatcher would send movements
            # between the outbox's reading and the wallet's (a dead server's call still at the
            # wallet may land meanwhile: read in that order, the checks allow for it)
            self.books.consistent()
            self.acknowledged()
            harness.start()
            self.recovered()
            harness.up.set()
        self.wallet.sound()
        harness.stopping.set()
        for p in self.players:
            p.thread.join(timeout=300)
            assert not p.thread.is_alive(), f"{p.name} did not finish"
        self.failed()

    def settle(self) -> float:
        """Wait for the server's dispatcher to settle the outbox; how long it took."""
        began = time.monotonic()
        while self.harness.server.sql("SELECT count(*) FROM wallet_movements WHERE state IN "
                                      "('pending', 'uncertain')") != [(0,)]:
            assert time.monotonic() - began < SETTLE_SECONDS, self.harness.server.sql(
                "SELECT kind, state, attempts, reason FROM wallet_movements WHERE state IN "
                "('pending', 'uncertain')")
            time.sleep(0.2)
        return time.monotonic() - began

    def final_checks(self, tmp: Path) -> str:
        server = self.harness.server
        self.acknowledged()
        self.books.settled()
        # every call was retried until answered, so each debit was settled by its call or its
        # retry: none was left for the dispatcher to find pending past its grace
        orphans = server.sql("SELECT round_id, purpose FROM wallet_movements WHERE reason = ?",
                             "the call that sent it ended unanswered")
        assert not orphans, orphans
        players = dict(server.sql("SELECT round_id, player FROM rounds"))
        net: Counter[str] = Counter()
        for _, round_id, payload in _records(server):
            net[players[round_id]] += payload["total_returned"] - payload["total_staked"]
        for p in self.players:
            assert self.wallet.ref.balance(p.name) == FUNDING + net[p.name], p.name
        summary = audit_with_checkpoint(server, server.data_dir / "keys", tmp)
        (rounds,), = server.sql("SELECT COUNT(*) FROM rounds")
        assert summary.startswith("audit PASS"), summary
        assert f"{rounds} rounds: {rounds} OK" in summary, (rounds, summary)
        return summary


def test_sigkill_under_concurrent_play_on_the_seamless_wallet(tmp_path: Path) -> None:
    ref = RefWallet(tmp_path / "ref-wallet").start()
    server = ServerProcess(tmp_path / "data", stacked=False)
    server.data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(FAIRSHOE), "operators", "wallet", "default", "--kind", "grpc",
                    "--endpoint", ref.endpoint, "--timeout-ms", "2000"],
                   env=server.env, cwd=server.data_dir, check=True, capture_output=True)
    wallet = Wallet(ref)
    harness = Harness(server)
    run = Run(harness, wallet)
    for p in run.players:
        ref.fund(p.name, FUNDING)
    began = time.perf_counter()
    try:
        run.crash_loop(KILLS)
        settled = run.settle()
        summary = run.final_checks(tmp_path)
    finally:
        harness.stopping.set()
        harness.up.set()
        server.stop()
        ref.stop()
    assert "Traceback" not in server.log(), server.log()[-4000:]
    players = run.players
    assert sum(p.rounds for p in players) > KILLS  # play went on between the kills
    print(f"\nseamless crash test: {KILLS} kills in {time.perf_counter() - began:.1f} s; "
          f"restart median {statistics.median(harness.restarts):.3f} s; wallet faults "
          f"{dict(wallet.drawn)}, {wallet.restarts} wallet restarts; "
          f"{sum(p.rounds for p in players)} rounds, {sum(p.actions for p in players)} acts, "
          f"{sum(p.void_starts for p in players)} starts void (uncertain), "
          f"{sum(p.refused_acts for p in players)} acts refused (uncertain), "
          f"{sum(p.retries for p in players)} retries; outbox settled {settled:.1f} s after "
          f"play; {summary}")
