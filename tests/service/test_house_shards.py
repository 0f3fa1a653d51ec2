"""The sixteen house accounts against rounds begun on the single ``@house`` (before the split),
and a posting refused after a transition's round, shoe, record and reveal writes (the money is
now posted last): every case to the minor unit, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import psycopg
import pytest
from support.engine_helpers import stack
from support.service_helpers import EUR, OP, Harness, ledger_invariants

from game_math.round import Action, HandBet, Round
from rng_service.core.errors import Conflict, IllegalState
from rng_service.service import ledger
from rng_service.service.ports import HOUSE, Mode, house_of
from rng_service.service.views import RoundView

#: a pair of eights against a six: split, double the first hand, stand the second
SPLIT_EIGHTS = stack("double-deck", [["8S", "8H"]], ["6D", "TC", "TH"], ["3C", "TD", "9S"])
SNAP_19_V_17 = stack("snap", [["TS", "9H"]], ["7D", "TC"])
T = TypeVar("T")
TABLES = ("rounds", "shoes", "records", "reveals", "log_leaves", "log_state", "ledger_entries",
          "accounts", "idempotency")


def _start_on_the_single_house(h: Harness, monkeypatch: pytest.MonkeyPatch, game: str
                               ) -> RoundView:
    """A round started as before the split: its stakes on ``@house`` itself."""
    with monkeypatch.context() as m:
        m.setattr(ledger, "house_of", lambda round_id: HOUSE)
        view = h.rounds.start_round(OP, "ann", game, mode=Mode.REAL, currency=EUR,
                                    hands=[HandBet(1000)], request_id=h.rid())
    assert h.sql("SELECT DISTINCT target FROM ledger_entries WHERE round_id = ?",
                 view.round_id) == [(HOUSE,)]
    return view


def _house_total(h: Harness) -> int:
    (total,), = h.sql("SELECT COALESCE(SUM(balance), 0) FROM accounts WHERE "
                      "substr(holder, 1, 6) = '@house'")
    return int(total)


@pytest.mark.parametrize("cached", [True, False])
def test_a_round_begun_on_the_single_house_splits_doubles_and_settles_to_the_unit(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, cached: bool) -> None:
    """Its later stakes and its returns go to its shard; the player and the house (all its
    accounts) end exactly where the round's money says, whether the transition knows what was
    posted (cache) or reads the entries (a restart)."""
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SPLIT_EIGHTS)
    view = _start_on_the_single_house(h, monkeypatch, "double-deck")
    if not cached:
        h.reopen()
    for action in (Action("split"), Action("double", 1000), Action("stand")):
        view = h.act(view, action)
        if not cached:
            h.reopen()
    assert view.status == "finished"
    shard = house_of(view.round_id)
    rows = h.sql("SELECT kind, source, target, amount FROM ledger_entries WHERE round_id = ? "
                 "ORDER BY entry_id", view.round_id)
    assert rows[0] == ("stake", "ann", HOUSE, 1000)
    assert all(HOUSE in (src, dst) or shard in (src, dst) for _, src, dst, _ in rows)
    assert all(shard in (src, dst) for _, src, dst, _ in rows[1:])
    staked = sum(a for k, _, _, a in rows if k == "stake")
    returned = sum(a for k, _, _, a in rows if k == "return")
    assert staked == 3000  # the opening 1000, the split's 1000, the double's 1000
    assert view.balance_after == h.balance("ann") == 10_000 - staked + returned
    assert _house_total(h) == staked - returned
    ledger_invariants(h)


def test_a_round_begun_on_the_single_house_is_voided_to_the_unit(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("double-exposure", [["TS", "6H"]], ["7D", "TC"], ["2C"]))
    view = _start_on_the_single_house(h, monkeypatch, "double-exposure")
    view = h.act(view, "hit")
    void = h.rounds.void_round(OP, view.round_id, reason="table fault",
                               expected_version=view.version, request_id=h.rid())
    assert (void.status, void.balance_after) == ("void", 10_000)
    assert h.sql("SELECT source, amount FROM ledger_entries WHERE round_id = ? AND "
                 "kind = 'return'", view.round_id) == [(house_of(view.round_id), 1000)]
    assert _house_total(h) == 0
    ledger_invariants(h)


def test_a_round_begun_on_the_single_house_is_completed_by_recovery(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = _start_on_the_single_house(h, monkeypatch, "snap")
    (state,), = h.sql("SELECT state FROM rounds WHERE round_id = ?", view.round_id)
    rnd = Round.from_bytes(state, h.shoes.stacked_cards(view.shoe.shoe_id))
    rnd.act(Action("stand"))  # a crash after the decision was stored, before what follows
    h.sql("UPDATE rounds SET state = ? WHERE round_id = ?", rnd.to_bytes(), view.round_id)
    h.reopen()
    assert h.rounds.recover().completed_rounds == (view.round_id,)
    assert h.balance("ann") == 11_000 and _house_total(h) == -1000
    assert h.sql("SELECT kind, source, target, amount FROM ledger_entries WHERE round_id = ? "
                 "ORDER BY entry_id", view.round_id) == [
        ("stake", "ann", HOUSE, 1000), ("return", house_of(view.round_id), "ann", 2000)]
    ledger_invariants(h)


def _dump(h: Harness) -> dict[str, list[str]]:
    h.storage.integrate_log()  # PostgreSQL queues the leaves: compare the log as merged
    return {t: sorted(map(repr, h.sql(f"SELECT * FROM {t}"))) for t in TABLES}


def test_a_refused_double_that_would_end_the_round_writes_nothing_and_retries_afresh(
        harness: Harness) -> None:
    """The double ends the round (record, log leaf, shoe moved, perhaps revealed) before its
    stake is posted and refused: every table is as before, the round plays on, and the same
    request id, once the money is there, doubles exactly once."""
    h = harness
    h.deposit("ann", 2000)
    h.shoes.stack(SNAP_19_V_17)
    view = h.rounds.start_round(OP, "ann", "snap", mode=Mode.REAL, currency=EUR,
                                hands=[HandBet(1000)], request_id=h.rid())
    h.wallet.withdraw(OP, "ann", EUR, 1000, request_id=h.rid())
    before = _dump(h)
    for _ in range(2):  # the refusal stores nothing: refused again, evaluated afresh
        with pytest.raises(IllegalState) as info:
            h.rounds.act(OP, view.round_id, Action("double", 1000), hand_id=view.turn_hand,
                         expected_version=view.version, request_id="double-1")
        assert info.value.reason == "INSUFFICIENT_FUNDS"
        assert _dump(h) == before
    assert not h.rounds._cache.has_round(OP, view.round_id)
    h.deposit("ann", 1000)
    done = h.rounds.act(OP, view.round_id, Action("double", 1000), hand_id=view.turn_hand,
                        expected_version=view.version, request_id="double-1")
    again = h.rounds.act(OP, view.round_id, Action("double", 1000), hand_id=view.turn_hand,
                         expected_version=view.version, request_id="double-1")
    assert done == again and done.status == "finished"
    (returned,), = h.sql("SELECT COALESCE(SUM(amount), 0) FROM ledger_entries WHERE "
                         "round_id = ? AND kind = 'return'", view.round_id)
    assert done.balance_after == h.balance("ann") == 2000 - 1000 + 1000 - 2000 + returned
    after = _dump(h)  # what the refused transition would have written before its posting
    assert len(after["records"]) == len(before["records"]) + 1
    assert len(after["log_leaves"]) > len(before["log_leaves"])
    ledger_invariants(h)


def test_concurrent_first_rounds_on_new_house_accounts_do_not_deadlock(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds of two players in three games each start together on a house account that does
    not exist yet (as on each of the sixteen once per operator, currency and mode), while each
    player deposits and withdraws: the account is created once, nothing deadlocks (a posting
    that found it missing held the player's row while it created it: out of holder order), any
    other race is a retryable Conflict, and the ledger balances to the unit."""
    h = harness
    players, games = ["ann", "bob"], ("snap", "double-deck", "multi-hand")
    for p in players:
        h.deposit(p, 100_000)
    failures: list[BaseException] = []
    conflicts: list[Conflict] = []

    def retried(call: Callable[[], T]) -> T:
        while True:
            try:
                return call()
            except Conflict as exc:
                conflicts.append(exc)

    def in_thread(barrier: threading.Barrier, work: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                barrier.wait()
                work()
            except BaseException as exc:
                failures.append(exc)
        return threading.Thread(target=run)

    def a_round(player: str, game: str) -> None:
        h.play_out(retried(lambda: h.rounds.start_round(
            OP, player, game, mode=Mode.REAL, currency=EUR, hands=[HandBet(1000)],
            request_id=h.rid())))

    def moves(player: str) -> None:
        for _ in range(2):
            retried(lambda: h.wallet.deposit(OP, player, EUR, 7, request_id=h.rid()))
            retried(lambda: h.wallet.withdraw(OP, player, EUR, 3, request_id=h.rid()))

    for shard in range(4):
        house = f"{HOUSE}/{shard:02d}"
        monkeypatch.setattr(ledger, "house_of", lambda round_id, house=house: house)
        barrier = threading.Barrier(len(players) * (len(games) + 1))
        threads = [in_thread(barrier, lambda p=p, g=g: a_round(p, g))
                   for p in players for g in games]
        threads += [in_thread(barrier, lambda p=p: moves(p)) for p in players]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures
    deadlocks = [str(c.__cause__) for c in conflicts
                 if isinstance(c.__cause__, psycopg.errors.DeadlockDetected)]
    assert not deadlocks, deadlocks
    assert h.sql("SELECT count(*) FROM rounds WHERE status = 'open'") == [(0,)]
    assert h.sql("SELECT count(*) FROM accounts WHERE substr(holder, 1, 6) = '@house'") == [(4,)]
    for p in players:
        assert h.balance(p) == 100_000 + 2 * 4 * (7 - 3) + sum(
            a if dst == p else -a for dst, a in h.sql(
                "SELECT target, amount FROM ledger_entries WHERE round_id IS NOT NULL AND "
                "(source = ? OR target = ?)", p, p))
    ledger_invariants(h)
