"""The gRPC wallet client against the reference operator wallet, a real process over real gRPC:
each kind of answer is classified as success, clean reject or uncertain, and the wallet's ledger
shows what really moved (so an "uncertain" that was applied is seen to be applied)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from support.live_server import make_dev_certs
from support.ref_wallet import RefWallet
from support.slow_link import SlowLink

from rng_service.api.operator_wallet_grpc import GrpcOperatorWallet, classify
from rng_service.api.proto_gen.fairshoe.operator.v1 import wallet_pb2 as pb
from rng_service.core.config import ConfigError
from rng_service.service.operator_wallet import (
    Accepted,
    Credit,
    Debit,
    Purpose,
    Rejected,
    RejectReason,
    Rollback,
    Uncertain,
    WalletConfig,
    WalletKind,
)

pytestmark = pytest.mark.processes  # it starts the reference wallet

#: the client's timeout: a loaded machine must not turn an answer into an uncertain one (the
#: most an operator may configure); the timeout's own test uses a short one
TIMEOUT_MS = 10_000
SHORT_TIMEOUT_MS = 250


@pytest.fixture(scope="module")
def wallet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefWallet]:
    ref = RefWallet(tmp_path_factory.mktemp("ref-wallet")).start()
    yield ref
    ref.stop()


@pytest.fixture
def ref(wallet: RefWallet) -> Iterator[RefWallet]:
    """The module's wallet, running and fault-free for each test."""
    if not wallet.running():
        wallet.start()
    wallet.faults()
    yield wallet
    wallet.faults()


@pytest.fixture
def client(wallet: RefWallet) -> Iterator[GrpcOperatorWallet]:
    if not wallet.running():
        wallet.start()
    c = GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, wallet.endpoint, TIMEOUT_MS))
    yield c
    c.close()


def _player(ref: RefWallet, amount: int = 1000) -> str:
    player = f"p-{uuid.uuid4().hex[:8]}"
    ref.fund(player, amount)
    return player


def _debit(player: str, amount: int = 100, tx: str | None = None) -> Debit:
    return Debit(tx or uuid.uuid4().hex, uuid.uuid4().hex, player, "EUR", amount, Purpose.BET,
                 "snap")


def test_a_debit_is_accepted_with_the_balance_after(ref: RefWallet,
                                                    client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    assert client.debit(_debit(player)) == Accepted(900, client_ref(ref, player))
    assert ref.balance(player) == 900


def client_ref(ref: RefWallet, player: str) -> str:
    """The wallet reference the reference wallet gives (the debit's own id)."""
    return str(ref._sql("SELECT transaction_id FROM transactions WHERE player = ? "
                        "AND kind = 'debit'", player)[0][0])


def test_the_same_debit_again_is_the_same_answer_and_moves_nothing(
        ref: RefWallet, client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    first = client.debit(debit)
    assert client.debit(debit) == first
    assert ref.balance(player) == 900


def test_a_debit_past_the_balance_is_a_clean_reject(ref: RefWallet,
                                                    client: GrpcOperatorWallet) -> None:
    player = _player(ref, 50)
    answer = client.debit(_debit(player, 100))
    assert isinstance(answer, Rejected) and answer.reason is RejectReason.INSUFFICIENT_FUNDS
    assert ref.balance(player) == 50


@pytest.mark.parametrize("reason", ["PLAYER_BLOCKED", "LIMIT_REACHED"])
def test_the_wallets_reject_reasons_are_kept(ref: RefWallet, client: GrpcOperatorWallet,
                                             reason: str) -> None:
    player = _player(ref)
    ref.faults(reject=reason)
    answer = client.debit(_debit(player))
    assert isinstance(answer, Rejected) and answer.reason is RejectReason[reason]
    assert ref.balance(player) == 1000


def test_latency_past_the_timeout_is_uncertain(ref: RefWallet) -> None:
    player = _player(ref)
    ref.faults(latency_ms=SHORT_TIMEOUT_MS * 4)
    c = GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, ref.endpoint, SHORT_TIMEOUT_MS))
    try:
        answer = c.debit(_debit(player))
    finally:
        c.close()
    assert answer == Uncertain("status DEADLINE_EXCEEDED")


@pytest.mark.parametrize("code", ["UNAVAILABLE", "INTERNAL", "INVALID_ARGUMENT",
                                  "RESOURCE_EXHAUSTED"])
def test_any_error_status_is_uncertain(ref: RefWallet, client: GrpcOperatorWallet,
                                       code: str) -> None:
    player = _player(ref)
    ref.faults(error=code)
    assert client.debit(_debit(player)) == Uncertain(f"status {code}")
    assert ref.balance(player) == 1000


