"""Several replicas on one PostgreSQL: three production ``fairshoe serve`` processes (OS-seeded
shoes) on one database, sharing the signing key and the seed-vault key (one key directory, each
replica's ``<data dir>/keys`` a link to it), each with its own data directory and log.

* A round started on one replica continues on another; two replicas acting on one round at once:
  one wins, the other is refused ABORTED (``STALE_VERSION`` or ``CONCURRENT_UPDATE``); one request
  id sent to two replicas at once has one effect and both get the same answer.
* Crash (``slow``): replicas SIGKILLed at random (``FAIRSHOE_REPLICA_KILLS``, default 20) while
  the others keep serving; the players of tests/api/test_crash.py send each call to a random
  replica that is up and retry a failed one, the same request with the same request id, on
  another. Checked while they play and at the end: the ledger to the cent, every acknowledged
  answer stored, no round left open, every real balance what the acknowledged answers add up to,
  and ``fairshoe audit export --database URL`` + ``fairshoe audit verify`` of every round.
* PostgreSQL restarted under load: every replica reports NOT_SERVING while it is down and SERVING
  again without a restart of its own; no acknowledged answer is lost.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from support.crash_players import Ack, Player, stored_action
from support.error_details import reason_of
from support.live_server import (
    Client,
    ServerProcess,
    at_once,
    audit_with_checkpoint,
    simple_action,
)
from support.pg_server import PgServer
from support.replicas import start_replicas

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2
from rng_service.crypto.signing import decode_envelope

KILLS = int(os.environ.get("FAIRSHOE_REPLICA_KILLS", "20"))
PLAYERS = 6
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
Code = grpc.StatusCode


@pytest.fixture
def replicas(tmp_path: Path, own_pg_server: PgServer) -> Iterator[list[ServerProcess]]:
    started = start_replicas(tmp_path, own_pg_server.url("fairshoe"))
    yield started
    for r in started:
        r.stop()
    for r in started:
        log = r.log()
        assert "Traceback" not in log, log[-4000:]


# --- (a) one round, several replicas ----------------------------------------------------------


def test_a_round_moves_between_replicas_and_races_have_one_winner(
        replicas: list[ServerProcess]) -> None:
    a, b, c = (r.client() for r in replicas)
    a.deposit("ann", 1_000_000)
    assert b.balance("ann") == c.balance("ann") == 1_000_000

    # started on one replica, continued on the others, read anywhere
    view = a.start("ann", "double-deck", [1000])
    hops = [b, c, a]
    while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
        view = hops[view.version % 3].act("ann", view, simple_action(view))
    assert view.status == rt.ROUND_STATUS_FINISHED
    for client in (a, b, c):
        assert client.get("ann", view.round_id) == view

    # two replicas acting on one round at once: one wins, the other is ABORTED
    races = 0
    while races < 8:
        view = a.start("ann", "snap", [1000])
        if view.status != rt.ROUND_STATUS_AWAITING_PLAYER:
            continue
        races += 1
        action = simple_action(view)
        one, two = at_once(partial(b.act, "ann", view, action),
                           partial(c.act, "ann", view, action))
        won = [x for x in (one, two) if isinstance(x, rt.RoundView)]
        lost = [x for x in (one, two) if isinstance(x, grpc.RpcError)]
        assert len(won) == 1 and len(lost) == 1, (one, two)
        assert lost[0].code() is Code.ABORTED, (lost[0].code(), lost[0].details())
        assert reason_of(lost[0]) in ("STALE_VERSION", "CONCURRENT_UPDATE"), lost[0].details()
        assert won[0].version == view.version + 1
        assert a.get("ann", view.round_id).version == won[0].version
        a.play_out("ann", won[0])

    # one request id sent to two replicas at once: one effect, the same answer to both
    for i in range(8):
        rid = f"dup-deposit-{i}"
        one, two = at_once(partial(b.deposit, "bob", 700, request_id=rid),
                           partial(c.deposit, "bob", 700, request_id=rid))
        assert isinstance(one, wallet_pb2.Transaction), one
        assert one == two
    assert a.balance("bob") == 8 * 700
    a.deposit("cat", 1_000_000)
    for i in range(6):
        rid = f"dup-start-{i}"
        one, two = at_once(partial(b.start, "cat", "snap", [1000], request_id=rid),
                           partial(c.start, "cat", "snap", [1000], request_id=rid))
        assert isinstance(one, rt.RoundView), one
        assert one == two
        view = one
        if view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            act_rid = f"dup-act-{i}"
            action = simple_action(view)
            one, two = at_once(partial(b.act, "cat", view, action, request_id=act_rid),
                               partial(c.act, "cat", view, action, request_id=act_rid))
            assert isinstance(one, rt.RoundView), one
            assert one == two and one.version == view.version + 1
            a.play_out("cat", one)
    (rounds,), = replicas[0].sql("SELECT COUNT(*) FROM rounds WHERE player = 'cat'")
    assert rounds == 6
    assert not replicas[0].sql("SELECT round_id FROM rounds WHERE status = 'open'")
    ledger_checks(replicas[0])


# --- the checks, on PostgreSQL ----------------------------------------------------------------


def ledger_checks(server: ServerProcess, *, records: bool = True) -> None:
    """The ledger to the cent, each check one statement (one consistent snapshot, so it holds
    while replicas write): balances are the sums of their entries, each operator/currency/mode
    sums to zero, each round's house result is its stakes less its returns, no wager staked or
    returned twice, no deposit booked twice, every ended round has its record, whose totals are
    the ledger's."""
    sql = server.sql
    wrong = sql(
        "SELECT holder, mode, balance, entries FROM (SELECT a.holder, a.mode, a.balance, "
        " COALESCE((SELECT SUM(amount) FROM ledger_entries e WHERE e.operator = a.operator "
        "  AND e.currency = a.currency AND e.mode = a.mode AND e.target = a.holder), 0) - "
        " COALESCE((SELECT SUM(amount) FROM ledger_entries e WHERE e.operator = a.operator "
        "  AND e.currency = a.currency AND e.mode = a.mode AND e.source = a.holder), 0) "
        " AS entries FROM accounts a) x WHERE balance != entries")
    assert not wrong, f"balances that are not the sum of their entries: {wrong}"
    unbalanced = sql("SELECT operator, currency, mode, SUM(balance) FROM accounts "
                     "GROUP BY operator, currency, mode HAVING SUM(balance) != 0")
    assert not unbalanced, unbalanced
    houses = sql(
        "SELECT round_id, result, house FROM (SELECT round_id, "
        " SUM(CASE kind WHEN 'stake' THEN amount ELSE 0 END) "
        " - SUM(CASE kind WHEN 'return' THEN amount ELSE 0 END) AS result, "
        " SUM(CASE WHEN substr(target, 1, 6) = '@house' THEN amount ELSE -amount END) AS house "
        "FROM ledger_entries WHERE round_id IS NOT NULL GROUP BY round_id) x "
        "WHERE result != house")
    assert not houses, f"rounds whose house result is not stakes - returns: {houses}"
    twice = sql("SELECT round_id, wager_id, kind, COUNT(*) FROM ledger_entries "
                "WHERE round_id IS NOT NULL GROUP BY round_id, wager_id, kind "
                "HAVING COUNT(*) > 1")
    assert not twice, f"wagers staked or returned twice: {twice}"
    twice = sql("SELECT request_id, COUNT(*) FROM ledger_entries WHERE kind IN "
                "('deposit', 'withdrawal') GROUP BY request_id HAVING COUNT(*) > 1")
    assert not twice, f"deposits or withdrawals booked twice: {twice}"
    unrecorded = sql("SELECT r.round_id, r.status FROM rounds r LEFT JOIN records c ON "
                     "c.operator = r.operator AND c.round_id = r.round_id "
                     "WHERE r.status != 'open' AND c.round_id IS NULL")
    assert not unrecorded, f"ended rounds without a record: {unrecorded}"
    if not records:
        return
    for round_id, envelope, stakes, returns in sql(
            "SELECT c.round_id, c.envelope, "
            "COALESCE(SUM(CASE e.kind WHEN 'stake' THEN e.amount END), 0), "
            "COALESCE(SUM(CASE e.kind WHEN 'return' THEN e.amount END), 0) FROM records c "
            "LEFT JOIN ledger_entries e ON e.operator = c.operator AND e.round_id = c.round_id "
            "GROUP BY c.operator, c.round_id, c.envelope"):
        payload = decode_envelope(bytes(envelope))["payload"]
        assert (payload["total_staked"], payload["total_returned"]) == (stakes, returns), (
            round_id, payload["total_staked"], payload["total_returned"], stakes, returns)


