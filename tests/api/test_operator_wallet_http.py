"""The HTTPS JSON wallet client against the reference operator wallet's HTTP face, a real process
over real HTTP (and HTTPS with mutual TLS) that checks every signature: each kind of answer is
classified as the gRPC client classifies it (success, clean reject or uncertain), and the
wallet's ledger shows what really moved. A request the wallet refuses (a bad signature, a
replay) is uncertain and moves nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.live_server import make_dev_certs
from support.ref_wallet import RefWallet

from rng_service.api.operator_wallet_http import HttpOperatorWallet, canonical, classify
from rng_service.api.wallet_clients import WalletClients
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

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

#: the client's timeout: a loaded machine must not turn an answer into an uncertain one (the
#: most an operator may configure); the timeout's own test uses a short one
TIMEOUT_MS = 10_000
SHORT_TIMEOUT_MS = 250


@pytest.fixture(scope="module")
def wallet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefWallet]:
    ref = RefWallet(tmp_path_factory.mktemp("ref-wallet-http"), http=True).start()
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


def _config(ref: RefWallet, secret: Path | None = None) -> WalletConfig:
    return WalletConfig("op", WalletKind.HTTP, ref.endpoint, TIMEOUT_MS,
                        hmac_secret=str(secret or ref.hmac_secret))


@pytest.fixture
def client(wallet: RefWallet) -> Iterator[HttpOperatorWallet]:
    if not wallet.running():
        wallet.start()
    c = HttpOperatorWallet(_config(wallet))
    yield c
    c.close()


def _player(ref: RefWallet, amount: int = 1000) -> str:
    player = f"p-{uuid.uuid4().hex[:8]}"
    ref.fund(player, amount)
    return player


def _debit(player: str, amount: int = 100) -> Debit:
    return Debit(uuid.uuid4().hex, uuid.uuid4().hex, player, "EUR", amount, Purpose.BET, "snap")


def test_a_debit_is_accepted_with_the_balance_after_and_the_wallets_reference(
        ref: RefWallet, client: HttpOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    assert client.debit(debit) == Accepted(900, debit.transaction_id)
    assert ref.balance(player) == 900
    assert client.debit(debit) == Accepted(900, debit.transaction_id)  # the same id: idempotent
    assert ref.balance(player) == 900


def test_a_debit_past_the_balance_is_a_clean_reject(ref: RefWallet,
                                                    client: HttpOperatorWallet) -> None:
    player = _player(ref, 50)
    assert client.debit(_debit(player)) == Rejected(RejectReason.INSUFFICIENT_FUNDS, "refused")
    assert ref.balance(player) == 50


@pytest.mark.parametrize("reason", ["PLAYER_BLOCKED", "LIMIT_REACHED"])
def test_the_wallets_reject_reasons_are_kept(ref: RefWallet, client: HttpOperatorWallet,
                                             reason: str) -> None:
    player = _player(ref)
    ref.faults(reject=reason)
    assert client.debit(_debit(player)) == Rejected(RejectReason[reason], "refused")
    assert ref.balance(player) == 1000


def test_latency_past_the_timeout_is_uncertain(ref: RefWallet) -> None:
    ref.faults(latency_ms=SHORT_TIMEOUT_MS * 4)
    c = HttpOperatorWallet(dataclasses.replace(_config(ref), timeout_ms=SHORT_TIMEOUT_MS))
    try:
        assert c.debit(_debit(_player(ref))) == Uncertain("timed out")
    finally:
        c.close()


@pytest.mark.parametrize("status", [500, 502, 503, 400, 404, 429])
def test_any_status_but_2xx_is_uncertain(ref: RefWallet, client: HttpOperatorWallet,
                                         status: int) -> None:
    player = _player(ref)
    ref.faults(http_status=status)
    assert client.debit(_debit(player)) == Uncertain(f"HTTP status {status}")
    assert ref.balance(player) == 1000


def test_an_applied_debit_whose_answer_is_lost_is_uncertain_and_its_retry_accepted(
        ref: RefWallet, client: HttpOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    ref.faults(lose_answer=True)
    assert client.debit(debit) == Uncertain("HTTP status 503")
    assert ref.balance(player) == 900  # applied all the same
    ref.faults()
    assert client.debit(debit) == Accepted(900, debit.transaction_id)
    assert ref.balance(player) == 900


@pytest.mark.parametrize(("body", "cause"), [
    ("{}", "an answer with no result"),
    ("not json {", "an answer that is not JSON"),
    ("[1, 2]", "an answer that is not a JSON object"),
    ('{"accepted": {"balance_after_minor": "900"}}',
     "an accepted answer without an integer balance_after_minor"),
    ('{"accepted": {"balance_after_minor": 9.5}}',
     "an accepted answer without an integer balance_after_minor"),
    ('{"accepted": {"balance_after_minor": true}}',
     "an accepted answer without an integer balance_after_minor"),
    ('{"accepted": {"balance_after_minor": -1}}', "an accepted answer with a negative balance -1"),
    ('{"accepted": 900}', "an accepted answer without an integer balance_after_minor"),
    ('{"accepted": {"balance_after_minor": 1}, "rejected": {"reason": '
     '"REJECT_REASON_LIMIT_REACHED"}}', "an answer with both results"),
    ('{"rejected": {"reason": "REJECT_REASON_TIRED"}}', "a reject with an unknown reason "
                                                        "REJECT_REASON_TIRED"),
    ('{"rejected": {"reason": "INSUFFICIENT_FUNDS"}}', "a reject with an unknown reason "
                                                       "INSUFFICIENT_FUNDS"),
    ('{"rejected": {"reason": 1}}', "a reject with an unknown reason int"),
    ('{"rejected": {}}', "a reject with an unknown reason NoneType"),
])
def test_a_malformed_or_misshapen_answer_is_uncertain(
        ref: RefWallet, client: HttpOperatorWallet, body: str, cause: str) -> None:
    ref.faults(body=body)
    assert client.debit(_debit(_player(ref))) == Uncertain(cause)


def test_a_credit_or_rollback_may_not_be_rejected() -> None:
    rejected = {"rejected": {"reason": "REJECT_REASON_INSUFFICIENT_FUNDS"}}
    assert classify(rejected, may_reject=False) == Uncertain(
        "a reject of a call that may not be rejected")
    assert classify(rejected, may_reject=True) == Rejected(RejectReason.INSUFFICIENT_FUNDS)


def test_a_wallet_that_is_down_or_resets_is_uncertain(ref: RefWallet,
                                                      client: HttpOperatorWallet) -> None:
    player = _player(ref)
    ref.faults(reset=True)
    answer = client.debit(_debit(player))
    assert isinstance(answer, Uncertain) and answer.cause.startswith("the call failed: ")
    ref.stop()
    assert client.debit(_debit(player)) == Uncertain("the call failed: ConnectError")
    ref.start()  # same port, same ledger
    ref.faults()
    assert isinstance(client.debit(_debit(player)), Accepted)


def test_a_wrong_secret_is_refused_by_the_wallet_and_uncertain(
        ref: RefWallet, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.secret"
    wrong.write_text("x" * 64)
    player = _player(ref)
    c = HttpOperatorWallet(_config(ref, wrong))
    try:
        assert c.debit(_debit(player)) == Uncertain("HTTP status 401")
        assert c.balance(player, "EUR") == Uncertain("HTTP status 401")
    finally:
        c.close()
    assert ref.balance(player) == 1000
    assert all(t["player"] != player for t in ref.transactions())


def _signed(ref: RefWallet, path: str, body: bytes, timestamp: int, nonce: str
            ) -> dict[str, str]:
    """The headers of a request signed by the contract's own definition (not the client's
    code): method, path, timestamp, nonce and the body's SHA-256, one a line."""
    message = f"POST\n{path}\n{timestamp}\n{nonce}\n{hashlib.sha256(body).hexdigest()}"
    mac = hmac.new(ref.secret.encode(), message.encode(), hashlib.sha256).hexdigest()
    return {"X-Fairshoe-Timestamp": str(timestamp), "X-Fairshoe-Nonce": nonce,
            "X-Fairshoe-Signature": mac, "Content-Type": "application/json"}


