"""Live rounds and the wallet end to end: a real `fairshoe serve` process (stacked shoes), real
gRPC on localhost, the database read directly at the end; every test on SQLite and on PostgreSQL
(the ``server`` fixture, tests/api/conftest.py).

Cards are stacked per new shoe (``server.stack``), in the order the shoe yields them
(``engine_helpers.stack`` turns hands and dealer cards into that order).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from support.engine_helpers import stack
from support.error_details import reason_of
from support.live_server import (
    DEMO,
    EUR,
    FAIRSHOE,
    HIT,
    REAL,
    SPLIT,
    STAND,
    Client,
    ServerProcess,
    double,
    even_money,
    insurance,
    ledger_is_balanced,
)

from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

try:  # the rich error details, once the errors mapping sends them
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status
except ImportError:  # the interim mapping: the field in the message, the reason in a trailer
    rpc_status = None

DEMO_FUNDING = 100_000
Code = grpc.StatusCode


# ----- error helpers ---------------------------------------------------------------------------


def failure(call: Callable[..., Any], *args: Any, **kwargs: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call(*args, **kwargs)
    return err.value


def _details(err: grpc.RpcError) -> list[Any]:
    """The google.rpc rich details, where the server sends them (empty otherwise)."""
    if rpc_status is None:
        return []
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    out: list[Any] = []
    for packed in status.details if status is not None else ():
        for cls in (error_details_pb2.BadRequest, error_details_pb2.ErrorInfo):
            if packed.Is(cls.DESCRIPTOR):
                message = cls()
                packed.Unpack(message)
                out.append(message)
    return out


def field_of(err: grpc.RpcError) -> str:
    """The field an INVALID_ARGUMENT names: google.rpc.BadRequest, else the message's prefix."""
    for detail in _details(err):
        if hasattr(detail, "field_violations") and detail.field_violations:
            return str(detail.field_violations[0].field)
    return (err.details() or "").split(": ", 1)[0]


def invalid(err: grpc.RpcError, field: str) -> None:
    assert err.code() is Code.INVALID_ARGUMENT, (err.code(), err.details())
    assert field_of(err) == field, err.details()


def refused(err: grpc.RpcError, code: grpc.StatusCode, reason: str) -> None:
    assert err.code() is code, (err.code(), err.details())
    assert reason_of(err) == reason, err.details()


# ----- the server ------------------------------------------------------------------------------


def test_health_and_reflection_name_the_live_services(server: ServerProcess) -> None:
    assert server.channel is not None
    health = health_pb2_grpc.HealthStub(server.channel)
    for name in ("", "fairshoe.round.v1.RoundService", "fairshoe.wallet.v1.WalletService"):
        status = health.Check(health_pb2.HealthCheckRequest(service=name)).status
        assert status == health_pb2.HealthCheckResponse.SERVING
    reflect = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    reply = next(iter(reflect.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]))))
    names = {s.name for s in reply.list_services_response.service}
    assert {"fairshoe.round.v1.RoundService", "fairshoe.wallet.v1.WalletService",
            "fairshoe.math.v1.MathService", "grpc.health.v1.Health"} <= names


# ----- a full round of every game, in both modes -----------------------------------------------

class Case(NamedTuple):
    """A full round: bets and a stacked shoe, the actions, and the money."""

    game: str
    level: str
    bets: list[Any]
    shoe: list[str]
    actions: list[rt.PlayerAction]
    staked: int
    returned: int


GAMES = [
    # 19 against 7+T: stand, win
    Case("snap", "", [1000], stack("snap", [["TS", "9H"]], ["7D", "TC"]), [STAND], 1000, 2000),
    # 8-8 against 6: split; 8+3 doubles and draws T; 8+9 stands; the dealer's 6+T draws T, busts
    Case("double-deck", "", [1000], stack("double-deck", [["8S", "8H"]], ["6D", "TC", "TH"],
                                          ["3C", "TD", "9S"]),
         [SPLIT, double(1000), STAND], 3000, 6000),
    # both dealer cards exposed: 19 against 17
    Case("double-exposure", "", [1000], stack("double-exposure", [["TS", "9H"]], ["7D", "TC"]),
         [STAND], 1000, 2000),
    # three hands, a perfect pair (100 pays 25:1, credited at round end), stand, stand, double
    Case("multi-hand", "1-500",
         [rt.HandBet(bet_minor=1000, side_bets=[rt.SideBetStake(name="perfect_pairs",
                                                                stake_minor=100)]), 1000, 1000],
         stack("multi-hand", [["8S", "8S"], ["TH", "9H"], ["5C", "6D"]], ["7D", "TD"], ["TC"]),
         [STAND, STAND, double(1000)], 4100, 8600),
]