def acknowledged(server: ServerProcess, acks: list[Ack]) -> None:
    """Every acknowledged answer is stored (as test_crash's Checker.acknowledged, read in two
    queries instead of one per round): a started round exists, an acknowledged Act's round is at
    that version or later with the same decisions in the same order, an acknowledged deposit or
    withdrawal is its ledger entry."""
    rounds = {round_id: (version, json.loads(bytes(state))["actions"])
              for round_id, version, state in server.sql(
                  "SELECT round_id, version, state FROM rounds")}
    entries = {public_id: (kind, request_id, amount) for public_id, kind, request_id, amount
               in server.sql("SELECT public_id, kind, request_id, amount FROM ledger_entries "
                             "WHERE kind IN ('deposit', 'withdrawal')")}
    for ack in acks:
        if ack.kind in ("start", "act"):
            assert ack.ident in rounds, f"acknowledged round {ack.ident} is not stored"
            version, actions = rounds[ack.ident]
            assert version >= ack.version, (ack, version)
            assert len(actions) == version - 1, (ack.ident, version, actions)
            if ack.kind == "act":
                assert stored_action(actions[ack.version - 2]) == ack.action, (ack, actions)
        else:
            assert entries.get(ack.ident) == (ack.kind, ack.request_id, abs(ack.amount)), ack