def test_the_canonical_string_is_the_documented_one() -> None:
    body = b'{"a":1}'
    assert canonical("POST", "/w/Debit", "1700000000", "n1", body) == (
        b"POST\n/w/Debit\n1700000000\nn1\n" + hashlib.sha256(body).hexdigest().encode())


def test_a_replayed_request_and_a_stale_one_are_refused_and_move_nothing(ref: RefWallet) -> None:
    player = _player(ref)
    path = "/fairshoe/v1/Debit"
    body = json.dumps({"transaction_id": uuid.uuid4().hex, "round_id": "r",
                       "account": {"player_id": player, "currency": "EUR"},
                       "amount_minor": 100, "purpose": "DEBIT_PURPOSE_BET",
                       "game": "snap"}).encode()
    url = f"http://127.0.0.1:{ref.port}{path}"
    headers = _signed(ref, path, body, int(time.time()), uuid.uuid4().hex)
    first = httpx.post(url, content=body, headers=headers)
    assert first.status_code == 200 and first.json()["accepted"]["balance_after_minor"] == 900
    replay = httpx.post(url, content=body, headers=headers)
    assert (replay.status_code, replay.json()) == (409, {"error": "replayed"})
    ref.stop()
    ref.start()  # the nonces seen are durable: a restart does not reopen the window
    assert httpx.post(url, content=body, headers=headers).status_code == 409
    for skew in (-310, 310):  # past the window, whichever second each clock reads
        stale = _signed(ref, path, body, int(time.time()) + skew, uuid.uuid4().hex)
        answer = httpx.post(url, content=body, headers=stale)
        assert (answer.status_code, answer.json()) == (
            401, {"error": "timestamp outside the replay window"})
    tampered = _signed(ref, path, body, int(time.time()), uuid.uuid4().hex)
    answer = httpx.post(url, content=body.replace(b"100", b"900"), headers=tampered)
    assert (answer.status_code, answer.json()) == (401, {"error": "bad signature"})
    assert httpx.post(url, content=body).status_code == 401  # unsigned
    assert ref.balance(player) == 900