@pytest.mark.parametrize("mode", [REAL, DEMO], ids=["real", "demo"])
@pytest.mark.parametrize("case", GAMES, ids=[g.game for g in GAMES])
def test_full_round_of_every_game(server: ServerProcess, client: Client, case: Case,
                                  mode: int) -> None:
    player = f"full-{case.game}-{mode}"
    if mode == REAL:
        client.deposit(player, 50_000)
    before = client.balance(player, mode)
    assert before == (50_000 if mode == REAL else DEMO_FUNDING)
    server.stack(case.shoe)
    view = client.start(player, case.game, case.bets, mode=mode, level=case.level)
    assert (view.status, view.version, view.mode) == (rt.ROUND_STATUS_AWAITING_PLAYER, 1, mode)
    assert view.balance_after_minor == before - sum(w.staked_minor for w in view.wagers)
    for action in case.actions:
        view = client.act(player, view, action)
    assert view.status == rt.ROUND_STATUS_FINISHED
    assert (view.total_staked_minor, view.total_returned_minor) == (case.staked, case.returned)
    assert view.balance_after_minor == before - case.staked + case.returned
    assert view.balance_after_minor == client.balance(player, mode)
    assert view.version == 1 + len(case.actions)
    assert view.HasField("finished_at") and view.shoe.commitment
    assert client.get(player, view.round_id) == view  # read back: the same view


def test_the_hole_card_stays_hidden_until_turned(server: ServerProcess, client: Client) -> None:
    client.deposit("hole", 10_000)
    server.stack(stack("snap", [["TS", "9H"]], ["7D", "TC"]))
    view = client.start("hole", "snap", [1000])
    assert [(c.code, c.hidden) for c in view.dealer.cards] == [("7D", False), ("", True)]
    assert view.dealer.total == 7
    dealt = [e.card for e in view.events if e.kind == rt.EVENT_KIND_CARD and e.dealer]
    assert [(c.code, c.hidden) for c in dealt] == [("7D", False), ("", True)]
    assert "TC" not in str(view)  # nowhere in the message, nor any undealt card
    assert view.cards_used == rt.CardRange(start=0, end=4)
    assert [a.action for a in view.legal_actions] == [
        rt.ACTION_KIND_HIT, rt.ACTION_KIND_STAND, rt.ACTION_KIND_DOUBLE]
    assert view.turn == rt.Turn(hand_id=0, decision=rt.DECISION_PLAY)
    done = client.act("hole", view, STAND)
    assert [c.code for c in done.dealer.cards] == ["7D", "TC"]
    assert any(e.kind == rt.EVENT_KIND_REVEAL and e.card.code == "TC" for e in done.events)


# ----- every action ----------------------------------------------------------------------------


def test_hit_and_double_for_less(server: ServerProcess, client: Client) -> None:
    client.deposit("dbl", 10_000)
    # 6+5 against 9: double for 500 (double-deck doubles for less), draws T: 21 against 9+7+8
    server.stack(["6S", "9D", "5H", "7C", "TD", "8C"])
    view = client.start("dbl", "double-deck", [1000])
    offer = next(a for a in view.legal_actions if a.action == rt.ACTION_KIND_DOUBLE)
    assert (offer.min_stake_minor, offer.max_stake_minor, offer.any_amount) == (1, 1000, True)
    view = client.act("dbl", view, double(500))
    assert [(w.kind, w.staked_minor, w.returned_minor) for w in view.wagers] == [
        (rt.WAGER_KIND_MAIN, 1000, 2000), (rt.WAGER_KIND_DOUBLE, 500, 1000)]
    # hit: 2+3 hits 4 then 5 (14), stands; the dealer's T+7 stands on 17
    server.stack(["2S", "TD", "3H", "7C", "4D", "5S"])
    view = client.start("dbl", "double-deck", [1000])
    view = client.act("dbl", view, HIT)
    view = client.act("dbl", view, HIT)
    assert [c.code for c in view.hands[0].cards] == ["2S", "3H", "4D", "5S"]
    view = client.act("dbl", view, STAND)
    assert view.hands[0].outcome == rt.OUTCOME_LOSE
    assert client.balance("dbl") == 10_000 + 1500 - 1000


def test_insurance_with_an_amount(server: ServerProcess, client: Client) -> None:
    client.deposit("ins", 10_000)
    # 16 against an ace: insure for 200 (double-deck takes any amount up to half the bet); no
    # dealer blackjack (A+9): the insurance is lost; hit 5: 21 beats 20
    server.stack(["TS", "AD", "6H", "9C", "5D"])
    view = client.start("ins", "double-deck", [1000])
    assert view.turn.decision == rt.DECISION_INSURANCE
    offer = view.legal_actions[0]
    assert (offer.action, offer.min_stake_minor, offer.max_stake_minor) == (
        rt.ACTION_KIND_INSURANCE, 0, 500)
    view = client.act("ins", view, insurance(200))
    assert view.turn.decision == rt.DECISION_PLAY
    view = client.act("ins", view, HIT)
    assert [(w.kind, w.staked_minor, w.returned_minor) for w in view.wagers] == [
        (rt.WAGER_KIND_MAIN, 1000, 2000), (rt.WAGER_KIND_INSURANCE, 200, 0)]
    assert client.balance("ins") == 10_000 - 1200 + 2000