# --- (b) replicas SIGKILLed at random under play ----------------------------------------------


class Replica:
    """One replica as the players see it: up or not, and which start of it they talk to."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.up = True
        self.generation = 1
        self.conn: Client | None = server.client()


class Fleet:
    """What the crash players need of their harness (``stopping``, ``ack``, a lock, the
    acknowledged answers), with calls spread over the replicas that are up."""

    def __init__(self, servers: list[ServerProcess]) -> None:
        self.replicas = [Replica(s) for s in servers]
        self.server = servers[0]  # what Checker reads the database through
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.acks: list[Ack] = []
        self.restarts: list[float] = []
        self.moves = 0  # calls retried on another replica

    def ack(self, entry: Ack) -> None:
        with self.lock:
            self.acks.append(entry)

    def pick(self, rng: random.Random, avoid: Replica | None) -> tuple[Replica, int, Client]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with self.lock:
                up = [r for r in self.replicas if r.up and r.conn is not None]
                others = [r for r in up if r is not avoid] or up
                if others:
                    replica = rng.choice(others)
                    assert replica.conn is not None
                    return replica, replica.generation, replica.conn
            time.sleep(0.01)
        raise TimeoutError("no replica up for two minutes")

    def kill(self, replica: Replica) -> None:
        with self.lock:
            replica.up = False  # before the kill: every failure it causes finds it down
            replica.conn = None
        replica.server.kill()

    def restart(self, replica: Replica) -> None:
        began = time.perf_counter()
        replica.server.start()
        self.restarts.append(time.perf_counter() - began)
        with self.lock:
            replica.generation += 1
            replica.conn = replica.server.client()
            replica.up = True

    def interrupted(self, replica: Replica, generation: int) -> bool:
        with self.lock:
            return not replica.up or replica.generation != generation


class FleetPlayer(Player):
    """A crash player (support.crash_players), each call to a random replica that is up; a call
    that fails because its replica went away (or UNAVAILABLE) is sent again, as it is, to another
    one."""

    fleet: Fleet

    def call(self, service: str, method: str, request: Any) -> Any:
        busy = 0
        avoid: Replica | None = None
        while True:
            replica, generation, conn = self.fleet.pick(self.rng, avoid)
            try:
                return getattr(getattr(conn, service), method)(request, timeout=20.0)
            except grpc.RpcError as exc:
                if self.fleet.interrupted(replica, generation):
                    self.retries += 1
                    self.fleet.moves += 1
                    avoid = replica
                    continue
                if exc.code() is Code.UNAVAILABLE and busy < 100:  # e.g. the database busy
                    busy += 1
                    self.retries += 1
                    avoid = replica
                    time.sleep(0.02)
                    continue
                raise
            except ValueError:  # "Cannot invoke RPC on closed channel!"
                if self.fleet.interrupted(replica, generation):
                    self.retries += 1
                    avoid = replica
                    continue
                raise


def fleet_players(fleet: Fleet, count: int, prefix: str) -> list[FleetPlayer]:
    players = []
    for i in range(count):
        player = FleetPlayer(fleet, f"{prefix}-{i}", seed=2000 + i)  # type: ignore[arg-type]
        player.fleet = fleet
        players.append(player)
    return players


def failed(players: list[FleetPlayer]) -> None:
    error = next((p.error for p in players if p.error), None)
    if error is not None:
        pytest.fail(f"a player failed:\n{error}")


def finish(fleet: Fleet, players: list[FleetPlayer], tmp: Path) -> str:
    """Stop the players (each ends its round and plays its double-exposure shoe out) and run the
    end checks: ledger, acknowledged answers, nothing open, balances, the audit."""
    fleet.stopping.set()
    for p in players:
        p.thread.join(timeout=300)
        assert not p.thread.is_alive(), f"{p.name} did not finish"
    failed(players)
    server = fleet.server
    ledger_checks(server)
    acknowledged(server, fleet.acks)
    still_open = server.sql("SELECT round_id FROM rounds WHERE status = 'open'")
    assert not still_open, f"rounds left open: {still_open}"
    unrevealed = server.sql("SELECT shoe_id FROM shoes WHERE status = 'finished'")
    assert not unrevealed, f"finished shoes without a reveal: {unrevealed}"
    for p in players:
        (balance,), = server.sql("SELECT balance FROM accounts WHERE holder = ? AND "
                                 "mode = 'REAL'", p.name)
        assert balance == p.real_expected, (p.name, balance, p.real_expected)
    summary = audit_with_checkpoint(server, server.data_dir / "keys", tmp)
    (rounds,), = server.sql("SELECT COUNT(*) FROM rounds")
    assert summary.startswith("audit PASS"), summary
    assert f"{rounds} rounds: {rounds} OK" in summary, (rounds, summary)
    return summary


@pytest.mark.slow
def test_replicas_sigkilled_at_random_while_the_others_serve(
        replicas: list[ServerProcess], tmp_path: Path) -> None:
    fleet = Fleet(replicas)
    players = fleet_players(fleet, PLAYERS, "kill")
    rng = random.Random(11)
    began = time.perf_counter()
    for p in players:
        p.thread.start()
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.05, 0.5))
        victim = rng.choice(fleet.replicas)
        fleet.kill(victim)
        failed(players)
        # while the others write (each check is one statement, one snapshot); the records' totals
        # and the acknowledged answers once at the end (reading them all takes seconds)
        ledger_checks(fleet.server, records=False)
        fleet.restart(victim)
    summary = finish(fleet, players, tmp_path)
    restarts = sorted(fleet.restarts)
    print(f"\nreplica crash test: {KILLS} kills in {time.perf_counter() - began:.1f} s; "
          f"restart median {restarts[len(restarts) // 2]:.2f} s; "
          f"{sum(p.rounds for p in players)} rounds, {sum(p.actions for p in players)} acts, "
          f"{len(fleet.acks)} acknowledged, {sum(p.retries for p in players)} retries "
          f"({fleet.moves} moved to another replica); {summary}")


# --- (c) PostgreSQL restarted under load ------------------------------------------------------


def test_postgresql_restart_under_load(tmp_path: Path, own_pg_server: PgServer) -> None:
    servers = start_replicas(tmp_path, own_pg_server.url("fairshoe"))
    try:
        fleet = Fleet(servers)
        players = fleet_players(fleet, 4, "pg")
        for p in players:
            p.thread.start()
        time.sleep(1.0)
        failed(players)
        acked_before = len(fleet.acks)
        own_pg_server.stop("immediate")  # a crash: recovery from the WAL at the next start
        for s in servers:  # generous under load: the point is that every replica notices
            s.wait_health(NOT_SERVING, 60, service="")
        for s in servers:
            assert s.health("") == NOT_SERVING
        time.sleep(1.0)
        own_pg_server.start()
        for s in servers:
            # generous: PostgreSQL's crash recovery fsyncs its data directory, which takes tens
            # of seconds on a loaded machine; the point is that no replica needs a restart
            s.wait_health(SERVING, 120, service="")
        pids = [s.proc.pid for s in servers if s.proc is not None]
        # play goes on after the outage: answers are acknowledged again (waited for, not given
        # a fixed second and a half, in which a loaded machine may acknowledge none)
        deadline = time.monotonic() + 60  # a bound on a broken test, not a timing
        while len(fleet.acks) <= acked_before:
            failed(players)
            assert time.monotonic() < deadline, "nothing acknowledged after the outage"
            time.sleep(0.1)
        failed(players)
        summary = finish(fleet, players, tmp_path)
        assert [s.proc.pid for s in servers if s.proc is not None] == pids  # no restarts
        assert all(s.proc is not None and s.proc.poll() is None for s in servers)
        assert summary.startswith("audit PASS")
    finally:
        for s in servers:
            s.stop()
    for s in servers:
        log = s.log()
        assert '"database_unreachable"' in log and '"database_reachable_again"' in log
        assert "Traceback" not in log, log[-4000:]
