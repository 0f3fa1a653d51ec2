"""What the fuzzing of every RPC (tests/api/test_fuzz.py) found, each pinned as a regression.

* a ReplayRound with 100,000 hands (500 kB) kept the server busy for seconds before refusing
  them; a 4 MiB ``script_json`` likewise: requests within gRPC's size limit must be refused as
  fast as they are read;
* a client that cancels a stream it is sending (reflection's ServerReflectionInfo) was logged
  and counted as an INTERNAL error of the server;
* balances are bounded by nothing but SQLite's int64: about a thousand of the largest deposits
  overflow it, and every later deposit in that currency (the operator's cash account) fails as
  INTERNAL.

bench/fuzz_rpcs.py (a million requests against a real ``fairshoe serve``) found:

* an error message echoing a client's value of wide characters (a paytable payout of 5,000
  playing-card emoji) was cut to 400 characters, 1,600 bytes of UTF-8 (sent twice, and
  percent-encoded in ``grpc-message``): messages are now bounded in bytes.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from prometheus_client import REGISTRY

from rng_service.api.metrics import grpc_code
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from rng_service.api.server import LiveServices, ServerConfig, build_server

QUICK = 0.5  # CPU seconds: far more than a refusal takes, far less than the work it refuses


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield ch
    server.stop(grace=None)


def _refused(call: object, request: object) -> tuple[grpc.RpcError, float]:
    """The refusal, and the CPU time this process (client and in-process server) spent on it:
    not the wall clock, which a loaded machine stretches while the work stays the same."""
    started = time.process_time()
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=30)  # type: ignore[operator]
    return err.value, time.process_time() - started


@pytest.mark.parametrize(("request_", "field"), [
    (game_pb2.ReplayRoundRequest(game="snap", hands=[rt.HandBet(bet_minor=1000)] * 100_000),
     "hands"),
    (game_pb2.ReplayRoundRequest(game="snap", hands=[rt.HandBet(
        bet_minor=1000, side_bets=[rt.SideBetStake(name=f"b{i}", stake_minor=1)
                                   for i in range(50_000)])]),
     "hands[0].side_bets"),
    (game_pb2.ReplayRoundRequest(game="snap", hands=[rt.HandBet(bet_minor=1000)] * 2,
                                 side_bets=[rt.SideBetStake(name=f"b{i}", stake_minor=1)
                                            for i in range(50_000)]),
     "side_bets"),
    (game_pb2.ReplayRoundRequest(script_json=json.dumps(
        {"game": "snap", "hands": [{"bet": 1000}] * 250_000, "shoe": ["AS"] * 10})),
     "script_json"),
])
def test_replay_round_refuses_huge_requests_at_once(channel: grpc.Channel,
                                                    request_: game_pb2.ReplayRoundRequest,
                                                    field: str) -> None:
    err, seconds = _refused(game_pb2_grpc.GameServiceStub(channel).ReplayRound, request_)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(f"{field}: at most")
    assert seconds < QUICK


def _count(method: str, code: str) -> float:
    service, name = method.strip("/").split("/")
    labels = {"grpc_type": "bidi_stream", "grpc_service": service, "grpc_method": name,
              "grpc_code": grpc_code(code)}
    return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0


def test_a_client_cancelling_its_stream_is_no_server_error(channel: grpc.Channel) -> None:
    method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    internal_before = _count(method, "INTERNAL")
    # a stream the client cancels ends CANCELLED, or OK when the server had already finished
    # it (the race is the client's): either way no server error
    ended_before = _count(method, "CANCELLED") + _count(method, "OK")
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    for i in range(3):
        sent = threading.Event()

        def requests(done: threading.Event = sent) -> Iterator[Any]:
            yield reflection_pb2.ServerReflectionRequest(list_services="")
            done.wait(10)  # no half-close: the server is still reading when the client leaves

        responses = stub.ServerReflectionInfo(requests(), timeout=10)
        next(responses)
        responses.cancel()
        sent.set()
        # generous: under load the server notices a client's cancellation seconds later; until
        # then the stream counts as open (two workers: one stream at a time, api/interceptors)
        deadline = time.monotonic() + 30
        while (_count(method, "CANCELLED") + _count(method, "OK") < ended_before + i + 1
               and time.monotonic() < deadline):
            time.sleep(0.02)
    assert _count(method, "INTERNAL") == internal_before
    # at least: the counters are the process's, and another module's server may still be
    # finishing streams its clients cancelled
    assert _count(method, "CANCELLED") + _count(method, "OK") >= ended_before + 3


def test_a_deposit_past_the_largest_balance_is_refused_not_internal(tmp_path: Path) -> None:
    database = tmp_path / "fairshoe.db"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FAIRSHOE_DATA_DIR", str(tmp_path))
        live = LiveServices.open(database)
        server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2), live)
    largest = 2**53 - 1  # the largest amount one deposit may carry
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            wallet = wallet_pb2_grpc.WalletServiceStub(ch)

            def deposit(player: str, request_id: str) -> None:
                account = wallet_pb2.Account(player_id=player, currency="EUR",
                                             mode=common_pb2.MODE_REAL)
                wallet.Deposit(wallet_pb2.DepositRequest(account=account, amount_minor=largest,
                                                         request_id=request_id), timeout=10)

            deposit("p", "d0")
            # what 1,022 more such deposits leave (a few seconds of a client's time), written
            # as one consistent entry: the player near int64's top, the cash account near its
            # bottom
            with contextlib.closing(sqlite3.connect(database)) as conn, conn:
                rest = 1022 * largest
                conn.execute("INSERT INTO ledger_entries (operator, currency, mode, source, "
                             "target, amount, kind, request_id, source_balance_after, "
                             "target_balance_after, created_at) SELECT operator, currency, "
                             "mode, source, target, ?, kind, 'd1-1022', "
                             "source_balance_after - ?, target_balance_after + ?, created_at "
                             "FROM ledger_entries", (rest, rest, rest))
                conn.execute("UPDATE accounts SET balance = balance + ? WHERE holder = 'p'",
                             (rest,))
                conn.execute("UPDATE accounts SET balance = balance - ? WHERE holder = '@cash'",
                             (rest,))
            deposit("p", "d1023")  # the last that fits in an int64
            for player, request_id in (("p", "d1024"), ("q", "q0")):
                with pytest.raises(grpc.RpcError) as err:
                    deposit(player, request_id)
                assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    finally:
        server.stop(grace=None)
        live.close()


WIDE = "\U0001f0a1" * 5000  # 4 bytes each in UTF-8


def _side_bets(channel: grpc.Channel, payout: str) -> object:
    bet = math_pb2.SideBetInput(name="snap", kind=math_pb2.SIDE_BET_KIND_TWENTY_ONE_PLUS_THREE,
                                paytable=[math_pb2.PaytableLine(line="straight", payout=payout)],
                                cards=["5H", "6H", "7H"])
    return math_pb2_grpc.MathServiceStub(channel).EvaluateSideBets(
        math_pb2.EvaluateSideBetsRequest(game="multi-hand", bets=[bet]), timeout=30)


@pytest.mark.parametrize("call", [
    lambda ch: _side_bets(ch, WIDE),
    lambda ch: _side_bets(ch, "1" + "\u00e9" * 5000),
    lambda ch: game_pb2_grpc.GameServiceStub(ch).GetRules(game_pb2.GetRulesRequest(game=WIDE),
                                                          timeout=30),
], ids=["payout-emoji", "payout-accents", "game-emoji"])
def test_an_error_echoing_wide_characters_stays_short_in_bytes(
        channel: grpc.Channel, call: Any) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        call(channel)
    err = raised.value
    assert err.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    texts = [err.details() or "", status.message]
    for detail in status.details:
        request = error_details_pb2.BadRequest()
        if detail.Unpack(request):
            texts += [t for v in request.field_violations for t in (v.field, v.description)]
    assert texts[0], texts
    for text in texts:
        assert len(text.encode()) <= 400 and text.isprintable(), text