@pytest.mark.parametrize("accept, outcome, returned", [
    (True, rt.OUTCOME_EVEN_MONEY, 2000), (False, rt.OUTCOME_BLACKJACK, 2500)])
def test_even_money_accepted_or_declined(server: ServerProcess, client: Client, accept: bool,
                                         outcome: int, returned: int) -> None:
    player = f"even-{accept}"
    client.deposit(player, 10_000)
    server.stack(["AS", "AD", "KH", "7C"])  # a blackjack against an ace, no dealer blackjack
    view = client.start(player, "snap", [1000])
    assert view.turn.decision == rt.DECISION_EVEN_MONEY
    view = client.act(player, view, even_money(accept))
    assert view.status == rt.ROUND_STATUS_FINISHED
    assert (view.hands[0].outcome, view.total_returned_minor) == (outcome, returned)
    assert client.balance(player) == 10_000 - 1000 + returned


# ----- errors ----------------------------------------------------------------------------------


def test_invalid_requests_name_the_field(client: Client) -> None:
    r, w = client.rounds, client.wallet
    start = round_pb2.StartRoundRequest(player_id="bad", game="snap", mode=REAL, currency=EUR,
                                        hands=[rt.HandBet(bet_minor=1000)], request_id="x-1")

    def changed(**fields: Any) -> round_pb2.StartRoundRequest:
        request = round_pb2.StartRoundRequest()
        request.CopyFrom(start)
        for name, value in fields.items():
            if name == "hands":
                del request.hands[:]
                request.hands.extend(value)
            else:
                setattr(request, name, value)
        return request

    invalid(failure(r.StartRound, changed(player_id="")), "player_id")
    invalid(failure(r.StartRound, changed(player_id="p" * 129)), "player_id")
    invalid(failure(r.StartRound, changed(player_id="bad player")), "player_id")
    invalid(failure(r.StartRound, changed(mode=0)), "mode")
    invalid(failure(r.StartRound, changed(mode=7)), "mode")
    invalid(failure(r.StartRound, changed(request_id="")), "request_id")
    invalid(failure(r.StartRound, changed(request_id="r" * 129)), "request_id")
    invalid(failure(r.StartRound, changed(hands=[])), "hands")
    invalid(failure(r.StartRound, changed(hands=[rt.HandBet(bet_minor=1000)] * 17)), "hands")
    invalid(failure(r.StartRound, changed(hands=[rt.HandBet(bet_minor=-5)])), "hands[0].bet_minor")
    invalid(failure(r.StartRound, changed(hands=[rt.HandBet(bet_minor=0)])), "hands[0].bet_minor")
    invalid(failure(r.StartRound, changed(currency="euro")), "currency")
    side = rt.HandBet(bet_minor=1000, side_bets=[rt.SideBetStake(name="snap", stake_minor=-1)])
    invalid(failure(r.StartRound, changed(hands=[side])), "hands[0].side_bets[0].stake_minor")
    act = round_pb2.ActRequest(player_id="bad", round_id="0" * 32, action=STAND,
                               expected_version=1, request_id="x-2")
    invalid(failure(r.Act, round_pb2.ActRequest(player_id="bad", round_id="0" * 32,
                                                expected_version=1, request_id="x")), "action")
    invalid(failure(r.Act, round_pb2.ActRequest(player_id="bad", round_id="0" * 32,
                                                action=STAND, request_id="x")),
            "expected_version")
    act.action.CopyFrom(double(0))
    invalid(failure(r.Act, act), "action.double.amount_minor")
    act.action.CopyFrom(insurance(-1))
    invalid(failure(r.Act, act), "action.insurance.amount_minor")
    invalid(failure(r.GetRound, round_pb2.GetRoundRequest(player_id="bad", round_id="nope")),
            "round_id")
    invalid(failure(r.ListRounds, round_pb2.ListRoundsRequest(player_id="bad", page_size=101)),
            "page_size")
    invalid(failure(r.ListRounds, round_pb2.ListRoundsRequest(player_id="bad", filter=9)),
            "filter")
    invalid(failure(r.ListRounds, round_pb2.ListRoundsRequest(player_id="bad",
                                                              page_token="garbage")),
            "page_token")
    invalid(failure(r.SetClientSeed, round_pb2.SetClientSeedRequest(
        player_id="bad", game="snap", mode=REAL, shoe_id="s", client_seed=b"",
        request_id="x")),
        "client_seed")
    account = Client.account("bad")
    invalid(failure(w.Deposit, wallet_pb2.DepositRequest(account=account, amount_minor=0,
                                                         request_id="x")), "amount_minor")
    invalid(failure(w.Withdraw, wallet_pb2.WithdrawRequest(account=account, amount_minor=-3,
                                                           request_id="x")), "amount_minor")
    invalid(failure(w.Deposit, wallet_pb2.DepositRequest(amount_minor=5, request_id="x")),
            "account")
    invalid(failure(w.Deposit, wallet_pb2.DepositRequest(
        account=Client.account("bad", DEMO), amount_minor=5, request_id="x")), "account.mode")
    invalid(failure(w.Deposit, wallet_pb2.DepositRequest(
        account=account, amount_minor=5, reference="r" * 129, request_id="x")), "reference")
    invalid(failure(w.GetBalance, wallet_pb2.GetBalanceRequest(
        account=wallet_pb2.Account(player_id="bad", currency="EUR"))), "account.mode")
    invalid(failure(w.ListTransactions, wallet_pb2.ListTransactionsRequest(
        account=account, page_size=501)), "page_size")


