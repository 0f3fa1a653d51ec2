"""Tenants and transport against a real `fairshoe serve` process over real gRPC: mutual TLS with
certificates from certs/make-dev-certs (made once per test session into a temporary directory).

Under mTLS the client certificate names the operator (URI SAN ``fairshoe://operator/<id>``), so a
second operator's certificate sees nothing of the first one's; an auditor certificate reads the
AuditService of the operators it is granted and nothing else; a certificate of another CA fails
the handshake. Without client certificates every call is the default operator's, and the
``serving`` line says so.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.live_server import EUR, REAL, Client, ServerProcess, Tls, make_dev_certs

from rng_service.api.caller import OPERATOR_METADATA
from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

PLAYER = "alice"
DENIED = grpc.StatusCode.PERMISSION_DENIED


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev CA, server, operator-a/-b, auditor and other-CA certificates."""
    return make_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(certs: Path, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """An mTLS server with operators op-a and op-b; auditor-1 may read op-a only; on SQLite and
    on PostgreSQL."""
    url = str(request.getfixturevalue("pg_module_url")) if request.param == "postgresql" else None
    proc = ServerProcess(tmp_path_factory.mktemp("mtls"), stacked=False, database_url=url,
                         tls=Tls(certs, mutual=True), operators=["op-a", "op-b"],
                         args=["--auditor-grants", "auditor-1=op-a"]).start()
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def channels(server: ServerProcess) -> Iterator[dict[str, grpc.Channel]]:
    opened = {name: server.open_channel(name) for name in ("operator-a", "operator-b", "auditor")}
    yield opened
    for channel in opened.values():
        channel.close()


@pytest.fixture(scope="module")
def played(channels: dict[str, grpc.Channel]) -> round_pb2.round__types__pb2.RoundView:
    """A finished round of op-a's player (after a deposit of 50 000)."""
    a = Client(channels["operator-a"])
    a.deposit(PLAYER, 50_000)
    return a.play_out(PLAYER, a.start(PLAYER, "snap", [1000]))


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _rpc_lines(server: ServerProcess) -> list[dict[str, object]]:
    return [line for line in _json_lines(server.log()) if line.get("event") == "rpc"]


def _code(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        if callable(call):
            result = call()
            if hasattr(result, "__iter__") and not hasattr(result, "DESCRIPTOR"):
                list(result)  # a stream fails at its first read
    return err.value.code()  # type: ignore[no-any-return]


def _as(op: str) -> tuple[tuple[str, str]]:
    return ((OPERATOR_METADATA, op),)


# -- the serving line without client certificates ---------------------------------------------


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "server-tls"])
def test_without_client_certificates_the_default_operator_owns_everything(
        tls: bool, certs: Path, tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "single", stacked=False,
                           tls=Tls(certs) if tls else None).start()
    try:
        Client(server.channel).deposit("bob", 700)  # type: ignore[arg-type]
    finally:
        assert server.stop() == 0, server.log()
    serving = next(line for line in _json_lines(server.log()) if line.get("event") == "serving")
    assert serving["tls"] == ("server" if tls else "none")
    assert "every call is operator 'default'" in str(serving["operators"])
    assert server.sql("SELECT operator, balance FROM accounts WHERE holder = 'bob'") == [
        ("default", 700)]


def test_under_mtls_the_serving_line_names_the_grants(server: ServerProcess) -> None:
    serving = next(line for line in _json_lines(server.log()) if line.get("event") == "serving")
    assert serving["tls"] == "mutual"
    assert serving["auditors"] == {"auditor-1": ["op-a"]}


# -- operators ------------------------------------------------------------------------------------


