"""`fairshoe play` says a server's refusal the way its table does (issue 20, "Clients and CLI" 1):
amounts in the table's currency units with the currency's minor-unit exponent, hands by the
names the screen gives them, all read from the refusal's google.rpc details (reason, ErrorInfo
metadata, BadRequest field), never from its message. A real `fairshoe play` process against a
real stacked server process, as in test_play_cli.py; the renderer alone against the same server
for the refusals the client's own checks keep it from meeting."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import grpc
import pytest
from play_run import play as run_play
from support.engine_helpers import stack
from support.live_server import REAL, Client, ServerProcess, double

from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2
from rng_service.cli.play_errors import ErrorNames, describe_error


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("play-errors")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def play(server: ServerProcess, player: str, lines: Sequence[str], *args: str) -> str:
    return run_play(server, player, lines, *args, columns=140)


def server_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("Server: ")]


def test_insufficient_funds_in_currency_units(server: ServerProcess) -> None:
    out = play(server, "short", ["10 10", "deal", "deposit 15", "deal", "quit"],
               "--game", "snap", "--mode", "real", "--level", "")
    assert "Bets: 10.00 10.00 (press DEAL)" in out
    assert server_lines(out) == [
        "Server: FAILED_PRECONDITION INSUFFICIENT_FUNDS: the stake 20.00 EUR exceeds the "
        "balance 0.00 EUR",
        "Server: FAILED_PRECONDITION INSUFFICIENT_FUNDS: the stake 20.00 EUR exceeds the "
        "balance 15.00 EUR"]


def test_a_refused_action_names_the_hand_as_the_screen_does(server: ServerProcess) -> None:
    # Right 19 stands; Left 12 hits a 3, then asks to double its three cards
    server.stack(stack("snap", [["TS", "9H"], ["TD", "2H"]], ["7D", "TC"], ["3C"]))
    out = play(server, "lefty", ["10 10", "deal", "stand", "hit", "double", "stand", "quit"],
               "--game", "snap", "--mode", "demo", "--level", "")
    assert server_lines(out) == [
        "Server: FAILED_PRECONDITION ILLEGAL_ACTION: cannot double Left: double is only on "
        "the first two cards (allowed: hit, stand)"]
    assert "hand 1" not in out


def test_a_double_for_the_wrong_amount_in_currency_units(server: ServerProcess) -> None:
    server.stack(stack("snap", [["5S", "6H"]], ["7D", "TC"], ["9C"]))
    out = play(server, "doubler", ["10", "deal", "double 50", "stand", "quit"],
               "--game", "snap", "--mode", "demo", "--level", "")
    assert server_lines(out) == [
        "Server: FAILED_PRECONDITION ILLEGAL_ACTION: double on Right must be 10.00 EUR, "
        "got 50.00 EUR"]


def refusal(send: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        send()  # type: ignore[operator]
    return caught.value


def test_bets_the_server_refuses_are_named_by_spot(server: ServerProcess) -> None:
    client: Client = server.client()
    names = ErrorNames("EUR", seat_name=lambda seat: ("Right", "Left")[seat])
    err = refusal(lambda: client.start("limits", "snap", [1000, 70_000], mode=REAL))
    assert describe_error(err, names) == (
        "INVALID_ARGUMENT INVALID_BET: Left bet 700.00 EUR is outside the limits 5.00 to "
        "500.00 EUR (level medium)")
    err = refusal(lambda: client.start("limits", "multi-hand", [1000, 1000], mode=REAL))
    assert describe_error(err, ErrorNames("EUR")) == (
        "INVALID_ARGUMENT INVALID_BET: 2 hands bet; the game plays 1, 3, 5")


def test_amounts_take_the_currency_exponent(server: ServerProcess) -> None:
    client: Client = server.client()
    for code, text in (("JPY", "1,000 JPY exceeds the balance 0 JPY"),
                       ("KWD", "1.000 KWD exceeds the balance 0.000 KWD")):
        err = refusal(lambda code=code: client.rounds.StartRound(round_pb2.StartRoundRequest(  # type: ignore[misc]
            player_id="yen", game="snap", mode=REAL, currency=code,  # type: ignore[arg-type]
            hands=[rt.HandBet(bet_minor=1000)], request_id=client.rid())))
        assert describe_error(err, ErrorNames(code)) == (
            f"FAILED_PRECONDITION INSUFFICIENT_FUNDS: the stake {text}")
    err = refusal(lambda: client.wallet.Withdraw(wallet_pb2.WithdrawRequest(
        account=client.account("yen"), amount_minor=250, request_id=client.rid())))
    assert describe_error(err, ErrorNames("EUR")) == (
        "FAILED_PRECONDITION INSUFFICIENT_FUNDS: 2.50 EUR needed, the balance is 0.00 EUR")


def test_another_hands_turn_is_named(server: ServerProcess) -> None:
    client: Client = server.client()
    client.deposit("turns", 10_000)
    server.stack(stack("snap", [["TS", "9H"], ["TD", "8H"]], ["7D", "TC"]))
    view = client.start("turns", "snap", [1000, 1000])
    request = round_pb2.ActRequest(player_id="turns", round_id=view.round_id, hand_id=1,
                                   action=double(), expected_version=view.version,
                                   request_id=client.rid())
    err = refusal(lambda: client.rounds.Act(request))
    names = ErrorNames("EUR", hand_names={0: "Right", 1: "Left"})
    assert describe_error(err, names) == (
        "FAILED_PRECONDITION NOT_THIS_HAND: Left is not awaiting a decision; Right is")
