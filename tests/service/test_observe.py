"""The round service's observer: events only after a commit, each round's money once, nothing
for a replayed idempotent answer or a refused request; transaction timings."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from support.engine_helpers import stack
from support.service_helpers import EUR, OP, Harness

from game_math.round import Action, HandBet, Round
from rng_service.core.errors import IllegalState
from rng_service.service.observe import (
    Event,
    RoundFinished,
    RoundStarted,
    ShoeOpened,
    ShoeRevealed,
    TimedStorage,
    WagerTotals,
)
from rng_service.service.ports import Mode
from rng_service.service.rounds import RoundService
from rng_service.service.views import RoundView

SNAP_19_V_17 = stack("snap", [["TS", "9H"]], ["7D", "TC"])


class Recorder:
    """An observer keeping every committed batch and every transaction timing."""

    def __init__(self) -> None:
        self.batches: list[list[Event]] = []
        self.transactions: list[tuple[str, float, str]] = []

    def committed(self, events: Sequence[Event]) -> None:
        self.batches.append(list(events))

    def transaction(self, kind: str, seconds: float, outcome: str) -> None:
        self.transactions.append((kind, seconds, outcome))

    def events(self) -> list[Event]:
        return [e for batch in self.batches for e in batch]


@pytest.fixture
def observed(harness: Harness) -> tuple[Harness, Recorder]:
    recorder = Recorder()
    harness.rounds = RoundService(TimedStorage(harness.storage, recorder), vault=harness.vault,
                                  signer=harness.signer, shoe_source=harness.shoes,
                                  observer=recorder)
    return harness, recorder


def start(h: Harness, *, request_id: str, bet: int = 1000) -> RoundView:
    return h.rounds.start_round(OP, "ann", "snap", mode=Mode.REAL, currency=EUR,
                                hands=[HandBet(bet)], request_id=request_id)


def test_a_round_reports_its_start_and_its_final_money_once(
        observed: tuple[Harness, Recorder]) -> None:
    h, rec = observed
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h, request_id="start-1")
    assert rec.batches == [[ShoeOpened("snap"), RoundStarted("snap", "REAL")]]
    assert start(h, request_id="start-1") == view  # a replayed answer: nothing new
    assert len(rec.batches) == 1
    done = h.rounds.act(OP, view.round_id, Action("stand"), expected_version=1,
                        request_id="act-1")
    h.rounds.act(OP, view.round_id, Action("stand"), expected_version=1, request_id="act-1")
    finished = [e for e in rec.events() if isinstance(e, RoundFinished)]
    assert finished == [RoundFinished("snap", "REAL", "finished",
                                      {"main": WagerTotals(1, 1000, 2000)})]
    assert done.total_staked == 1000 and done.total_returned == 2000
    assert ShoeRevealed("snap") in rec.events()  # snap deals one round per shoe
    (staked, returned), = h.sql(
        "SELECT SUM(CASE kind WHEN 'stake' THEN amount END), "
        "SUM(CASE kind WHEN 'return' THEN amount END) FROM ledger_entries WHERE round_id = ?",
        view.round_id)
    assert (staked, returned) == (1000, 2000)


def test_a_refused_request_reports_nothing(observed: tuple[Harness, Recorder]) -> None:
    h, rec = observed
    h.deposit("ann", 500)
    with pytest.raises(IllegalState):
        start(h, request_id="too-much")
    assert rec.batches == []
    # rolled back, then the request's stored answer looked for (there is none)
    assert [(kind, outcome) for kind, _, outcome in rec.transactions[-2:]] == [
        ("write", "error"), ("read", "ok")]


def test_recovery_reports_the_round_it_finishes(observed: tuple[Harness, Recorder]) -> None:
    h, rec = observed
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h, request_id="start-1")
    (state,), = h.sql("SELECT state FROM rounds WHERE round_id = ?", view.round_id)
    rnd = Round.from_bytes(state, h.shoes.stacked_cards(view.shoe.shoe_id))
    rnd.act(Action("stand"))
    h.sql("UPDATE rounds SET state = ? WHERE round_id = ?", rnd.to_bytes(), view.round_id)
    assert h.rounds.recover().completed_rounds == (view.round_id,)
    assert RoundFinished("snap", "REAL", "finished",
                         {"main": WagerTotals(1, 1000, 2000)}) in rec.batches[-1]
    h.rounds.recover()  # nothing left to do: nothing reported
    assert sum(isinstance(e, RoundFinished) for e in rec.events()) == 1


def test_transactions_are_timed_by_kind_and_outcome(observed: tuple[Harness, Recorder]) -> None:
    h, rec = observed
    h.rounds.get_next_shoe(OP, "ann", "snap", mode=Mode.REAL)
    h.rounds.list_rounds(OP, "ann")
    kinds = [(kind, outcome) for kind, _, outcome in rec.transactions]
    assert kinds == [("write", "ok"), ("read", "ok")]
    assert all(seconds >= 0 for _, seconds, _ in rec.transactions)


def test_storage_sizes_are_the_row_counts(observed: tuple[Harness, Recorder]) -> None:
    h, _ = observed
    sequencer = getattr(h.storage, "_sequencer", None)
    if sequencer is not None:
        sequencer.stop()  # PostgreSQL: what this test logs stays queued, and is counted
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h, request_id="start-1")
    h.rounds.act(OP, view.round_id, Action("stand"), expected_version=1, request_id="act-1")
    with pytest.raises(IllegalState):  # refused inside its transaction: rolled back
        h.wallet.withdraw(OP, "ann", EUR, 1_000_000, request_id=h.rid())
    h.deposit("ann", 500)  # the next row after a rollback leaves no gap
    counts = {table: h.sql(f"SELECT COUNT(*) FROM {table}")[0][0]
              for table in ("ledger_entries", "records", "reveals", "rng_draws", "log_queue")}
    assert h.storage.sizes() == {
        "ledger_entries": counts["ledger_entries"], "round": counts["records"],
        "shoe_reveal": counts["reveals"], "rng": counts["rng_draws"],
        "rng_reveal": counts["rng_draws"], "log_queued": counts["log_queue"]}
    # PostgreSQL queues the leaves (key, shoe commitment, record, reveal); SQLite sequences them
    assert counts["log_queue"] == (0 if sequencer is None else 4)
    assert counts["ledger_entries"] == 4 and counts["records"] == 1