def test_each_operator_sees_only_its_own_rounds_and_balances(
        server: ServerProcess, channels: dict[str, grpc.Channel],
        played: round_pb2.round__types__pb2.RoundView) -> None:
    a, b = Client(channels["operator-a"]), Client(channels["operator-b"])
    assert a.get(PLAYER, played.round_id).round_id == played.round_id
    # op-b: the same player id is another player; op-a's round ids name nothing
    assert _code(lambda: b.get(PLAYER, played.round_id)) is grpc.StatusCode.NOT_FOUND
    assert _code(lambda: audit_pb2_grpc.AuditServiceStub(channels["operator-b"]).GetRoundRecord(
        audit_pb2.GetRoundRecordRequest(round_id=played.round_id))) is grpc.StatusCode.NOT_FOUND
    assert b.balance(PLAYER) == 0 and a.balance(PLAYER) > 0
    listed = list(b.list_all(round_pb2.ListRoundsRequest(player_id=PLAYER)))
    assert listed == []
    b.deposit(PLAYER, 123)  # op-b's own, separate wallet
    assert b.balance(PLAYER) == 123 and a.balance(PLAYER) != 123
    rows = server.sql("SELECT operator, balance FROM accounts WHERE holder = ? AND mode = 'REAL'",
                      PLAYER)
    assert sorted(rows) == [("op-a", a.balance(PLAYER)), ("op-b", 123)]
    assert server.sql("SELECT operator FROM rounds WHERE round_id = ?", played.round_id) == [
        ("op-a",)]


def test_an_operator_cannot_name_another_operator(channels: dict[str, grpc.Channel]) -> None:
    wallet = Client(channels["operator-b"]).wallet
    request = wallet_pb2.GetBalanceRequest(account=Client.account(PLAYER))
    assert _code(lambda: wallet.GetBalance(request, metadata=_as("op-a"))) is DENIED
    wallet.GetBalance(request, metadata=_as("op-b"))  # its own name is no change


def test_rpc_log_lines_name_the_certificates_operator(
        server: ServerProcess, played: round_pb2.round__types__pb2.RoundView) -> None:
    # StartRound's line names the round it created; a round that ends at the deal has no Act
    lines = [line for line in _rpc_lines(server) if line.get("round_id") == played.round_id
             and str(line["method"]).endswith(("/StartRound", "/Act"))]
    assert lines and {line["operator"] for line in lines} == {"op-a"}


# -- the auditor ----------------------------------------------------------------------------------


def test_the_auditor_reads_a_granted_operators_records(
        channels: dict[str, grpc.Channel],
        played: round_pb2.round__types__pb2.RoundView) -> None:
    audit = audit_pb2_grpc.AuditServiceStub(channels["auditor"])
    record = audit.GetRoundRecord(audit_pb2.GetRoundRecordRequest(round_id=played.round_id),
                                  metadata=_as("op-a")).record
    assert record.envelope
    assert audit.GetSigningKeys(audit_pb2.GetSigningKeysRequest(), metadata=_as("op-a")).keys
    reveal = audit.GetShoeReveal(audit_pb2.GetShoeRevealRequest(shoe_id=played.shoe.shoe_id),
                                 metadata=_as("op-a"))
    assert reveal.reveal.envelope
    items = list(audit.ExportRecords(audit_pb2.ExportRecordsRequest(), metadata=_as("op-a")))
    assert any(item.round_record.envelope == record.envelope for item in items)


