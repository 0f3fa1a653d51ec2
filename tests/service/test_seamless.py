"""Rounds on an operator's seamless wallet: the reference operator wallet runs as its own process
and is called over each transport, gRPC and signed HTTPS JSON (its HTTP face, plain HTTP); the
service runs on SQLite and PostgreSQL. For every outcome of the stake's debit (accepted,
rejected, uncertain: a timeout, an error status, a lost or malformed answer, a reset, the wallet
down; the call dying before it recorded the answer) and of a credit, the wallet's own ledger is
checked: what the round moved there is what its record says, or nothing for a round never
dealt."""

from __future__ import annotations

import threading
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support.engine_helpers import stack
from support.seamless_helpers import (
    SNAP_19_V_17,
    Seamless,
    audit,
    record,
    ref_wallet,
    rounds_stored,
    seamless,
    void_unstarted,
    wallet,
)
from support.service_helpers import EUR, OP, Harness

from game_math.round import Action, HandBet
from rng_service.api.wallet_clients import WalletClients
from rng_service.core.errors import IllegalState, InvalidInput, Unavailable
from rng_service.crypto.signing import decode_envelope
from rng_service.service import outbox
from rng_service.service.dispatcher import OutboxDispatcher
from rng_service.service.operator_wallet import Accepted, Purpose, WalletConfig
from rng_service.service.ports import Mode, MovementState
from rng_service.service.rounds import RoundService
from rng_service.service.views import CreditView, RoundView
from rng_service.storage import open_storage

__all__ = ["ref_wallet", "seamless", "wallet"]  # the fixtures this module's tests use

def test_a_round_is_debited_before_the_deal_and_credited_at_its_end(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_19_V_17)
    view = s.start()
    assert view.status == "awaiting" and view.balance_after == 4000
    assert s.wallet.balance(s.player) == 4000
    assert s.movements() == [("debit", "acked", 1000)]
    done = h.act(view, "stand")
    assert (done.status, done.total_staked, done.total_returned) == ("finished", 1000, 2000)
    assert s.movements() == [("debit", "acked", 1000), ("credit", "pending", 2000)]
    (credit_id,), = h.sql("SELECT transaction_id FROM wallet_movements WHERE round_id = ? AND "
                          "kind = 'credit'", view.round_id)
    # finished at once, its credit shown pending (and the balance the wallet last gave)
    assert done.credit == CreditView(credit_id, 2000, "pending") and done.balance_after == 4000
    assert h.rounds.get_round(OP, view.round_id).credit == done.credit
    assert s.dispatcher.run_once() == 1
    assert s.movements()[1] == ("credit", "acked", 2000)
    assert s.wallet.balance(s.player) == 6000
    paid = h.rounds.get_round(OP, view.round_id)
    assert paid.credit == CreditView(credit_id, 2000, "acknowledged")
    assert paid.balance_after == 6000
    assert s.wallet.net(view.round_id) == done.total_returned - done.total_staked
    credit = s.wallet.transactions(view.round_id)[1]
    debit_id = s.wallet.transactions(view.round_id)[0]["transaction_id"]
    assert credit["kind"] == "credit" and credit["reference"] == debit_id
    # the internal ledger holds nothing of it; the signed record has the round's money
    assert h.sql("SELECT count(*) FROM ledger_entries WHERE round_id = ?", view.round_id
                 ) == [(0,)]
    (envelope,), = h.sql("SELECT envelope FROM records WHERE round_id = ?", view.round_id)
    payload = decode_envelope(bytes(envelope))["payload"]
    assert (payload["total_staked"], payload["total_returned"]) == (1000, 2000)
    assert s.dispatcher.run_once() == 0  # nothing is sent twice


#: for a test of what the database and the dispatcher do whatever the transport (which calls
#: no wallet, or whose point is the outbox's rows): on the gRPC face only
ONE_TRANSPORT = pytest.mark.parametrize("ref_wallet", ["grpc"], indirect=True)

SNAP_17_V_19 = stack("snap", [["TS", "7H"]], ["9D", "TC"])


def test_a_lost_round_is_closed_by_a_credit_of_0_naming_its_debit(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_17_V_19)
    done = h.act(s.start(), "stand")
    assert (done.status, done.total_staked, done.total_returned) == ("finished", 1000, 0)
    assert done.credit is not None and (done.credit.amount, done.credit.state) == (0, "pending")
    assert s.dispatcher.run_once() == 1
    debit, credit = s.wallet.transactions(done.round_id)
    assert (credit["kind"], credit["amount"], credit["applied"]) == ("credit", 0, 0)
    assert credit["reference"] == debit["transaction_id"]
    assert s.movements() == [("debit", "acked", 1000), ("credit", "acked", 0)]
    assert s.wallet.balance(s.player) == 4000 and s.wallet.net(done.round_id) == -1000


