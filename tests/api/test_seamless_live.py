"""A real `fairshoe serve` process on the seamless wallet of a real reference operator wallet
process, over real gRPC both ways: the wallet's answers reach the client as status codes, the
server's own dispatcher thread pays the returns, and a credit left unsent by a SIGKILL (the wallet
down meanwhile) is paid once after the restart. A second server stakes and pays a round through
the wallet's HTTP face, every request signed, its secret in no log."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest
from support.error_details import reason_of
from support.live_server import FAIRSHOE, STAND, Client, ServerProcess
from support.ref_wallet import RefWallet

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

SNAP_19_V_17 = ["TS", "7D", "9H", "TC"]  # player 19 against the dealer's 17 (no hole card)
WAIT_SECONDS = 60.0


@pytest.fixture(scope="module")
def wallet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefWallet]:
    ref = RefWallet(tmp_path_factory.mktemp("ref-wallet")).start()
    yield ref
    ref.stop()


@pytest.fixture(scope="module")
def server(wallet: RefWallet, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("seamless-live"), metrics_port="any")
    proc.data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(FAIRSHOE), "operators", "wallet", "default", "--kind", "grpc",
                    "--endpoint", wallet.endpoint, "--timeout-ms", "5000"],
                   env=proc.env, cwd=proc.data_dir, check=True, capture_output=True)
    proc.start()
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture
def ref(wallet: RefWallet) -> Iterator[RefWallet]:
    if not wallet.running():
        wallet.start()
    wallet.faults()
    yield wallet
    wallet.faults()


def _player(ref: RefWallet, amount: int = 5000) -> str:
    player = f"p{uuid.uuid4().hex[:10]}"
    ref.fund(player, amount)
    return player


def _settled(server: ServerProcess, round_id: str) -> list[tuple[str, str]]:
    """The round's movements once none is pending (the server's dispatcher sends them)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        rows = server.sql("SELECT kind, state FROM wallet_movements WHERE round_id = ? "
                          "ORDER BY created_at", round_id)
        if all(state != "pending" for _, state in rows) or time.monotonic() > deadline:
            return [(str(k), str(s)) for k, s in rows]
        time.sleep(0.05)


def test_a_round_is_staked_and_paid_through_the_operators_wallet(
        server: ServerProcess, ref: RefWallet) -> None:
    client = server.client()
    player = _player(ref)
    server.stack(SNAP_19_V_17)
    view = client.start(player, "snap", [1000])
    assert view.balance_after_minor == 4000 and ref.balance(player) == 4000
    done = client.act(player, view, STAND)
    assert done.status == rt.ROUND_STATUS_FINISHED
    assert _settled(server, view.round_id) == [("debit", "acked"), ("credit", "acked")]
    assert ref.balance(player) == 6000 and ref.net(view.round_id) == 1000
    assert not view.HasField("credit")  # none before the round ends


def test_a_rejected_stake_is_failed_precondition_with_the_wallets_reason(
        server: ServerProcess, ref: RefWallet) -> None:
    client = server.client()
    player = _player(ref, 500)
    with pytest.raises(grpc.RpcError) as info:
        client.start(player, "snap", [1000])
    assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(info.value) == "INSUFFICIENT_FUNDS"
    ref.faults(reject="PLAYER_BLOCKED")
    with pytest.raises(grpc.RpcError) as info:
        client.start(_player(ref), "snap", [1000])
    assert reason_of(info.value) == "PLAYER_BLOCKED"


def test_an_unanswered_stake_is_unavailable_and_rolled_back(server: ServerProcess,
                                                          ref: RefWallet) -> None:
    client = server.client()
    player = _player(ref)
    ref.faults(lose_answer=True, methods=["Debit"])
    with pytest.raises(grpc.RpcError) as info:
        client.start(player, "snap", [1000], request_id="lost-1")
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE
    assert reason_of(info.value) == "WALLET_UNCERTAIN"
    ref.faults()
    with pytest.raises(grpc.RpcError) as again:  # the same request: the same answer
        client.start(player, "snap", [1000], request_id="lost-1")
    assert reason_of(again.value) == "WALLET_UNCERTAIN"
    (round_id,), = server.sql("SELECT DISTINCT round_id FROM wallet_movements WHERE player = ?",
                              player)
    assert _settled(server, round_id) == [("debit", "rolled_back"), ("rollback", "acked")]
    assert ref.balance(player) == 5000
    # the round ends void without a card dealt: its record is there for an auditor
    assert server.sql("SELECT round_id, status FROM rounds WHERE player = ?", player) == [
        (round_id, "void")]


def _gauge(server: ServerProcess, name: str) -> float:
    values = [float(line.split()[-1]) for line in server.scrape().splitlines()
              if line.startswith(name + " ")]
    assert len(values) == 1, f"{name} not on /metrics once"
    return values[0]


def test_the_outbox_is_on_the_metrics_while_a_wallet_is_down(server: ServerProcess,
                                                             ref: RefWallet) -> None:
    client = server.client()
    player = _player(ref)
    server.stack(SNAP_19_V_17)
    view = client.start(player, "snap", [1000])
    ref.stop()
    done = client.act(player, view, STAND)
    assert done.credit.state == rt.CREDIT_STATE_PENDING  # finished, its credit not yet paid
    assert done.credit.amount_minor == 2000 and done.credit.transaction_id
    time.sleep(1.1)  # the oldest unsettled movement's age grows past a second
    assert _gauge(server, "fairshoe_wallet_unsettled_movements") >= 1
    assert _gauge(server, "fairshoe_wallet_oldest_unsettled_seconds") >= 1.0
    ref.start()
    assert _settled(server, view.round_id) == [("debit", "acked"), ("credit", "acked")]
    assert _gauge(server, "fairshoe_wallet_unsettled_movements") == 0
    assert _gauge(server, "fairshoe_wallet_oldest_unsettled_seconds") == 0
    paid = client.get(player, view.round_id)
    assert paid.credit.state == rt.CREDIT_STATE_ACKNOWLEDGED
    assert paid.credit.transaction_id == done.credit.transaction_id
    assert paid.balance_after_minor == 6000


