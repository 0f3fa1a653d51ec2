"""A hostile client against two real server processes (`serve --processes 2`: one SQLite file,
or two PostgreSQL replicas), aimed at the writes that check what the process holds:

* ``Act`` from the live cache does not read its round: its ``UPDATE ... WHERE`` version and
  state is the check. The same round is acted on at the same version through both processes
  at once (different actions; the same request id twice), and a stale version is retried
  through the process that holds the round in its cache after the other one moved it.
* ``StartRound`` does not look for an open round first: starts for one player race through
  both processes (exactly one round opens; every refusal names ROUND_IN_PROGRESS).
* SQLite's log appends after the head a committed transaction left (``WHERE size``): both
  processes append to one log all along.

After each: every acknowledged answer is what the stored round shows, no round is acted
twice, the ledger balances, the log is dense and the audit passes against a checkpoint.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.engine_helpers import stack
from support.error_details import error_info
from support.live_server import (
    HIT,
    STAND,
    Client,
    ServerProcess,
    at_once,
    audit_with_checkpoint,
    ledger_is_balanced,
    simple_action,
)
from support.worker_channels import channels_on_each_worker

from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

AWAITING = rt.ROUND_STATUS_AWAITING_PLAYER
ROUNDS = 9


@pytest.fixture(params=["sqlite", "postgresql"])
def two(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    url = str(request.getfixturevalue("pg_url")) if request.param == "postgresql" else None
    server = ServerProcess(tmp_path / "data", stacked=False, processes=2,
                           database_url=url).start()
    yield server
    status = server.stop()
    log = server.log()
    assert status == 0, log[-4000:]
    assert "Traceback" not in log, log[-4000:]


def refused(result: Any, *reasons: str) -> bool:
    return isinstance(result, grpc.RpcError) and error_info(result).reason in reasons


def same_round(a: rt.RoundView, b: rt.RoundView) -> None:
    """``a`` (an acknowledged answer) is the stored round ``b`` (the balance aside: later
    rounds move it)."""
    a, b = rt.RoundView.FromString(a.SerializeToString()), rt.RoundView.FromString(
        b.SerializeToString())
    a.ClearField("balance_after_minor")
    b.ClearField("balance_after_minor")
    assert a == b, f"answered:\n{a}\nstored / other answer:\n{b}"


def decisions(server: ServerProcess, round_id: str) -> int:
    """The round's stored version (one per transition: start, each action)."""
    (version,), = server.sql("SELECT version FROM rounds WHERE round_id = ?", round_id)
    return int(version)


def log_is_dense(server: ServerProcess) -> None:
    (size,), = server.sql("SELECT size FROM log_state WHERE operator = 'default'")
    (leaves,), = server.sql("SELECT COUNT(*) FROM log_leaves WHERE operator = 'default'")
    (dense,), = server.sql("SELECT COUNT(DISTINCT leaf_index) FROM log_leaves WHERE operator = "
                           "'default' AND leaf_index < ?", size)
    assert size == leaves == dense


def settled(server: ServerProcess, tmp: Path, rounds: int, *, audit: bool = True) -> None:
    """Balanced, nothing open, a record per round, the log dense and (unless the shoes were
    stacked: then the verifier's shuffle is not the cards dealt) the audit passes."""
    ledger_is_balanced(server)
    assert server.sql("SELECT COUNT(*) FROM rounds WHERE status = 'open'") == [(0,)]
    (records,), = server.sql("SELECT COUNT(*) FROM records")
    assert records == rounds
    log_is_dense(server)
    if not audit:
        return
    summary = audit_with_checkpoint(server, server.data_dir / "keys", tmp)
    assert summary.startswith("audit PASS"), summary
    assert f"{rounds} rounds: {rounds} OK" in summary, summary