def test_a_retried_start_is_the_same_round_and_one_debit(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_19_V_17)
    first = s.start(request_id="start-1")
    assert s.start(request_id="start-1") == first
    assert [t["kind"] for t in s.wallet.transactions(first.round_id)] == ["debit"]
    with pytest.raises(InvalidInput) as info:
        s.start(500, request_id="start-1")
    assert info.value.field == "request_id"


def test_a_clean_reject_refuses_the_round_with_the_wallets_reason(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 500)
    for _ in range(2):  # the retry gets the same answer and sends nothing more
        with pytest.raises(IllegalState) as info:
            s.start(request_id="broke")
        assert info.value.reason == "INSUFFICIENT_FUNDS"
    assert rounds_stored(h) == 0 and h.sql("SELECT count(*) FROM shoes") == [(0,)]
    assert s.movements() == [("debit", "rejected", 1000)]
    mine = [t for t in s.wallet.transactions() if t["player"] == s.player]
    assert [(t["kind"], t["state"], t["applied"]) for t in mine] == [("debit", "rejected", 0)]
    assert s.wallet.balance(s.player) == 500


@pytest.mark.parametrize("reason", ["PLAYER_BLOCKED", "LIMIT_REACHED"])
def test_the_wallets_other_reasons_refuse_the_round(seamless: Seamless, reason: str) -> None:
    s = seamless
    s.wallet.fund(s.player, 5000)
    s.wallet.faults(reject=reason)
    with pytest.raises(IllegalState) as info:
        s.start()
    assert info.value.reason == reason
    assert rounds_stored(s.h) == 0 and s.wallet.balance(s.player) == 5000


def test_a_debit_applied_but_unanswered_is_rolled_back_and_no_card_dealt(
        seamless: Seamless, tmp_path: Path) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    s.wallet.faults(lose_answer=True, methods=["Debit"])
    for _ in range(2):  # the retry gets the same answer, and nothing more moves
        with pytest.raises(Unavailable) as info:
            s.start(request_id="lost")
        assert info.value.reason == "WALLET_UNCERTAIN"
    void_unstarted(s, 1000)  # the round ends void without a card dealt
    assert audit(h, tmp_path) == []
    assert s.movements() == [("debit", "rolled_back", 1000), ("rollback", "acked", 1000)]
    assert s.wallet.balance(s.player) == 5000
    kinds = [t["kind"] for t in s.wallet.transactions() if t["player"] == s.player]
    assert kinds == ["debit", "rollback"]