def test_the_auditor_is_denied_everything_else(
        server: ServerProcess, channels: dict[str, grpc.Channel],
        played: round_pb2.round__types__pb2.RoundView) -> None:
    channel = channels["auditor"]
    audit = audit_pb2_grpc.AuditServiceStub(channel)
    auditor = Client(channel)
    by_id = audit_pb2.GetRoundRecordRequest(round_id=played.round_id)
    # one call it may make, so that this test's own log has the auditor's OK line (not one
    # left by another test, which -n 2 may have run in another worker's server)
    assert audit.GetRoundRecord(by_id, metadata=_as("op-a")).record.envelope
    denied = {
        "another operator": lambda: audit.GetRoundRecord(by_id, metadata=_as("op-b")),
        "an export of another": lambda: audit.ExportRecords(audit_pb2.ExportRecordsRequest(),
                                                            metadata=_as("op-b")),
        "an unknown operator": lambda: audit.GetRoundRecord(by_id, metadata=_as("op-z")),
        "RoundService": lambda: auditor.rounds.GetRound(
            round_pb2.GetRoundRequest(player_id=PLAYER, round_id=played.round_id),
            metadata=_as("op-a")),
        "WalletService": lambda: auditor.wallet.GetBalance(
            wallet_pb2.GetBalanceRequest(account=Client.account(PLAYER)), metadata=_as("op-a")),
        "a deposit": lambda: auditor.wallet.Deposit(wallet_pb2.DepositRequest(
            account=Client.account(PLAYER), amount_minor=1, request_id="aud-1"),
            metadata=_as("op-a")),
        "RngService": lambda: rng_pb2_grpc.RngServiceStub(channel).Shuffle(
            rng_pb2.ShuffleRequest(n=3, request_id="aud-2"), metadata=_as("op-a")),
        "GameService": lambda: game_pb2_grpc.GameServiceStub(channel).ListGames(
            game_pb2.ListGamesRequest(), metadata=_as("op-a")),
    }
    codes = {what: _code(call) for what, call in denied.items()}
    assert codes == dict.fromkeys(denied, DENIED)
    # an auditor names the operator of each call, and only one
    assert _code(lambda: audit.GetRoundRecord(by_id)) is grpc.StatusCode.INVALID_ARGUMENT
    two = ((OPERATOR_METADATA, "op-a"), (OPERATOR_METADATA, "op-b"))
    assert _code(lambda: audit.GetRoundRecord(by_id, metadata=two)) is (
        grpc.StatusCode.INVALID_ARGUMENT)
    # nothing changed: no deposit of 1, no draw
    assert server.sql("SELECT COUNT(*) FROM ledger_entries WHERE amount = 1") == [(0,)]
    lines = [line for line in _rpc_lines(server) if line.get("auditor") == "auditor-1"]
    assert {line["code"] for line in lines} >= {"PERMISSION_DENIED", "OK"}
    # health and reflection are for any peer that passed the handshake
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING


# -- the handshake --------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["other-client", ""], ids=["another-CA", "no-certificate"])
def test_a_certificate_of_another_ca_is_refused_at_the_handshake(
        who: str, server: ServerProcess) -> None:
    before = len(_rpc_lines(server))
    with server.open_channel(who) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert err.value.code() is grpc.StatusCode.UNAVAILABLE
        wallet = Client(channel).wallet
        with pytest.raises(grpc.RpcError) as err:
            wallet.GetBalance(wallet_pb2.GetBalanceRequest(account=Client.account(PLAYER)),
                              timeout=5)
        assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    # the calls never reached the server: nothing served, nothing logged
    assert len(_rpc_lines(server)) == before, _rpc_lines(server)[before:]


def test_an_operator_never_added_is_not_found(certs: Path, tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "unprovisioned", stacked=False,
                           tls=Tls(certs, mutual=True), operators=["op-a"]).start()
    try:
        with server.open_channel("operator-b") as channel:
            request = wallet_pb2.GetBalanceRequest(
                account=wallet_pb2.Account(player_id=PLAYER, currency=EUR, mode=REAL))
            with pytest.raises(grpc.RpcError) as err:
                Client(channel).wallet.GetBalance(request)
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
        assert "no operator 'op-b'" in (err.value.details() or "")
    finally:
        assert server.stop() == 0, server.log()


# -- configurations that must not start -----------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--tls-cert", "{certs}/server.pem"], "--tls-cert and --tls-key go together"),
    (["--tls-client-ca", "{certs}/ca.pem"], "--tls-client-ca needs --tls-cert"),
    (["--auditor-grants", "auditor-1=op-a"], "auditor grants need --tls-client-ca"),
    (["--tls-cert", "{certs}/server.pem", "--tls-key", "{certs}/server.key",
      "--tls-client-ca", "{certs}/ca.pem", "--auditor-grants", "auditor-1"],
     "auditor_grants: 'auditor-1' is not NAME=OPERATOR"),
    (["--tls-cert", "{certs}/server.pem", "--tls-key", "{certs}/server.key",
      "--tls-client-ca", "{certs}/no-such-ca.pem"], "no-such-ca.pem"),
])
def test_a_tls_configuration_that_cannot_be_meant_does_not_start(
        args: list[str], message: str, certs: Path, tmp_path: Path) -> None:
    """A certificate without its key used to start in plaintext, silently."""
    server = ServerProcess(tmp_path, stacked=False,
                           args=[a.replace("{certs}", str(certs)) for a in args])
    done = subprocess.run(server.command(), env=server.env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [line["event"] for line in lines] == ["start_failed"], done.stderr
    assert message in str(lines[0]["error"])