def test_acts_racing_through_both_processes_are_decided_once_each(
        two: ServerProcess, tmp_path: Path) -> None:
    """Each decision of each round is raced: the process that made the round's last transition
    (its live cache holds the round, so it does not read it) against the other (which reads
    it), same version, different actions; then the same request id through both at once; then
    the loser retries its stale version through each process. Exactly one action of each race
    is taken, the winner's answer is the stored round, and the losers are refused as stale or
    concurrent, changing nothing."""
    spread = channels_on_each_worker(two)
    a, b = (Client(group[0]) for group in spread.values())
    player = "racer"
    a.deposit(player, 10_000_000)
    rounds = 0
    for n in range(ROUNDS):
        view = (a, b)[n % 2].start(player, "snap", [1000])
        rounds += 1
        step = 0
        while view.status == AWAITING:
            version = view.version
            mode = (n + step) % 3  # each kind of race opens some round
            if mode == 2:  # one request id, different actions, one through each process
                rid = Client.rid()
                other = HIT if view.turn.decision == rt.DECISION_PLAY else simple_action(view)
                results = at_once(partial(a.act, player, view, simple_action(view), request_id=rid),
                                  partial(b.act, player, view, other, request_id=rid))
                won = [r for r in results if isinstance(r, rt.RoundView)]
                assert len(won) == 1 or (other == simple_action(view) and len(won) == 2), results
                for r in results:  # the id names the first request: the other is refused
                    assert isinstance(r, rt.RoundView) or (
                        r.code() is grpc.StatusCode.INVALID_ARGUMENT), r
            elif mode == 0:  # different actions, one through each process
                other = HIT if view.turn.decision == rt.DECISION_PLAY else simple_action(view)
                results = at_once(partial(a.act, player, view, simple_action(view)),
                                  partial(b.act, player, view, other))
                won = [r for r in results if isinstance(r, rt.RoundView)]
                assert len(won) == 1, results
                lost = [r for r in results if not isinstance(r, rt.RoundView)]
                assert all(refused(r, "STALE_VERSION", "CONCURRENT_UPDATE") for r in lost), lost
            else:  # the same request twice at once: one decision, both told it
                rid = Client.rid()
                action = simple_action(view)
                results = at_once(partial(a.act, player, view, action, request_id=rid),
                                  partial(b.act, player, view, action, request_id=rid))
                won = [r for r in results if isinstance(r, rt.RoundView)]
                assert won, results
                for other_answer in won[1:]:
                    same_round(other_answer, won[0])
                lost = [r for r in results if not isinstance(r, rt.RoundView)]
                assert all(refused(r, "CONCURRENT_UPDATE") for r in lost), lost
            new = won[0]
            assert new.version == version + 1
            assert decisions(two, view.round_id) == version + 1  # acted once
            for client in (a, b):
                same_round(new, client.get(player, view.round_id))
            # the stale version again, through each process (one holds the new round cached)
            for client in (a, b):
                with pytest.raises(grpc.RpcError) as info:
                    client.act(player, view, STAND)
                assert error_info(info.value).reason in ("STALE_VERSION", "ROUND_FINISHED")
            assert decisions(two, view.round_id) == version + 1
            view, step = new, step + 1
    settled(two, tmp_path, rounds)


def test_starts_racing_through_both_processes_open_one_round(
        two: ServerProcess, tmp_path: Path) -> None:
    """Starts for one player race through both processes (without looking for an open round
    first, the unique index on open rounds is the check): at most one round is open at a time,
    every refusal names ROUND_IN_PROGRESS (not a lost race, not the stake), and each round
    opened is played out."""
    spread = channels_on_each_worker(two)
    clients = [Client(c) for group in spread.values() for c in group[:1]]
    player = "starter"
    clients[0].deposit(player, 10_000_000)
    rounds = 0
    for _ in range(ROUNDS):
        results = at_once(*[partial(c.start, player, "snap", [1000])
                           for c in clients for _ in range(2)])
        views = [r for r in results if isinstance(r, rt.RoundView)]
        assert views, results
        open_views = [v for v in views if v.status == AWAITING]
        assert len(open_views) <= 1, open_views
        for r in results:
            if not isinstance(r, rt.RoundView):
                assert refused(r, "ROUND_IN_PROGRESS"), r
        stored_open = two.sql("SELECT round_id FROM rounds WHERE player = ? AND status = 'open'",
                              player)
        assert stored_open == [(v.round_id,) for v in open_views]
        rounds += len(views)
        for v in views:  # each answer is the stored round (a settled one as it settled)
            same_round(v, clients[1].get(player, v.round_id))
        for v in open_views:
            done = clients[0].play_out(player, v)
            same_round(done, clients[1].get(player, v.round_id))
    settled(two, tmp_path, rounds)