def test_a_wallet_that_is_down_gets_the_rollback_once_it_is_back(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    s.wallet.faults(error="UNAVAILABLE")
    with pytest.raises(Unavailable):
        s.start()
    assert s.movements() == [("debit", "uncertain", 1000), ("rollback", "pending", 1000)]
    h.sql("UPDATE wallet_movements SET next_attempt_at = '2000-01-01T00:00:00.000000Z'")
    assert s.dispatcher.run_once() == 1  # still down: due again later
    (attempts, reason), = h.sql("SELECT attempts, reason FROM wallet_movements "
                                "WHERE kind = 'rollback' AND player = ?", s.player)
    assert attempts == 2 and reason == s.unavailable
    s.wallet.faults()
    h.sql("UPDATE wallet_movements SET next_attempt_at = '2000-01-01T00:00:00.000000Z'")
    s.dispatcher.run_once()
    assert s.movements() == [("debit", "rolled_back", 1000), ("rollback", "acked", 1000)]
    assert s.wallet.balance(s.player) == 5000
    # the debit never reached the wallet: its id is remembered as rolled back, so a late
    # delivery of it moves nothing
    (debit_id,), = h.sql("SELECT transaction_id FROM wallet_movements WHERE kind = 'debit' "
                         "AND player = ?", s.player)
    late, = [t for t in s.wallet.transactions() if t["transaction_id"] == debit_id]
    assert late["state"] == "rolled_back" and late["applied"] == 0
    void_unstarted(s, 1000)
    # the player's next round deals from a new shoe (a void round finishes its own)
    h.shoes.stack(SNAP_19_V_17)
    view = s.start()
    assert view.status == "awaiting" and s.wallet.balance(s.player) == 4000


def test_a_debit_whose_call_died_is_rolled_back_by_the_dispatcher(seamless: Seamless) -> None:
    """A crash between writing the debit and recording its answer: the debit was applied, and
    after its grace the dispatcher of a restarted server rolls it back."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    debit = outbox.new_debit(operator=OP, round_id=uuid.uuid4().hex, player=s.player,
                             currency=EUR, game="snap", amount=700, purpose=Purpose.BET,
                             request_id="died", request_hash="x", grace=0)
    with h.storage.transaction() as uow:
        uow.insert_movement(debit)
    assert isinstance(outbox.send(s.wallets.client(_config(h)), debit), Accepted)
    assert s.wallet.balance(s.player) == 4300
    s.reopen()
    s.dispatcher.run_once()
    assert s.movements() == [("debit", "rolled_back", 700), ("rollback", "acked", 700)]
    assert s.wallet.balance(s.player) == 5000


def _config(h: Harness) -> WalletConfig:
    with h.storage.snapshot() as uow:
        config = uow.wallet_config(OP)
    assert config is not None
    return config


def test_a_pending_credit_survives_a_restart_and_is_sent_once(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_19_V_17)
    s.wallet.faults(error="UNAVAILABLE", methods=["Credit"])
    view = h.act(s.start(), "stand")
    assert s.movements()[1] == ("credit", "pending", 2000)
    s.reopen()
    s.wallet.faults()
    s.dispatcher.run_once()
    assert s.movements()[1] == ("credit", "acked", 2000)
    assert s.wallet.net(view.round_id) == 1000


def test_a_credit_whose_answer_is_lost_is_sent_again_under_its_id_and_paid_once(
        seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_19_V_17)
    s.wallet.faults(lose_answer=True, methods=["Credit"])
    view = h.act(s.start(), "stand")
    s.dispatcher.run_once()
    assert s.movements()[1] == ("credit", "pending", 2000)
    assert s.wallet.balance(s.player) == 6000  # applied, answer lost
    s.wallet.faults()
    h.sql("UPDATE wallet_movements SET next_attempt_at = '2000-01-01T00:00:00.000000Z'")
    s.dispatcher.run_once()
    assert s.movements()[1] == ("credit", "acked", 2000)
    assert s.wallet.balance(s.player) == 6000
    assert [t["kind"] for t in s.wallet.transactions(view.round_id)] == ["debit", "credit"]


def test_a_void_round_refunds_its_stake(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_19_V_17)
    view = s.start()
    void = h.rounds.void_round(OP, view.round_id, reason="table fault",
                               expected_version=view.version, request_id=h.rid())
    assert void.status == "void"
    s.dispatcher.run_once()
    assert s.movements() == [("debit", "acked", 1000), ("credit", "acked", 1000)]
    assert s.wallet.balance(s.player) == 5000 and s.wallet.net(view.round_id) == 0


SNAP_11_V_17_DOUBLE_TO_21 = stack("snap", [["6S", "5H"]], ["7D", "TC"], ["TS"])


def test_a_double_is_debited_before_its_card_and_the_credit_settles_both_debits(
        seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_11_V_17_DOUBLE_TO_21)
    view = s.start()
    request = h.rid()
    done = h.rounds.act(OP, view.round_id, Action("double", 1000), hand_id=view.turn_hand,
                        expected_version=view.version, request_id=request)
    assert (done.status, done.total_staked, done.total_returned) == ("finished", 2000, 4000)
    assert done.balance_after == 3000
    again = h.rounds.act(OP, view.round_id, Action("double", 1000), hand_id=view.turn_hand,
                         expected_version=view.version, request_id=request)
    assert again == done  # the retry: its first answer, no further debit
    s.dispatcher.run_once()
    assert s.movements() == [("debit", "acked", 1000), ("debit", "acked", 1000),
                             ("credit", "acked", 4000)]
    debits = [t["transaction_id"] for t in s.wallet.transactions(view.round_id)[:2]]
    credit = s.wallet.transactions(view.round_id)[2]
    assert credit["reference"] == ",".join(debits)
    assert s.wallet.net(view.round_id) == 2000 and s.wallet.balance(s.player) == 7000
    # the signed record names what the wallet's statement shows, id for id
    wallet = record(h, view.round_id)["wallet"]
    assert [(d["transaction_id"], d["purpose"], d["amount"]) for d in wallet["debits"]] == [
        (debits[0], "bet", 1000), (debits[1], "double", 1000)]
    assert wallet["credit"] == {"transaction_id": credit["transaction_id"], "amount": 4000,
                                "debits": debits}
    assert (wallet["cancelled"], wallet["rollbacks"]) == ([], [])


def test_a_rejected_double_leaves_the_round_awaiting_the_player(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 1500)
    h.shoes.stack(SNAP_11_V_17_DOUBLE_TO_21)
    view = s.start()
    for _ in range(2):  # the retry: the same refusal
        with pytest.raises(IllegalState) as info:
            h.rounds.act(OP, view.round_id, Action("double", 1000), hand_id=view.turn_hand,
                         expected_version=view.version, request_id="double-1")
        assert info.value.reason == "INSUFFICIENT_FUNDS"
    assert h.rounds.get_round(OP, view.round_id) == view
    done = h.act(view, "stand")  # the player plays on
    assert done.status == "finished" and done.total_staked == 1000


def test_an_unanswered_double_is_rolled_back_and_the_round_still_awaits(
        seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_11_V_17_DOUBLE_TO_21)
    view = s.start()
    s.wallet.faults(lose_answer=True, methods=["Debit"])
    with pytest.raises(Unavailable) as info:
        h.act(view, Action("double", 1000))
    assert info.value.reason == "WALLET_UNCERTAIN"
    s.wallet.faults()
    assert h.rounds.get_round(OP, view.round_id) == view
    assert s.movements() == [("debit", "acked", 1000), ("debit", "rolled_back", 1000),
                             ("rollback", "acked", 1000)]
    assert s.wallet.balance(s.player) == 4000
    done = h.act(view, Action("double", 1000))  # a new request: a new debit
    assert done.total_staked == 2000 and s.wallet.balance(s.player) == 3000
    # the record names the double rolled back beside the one taken
    statement = s.wallet.transactions(view.round_id)
    wallet = record(h, view.round_id)["wallet"]
    lost, rollback = statement[1], statement[2]
    assert wallet["cancelled"] == [{"transaction_id": lost["transaction_id"],
                                    "purpose": "double", "amount": 1000}]
    assert wallet["rollbacks"] == [{"transaction_id": rollback["transaction_id"],
                                    "debit": lost["transaction_id"], "amount": 1000}]
    assert [d["transaction_id"] for d in wallet["debits"]] == [
        statement[0]["transaction_id"], statement[3]["transaction_id"]]


class _Killed(BaseException):
    """The call's end as a SIGKILL would end it: nothing after this point runs."""


class _DiesAfterTheDebit:
    """A wallet directory whose debits reach the wallet, which takes them, and then the call
    dies before it records the answer."""

    def __init__(self, inner: WalletClients) -> None:
        self.inner = inner

    def client(self, config: WalletConfig) -> Any:
        wallet = self.inner.client(config)

        class Client:
            def debit(self, movement: Any) -> Any:
                wallet.debit(movement)
                raise _Killed

            def __getattr__(self, name: str) -> Any:
                return getattr(wallet, name)

        return Client()


def test_an_action_whose_call_died_after_its_debit_is_completed_by_its_retry(
        seamless: Seamless) -> None:
    """The retry of a double whose call died between the wallet taking the stake and the
    answer being recorded sends the same debit again and doubles: one debit, taken once."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_11_V_17_DOUBLE_TO_21)
    view = s.start()
    dying = RoundService(h.storage, vault=h.vault, signer=h.signer, shoe_source=h.shoes,
                         wallets=_DiesAfterTheDebit(s.wallets))
    double = partial(h.rounds.act, OP, view.round_id, Action("double", 1000),
                     hand_id=view.turn_hand, expected_version=view.version,
                     request_id="double-1")
    with pytest.raises(_Killed):
        partial(dying.act, *double.args, **double.keywords)()
    assert s.movements(view.round_id) == [("debit", "acked", 1000), ("debit", "pending", 1000)]
    assert s.wallet.balance(s.player) == 3000  # the wallet took it
    done = double()
    assert (done.status, done.total_staked, done.total_returned) == ("finished", 2000, 4000)
    assert double() == done  # and its retry is its answer
    s.dispatcher.run_once()
    assert s.movements(view.round_id) == [("debit", "acked", 1000), ("debit", "acked", 1000),
                                          ("credit", "acked", 4000)]
    assert [(t["kind"], t["calls"]) for t in s.wallet.transactions(view.round_id)] == [
        ("debit", 1), ("debit", 2), ("credit", 1)]
    assert s.wallet.net(view.round_id) == 2000 and s.wallet.balance(s.player) == 7000


class _DiesAtTheRollback(_DiesAfterTheDebit):
    """A wallet directory whose calls die as they send the first rollback."""

    def client(self, config: WalletConfig) -> Any:
        wallet = self.inner.client(config)

        class Client:
            def rollback(self, movement: Any) -> Any:
                raise _Killed

            def __getattr__(self, name: str) -> Any:
                return getattr(wallet, name)

        return Client()


def test_a_start_killed_while_rolling_back_is_voided_by_its_retry(seamless: Seamless,
                                                                  tmp_path: Path) -> None:
    """The bet's debit unanswered, the call dies sending the first rollback: every stake was
    taken as uncertain with its rollback in one transaction before it, so none waits for the
    dispatcher's grace; the retry answers as the call would have and records the void round."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    s.wallet.faults(lose_answer=True, methods=["Debit"])
    dying = RoundService(h.storage, vault=h.vault, signer=h.signer, shoe_source=h.shoes,
                         wallets=_DiesAtTheRollback(s.wallets))
    with pytest.raises(_Killed):
        dying.start_round(OP, s.player, "snap", mode=Mode.REAL, currency=EUR,
                          hands=[HandBet(1000)] * 2, side_bets=SNAP_SIDE_BET,
                          request_id="killed")
    assert sorted(s.movements()) == [("debit", "uncertain", 500), ("debit", "uncertain", 2000),
                                     ("rollback", "pending", 500), ("rollback", "pending", 2000)]
    s.wallet.faults()
    for _ in range(2):
        with pytest.raises(Unavailable) as info:
            s.start(side_bets=SNAP_SIDE_BET, hands=2, request_id="killed")
        assert info.value.reason == "WALLET_UNCERTAIN"
    void_unstarted(s, 2500)
    h.sql("UPDATE wallet_movements SET next_attempt_at = '2000-01-01T00:00:00.000000Z' "
          "WHERE state = 'pending'")  # the dead call's claims run out
    s.dispatcher.run_once()
    assert sorted(s.movements()) == [("debit", "rolled_back", 500), ("debit", "rolled_back", 2000),
                                     ("rollback", "acked", 500), ("rollback", "acked", 2000)]
    assert s.wallet.balance(s.player) == 5000
    assert audit(h, tmp_path) == []


SNAP_8S_V_17_SPLIT_TO_18S = stack("snap", [["8S", "8H"]], ["7D", "TC"], ["TS", "TD"])
SNAP_19_V_ACE = stack("snap", [["TS", "9H"]], ["AD", "7C"])
#: an action staking more, the shoe it is offered on, its further stake
FURTHER = {"split": (SNAP_8S_V_17_SPLIT_TO_18S, Action("split"), 1000),
           "insurance": (SNAP_19_V_ACE, Action("insurance", 500), 500)}


@pytest.mark.parametrize("kind", sorted(FURTHER))
def test_a_split_or_insurance_is_debited_before_it_is_applied(seamless: Seamless, kind: str
                                                              ) -> None:
    s, h = seamless, seamless.h
    cards, action, extra = FURTHER[kind]
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(cards)
    view = s.start()
    assert view.decision == ("insurance" if kind == "insurance" else "play")
    after = h.act(view, action)
    assert after.total_staked == 1000 + extra and after.balance_after == 4000 - extra
    assert s.movements() == [("debit", "acked", 1000), ("debit", "acked", extra)]
    assert s.purposes(view.round_id) == ["bet", kind]
    done = h.play_out(after)
    assert done.status == "finished"
    s.dispatcher.run_once()
    assert s.movements()[2] == ("credit", "acked", done.total_returned)
    assert s.wallet.net(view.round_id) == done.total_returned - done.total_staked
    debits = [t["transaction_id"] for t in s.wallet.transactions(view.round_id)[:2]]
    assert s.wallet.transactions(view.round_id)[2]["reference"] == ",".join(debits)


@pytest.mark.parametrize("kind", sorted(FURTHER))
def test_a_refused_split_or_insurance_leaves_the_round_awaiting_the_player(
        seamless: Seamless, kind: str) -> None:
    """Rejected, or uncertain and rolled back: the action is refused (its retry too) and the
    round is as it was; the player may then take it under a new request."""
    s, h = seamless, seamless.h
    cards, action, extra = FURTHER[kind]
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(cards)
    view = s.start()

    def act(request_id: str) -> RoundView:
        return h.rounds.act(OP, view.round_id, action, hand_id=view.turn_hand,
                            expected_version=view.version, request_id=request_id)

    s.wallet.faults(reject="LIMIT_REACHED", methods=["Debit"])
    for _ in range(2):
        with pytest.raises(IllegalState) as info:
            act(f"{kind}-rejected")
        assert info.value.reason == "LIMIT_REACHED"
    s.wallet.faults(lose_answer=True, methods=["Debit"])
    for _ in range(2):
        with pytest.raises(Unavailable) as unsure:
            act(f"{kind}-lost")
        assert unsure.value.reason == "WALLET_UNCERTAIN"
    s.wallet.faults()
    assert h.rounds.get_round(OP, view.round_id) == view
    assert s.movements() == [("debit", "acked", 1000), ("debit", "rejected", extra),
                             ("debit", "rolled_back", extra), ("rollback", "acked", extra)]
    assert s.wallet.balance(s.player) == 4000
    after = act(f"{kind}-paid")
    assert after.total_staked == 1000 + extra and s.wallet.balance(s.player) == 4000 - extra


SNAP_TWO_19S_V_17 = stack("snap", [["TS", "9H"], ["TD", "9C"]], ["7D", "TC"])
SNAP_SIDE_BET = {"snap": 500}  # on two hands


def test_side_bets_are_debited_apart_from_the_bet_as_side_bet(seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_TWO_19S_V_17)
    view = s.start(side_bets=SNAP_SIDE_BET, hands=2, request_id="with-side")
    assert view.total_staked == 2500 and view.balance_after == 2500
    assert s.movements() == [("debit", "acked", 2000), ("debit", "acked", 500)]
    assert s.purposes(view.round_id) == ["bet", "side_bet"]
    assert [(t["purpose"], t["amount"]) for t in s.wallet.transactions(view.round_id)] == [
        ("DEBIT_PURPOSE_BET", 2000), ("DEBIT_PURPOSE_SIDE_BET", 500)]
    assert s.start(side_bets=SNAP_SIDE_BET, hands=2, request_id="with-side") == view  # nothing more
    done = h.play_out(view)
    s.dispatcher.run_once()
    statement = s.wallet.transactions(view.round_id)
    assert [t["kind"] for t in statement] == ["debit", "debit", "credit"]
    assert statement[2]["reference"] == ",".join(t["transaction_id"] for t in statement[:2])
    assert s.wallet.net(view.round_id) == done.total_returned - done.total_staked


def test_a_refused_side_bet_refuses_the_round_and_its_bet_is_rolled_back(
        seamless: Seamless) -> None:
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    s.wallet.faults(reject="LIMIT_REACHED", purposes=["SIDE_BET"])
    for _ in range(2):  # the retry: the same refusal, nothing more sent
        with pytest.raises(IllegalState) as info:
            s.start(side_bets=SNAP_SIDE_BET, hands=2, request_id="side-refused")
        assert info.value.reason == "LIMIT_REACHED"
    assert rounds_stored(h) == 0 and s.wallet.balance(s.player) == 5000
    assert s.movements() == [("debit", "rolled_back", 2000), ("debit", "rejected", 500),
                             ("rollback", "acked", 2000)]
    mine = [(t["kind"], t["state"], t["applied"]) for t in s.wallet.transactions()
            if t["player"] == s.player]
    assert mine == [("debit", "rolled_back", -2000), ("debit", "rejected", 0),
                    ("rollback", "accepted", 2000)]


def test_an_unanswered_bet_rolls_back_its_side_bet_too(seamless: Seamless) -> None:
    """The bet's answer lost: its side bet is not sent, and both are rolled back (a rollback of
    a debit the wallet never saw keeps a late delivery of it from moving money)."""
    s = seamless
    s.wallet.fund(s.player, 5000)
    s.wallet.faults(lose_answer=True, methods=["Debit"])
    for _ in range(2):
        with pytest.raises(Unavailable) as info:
            s.start(side_bets=SNAP_SIDE_BET, hands=2, request_id="side-unsure")
        assert info.value.reason == "WALLET_UNCERTAIN"
    void_unstarted(s, 2500)
    assert s.wallet.balance(s.player) == 5000
    assert s.movements() == [("debit", "rolled_back", 2000), ("debit", "rolled_back", 500),
                             ("rollback", "acked", 2000), ("rollback", "acked", 500)]
    mine = [(t["kind"], t["state"]) for t in s.wallet.transactions() if t["player"] == s.player]
    assert mine == [("debit", "rolled_back"), ("rollback", "accepted"), ("debit", "rolled_back"),
                    ("rollback", "accepted")]


@ONE_TRANSPORT
def test_two_dispatchers_on_one_database_send_each_movement_once(seamless: Seamless) -> None:
    """Two replicas' dispatchers passing at once over the same due credits, the wallet slow:
    each credit is claimed by one of them and sent once; together they send them all."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 100_000)
    rounds = [h.play_out(s.start()) for _ in range(4)]
    s.wallet.faults(latency_ms=300, methods=["Credit"])
    other = open_storage(h.url)
    try:
        dispatchers = [s.dispatcher, OutboxDispatcher(other, s.wallets)]
        barrier = threading.Barrier(2)
        sent = [0, 0]

        def run(i: int) -> None:
            barrier.wait()
            sent[i] = dispatchers[i].run_once()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        other.close()
    assert sum(sent) == 4
    for view in rounds:
        credit, = [t for t in s.wallet.transactions(view.round_id) if t["kind"] == "credit"]
        assert credit["calls"] == 1 and credit["amount"] == view.total_returned
        assert s.movements(view.round_id)[-1] == ("credit", "acked", view.total_returned)


class _Counting:
    """A wallet directory whose clients count the calls in flight at once."""

    def __init__(self, inner: WalletClients) -> None:
        self.inner, self.lock = inner, threading.Lock()
        self.now = self.most = 0

    def client(self, config: WalletConfig) -> Any:
        wallet, counting = self.inner.client(config), self

        class Client:
            def credit(self, movement: Any) -> Any:
                with counting.lock:
                    counting.now += 1
                    counting.most = max(counting.most, counting.now)
                try:
                    return wallet.credit(movement)
                finally:
                    with counting.lock:
                        counting.now -= 1

        return Client()


@pytest.mark.parametrize("senders", [1, 8])
def test_a_pass_sends_the_rounds_credits_at_once_up_to_its_senders(seamless: Seamless,
                                                                   senders: int) -> None:
    """A slow wallet: one pass sends every due credit, ``senders`` of them in flight at once
    (one at a time would cap a 50 ms wallet at 20 credits a second), each once."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 100_000)
    s.wallet.faults(error="UNAVAILABLE", methods=["Credit"])
    rounds = [h.play_out(s.start()) for _ in range(6)]
    s.dispatcher.run_once()  # each credit tried once, refused: all pending again
    s.wallet.faults(latency_ms=300, methods=["Credit"])
    h.sql("UPDATE wallet_movements SET next_attempt_at = '2000-01-01T00:00:00.000000Z' "
          "WHERE state = 'pending'")
    counting = _Counting(s.wallets)
    assert OutboxDispatcher(h.storage, counting, senders=senders).run_once() == 6
    assert counting.most == (1 if senders == 1 else 6)
    for view in rounds:
        assert s.movements(view.round_id)[-1] == ("credit", "acked", view.total_returned)
        assert [t["calls"] for t in s.wallet.transactions(view.round_id)
                if t["kind"] == "credit"] == [1]


@ONE_TRANSPORT
def test_demo_play_stays_on_the_internal_ledger(seamless: Seamless) -> None:
    s = seamless
    view = s.start(mode=Mode.DEMO)
    assert view.mode == "DEMO" and s.movements() == []
    assert seamless.h.play_out(view).credit is None  # no wallet credit on the internal ledger
    assert not [t for t in s.wallet.transactions() if t["player"] == s.player]


@ONE_TRANSPORT
def test_without_a_wallet_client_a_seamless_operators_real_round_is_unavailable(
        seamless: Seamless) -> None:
    h = seamless.h
    h.rounds = RoundService(h.storage, vault=h.vault, signer=h.signer, shoe_source=h.shoes)
    with pytest.raises(Unavailable) as info:
        seamless.start()
    assert info.value.reason == "WALLET_NOT_CONFIGURED"
    assert rounds_stored(h) == 0 and seamless.movements() == []


def test_states_are_the_outboxs() -> None:
    assert {s.value for s in MovementState} == {"pending", "acked", "rejected", "uncertain",
                                                "rolled_back"}


@ONE_TRANSPORT
def test_reconcile_lists_what_the_wallet_has_not_settled(seamless: Seamless,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    from support.cli_helpers import run  # noqa: PLC0415

    from rng_service.service.reconcile import unsettled  # noqa: PLC0415

    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    h.shoes.stack(SNAP_19_V_17)
    s.wallet.faults(error="UNAVAILABLE", methods=["Credit"])
    view = h.act(s.start(), "stand")
    s.dispatcher.run_once()
    rows = unsettled(h.storage, OP)
    assert [(r.movement.kind, r.movement.state, r.movement.amount, r.movement.round_id)
            for r in rows] == [("credit", "pending", 2000, view.round_id)]
    assert rows[0].age_seconds >= 0 and rows[0].movement.attempts == 1
    assert run(["wallet", "reconcile", "--database", h.url]) == 0
    out = capsys.readouterr().out.splitlines()
    header = out.index(next(line for line in out if line.startswith("operator\ttransaction_id")))
    assert out[header + 1].split("\t")[2:5] == ["credit", "pending", "2000"]
    assert out[-1].startswith(f"# {OP}: 1 unsettled, oldest ")
    s.wallet.faults()
    h.sql("UPDATE wallet_movements SET next_attempt_at = '2000-01-01T00:00:00.000000Z'")
    s.dispatcher.run_once()
    assert unsettled(h.storage) == []
    assert run(["wallet", "reconcile", "--database", h.url]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "# nothing unsettled"


@ONE_TRANSPORT
def test_the_unsettled_listing_pages_one_operators_movements_only(seamless: Seamless) -> None:
    from rng_service.core.errors import InvalidInput  # noqa: PLC0415
    from rng_service.service.operators import add_operator  # noqa: PLC0415
    from rng_service.service.reconcile import unsettled_page  # noqa: PLC0415

    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 5000)
    s.wallet.faults(error="UNAVAILABLE", methods=["Credit"])
    rounds = []
    for _ in range(3):
        h.shoes.stack(SNAP_19_V_17)
        rounds.append(h.act(s.start(), "stand").round_id)
    first = unsettled_page(h.storage, OP, page_size=2)
    assert (len(first.movements), first.total) == (2, 3) and first.next_page_token
    assert first.next_page_token == first.movements[-1].movement.transaction_id
    rest = unsettled_page(h.storage, OP, page_size=2, page_token=first.next_page_token)
    assert (len(rest.movements), rest.next_page_token, rest.total) == (1, "", 3)
    assert [u.movement.round_id for u in first.movements + rest.movements] == rounds
    assert first.oldest_age_seconds >= first.movements[0].age_seconds >= 0
    # another operator sees none of them, and one of them is no page token of its listing
    add_operator(h.storage, "other-casino")
    other = unsettled_page(h.storage, "other-casino")
    assert (other.movements, other.total, other.next_page_token, other.oldest_age_seconds) == (
        (), 0, "", 0.0)
    with pytest.raises(InvalidInput) as info:
        unsettled_page(h.storage, "other-casino", page_token=first.next_page_token)
    assert info.value.field == "page_token"


def _doubling(h: Harness, view: RoundView) -> RoundView:
    """Double the first hand when offered, then play the round out as play_out does."""
    offered = {la.action: la for la in view.legal_actions}
    if view.status == "awaiting" and "double" in offered:
        view = h.act(view, Action("double", 1000))
    return h.play_out(view)


def test_the_signed_records_name_the_wallets_statement_and_the_audit_passes(
        seamless: Seamless, tmp_path: Path) -> None:
    """Rounds on OS-seeded shoes (the audit recomputes them), some doubled, some with a side
    bet: each record's wallet member names exactly the wallet's own statement of the round,
    and the offline audit passes every record, its wallet checked against the replay."""
    s, h = seamless, seamless.h
    s.wallet.fund(s.player, 100_000)
    rounds = []
    for i in range(12):
        view = s.start(hands=2, side_bets=SNAP_SIDE_BET) if i % 3 == 0 else s.start()
        rounds.append(_doubling(h, view).round_id)
    s.dispatcher.run_once()
    purposes = set()
    for round_id in rounds:
        wallet = record(h, round_id)["wallet"]
        purposes |= {d["purpose"] for d in wallet["debits"]}
        statement = {t["transaction_id"]: t for t in s.wallet.transactions(round_id)}
        named = {d["transaction_id"]: ("debit", d["amount"]) for d in wallet["debits"]}
        named[wallet["credit"]["transaction_id"]] = ("credit", wallet["credit"]["amount"])
        assert {t: (m["kind"], m["amount"]) for t, m in statement.items()} == named
    assert purposes == {"bet", "side_bet", "double"}
    assert audit(h, tmp_path) == []
