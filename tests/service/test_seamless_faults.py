"""The seamless wallet's faults, on each of the reference wallet's faces (gRPC and signed HTTP
JSON), on SQLite and PostgreSQL: a stake's debit or a credit that meets a timeout, a malformed
answer, a reset connection or a wallet that is down, and a wallet down for a quarter of an hour,
run through the dispatcher's clock. Whatever the fault, the wallet's own ledger ends holding
what the rounds' records say, each movement applied once."""

from __future__ import annotations

import calendar
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.seamless_helpers import (
    SNAP_19_V_17,
    TIMEOUT_MS,
    Seamless,
    audit,
    ref_wallet,
    seamless,
    settle,
    unsettled,
    void_unstarted,
    wallet,
)
from support.service_helpers import OP

from rng_service.core.errors import Unavailable
from rng_service.service.dispatcher import OutboxDispatcher

__all__ = ["ref_wallet", "seamless", "wallet"]  # the fixtures this module's tests use

#: the operator's timeout while the wallet is slower than it, and the wallet's delay
SHORT_TIMEOUT_MS, LATE_MS = 250, 1000

#: what the wallet does with the stake's debit (none of them answers it)
START_FAULTS: dict[str, dict[str, Any]] = {
    "timeout": {"latency_ms": LATE_MS},  # applies it once the caller has given up
    "malformed": {"malformed": True},    # applies it, answers OK with no result
    "reset": {"reset": True},            # the connection reset: the wallet exits, down
    "down": {},                          # not running at all
}


def _inject(s: Seamless, fault: str, faults: dict[str, Any], method: str) -> None:
    if fault == "down":
        s.wallet.stop()
    else:
        s.wallet.faults(**faults, methods=[method])
    if fault == "timeout":
        s.configure(SHORT_TIMEOUT_MS)


def _heal(s: Seamless) -> None:
    """The wallet answers again, as configured at first."""
    s.wallet.faults()
    s.configure(TIMEOUT_MS)
    if not s.wallet.running():
        s.wallet.start()


def _statement(s: Seamless) -> dict[str, dict[str, Any]]:
    """The wallet's transactions of the player, by id."""
    return {t["transaction_id"]: t for t in s.wallet.transactions() if t["player"] == s.player}


def _delivered(s: Seamless, transaction_id: str) -> None:
    """Wait until a call the wallet is still working on (past its caller's timeout) has reached
    its ledger."""
    bound = time.monotonic() + 30
    while _statement(s).get(transaction_id, {}).get("calls", 0) < 1:
        assert time.monotonic() < bound, "the late debit never reached the wallet"
        time.sleep(0.05)


@pytest.mark.parametrize("fault", sorted(START_FAULTS))
def test_a_stake_the_wallet_does_not_answer_is_rolled_back_and_the_round_ends_void(
        seamless: Seamless, fault: str, tmp_path: Path) -> None:
    """The start is UNAVAILABLE (its retry too), no card is dealt, the stake's rollback is sent
    until the wallet takes it, and the wallet ends as it began: the debit never applied, or
    applied and rolled back, or (a timeout) arriving after its rollback and moving nothing."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    _inject(s, fault, START_FAULTS[fault], "Debit")
    for _ in range(2):
        with pytest.raises(Unavailable) as info:
            s.start(request_id="unanswered")
        assert info.value.reason == "WALLET_UNCERTAIN"
    _heal(s)
    settle(s)
    (debit_id,), = h.sql("SELECT transaction_id FROM wallet_movements WHERE kind = 'debit' "
                         "AND player = ?", s.player)
    if fault == "timeout":
        _delivered(s, debit_id)
    assert s.movements() == [("debit", "rolled_back", 1000), ("rollback", "acked", 1000)]
    void_unstarted(s, 1000)
    assert audit(h, tmp_path) == []
    statement = _statement(s)
    assert statement[debit_id]["state"] == "rolled_back"
    assert sum(t["applied"] for t in statement.values()) == 0
    assert s.wallet.balance(s.player) == 5000


#: what the wallet does with a credit (none of them answers it)
CREDIT_FAULTS: dict[str, dict[str, Any]] = {
    "timeout": {"latency_ms": LATE_MS},
    "malformed": {"malformed": True},
    "reset": {"reset": True},
    "down": {},
}


@pytest.mark.parametrize("fault", sorted(CREDIT_FAULTS))
def test_a_credit_the_wallet_does_not_answer_is_sent_again_and_paid_once(
        seamless: Seamless, fault: str) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_19_V_17)
    view = h.act(s.start(), "stand")
    _inject(s, fault, CREDIT_FAULTS[fault], "Credit")
    assert s.dispatcher.run_once() == 1
    (credit_id, state, attempts, cause), = h.sql(
        "SELECT transaction_id, state, attempts, reason FROM wallet_movements "
        "WHERE kind = 'credit' AND player = ?", s.player)
    assert (state, attempts) == ("pending", 1) and cause  # due again, with why
    assert h.rounds.get_round(OP, view.round_id).credit.state == "pending"  # type: ignore[union-attr]
    _heal(s)
    if fault == "timeout":  # the first call arrives late, and is applied
        _delivered(s, credit_id)
    settle(s)
    assert s.movements()[1] == ("credit", "acked", 2000)
    credit = _statement(s)[credit_id]
    assert credit["applied"] == 2000 and s.wallet.balance(s.player) == 6000
    # every call that reached the wallet came under the one id: those faults that let the
    # first call through had it applied, and its retry answered as the first, moving nothing
    assert credit["calls"] == (2 if fault in {"timeout", "malformed"} else 1)
    assert s.wallet.net(view.round_id) == view.total_returned - view.total_staked
    assert h.rounds.get_round(OP, view.round_id).credit.state == "acknowledged"  # type: ignore[union-attr]


def _ns(stamp: str) -> int:
    """Nanoseconds since the epoch of a stored stamp."""
    at = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")  # UTC, as stored
    return (calendar.timegm(at.timetuple()) * 1_000_000 + at.microsecond) * 1000


class _Clock:
    """The dispatcher's clock, moved by the test."""

    def __init__(self) -> None:
        self.ns = time.time_ns()

    def __call__(self) -> int:
        return self.ns