def test_a_stale_act_through_the_process_that_holds_the_round_is_stale(
        two: ServerProcess, tmp_path: Path) -> None:
    """One process makes a transition (its live cache holds the round at that version), the
    other moves the round on; then the first is asked to act at the version it holds, with an
    action the copy takes, one it refuses, on another hand, or as another player. Each is
    decided on the stored round: STALE_VERSION (NotFound for another player), and nothing
    changes; then the round plays on through the process that was stale."""
    spread = channels_on_each_worker(two)
    a, b = (Client(group[0]) for group in spread.values())
    player = "stale"
    a.deposit(player, 10_000_000)
    a.deposit("thief", 10_000_000)
    split = rt.PlayerAction(split=rt.PlayerAction.Split())
    attempts: list[tuple[str, Callable[[rt.RoundView], Any]]] = [
        ("STALE_VERSION", lambda v: a.act(player, v, STAND)),
        ("STALE_VERSION", lambda v: a.act(player, v, HIT)),
        ("STALE_VERSION", lambda v: a.act(player, v, split)),  # refused on the copy first
        ("STALE_VERSION", lambda v: a.rounds.Act(round_pb2.ActRequest(
            player_id=player, round_id=v.round_id, hand_id=v.turn.hand_id + 5, action=STAND,
            expected_version=v.version, request_id=Client.rid()))),
        ("NOT_FOUND", lambda v: a.act("thief", v, STAND)),
    ]
    rounds = 0
    tried = 0
    while tried < len(attempts):
        view = a.start(player, "snap", [1000])  # a holds the round now
        rounds += 1
        if view.status != AWAITING or view.turn.decision != rt.DECISION_PLAY:
            view = a.play_out(player, view)
            continue
        moved = b.act(player, view, HIT)  # b moves it on; a still holds the old version
        reason, attempt = attempts[tried]
        with pytest.raises(grpc.RpcError) as info:
            attempt(view)
        if reason == "NOT_FOUND":
            assert info.value.code() is grpc.StatusCode.NOT_FOUND, info.value
        else:
            assert error_info(info.value).reason == reason, info.value
        assert decisions(two, view.round_id) == moved.version
        same_round(moved, a.get(player, view.round_id))
        tried += 1
        same_round(a.play_out(player, moved), b.get(player, view.round_id))
    settled(two, tmp_path, rounds)


def test_a_process_sigkilled_mid_play_while_the_other_plays_on(
        two: ServerProcess, tmp_path: Path) -> None:
    """Players play through both processes at once, each on its own player and sometimes on
    the round another process moved last; one process is SIGKILLed mid-play. Every call is
    retried with its request id until answered: nothing acknowledged is lost or taken twice,
    and everything settles, balanced and audited."""
    spread = channels_on_each_worker(two)
    victim = next(iter(spread))
    channels = [group[0] for group in spread.values()]
    players = [f"kill-{i}" for i in range(4)]
    setup = Client(channels[0])
    for p in players:
        setup.deposit(p, 10_000_000)
    answers: dict[str, list[rt.RoundView]] = {p: [] for p in players}
    errors: list[BaseException] = []
    halfway = threading.Barrier(len(players) + 1)

    def answered(call: Callable[[], rt.RoundView]) -> rt.RoundView:
        while True:
            try:
                return call()
            except grpc.RpcError as err:
                if err.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise
                threading.Event().wait(0.05)

    def play(i: int) -> None:
        player = players[i]
        try:
            for n in range(ROUNDS):
                if n == ROUNDS // 2:
                    halfway.wait(timeout=120)
                client = Client(channels[(i + n) % 2])
                view = answered(partial(client.start, player, "double-deck", [1000],
                                            request_id=Client.rid()))
                answers[player].append(view)
                k = 0
                while view.status == AWAITING:
                    client = Client(channels[(i + n + k) % 2])  # alternate the processes
                    view = answered(partial(client.act, player, view, simple_action(view),
                                            request_id=Client.rid()))
                    answers[player].append(view)
                    k += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=play, args=(i,)) for i in range(len(players))]
    for thread in threads:
        thread.start()
    halfway.wait(timeout=120)
    threading.Event().wait(0.02)  # mid-play: the others are in their calls
    os.kill(victim, signal.SIGKILL)
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    rounds = 0
    for player, views in answers.items():
        final: dict[str, rt.RoundView] = {}
        for v in views:
            final[v.round_id] = v
        rounds += len(final)
        for round_id, last in final.items():
            assert last.status != AWAITING
            same_round(last, answered(partial(setup.get, player, round_id)))
    settled(two, tmp_path, rounds)