def test_an_applied_debit_whose_answer_is_lost_is_uncertain_and_its_retry_accepted(
        ref: RefWallet, client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    ref.faults(lose_answer=True)
    assert client.debit(debit) == Uncertain("status UNAVAILABLE")
    assert ref.balance(player) == 900  # applied all the same
    ref.faults()
    answer = client.debit(debit)
    assert isinstance(answer, Accepted) and answer.balance_after == 900
    assert ref.balance(player) == 900


def test_an_answer_with_no_result_is_uncertain(ref: RefWallet,
                                               client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    ref.faults(malformed=True)
    assert client.debit(_debit(player)) == Uncertain("an answer with no result")
    assert client.credit(Credit(uuid.uuid4().hex, "r", player, "EUR", 5, (), "snap")
                         ) == Uncertain("an answer with no result")


def test_a_wallet_that_is_down_or_resets_is_uncertain(ref: RefWallet,
                                                      client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    ref.faults(reset=True)
    assert isinstance(client.debit(_debit(player)), Uncertain)
    ref.stop()
    assert client.debit(_debit(player)) == Uncertain("status UNAVAILABLE")
    ref.start()  # same port, same ledger
    ref.faults()
    assert isinstance(_until_answered(client, _debit(player)), Accepted)


def _until_answered(client: GrpcOperatorWallet, debit: Debit) -> Accepted | Rejected | Uncertain:
    """Send ``debit`` (the same id each time, as the dispatcher does) until it is not
    uncertain: the channel reconnects to a restarted wallet within its backoff."""
    for _ in range(100):
        answer = client.debit(debit)
        if not isinstance(answer, Uncertain):
            return answer
        time.sleep(0.05)
    return answer


def test_a_rollback_refunds_an_applied_debit_once(ref: RefWallet,
                                                  client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    client.debit(debit)
    rollback = Rollback(uuid.uuid4().hex, debit.transaction_id, debit.round_id, player, "EUR",
                        debit.amount)
    assert client.rollback(rollback) == Accepted(1000)
    assert client.rollback(rollback) == Accepted(1000)
    assert ref.balance(player) == 1000


def test_a_rollback_of_an_unseen_debit_succeeds_and_the_late_debit_moves_nothing(
        ref: RefWallet, client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    rollback = Rollback(uuid.uuid4().hex, debit.transaction_id, debit.round_id, player, "EUR",
                        debit.amount)
    assert client.rollback(rollback) == Accepted(1000)
    late = client.debit(debit)
    assert isinstance(late, Rejected) and late.reason is RejectReason.ROLLED_BACK
    assert ref.balance(player) == 1000


def test_a_credit_of_zero_closes_a_round(ref: RefWallet, client: GrpcOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    client.debit(debit)
    credit = Credit(uuid.uuid4().hex, debit.round_id, player, "EUR", 0, (debit.transaction_id,),
                    "snap")
    assert client.credit(credit) == Accepted(900)
    assert [t["kind"] for t in ref.transactions(debit.round_id)] == ["debit", "credit"]
    assert ref.transactions(debit.round_id)[1]["reference"] == debit.transaction_id


def test_the_balance(ref: RefWallet, client: GrpcOperatorWallet) -> None:
    player = _player(ref, 321)
    assert client.balance(player, "EUR") == 321
    ref.faults(error="UNAVAILABLE")
    assert client.balance(player, "EUR") == Uncertain("status UNAVAILABLE")


def test_a_reject_of_a_credit_or_an_unknown_reason_is_uncertain() -> None:
    unknown = pb.DebitResponse(rejected=pb.Rejected(reason=99))  # type: ignore[arg-type]
    assert isinstance(classify(unknown, may_reject=True), Uncertain)
    unspecified = pb.DebitResponse(rejected=pb.Rejected())
    assert isinstance(classify(unspecified, may_reject=True), Uncertain)
    negative = pb.CreditResponse(accepted=pb.Accepted(balance_after_minor=-1))
    assert isinstance(classify(negative, may_reject=False), Uncertain)


def test_credentials_are_checked_without_showing_their_paths(tmp_path: Path) -> None:
    secret = tmp_path / "very-secret-name"
    with pytest.raises(ConfigError) as missing:
        GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, "127.0.0.1:1", 100,
                                        ca=str(secret)))
    assert "very-secret-name" not in str(missing.value)
    secret.write_text("not a pem")
    (tmp_path / "ca.pem").write_text("x")
    with pytest.raises(ConfigError) as bad:
        GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, "127.0.0.1:1", 100,
                                        credentials=str(secret), ca=str(tmp_path / "ca.pem")))
    assert "very-secret-name" not in str(bad.value) and "not a pem" not in str(bad.value)
    assert "very-secret-name" not in repr(WalletConfig("op", WalletKind.GRPC, "e", 1,
                                                       credentials=str(secret)))


#: the slow link's delay each way: a connection's set-up (TCP's handshake, then HTTP/2's settings
#: each way) takes several of it, as a wallet across an ocean (TLS adds its round trips) or on
#: a busy machine takes
LINK_DELAY_S = 0.3


def test_a_wallet_whose_connection_is_slow_to_set_up_is_reached(ref: RefWallet) -> None:
    """Every byte 0.3 s late each way: the connection takes over a second to set up, and the
    first call waits for it (within the call's timeout) and is answered. gRPC's minimum
    connect timeout is set by its option "min_reconnect_backoff_ms", which the client once set
    to 100 ms for a fast reconnect: every connection that took longer failed, and every call
    on it was uncertain, whatever its timeout."""
    player = _player(ref)
    with SlowLink(ref.port, LINK_DELAY_S) as link:
        c = GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, f"127.0.0.1:{link.port}",
                                            TIMEOUT_MS))
        try:
            answer = c.debit(_debit(player))
        finally:
            c.close()
    assert isinstance(answer, Accepted) and answer.balance_after == 900, answer
    assert ref.balance(player) == 900


