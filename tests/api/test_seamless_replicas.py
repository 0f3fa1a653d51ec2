"""The seamless wallet's outbox on two replicas: two production ``fairshoe serve`` processes on one
PostgreSQL database, the operator's wallet (the reference wallet, over gRPC) slow and flaky:
every call late, a share of the credits' and rollbacks' answers lost after they were applied.
Players play real-money rounds (doubles included) on both replicas, each call sent to a replica
that is up and sent again, the same request under the same request id, when it fails; one replica
is SIGKILLed mid-play and not restarted. Once the wallet is sound again, the survivor settles
everything, including what the dead replica had claimed:

* no movement is sent under two ids: each round has at most one credit in the outbox and in the
  wallet, and every transaction in the wallet is an outbox movement of its round;
* none is lost: nothing is left pending or uncertain, every finished round's credit is in the
  wallet once, and every round's net movement in the wallet is its signed record's staked minus
  returned (0 for a round void before its deal); no debit stays applied without its round.
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.error_details import reason_of
from support.live_server import FAIRSHOE, Client, ServerProcess, double, simple_action
from support.ref_wallet import RefWallet
from support.replicas import start_replicas

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.crypto.signing import decode_envelope

PLAYERS = 3
ROUNDS_BEFORE_THE_KILL = 12
ROUNDS_AFTER_THE_KILL = 12
SETTLE_SECONDS = 120.0
Code = grpc.StatusCode


@pytest.fixture
def wallet(tmp_path: Path) -> Iterator[RefWallet]:
    ref = RefWallet(tmp_path / "ref-wallet").start()
    yield ref
    ref.stop()


@pytest.fixture
def replicas(tmp_path: Path, pg_url: str, wallet: RefWallet) -> Iterator[list[ServerProcess]]:
    started = start_replicas(tmp_path, pg_url, count=2)
    subprocess.run([str(FAIRSHOE), "operators", "wallet", "default", "--kind", "grpc",
                    "--endpoint", wallet.endpoint, "--timeout-ms", "3000"],
                   env=started[0].env, cwd=started[0].data_dir, check=True, capture_output=True)
    yield started
    for r in started:
        r.stop()
    for r in started:
        assert "Traceback" not in r.log(), r.log()[-4000:]


class Table:
    """The replicas that are up, and the rounds the players finished."""

    def __init__(self, replicas: list[ServerProcess]) -> None:
        self.up = list(replicas)
        self.lock = threading.Lock()
        self.finished = 0
        self.errors: list[str] = []

    def clients(self) -> list[Client]:
        with self.lock:
            return [r.client() for r in self.up]

    def call(self, send: Callable[[Client], Any]) -> Any:
        """``send`` to a replica that is up until it is answered; an answer the wallet's
        uncertainty refused is raised (the caller starts a new round)."""
        for _ in range(200):
            try:
                return send(random.choice(self.clients()))
            except grpc.RpcError as exc:
                if exc.code() is Code.UNAVAILABLE and reason_of(exc) == "WALLET_UNCERTAIN":
                    raise
                if exc.code() not in (Code.UNAVAILABLE, Code.CANCELLED, Code.DEADLINE_EXCEEDED):
                    raise
            except ValueError:  # the channel of the replica just killed is closed
                pass
            time.sleep(0.05)
        raise AssertionError("no replica answered")

    def play(self, player: str, rounds: int) -> None:
        try:
            for _ in range(rounds):
                self.play_round(player)
        except Exception as exc:  # reported by the test
            self.errors.append(f"{player}: {exc!r}")

    def play_round(self, player: str) -> None:
        request = Client.rid()
        try:
            view = self.call(lambda c: c.start(player, "snap", [1000], request_id=request))
        except grpc.RpcError as exc:
            if reason_of(exc) == "WALLET_UNCERTAIN":
                return  # void without a card dealt; the player starts another
            raise
        while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            legal = {la.action for la in view.legal_actions}
            action = (double() if rt.ACTION_KIND_DOUBLE in legal and random.random() < 0.3
                      else simple_action(view))
            act_id = Client.rid()
            try:
                view = self.call(lambda c, v=view, a=action, i=act_id: c.act(
                    player, v, a, request_id=i))
            except grpc.RpcError as exc:
                if reason_of(exc) != "WALLET_UNCERTAIN":
                    raise
                action = simple_action(view)  # the double was refused: play on
                view = self.call(lambda c, v=view, a=action: c.act(player, v, a))
        with self.lock:
            self.finished += 1


def _players(table: Table, names: list[str], rounds: int) -> None:
    threads = [threading.Thread(target=table.play, args=(n, rounds)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_two_replicas_send_each_movement_under_one_id_and_lose_none_to_a_sigkill(
        replicas: list[ServerProcess], wallet: RefWallet) -> None:
    names = [f"p{i}" for i in range(PLAYERS)]
    for name in names:
        wallet.fund(name, 10_000_000)
    wallet.faults(latency_ms=30)
    table = Table(replicas)
    _players(table, names, ROUNDS_BEFORE_THE_KILL // PLAYERS)
    # flaky and slower from now on; one replica dies with the players mid-round and credits
    # in flight (each takes half a second, so the replicas' dispatchers hold claims)
    wallet.faults(latency_ms=500, lose_answer=0.3, methods=["Credit", "Rollback"])
    victim = replicas[1]
    threads = [threading.Thread(target=table.play, args=(n, ROUNDS_AFTER_THE_KILL // PLAYERS))
               for n in names]
    for t in threads:
        t.start()
    survivor = replicas[0]
    # the kill comes once credits or rollbacks are in flight (not after a fixed second, in
    # which a loaded machine may finish no round); each call takes half a second, so those
    # are still in flight as it comes
    deadline = time.monotonic() + SETTLE_SECONDS  # a bound on a broken test, not a timing
    while not (in_flight := _in_flight(survivor)):
        assert time.monotonic() < deadline and any(t.is_alive() for t in threads), table.errors
        time.sleep(0.1)
    with table.lock:
        table.up.remove(victim)
    victim.kill()
    wallet.faults(latency_ms=30, lose_answer=0.3, methods=["Credit", "Rollback"])
    for t in threads:
        t.join()
    assert in_flight > 0  # the kill left movements to settle
    assert table.errors == []
    assert table.finished >= ROUNDS_BEFORE_THE_KILL
    wallet.faults()
    deadline = time.monotonic() + SETTLE_SECONDS
    while survivor.sql("SELECT count(*) FROM wallet_movements WHERE state IN "
                       "('pending', 'uncertain')") != [(0,)]:
        assert time.monotonic() < deadline, survivor.sql(
            "SELECT kind, state, attempts, reason FROM wallet_movements WHERE state IN "
            "('pending', 'uncertain')")
        time.sleep(0.2)
    _books_agree(survivor, wallet)


def _in_flight(server: ServerProcess) -> int:
    """The credits and rollbacks not yet acknowledged."""
    return int(server.sql("SELECT count(*) FROM wallet_movements WHERE state = 'pending' AND "
                          "kind IN ('credit', 'rollback')")[0][0])


def _books_agree(server: ServerProcess, wallet: RefWallet) -> None:
    """The outbox, the signed records and the wallet's statement tell one story."""
    outbox = {tx: (str(round_id), str(kind)) for tx, round_id, kind in server.sql(
        "SELECT transaction_id, round_id, kind FROM wallet_movements")}
    statement = wallet.transactions()
    assert {t["transaction_id"] for t in statement} <= set(outbox)  # no id of its own
    for t in statement:
        assert outbox[t["transaction_id"]] == (t["round_id"], t["kind"])
    credits = Counter(r for r, k in outbox.values() if k == "credit")
    assert max(credits.values()) == 1
    assert max(Counter(t["round_id"] for t in statement if t["kind"] == "credit").values()) == 1
    records = {str(rid): decode_envelope(bytes(env))["payload"]
               for rid, env in server.sql("SELECT round_id, envelope FROM records")}
    statuses = dict(server.sql("SELECT round_id, status FROM rounds"))
    assert "open" not in statuses.values() and set(statuses) == set(records)
    net: Counter[str] = Counter()
    for t in statement:
        net[t["round_id"]] += int(t["applied"])
    for round_id, payload in records.items():
        assert net[round_id] == payload["total_returned"] - payload["total_staked"], round_id
        paid = [t for t in statement if t["round_id"] == round_id and t["kind"] == "credit"]
        if payload["cards"]:  # dealt: its credit reached the wallet, once
            assert [t["amount"] for t in paid] == [payload["total_returned"]], round_id
    # a debit still applied belongs to a round (one refused by its rollback has net 0)
    applied = {t["round_id"] for t in statement if t["kind"] == "debit"
               and t["state"] == "accepted"}
    assert applied <= set(records)
    assert sum(1 for p in records.values() if p["cards"]) >= ROUNDS_BEFORE_THE_KILL