def test_a_client_signs_each_retry_anew(ref: RefWallet, client: HttpOperatorWallet) -> None:
    """The same movement sent twice in one second is two requests (two nonces), so the retry
    is not taken for a replay: it gets the first answer."""
    player = _player(ref)
    debit = _debit(player)
    assert client.debit(debit) == client.debit(debit) == Accepted(900, debit.transaction_id)


def test_a_rollback_and_a_credit(ref: RefWallet, client: HttpOperatorWallet) -> None:
    player = _player(ref)
    debit = _debit(player)
    unseen = _debit(player)
    assert client.rollback(Rollback(uuid.uuid4().hex, unseen.transaction_id, unseen.round_id,
                                    player, "EUR", 100)) == Accepted(1000)
    assert client.debit(unseen) == Rejected(RejectReason.ROLLED_BACK, "refused")
    client.debit(debit)
    rollback = Rollback(uuid.uuid4().hex, debit.transaction_id, debit.round_id, player, "EUR",
                        debit.amount)
    assert client.rollback(rollback) == client.rollback(rollback) == Accepted(1000)
    again = _debit(player)
    client.debit(again)
    credit = Credit(uuid.uuid4().hex, again.round_id, player, "EUR", 250,
                    (again.transaction_id,), "snap")
    assert client.credit(credit) == Accepted(1150)
    assert ref.transactions(again.round_id)[1]["reference"] == again.transaction_id
    ref.faults(malformed=True, methods=["Credit"])
    assert client.credit(Credit(uuid.uuid4().hex, "r", player, "EUR", 0, (), "snap")
                         ) == Uncertain("an answer with no result")