def _unsettled(client: Client, page_size: int) -> list[wallet_pb2.UnsettledMovement]:
    """Every unsettled movement ListUnsettledMovements shows, page by page; each page's total
    is the whole list's length."""
    shown: list[wallet_pb2.UnsettledMovement] = []
    token = ""
    while True:
        page = client.wallet.ListUnsettledMovements(wallet_pb2.ListUnsettledMovementsRequest(
            page_size=page_size, page_token=token))
        assert len(page.movements) <= page_size
        shown += page.movements
        token = page.next_page_token
        if not token:
            assert page.total_unsettled == len(shown)
            assert (page.oldest_age_seconds > 0) == bool(shown)
            return shown


def test_reconciliation_lists_the_credits_a_wallet_down_has_not_taken(
        server: ServerProcess, ref: RefWallet) -> None:
    client = server.client()
    players = [_player(ref), _player(ref)]
    views = []
    for player in players:
        server.stack(SNAP_19_V_17)
        views.append(client.start(player, "snap", [1000]))
    ref.stop()
    credits = [client.act(p, v, STAND).credit.transaction_id for p, v in zip(players, views,
                                                                               strict=True)]
    shown = _unsettled(client, page_size=1)
    assert [m.transaction_id for m in shown if m.round_id in {v.round_id for v in views}] == \
        credits  # oldest first
    ages = [m.created_at.ToNanoseconds() for m in shown]
    assert ages == sorted(ages)
    first = next(m for m in shown if m.transaction_id == credits[0])
    assert (first.kind, first.state, first.amount_minor, first.currency, first.player_id) == (
        wallet_pb2.MOVEMENT_KIND_CREDIT, wallet_pb2.MOVEMENT_STATE_PENDING, 2000, "EUR",
        players[0])
    assert first.reference and first.age_seconds >= 0 and first.next_attempt_at.seconds > 0
    for bad, field in (({"page_token": "nope"}, "page_token"),
                       ({"page_token": "0" * 32}, "page_token"),
                       ({"page_size": 501}, "page_size")):
        with pytest.raises(grpc.RpcError) as info:
            client.wallet.ListUnsettledMovements(
                wallet_pb2.ListUnsettledMovementsRequest(**bad))  # type: ignore[arg-type]
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in (info.value.details() or "")
    ref.start()
    for view in views:
        assert _settled(server, view.round_id) == [("debit", "acked"), ("credit", "acked")]
    assert not {m.transaction_id for m in _unsettled(client, page_size=50)} & set(credits)


def test_a_credit_unsent_at_a_sigkill_is_paid_once_after_the_restart(
        server: ServerProcess, ref: RefWallet) -> None:
    client = server.client()
    player = _player(ref)
    server.stack(SNAP_19_V_17)
    view = client.start(player, "snap", [1000])
    ref.stop()  # the wallet is down when the round ends
    done = client.act(player, view, STAND)
    assert done.status == rt.ROUND_STATUS_FINISHED  # the player sees it finished at once
    server.kill()
    assert server.sql("SELECT kind, state FROM wallet_movements WHERE round_id = ? "
                      "ORDER BY created_at", view.round_id) == [("debit", "acked"),
                                                                 ("credit", "pending")]
    ref.start()
    server.start()
    assert _settled(server, view.round_id) == [("debit", "acked"), ("credit", "acked")]
    assert ref.balance(player) == 6000
    assert [t["kind"] for t in ref.transactions(view.round_id)] == ["debit", "credit"]


@pytest.fixture(scope="module")
def http_wallet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefWallet]:
    ref = RefWallet(tmp_path_factory.mktemp("ref-wallet-http"), http=True).start()
    yield ref
    ref.stop()


def test_a_round_is_staked_and_paid_through_an_http_wallet(
        http_wallet: RefWallet, tmp_path_factory: pytest.TempPathFactory) -> None:
    ref = http_wallet
    proc = ServerProcess(tmp_path_factory.mktemp("seamless-http"))
    proc.data_dir.mkdir(parents=True, exist_ok=True)
    setting = subprocess.run(
        [str(FAIRSHOE), "operators", "wallet", "default", "--kind", "http", "--endpoint",
         ref.endpoint, "--hmac-secret-file", str(ref.hmac_secret), "--timeout-ms", "5000"],
        env=proc.env, cwd=proc.data_dir, check=True, capture_output=True, text=True)
    proc.start()
    try:
        client = proc.client()
        player = _player(ref)
        proc.stack(SNAP_19_V_17)
        view = client.start(player, "snap", [1000])
        assert view.balance_after_minor == 4000 and ref.balance(player) == 4000
        done = client.act(player, view, STAND)
        assert done.status == rt.ROUND_STATUS_FINISHED
        assert _settled(proc, view.round_id) == [("debit", "acked"), ("credit", "acked")]
        assert ref.balance(player) == 6000 and ref.net(view.round_id) == 1000
        assert [t["kind"] for t in ref.transactions(view.round_id)] == ["debit", "credit"]
    finally:
        assert proc.stop() == 0, proc.log()
    for shown in (setting.stdout, setting.stderr, proc.log()):
        assert ref.secret not in shown
