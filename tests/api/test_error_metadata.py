"""A refusal carries its values in its google.rpc.ErrorInfo metadata (amounts in minor units, the
hand's id, the field), so a client renders it in its own units and names without parsing the
message; the message itself stays as it was, for clients that show it as it is. Against a real
stacked server process."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from support.engine_helpers import stack
from support.error_details import error_info
from support.live_server import HIT, Client, ServerProcess, double

from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("metadata")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def test_insufficient_funds_names_the_stake_and_the_balance(server: ServerProcess) -> None:
    client = server.client()
    client.deposit("short", 1500)
    with pytest.raises(grpc.RpcError) as caught:
        client.start("short", "snap", [2000])
    err = caught.value
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
    assert err.details() == "the stake 2000 exceeds the balance 1500"  # type: ignore[attr-defined]
    info = error_info(err)
    assert info.reason == "INSUFFICIENT_FUNDS" and info.domain == "fairshoe"
    assert dict(info.metadata) == {"stake_minor": "2000", "balance_minor": "1500",
                                   "currency": "EUR"}


def test_a_bet_outside_the_limits_names_them(server: ServerProcess) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        server.client().start("tiny", "snap", [1])
    info = error_info(caught.value)
    assert info.reason == "INVALID_BET"
    assert dict(info.metadata) == {"stake_minor": "1", "min_minor": "500", "max_minor": "50000",
                                   "level": "medium", "field": "hands[0].bet_minor"}


def test_a_refused_action_names_the_hand_and_why(server: ServerProcess) -> None:
    client = server.client()
    client.deposit("late", 10_000)
    server.stack(stack("snap", [["TS", "2H"]], ["7D", "TC"], ["3C"]))
    view = client.act("late", client.start("late", "snap", [1000]), HIT)  # 15 in three cards
    with pytest.raises(grpc.RpcError) as caught:
        client.act("late", view, double())
    err = caught.value
    assert err.details().startswith("cannot double hand 0: ")  # type: ignore[attr-defined]
    info = error_info(err)
    assert info.reason == "ILLEGAL_ACTION"
    assert dict(info.metadata) == {"hand_id": "0", "action": "double",
                                   "why": "double is only on the first two cards",
                                   "allowed": "hit, stand"}


def test_a_double_for_too_much_names_the_stakes(server: ServerProcess) -> None:
    client = server.client()
    client.deposit("greedy", 10_000)
    server.stack(stack("snap", [["5S", "6H"]], ["7D", "TC"], ["9C"]))
    view = client.start("greedy", "snap", [1000])
    with pytest.raises(grpc.RpcError) as caught:
        client.act("greedy", view, double(5000))
    info = error_info(caught.value)
    assert info.reason == "ILLEGAL_ACTION"
    assert info.metadata["hand_id"] == "0" and info.metadata["action"] == "double"
    assert info.metadata["amount_minor"] == "5000"
    assert {k for k in info.metadata if k.endswith("stake_minor") or k == "stakes_minor"}


def test_a_withdrawal_past_the_balance_names_both(server: ServerProcess) -> None:
    client: Client = server.client()
    client.deposit("saver", 700)
    with pytest.raises(grpc.RpcError) as caught:
        client.wallet.Withdraw(wallet_pb2.WithdrawRequest(
            account=client.account("saver"), amount_minor=900, request_id=client.rid()))
    info = error_info(caught.value)
    assert info.reason == "INSUFFICIENT_FUNDS"
    assert dict(info.metadata) == {"amount_minor": "900", "balance_minor": "700"}