def test_ids_and_amounts_are_checked_once_under_the_request_names(client: Client) -> None:
    """The edge checks the form of ids and amounts (the use cases take them as checked), each
    under the name its request gives it."""
    r, w = client.rounds, client.wallet

    def act(**fields: Any) -> round_pb2.ActRequest:
        sent: dict[str, Any] = {"player_id": "bad", "round_id": "0" * 32, "action": STAND,
                                "expected_version": 1, "request_id": "x-3"}
        return round_pb2.ActRequest(**(sent | fields))

    invalid(failure(r.Act, act(action=double(2**62))), "action.double.amount_minor")
    invalid(failure(r.Act, act(round_id="0" * 31)), "round_id")
    invalid(failure(r.Act, act(request_id="two words")), "request_id")
    invalid(failure(r.Act, act(player_id="@house")), "player_id")
    invalid(failure(w.Deposit, wallet_pb2.DepositRequest(
        account=Client.account("@house"), amount_minor=5, request_id="x")), "account.player_id")
    invalid(failure(w.Deposit, wallet_pb2.DepositRequest(
        account=Client.account("bad", currency="euro"), amount_minor=5, request_id="x")),
        "account.currency")
    invalid(failure(w.Deposit, wallet_pb2.DepositRequest(
        account=Client.account("bad"), amount_minor=2**62, request_id="x")), "amount_minor")
    invalid(failure(w.GetBalance, wallet_pb2.GetBalanceRequest(
        account=Client.account("bad player"))), "account.player_id")
    invalid(failure(w.ListTransactions, wallet_pb2.ListTransactionsRequest(
        account=Client.account("bad"), round_id="nope")), "round_id")


def test_bets_outside_the_limits_are_invalid_bets(client: Client) -> None:
    client.deposit("limits", 10_000_000)
    err = failure(client.start, "limits", "snap", [100])  # snap's medium level starts at 500
    invalid(err, "hands[0].bet_minor")
    assert reason_of(err) == "INVALID_BET" and "outside the limits" in (err.details() or "")
    invalid(failure(client.start, "limits", "snap", [60_000]), "hands[0].bet_minor")
    invalid(failure(client.start, "limits", "snap", [1000], level="vip"), "level")
    invalid(failure(client.start, "limits", "snap", [1000, 1000, 1000]), "hands")
    side = rt.HandBet(bet_minor=1000, side_bets=[rt.SideBetStake(name="lucky", stake_minor=500)])
    invalid(failure(client.start, "limits", "snap", [side]), "hands[0].side_bets[0]")
    assert client.balance("limits") == 10_000_000  # nothing was staked
    assert failure(client.start, "limits", "baccarat", [1000]).code() is Code.NOT_FOUND