def test_a_wallet_not_scheduled_as_the_first_call_connects_is_reached(ref: RefWallet) -> None:
    """The wallet's process stopped for 0.3 s as the first call connects (what a loaded
    machine does to it: the suite's seamless tests failed so, UNAVAILABLE on their first
    debit): the call waits for the connection and is answered."""
    player = _player(ref)
    assert ref.proc is not None
    c = GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, ref.endpoint, TIMEOUT_MS))
    resume = threading.Timer(LINK_DELAY_S, os.kill, (ref.proc.pid, signal.SIGCONT))
    try:
        os.kill(ref.proc.pid, signal.SIGSTOP)
        resume.start()
        answer = c.debit(_debit(player))
    finally:
        resume.join()
        os.kill(ref.proc.pid, signal.SIGCONT)
        c.close()
    assert isinstance(answer, Accepted) and answer.balance_after == 900, answer


def test_an_unreachable_endpoint_is_uncertain() -> None:
    with grpc.insecure_channel("127.0.0.1:1"):
        pass
    c = GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, "127.0.0.1:1", 300))
    try:
        assert isinstance(c.debit(_debit("p")), Uncertain)
    finally:
        c.close()


@pytest.fixture(scope="module")
def tls_wallet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefWallet]:
    """The reference wallet on gRPC over mutual TLS: its server certificate of the dev CA, a
    client certificate of that CA required."""
    certs = make_dev_certs(tmp_path_factory.mktemp("wallet-certs"))
    ref = RefWallet(tmp_path_factory.mktemp("ref-wallet-tls"), certs=certs).start()
    yield ref
    ref.stop()


def _tls_client(ref: RefWallet, *, client: str | None, ca: str = "ca") -> GrpcOperatorWallet:
    """A client configured as `fairshoe operators wallet --credentials --ca` configures it."""
    certs, credentials = ref.certs, ""
    assert certs is not None
    if client is not None:  # the chain and its key in one PEM file, as configured
        pem = ref.data_dir / f"{client}-with-key.pem"
        pem.write_bytes((certs / f"{client}.pem").read_bytes()
                        + (certs / f"{client}.key").read_bytes())
        credentials = str(pem)
    return GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, ref.endpoint, 5000,
                                           credentials=credentials, ca=str(certs / f"{ca}.pem")))


def test_mutual_tls_with_the_client_certificate_is_accepted(tls_wallet: RefWallet) -> None:
    c = _tls_client(tls_wallet, client="operator-a")
    try:
        player = _player(tls_wallet)
        assert isinstance(c.debit(_debit(player)), Accepted)
        assert c.balance(player, "EUR") == tls_wallet.balance(player) == 900
    finally:
        c.close()


@pytest.mark.parametrize(("client", "ca"), [(None, "ca"), ("other-client", "ca"),
                                            ("operator-a", "other-ca")])
def test_tls_without_the_right_certificates_is_uncertain_and_moves_nothing(
        tls_wallet: RefWallet, client: str | None, ca: str) -> None:
    """No client certificate, one of another CA, or a wallet whose certificate the configured
    CA did not sign: the handshake fails, the call is uncertain, and nothing moves."""
    c = _tls_client(tls_wallet, client=client, ca=ca)
    try:
        player = _player(tls_wallet)
        assert c.debit(_debit(player)) == Uncertain("status UNAVAILABLE")
        assert tls_wallet.balance(player) == 1000
    finally:
        c.close()


def test_a_plaintext_client_of_a_tls_wallet_is_uncertain(tls_wallet: RefWallet) -> None:
    c = GrpcOperatorWallet(WalletConfig("op", WalletKind.GRPC, tls_wallet.endpoint, 5000))
    try:
        player = _player(tls_wallet)
        assert c.debit(_debit(player)) == Uncertain("status UNAVAILABLE")
        assert tls_wallet.balance(player) == 1000
    finally:
        c.close()