def test_the_balance(ref: RefWallet, client: HttpOperatorWallet) -> None:
    player = _player(ref, 321)
    assert client.balance(player, "EUR") == 321
    ref.faults(body='{"balance_minor": "321"}')
    assert client.balance(player, "EUR") == Uncertain(
        "a balance answer without an integer balance_minor")
    ref.faults(http_status=500)
    assert client.balance(player, "EUR") == Uncertain("HTTP status 500")


def test_the_secret_is_checked_without_showing_it_or_its_path(tmp_path: Path) -> None:
    secret = tmp_path / "very-secret-name"
    config = WalletConfig("op", WalletKind.HTTP, "http://127.0.0.1:1/w", 100,
                          hmac_secret=str(secret))
    with pytest.raises(ConfigError) as missing:
        HttpOperatorWallet(config)
    assert "very-secret-name" not in str(missing.value)
    secret.write_text("short-sesame\n")
    with pytest.raises(ConfigError) as short:
        HttpOperatorWallet(config)
    assert "at least 32 bytes" in str(short.value) and "sesame" not in str(short.value)
    assert "very-secret-name" not in repr(config)
    secret.write_text("s" * 40)
    with pytest.raises(ConfigError, match="https://"):
        HttpOperatorWallet(WalletConfig("op", WalletKind.HTTP, "http://h/w", 100,
                                        ca=str(secret), hmac_secret=str(secret)))
    with pytest.raises(ConfigError) as bad_ca:
        HttpOperatorWallet(WalletConfig("op", WalletKind.HTTP, "https://h/w", 100,
                                        ca=str(secret), hmac_secret=str(secret)))
    assert "very-secret-name" not in str(bad_ca.value) and "sss" not in str(bad_ca.value)


def test_the_directory_picks_the_transport_by_kind(ref: RefWallet) -> None:
    clients = WalletClients()
    try:
        config = _config(ref)
        http = clients.client(config)
        assert isinstance(http, HttpOperatorWallet) and clients.client(config) is http
        player = _player(ref)
        assert http.balance(player, "EUR") == 1000
    finally:
        clients.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dev_certs(tmp_path_factory.mktemp("wallet-certs"))


@pytest.fixture(scope="module")
def tls_wallet(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[RefWallet]:
    ref = RefWallet(tmp_path_factory.mktemp("ref-wallet-https"), http=True, certs=certs).start()
    yield ref
    ref.stop()


def _tls_client(ref: RefWallet, *, client: str | None, ca: str = "ca") -> HttpOperatorWallet:
    certs, credentials = ref.certs, ""
    assert certs is not None
    if client is not None:  # the chain and its key in one PEM file, as configured
        pem = ref.data_dir / f"{client}-with-key.pem"
        pem.write_bytes((certs / f"{client}.pem").read_bytes()
                        + (certs / f"{client}.key").read_bytes())
        credentials = str(pem)
    return HttpOperatorWallet(WalletConfig(
        "op", WalletKind.HTTP, ref.endpoint, 2000, credentials=credentials,
        ca=str(certs / f"{ca}.pem"), hmac_secret=str(ref.hmac_secret)))


def test_mutual_tls_with_the_client_certificate_is_accepted(tls_wallet: RefWallet) -> None:
    c = _tls_client(tls_wallet, client="operator-a")
    try:
        player = _player(tls_wallet)
        assert isinstance(c.debit(_debit(player)), Accepted)
        assert tls_wallet.balance(player) == 900
    finally:
        c.close()


@pytest.mark.parametrize(("client", "ca"), [(None, "ca"), ("other-client", "ca"),
                                            ("operator-a", "other-ca")])
def test_tls_without_the_right_certificates_is_uncertain_and_moves_nothing(
        tls_wallet: RefWallet, client: str | None, ca: str) -> None:
    """No client certificate, one of another CA, or a wallet whose certificate the configured
    CA did not sign: the connection fails, and nothing moves."""
    c = _tls_client(tls_wallet, client=client, ca=ca)
    try:
        player = _player(tls_wallet)
        answer = c.debit(_debit(player))
        assert isinstance(answer, Uncertain) and answer.cause.startswith("the call failed: ")
        assert tls_wallet.balance(player) == 1000
    finally:
        c.close()
