"""Every RPC that takes a currency takes only an active ISO 4217 code with a minor unit: any other
is INVALID_ARGUMENT naming the request's field, and changes nothing (issue 20, "Clients and CLI"
4). Against a real server process."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest
from support.live_server import REAL, Client, ServerProcess

from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2

BAD = ["XYZ", "eur", "XAU", "XTS", "EURO", ""]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("currency")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def account(currency: str) -> wallet_pb2.Account:
    return wallet_pb2.Account(player_id="cur", currency=currency, mode=REAL)  # type: ignore[arg-type]


CALLS: dict[str, tuple[str, Callable[[Client, str], object]]] = {
    "StartRound": ("currency", lambda c, cur: c.rounds.StartRound(round_pb2.StartRoundRequest(
        player_id="cur", game="snap", mode=REAL, currency=cur,  # type: ignore[arg-type]
        hands=[rt.HandBet(bet_minor=1000)], request_id=c.rid()))),
    "Deposit": ("account.currency", lambda c, cur: c.wallet.Deposit(wallet_pb2.DepositRequest(
        account=account(cur), amount_minor=100, request_id=c.rid()))),
    "Withdraw": ("account.currency", lambda c, cur: c.wallet.Withdraw(wallet_pb2.WithdrawRequest(
        account=account(cur), amount_minor=100, request_id=c.rid()))),
    "GetBalance": ("account.currency", lambda c, cur: c.wallet.GetBalance(
        wallet_pb2.GetBalanceRequest(account=account(cur)))),
    "ListTransactions": ("account.currency", lambda c, cur: c.wallet.ListTransactions(
        wallet_pb2.ListTransactionsRequest(account=account(cur)))),
}


@pytest.mark.parametrize("method", list(CALLS))
@pytest.mark.parametrize("currency", BAD)
def test_a_bad_currency_is_invalid_argument_naming_the_field(
        server: ServerProcess, method: str, currency: str) -> None:
    field, send = CALLS[method]
    with pytest.raises(grpc.RpcError) as caught:
        send(server.client(), currency)
    err = caught.value
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, err  # type: ignore[attr-defined]
    assert err.details().startswith(f"{field}: "), err.details()  # type: ignore[attr-defined]
    assert server.sql("SELECT COUNT(*) FROM accounts WHERE currency != 'EUR'") == [(0,)]


def test_currencies_of_every_exponent_are_taken(server: ServerProcess) -> None:
    client = server.client()
    for code in ("JPY", "KWD", "USD"):
        client.wallet.Deposit(wallet_pb2.DepositRequest(
            account=account(code), amount_minor=500, request_id=client.rid()))
        reply = client.wallet.GetBalance(wallet_pb2.GetBalanceRequest(account=account(code)))
        assert reply.balance_minor == 500