#: the outage, in the dispatcher's time
OUTAGE_S = 15 * 60
#: the documented backoff after the 1st, 2nd ... failed attempt; 30 s from the 9th on
BACKOFF_S = [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6]
BACKOFF_CAP_S = 30.0


def test_a_wallet_down_for_minutes_gets_every_movement_once_it_is_back(seamless: Seamless
                                                                       ) -> None:
    """The wallet goes down before the credits of the player's last rounds are sent, one of
    them finishing while it is down, and a start is then refused: the credits and the start's
    rollback wait in the outbox for a quarter of an hour (the dispatcher's clock moved from one
    due attempt to the next), each tried again after 0.2 s, doubling to 30 s and staying
    there, and never before it is due; none is dropped. Once the wallet is back, each is
    applied once and every round's net in the wallet is what its record says."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 100_000)
    done = [h.play_out(s.start()) for _ in range(2)]
    last = s.start()
    s.wallet.stop()
    done.append(h.play_out(last))
    with pytest.raises(Unavailable):
        s.start()
    clock = _Clock()
    dispatcher = OutboxDispatcher(h.storage, s.wallets, clock=clock)
    began, gaps = clock.ns, dict[str, list[float]]()

    def waiting() -> dict[str, tuple[int, int]]:
        """The pending movements: (attempts, next attempt's ns), by id."""
        return {t: (a, _ns(n)) for t, a, n in h.sql(
            "SELECT transaction_id, attempts, next_attempt_at FROM wallet_movements "
            "WHERE player = ? AND state = 'pending'", s.player)}

    while clock.ns - began < OUTAGE_S * 1e9:
        before = waiting()
        assert len(before) == 4  # three credits and a rollback: none dropped
        due = min(n for _, n in before.values())
        if due - 1000 > clock.ns:  # a microsecond early: nothing is sent
            clock.ns = due - 1000
            assert dispatcher.run_once() == 0
        clock.ns = max(clock.ns, due)
        sent = dispatcher.run_once()
        after = waiting()
        tried = [t for t in after if after[t][0] != before[t][0]]
        assert sent == len(tried) >= 1
        for t in tried:
            attempts, next_ns = after[t]
            assert attempts == before[t][0] + 1
            gaps.setdefault(t, []).append(round((next_ns - clock.ns) / 1e9, 5))
    for t, seen in gaps.items():
        attempts = waiting()[t][0]
        expected = [BACKOFF_S[n - 1] if n <= len(BACKOFF_S) else BACKOFF_CAP_S
                    for n in range(attempts - len(seen) + 1, attempts + 1)]
        assert seen == pytest.approx(expected, abs=1e-5)
        assert seen.count(BACKOFF_CAP_S) >= 20  # the cap held for minutes
    for view in done:
        assert h.rounds.get_round(OP, view.round_id).credit.state == "pending"  # type: ignore[union-attr]
    assert not [t for t in s.wallet.transactions() if t["kind"] != "debit"
                and t["player"] == s.player]  # nothing reached it

    s.wallet.start()
    bound = time.monotonic() + 60
    while unsettled(s):  # the next due attempts find it back
        assert time.monotonic() < bound, f"not settled: {unsettled(s)}"
        clock.ns = max([clock.ns, *(n for _, n in waiting().values())])
        if not dispatcher.run_once():
            time.sleep(0.05)
    for view in done:
        assert h.rounds.get_round(OP, view.round_id).credit.state == "acknowledged"  # type: ignore[union-attr]
        credit, = [t for t in s.wallet.transactions(view.round_id) if t["kind"] == "credit"]
        assert (credit["applied"], credit["calls"]) == (view.total_returned, 1)
        assert s.wallet.net(view.round_id) == view.total_returned - view.total_staked
    assert [k for k, st, _ in s.movements() if st not in {"acked", "rolled_back"}] == []
    assert s.wallet.balance(s.player) == 100_000 + sum(
        v.total_returned - v.total_staked for v in done)