def test_refusals_carry_their_reason(server: ServerProcess, client: Client) -> None:
    client.deposit("ref", 1500)
    err = failure(client.start, "ref", "snap", [2000])
    refused(err, Code.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS")
    err = failure(client.wallet.Withdraw, wallet_pb2.WithdrawRequest(
        account=Client.account("ref"), amount_minor=1501, request_id=Client.rid()))
    refused(err, Code.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS")
    server.stack(stack("snap", [["TS", "6H"]], ["9D", "7C"], ["2D"]))
    view = client.start("ref", "snap", [1000])
    refused(failure(client.start, "ref", "snap", [500]), Code.FAILED_PRECONDITION,
            "ROUND_IN_PROGRESS")
    refused(failure(client.act, "ref", view, SPLIT), Code.FAILED_PRECONDITION, "ILLEGAL_ACTION")
    wrong_hand = round_pb2.ActRequest(player_id="ref", round_id=view.round_id, hand_id=1,
                                      action=STAND, expected_version=1, request_id=Client.rid())
    refused(failure(client.rounds.Act, wrong_hand), Code.FAILED_PRECONDITION, "NOT_THIS_HAND")
    refused(failure(client.act, "ref", view, STAND, expected_version=7), Code.ABORTED,
            "STALE_VERSION")
    # another player's round, and a round that does not exist: NOT_FOUND
    assert failure(client.get, "someone-else", view.round_id).code() is Code.NOT_FOUND
    assert failure(client.act, "someone-else", view, STAND).code() is Code.NOT_FOUND
    assert failure(client.get, "ref", "f" * 32).code() is Code.NOT_FOUND
    done = client.act("ref", view, STAND)
    refused(failure(client.act, "ref", done, STAND), Code.FAILED_PRECONDITION, "ROUND_FINISHED")
    assert client.balance("ref") == 1500 - 1000 + done.total_returned_minor


def test_two_concurrent_acts_one_wins_one_is_aborted(server: ServerProcess,
                                                     client: Client) -> None:
    client.deposit("race", 10_000)
    server.stack(stack("double-deck", [["TS", "6H"]], ["9D", "7C"], ["2D", "3D"]))
    view = client.start("race", "double-deck", [1000])
    barrier = threading.Barrier(2)
    results: list[Any] = []

    def hit() -> None:
        barrier.wait()
        try:
            results.append(client.act("race", view, HIT))
        except grpc.RpcError as err:
            results.append(err)

    threads = [threading.Thread(target=hit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [r for r in results if isinstance(r, rt.RoundView)]
    lost = [r for r in results if isinstance(r, grpc.RpcError)]
    assert len(won) == len(lost) == 1
    refused(lost[0], Code.ABORTED, "STALE_VERSION")
    assert won[0].version == 2 and len(won[0].hands[0].cards) == 3  # one card, not two
    assert client.get("race", view.round_id) == won[0]


# ----- idempotent retries ----------------------------------------------------------------------


def test_retries_answer_the_same_and_change_nothing(server: ServerProcess,
                                                    client: Client) -> None:
    deposit = wallet_pb2.DepositRequest(account=Client.account("idem"), amount_minor=10_000,
                                        request_id="idem-dep")
    first = client.wallet.Deposit(deposit)
    assert client.wallet.Deposit(deposit) == first
    assert client.balance("idem") == 10_000
    deposit.amount_minor = 20_000
    invalid(failure(client.wallet.Deposit, deposit), "request_id")

    withdraw = wallet_pb2.WithdrawRequest(account=Client.account("idem"), amount_minor=1000,
                                          request_id="idem-wd")
    assert client.wallet.Withdraw(withdraw) == client.wallet.Withdraw(withdraw)
    assert client.balance("idem") == 9000
    withdraw.amount_minor = 2000
    invalid(failure(client.wallet.Withdraw, withdraw), "request_id")

    server.stack(stack("snap", [["TS", "6H"]], ["9D", "7C"], ["2D"]))
    start = client.start("idem", "snap", [1000], request_id="idem-start")
    again = client.start("idem", "snap", [1000], request_id="idem-start")
    assert again == start and client.balance("idem") == 8000
    invalid(failure(client.start, "idem", "snap", [2000], request_id="idem-start"), "request_id")
    hit = client.act("idem", start, HIT, request_id="idem-act")
    assert client.act("idem", start, HIT, request_id="idem-act") == hit  # not a second card
    invalid(failure(client.act, "idem", start, STAND, request_id="idem-act"), "request_id")
    assert len(client.get("idem", start.round_id).hands[0].cards) == 3
    assert server.sql("SELECT count(*) FROM rounds WHERE player = 'idem'") == [(1,)]


def test_a_request_past_its_deadline_changes_nothing(client: Client) -> None:
    client.deposit("late", 1000)
    for _ in range(5):
        err = failure(client.deposit, "late", 500, timeout=1e-6)
        assert err.code() is Code.DEADLINE_EXCEEDED
    assert client.balance("late") == 1000


# ----- shoes and client seeds ------------------------------------------------------------------


def test_commitment_before_client_seed_and_locked_after_the_first_card(
        client: Client) -> None:
    player, game = "seedy", "double-exposure"
    client.deposit(player, 10_000)
    ask = round_pb2.GetNextShoeRequest(player_id=player, game=game, mode=REAL)
    shoe = client.rounds.GetNextShoe(ask).shoe
    assert len(shoe.commitment) == 64 and not shoe.client_seed and not shoe.client_seed_locked
    assert shoe.HasField("committed_at") and shoe.decks == 6
    assert client.rounds.GetNextShoe(ask).shoe == shoe  # the same shoe until it is used

    def set_seed(seed: bytes, shoe_id: str) -> round_pb2.NextShoe:
        return client.rounds.SetClientSeed(round_pb2.SetClientSeedRequest(
            player_id=player, game=game, mode=REAL, shoe_id=shoe_id, client_seed=seed,
            request_id=Client.rid())).shoe

    refused(failure(set_seed, b"lucky", "0" * 32), Code.FAILED_PRECONDITION,
            "NOT_THE_NEXT_SHOE")
    seeded = set_seed(b"lucky", shoe.shoe_id)
    assert (seeded.commitment, seeded.client_seed) == (shoe.commitment, b"lucky")
    view = client.start(player, game, [1000])
    assert view.shoe == rt.ShoeRef(shoe_id=shoe.shoe_id, commitment=shoe.commitment, decks=6,
                                   client_seed=b"lucky")
    locked = client.rounds.GetNextShoe(ask).shoe
    assert locked.shoe_id == shoe.shoe_id and locked.client_seed_locked
    refused(failure(set_seed, b"other", shoe.shoe_id), Code.FAILED_PRECONDITION,
            "CLIENT_SEED_LOCKED")
    client.play_out(player, view)


def test_client_seed_request_ids_are_idempotency_keys(client: Client) -> None:
    # fairshoe.common.v1: a retry with the same id and request gets the first answer, the same
    # id with another request (or one already used by another RPC) is INVALID_ARGUMENT
    player, game = "seedkey", "double-exposure"
    deposit = client.deposit(player, 10_000)
    shoe = client.rounds.GetNextShoe(round_pb2.GetNextShoeRequest(
        player_id=player, game=game, mode=REAL)).shoe

    def set_seed(seed: bytes, request_id: str) -> round_pb2.NextShoe:
        return client.rounds.SetClientSeed(round_pb2.SetClientSeedRequest(
            player_id=player, game=game, mode=REAL, shoe_id=shoe.shoe_id, client_seed=seed,
            request_id=request_id)).shoe

    rid = Client.rid()
    first = set_seed(b"first", rid)
    assert first.client_seed == b"first"
    assert set_seed(b"first", rid) == first  # an exact retry: the same answer
    invalid(failure(set_seed, b"second", rid), "request_id")
    invalid(failure(set_seed, b"second", deposit.request_id), "request_id")
    again = client.rounds.GetNextShoe(round_pb2.GetNextShoeRequest(
        player_id=player, game=game, mode=REAL)).shoe
    assert again.client_seed == b"first"  # neither refused request changed the seed


def test_demo_and_real_money_never_share_a_shoe(server: ServerProcess, client: Client) -> None:
    # double-exposure's cut-card shoe spans rounds: free demo rounds from the real-money shoe
    # would let a player count its cards and bet real money when the count favours them
    player, game = "twofaced", "double-exposure"
    client.deposit(player, 10_000)

    def ask(mode: int) -> round_pb2.NextShoe:
        return client.rounds.GetNextShoe(round_pb2.GetNextShoeRequest(
            player_id=player, game=game, mode=mode)).shoe  # type: ignore[arg-type]

    real, demo = ask(REAL), ask(DEMO)
    assert real.shoe_id != demo.shoe_id and real.commitment != demo.commitment
    client.rounds.SetClientSeed(round_pb2.SetClientSeedRequest(
        player_id=player, game=game, mode=DEMO, shoe_id=demo.shoe_id, client_seed=b"demo",
        request_id=Client.rid()))
    assert ask(REAL) == real and ask(DEMO).client_seed == b"demo"
    played = client.play_out(player, client.start(player, game, [1000], mode=DEMO))
    assert (played.shoe.shoe_id, played.shoe.client_seed) == (demo.shoe_id, b"demo")
    view = client.play_out(player, client.start(player, game, [1000], mode=REAL))
    assert view.shoe == rt.ShoeRef(shoe_id=real.shoe_id, commitment=real.commitment, decks=6)
    assert view.cards_used.start == 0  # no card of the real shoe was dealt in demo play
    assert dict(server.sql("SELECT shoe_id, mode FROM shoes WHERE player = ?", player)) == {
        real.shoe_id: "REAL", demo.shoe_id: "DEMO"}
    invalid(failure(client.rounds.GetNextShoe, round_pb2.GetNextShoeRequest(
        player_id=player, game=game)), "mode")
    invalid(failure(client.rounds.SetClientSeed, round_pb2.SetClientSeedRequest(
        player_id=player, game=game, shoe_id=real.shoe_id, client_seed=b"x",
        request_id=Client.rid())), "mode")


# ----- history ---------------------------------------------------------------------------------


def test_history_lists_open_rounds_first_then_newest_first(client: Client) -> None:
    player = "history"
    client.deposit(player, 1_000_000)
    finished = [client.play_out(player, client.start(player, "snap", [500]))
                for _ in range(12)]
    demo = client.play_out(player, client.start(player, "snap", [500], mode=DEMO))
    open_dd = client.start(player, "double-deck", [500])
    open_de = client.start(player, "double-exposure", [500])
    opened = [v for v in (open_dd, open_de) if v.status == rt.ROUND_STATUS_AWAITING_PLAYER]
    closed = [v for v in (open_dd, open_de) if v.status != rt.ROUND_STATUS_AWAITING_PLAYER]
    newest_first = sorted([*finished, demo, *closed], key=lambda v: v.started_at.ToNanoseconds(),
                          reverse=True)
    request = round_pb2.ListRoundsRequest(player_id=player, page_size=5)
    first_page = client.rounds.ListRounds(request)
    assert len(first_page.rounds) == 5 and first_page.next_page_token
    listed = list(client.list_all(request))
    ids = [v.round_id for v in listed]
    expected_open = sorted(opened, key=lambda v: v.started_at.ToNanoseconds(), reverse=True)
    assert ids == [v.round_id for v in expected_open + newest_first]
    assert all(len(v.events) > 0 for v in listed)  # every step of each round
    only_open = list(client.list_all(round_pb2.ListRoundsRequest(
        player_id=player, filter=round_pb2.ROUND_FILTER_OPEN, page_size=1)))
    assert [v.round_id for v in only_open] == [v.round_id for v in expected_open]
    real_done = list(client.list_all(round_pb2.ListRoundsRequest(
        player_id=player, mode=REAL, filter=round_pb2.ROUND_FILTER_FINISHED, page_size=4)))
    assert [v.round_id for v in real_done] == [v.round_id for v in newest_first
                                               if v.round_id != demo.round_id]
    # a token belongs to its listing
    token = client.rounds.ListRounds(round_pb2.ListRoundsRequest(
        player_id=player, page_size=2)).next_page_token
    invalid(failure(client.rounds.ListRounds, round_pb2.ListRoundsRequest(
        player_id=player, mode=DEMO, page_token=token)), "page_token")
    for view in opened:
        client.play_out(player, view)


# ----- wallet ----------------------------------------------------------------------------------


def test_wallet_balance_and_paginated_transactions(server: ServerProcess,
                                                   client: Client) -> None:
    player, account = "wally", Client.account("wally")
    first = client.wallet.Deposit(wallet_pb2.DepositRequest(
        account=account, amount_minor=5000, reference="psp-7731", request_id="wally-1")
    ).transaction
    assert (first.kind, first.amount_minor, first.balance_after_minor, first.reference,
            first.request_id, first.account) == (
        wallet_pb2.TRANSACTION_KIND_DEPOSIT, 5000, 5000, "psp-7731", "wally-1", account)
    out = client.wallet.Withdraw(wallet_pb2.WithdrawRequest(
        account=account, amount_minor=1200, request_id=Client.rid())).transaction
    assert (out.kind, out.amount_minor, out.balance_after_minor, out.reference) == (
        wallet_pb2.TRANSACTION_KIND_WITHDRAWAL, -1200, 3800, "")
    server.stack(stack("double-deck", [["TS", "6H"]], ["9D", "7C"], ["2D"]))
    view = client.start(player, "double-deck", [1000])
    balance = client.wallet.GetBalance(wallet_pb2.GetBalanceRequest(account=account))
    assert (balance.balance_minor, balance.in_play_minor) == (2800, 1000)
    view = client.act(player, view, STAND)  # 16 against 9+7, who draws 2: 18
    balance = client.wallet.GetBalance(wallet_pb2.GetBalanceRequest(account=account))
    assert balance.in_play_minor == 0
    assert balance.balance_minor == 2800 + view.total_returned_minor
    pages, request = [], wallet_pb2.ListTransactionsRequest(account=account, page_size=2)
    while True:
        page = client.wallet.ListTransactions(request)
        pages.append(list(page.transactions))
        if not page.next_page_token:
            break
        request.page_token = page.next_page_token
    entries = [t for p in pages for t in p]
    assert all(len(p) <= 2 for p in pages)
    kinds = [t.kind for t in reversed(entries)]
    assert kinds[:3] == [wallet_pb2.TRANSACTION_KIND_DEPOSIT,
                         wallet_pb2.TRANSACTION_KIND_WITHDRAWAL, wallet_pb2.TRANSACTION_KIND_STAKE]
    assert entries[0].balance_after_minor == balance.balance_minor
    assert entries[-1] == first  # stored as answered, reference included
    stamps = [t.created_at.ToNanoseconds() for t in entries]
    assert stamps == sorted(stamps, reverse=True)  # newest first
    assert len({t.transaction_id for t in entries}) == len(entries)
    of_round = client.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(
        account=account, round_id=view.round_id)).transactions
    assert {t.round_id for t in of_round} == {view.round_id}
    assert sum(t.amount_minor for t in of_round) == (
        view.total_returned_minor - view.total_staked_minor)
    demo = client.wallet.GetBalance(wallet_pb2.GetBalanceRequest(
        account=Client.account(player, DEMO)))
    assert demo.balance_minor == DEMO_FUNDING  # play money, apart from the real balance


# ----- live ActionValues -----------------------------------------------------------------------


def test_action_values_of_a_live_round_see_only_what_the_player_sees(
        server: ServerProcess, client: Client) -> None:
    client.deposit("adv", 10_000)
    server.stack(stack("double-deck", [["TS", "6H"]], ["9D", "7C"], ["2D"]))
    view = client.start("adv", "double-deck", [1000])
    live = client.math.ActionValues(math_pb2.ActionValuesRequest(
        live=math_pb2.LiveDecision(player_id="adv", round_id=view.round_id)))
    # the same as the explicit situation: the up card only, never the hole card (7C)
    explicit = client.math.ActionValues(math_pb2.ActionValuesRequest(
        situation=math_pb2.Situation(rules=math_pb2.RulesSource(game="double-deck"),
                                     player_cards=["TS", "6H"], dealer_cards=["9D"])))
    assert live == explicit
    assert {v.action for v in live.values} == {rt.ACTION_KIND_HIT, rt.ACTION_KIND_STAND}
    other = math_pb2.ActionValuesRequest(
        live=math_pb2.LiveDecision(player_id="not-adv", round_id=view.round_id))
    assert failure(client.math.ActionValues, other).code() is Code.NOT_FOUND
    done = client.act("adv", view, STAND)
    err = failure(client.math.ActionValues, math_pb2.ActionValuesRequest(
        live=math_pb2.LiveDecision(player_id="adv", round_id=done.round_id)))
    refused(err, Code.FAILED_PRECONDITION, "ROUND_FINISHED")


# ----- the process: crash and restart, configuration -------------------------------------------


def test_sigkill_mid_round_and_the_round_continues_where_it_was(tmp_path: Path, backend: str,
                                                                database_url: str) -> None:
    server = ServerProcess(tmp_path / "crash", database_url=database_url).start()
    try:
        client = server.client()
        client.deposit("crash", 10_000)
        server.stack(stack("double-deck", [["8S", "8H"]], ["6D", "TC", "TH"],
                           ["3C", "TD", "9S"]))
        view = client.act("crash", client.start("crash", "double-deck", [1000]), SPLIT)
        server.kill()
        server.start()  # the same data directory, database and keys
        client = server.client()
        again = client.get("crash", view.round_id)
        assert again == view  # the same version, cards, legal actions and balance
        assert client.balance("crash") == 8000
        again = client.act("crash", again, double(1000))
        done = client.act("crash", again, STAND)
        assert (done.total_staked_minor, done.total_returned_minor) == (3000, 6000)
        assert client.balance("crash") == 13_000
        ledger_is_balanced(server)
    finally:
        server.stop()


def test_production_refuses_test_shoes_and_a_missing_signing_key(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "prod", env={"FAIRSHOE_ENV": "production"})
    with pytest.raises(RuntimeError, match="no active signing key"):
        server.start()  # production makes no dev signing key
    subprocess.run([str(FAIRSHOE), "keys", "create"], env=server.env, check=True,
                   capture_output=True)
    with pytest.raises(RuntimeError, match="FAIRSHOE_TEST_SHOES=1 is refused"):
        server.start()
    server = ServerProcess(tmp_path / "no-switch", env={"FAIRSHOE_TEST_SHOES": ""})
    with pytest.raises(RuntimeError, match="uncertified shoe source"):
        server.start()


def test_plain_serve_on_a_fresh_data_dir_deals_genuine_shoes(tmp_path: Path) -> None:
    """`fairshoe serve` itself: a first run makes its dev keys (logging the key id, never the
    key), and nothing a test stacks reaches it, even with the test switch on."""
    server = ServerProcess(tmp_path / "fresh", stacked=False,
                           env={"FAIRSHOE_TEST_SHOES": "1",
                                "FAIRSHOE_TEST_STACK_DIR": str(tmp_path / "stacks")})
    server.stack_dir = tmp_path / "stacks"
    server.stack(["AS", "AD", "KH", "7C"])
    server.start()
    try:
        client = server.client()
        view = client.play_out("fresh", client.start("fresh", "snap", [1000], mode=DEMO))
        assert view.status != rt.ROUND_STATUS_AWAITING_PLAYER
        assert list((tmp_path / "stacks" / "queue").glob("*.json"))  # never read
    finally:
        assert server.stop() == 0
    log = server.log()
    assert '"dev_signing_key_created"' in log and '"recovered"' in log
    for key_file in (tmp_path / "fresh" / "keys").glob("*.key"):
        secret = key_file.read_text()
        body = "".join(line for line in secret.splitlines() if "-----" not in line)
        assert body.strip() and body.strip() not in log