SNAP_OPEN = stack("snap", [["TS", "9H"]], ["7D", "TC"])  # 19 against a 7: the player decides
SNAP_BLACKJACK = stack("snap", [["AS", "KH"]], ["9D", "7C"])  # settles at once


@pytest.fixture(params=["sqlite", "postgresql"])
def two_stacked(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    url = str(request.getfixturevalue("pg_url")) if request.param == "postgresql" else None
    server = ServerProcess(tmp_path / "data", processes=2, database_url=url).start()
    yield server
    status = server.stop()
    log = server.log()
    assert status == 0, log[-4000:]
    assert "Traceback" not in log, log[-4000:]


def open_round_shoe_is_sealed(server: ServerProcess, player: str) -> None:
    """The player's open round (if any) deals from a shoe in play, not revealed."""
    for (shoe_id,) in server.sql("SELECT shoe_id FROM rounds WHERE player = ? AND "
                                 "status = 'open'", player):
        assert server.sql("SELECT status FROM shoes WHERE shoe_id = ?", shoe_id) == [
            ("in_play",)]
        assert server.sql("SELECT COUNT(*) FROM reveals WHERE shoe_id = ?", shoe_id) == [(0,)]


def test_starts_that_settle_at_once_race_an_open_round_across_processes(
        two_stacked: ServerProcess, tmp_path: Path) -> None:
    """A start whose deal settles at once is stored finished, outside the unique index on open
    rounds: through the other process, while a round is open, it is refused ROUND_IN_PROGRESS
    and the open round's shoe stays sealed; raced against starts that open a round, at most
    one round is open, every refusal names ROUND_IN_PROGRESS and the open shoe is never
    revealed."""
    server = two_stacked
    spread = channels_on_each_worker(server)
    a, b = (Client(group[0]) for group in spread.values())
    player = "settler"
    a.deposit(player, 10_000_000)
    queue = server.stack_dir / "queue"
    rounds = 0
    # one after the other: a holds the open round, b is asked for a blackjack
    server.stack(SNAP_OPEN)
    view = a.start(player, "snap", [1000])
    rounds += 1
    assert view.status == AWAITING
    server.stack(SNAP_BLACKJACK)
    for client in (b, a):
        with pytest.raises(grpc.RpcError) as info:
            client.start(player, "snap", [1000])
        assert error_info(info.value).reason == "ROUND_IN_PROGRESS", info.value
        open_round_shoe_is_sealed(server, player)
    same_round(b.play_out(player, view), a.get(player, view.round_id))
    # raced
    for _ in range(4):
        for leftover in queue.glob("*.json"):
            leftover.unlink()
        for cards in (SNAP_BLACKJACK, SNAP_OPEN, SNAP_BLACKJACK, SNAP_OPEN):
            server.stack(cards)
        results = at_once(*[partial(c.start, player, "snap", [1000]) for c in (a, b, a, b)])
        views = [r for r in results if isinstance(r, rt.RoundView)]
        assert views, results
        for r in results:
            assert isinstance(r, rt.RoundView) or refused(r, "ROUND_IN_PROGRESS"), r
        open_views = [v for v in views if v.status == AWAITING]
        assert len(open_views) <= 1, open_views
        open_round_shoe_is_sealed(server, player)
        rounds += len(views)
        for v in views:
            same_round(v, b.get(player, v.round_id))
        for v in open_views:
            a.play_out(player, v)
    settled(server, tmp_path, rounds, audit=False)  # stacked: see settled()
