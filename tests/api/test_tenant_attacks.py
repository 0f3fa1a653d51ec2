"""Tenants attacked as a hostile client would, against a real mTLS `fairshoe serve` process:
one operator reaching for another's data through every RPC that takes an id or a request id,
an auditor playing metadata tricks, and client certificates with odd SANs, odd key usages, a
CA's basic constraints or the wrong dates (the certificates are signed here by the dev CA that
certs/make-dev-certs made, with the ``cryptography`` library).

What held is pinned here as well as what did not: a CA certificate (basicConstraints CA:TRUE)
that named an operator used to act as that operator.
"""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from support.live_server import REAL, Client, ServerProcess, Tls, make_dev_certs

from rng_service.api.caller import OPERATOR_METADATA
from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2

PLAYER = "mallory"
OK = grpc.StatusCode.OK
DENIED = grpc.StatusCode.PERMISSION_DENIED
NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
CLIENT_AUTH = (ExtendedKeyUsageOID.CLIENT_AUTH,)
#: keyUsage of a CA: certificate and CRL signing, no digital signature (TLS client auth needs one)
CA_USAGE = x509.KeyUsage(digital_signature=False, content_commitment=False,
                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                         key_cert_sign=True, crl_sign=True, encipher_only=False,
                         decipher_only=False)


def _sign(certs: Path, name: str, uris: tuple[str, ...], *, ca: bool = False,
          eku: tuple[x509.ObjectIdentifier, ...] = CLIENT_AUTH, usage: x509.KeyUsage | None = None,
          valid: tuple[datetime.datetime, datetime.datetime] = (NOW - DAY, NOW + DAY)) -> None:
    """``certs/<name>.pem`` and ``.key``: a client certificate the dev CA signed."""
    issuer_key = serialization.load_pem_private_key((certs / "ca.key").read_bytes(), None)
    issuer = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(issuer.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(valid[0]).not_valid_after(valid[1])
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if uris:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.UniformResourceIdentifier(u) for u in uris]), critical=False)
    if eku:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(eku)), critical=False)
    if usage is not None:
        builder = builder.add_extension(usage, critical=True)
    cert = builder.sign(issuer_key, hashes.SHA256())  # type: ignore[arg-type]
    (certs / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (certs / f"{name}.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))


#: certificates that pass the handshake, and whose balance of PLAYER they read: op-a's or
#: op-b's, or None for PERMISSION_DENIED
ODD_SANS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "two-operators": (("fairshoe://operator/op-a", "fairshoe://operator/op-b"), None),
    "same-uri-twice-cased": (("Fairshoe://operator/op-a", "fairshoe://operator/op-a"), None),
    "operator-and-auditor": (("fairshoe://operator/op-b", "fairshoe://auditor/auditor-1"), None),
    # a URI's scheme is case-insensitive (RFC 3986): the same identity
    "upper-scheme": (("FAIRSHOE://operator/op-b",), "op-b"),
    "upper-role": (("fairshoe://OPERATOR/op-b",), None),
    "percent-encoded": (("fairshoe://operator/op%2Db",), None),
    "trailing-slash": (("fairshoe://operator/op-b/",), None),
    "traversal-to-auditor": (("fairshoe://operator/../auditor/auditor-1",), None),
    "traversal-to-operator": (("fairshoe://auditor/x/../../operator/op-b",), None),
    "dot-segments": (("fairshoe://operator/./op-b",), None),
    "query": (("fairshoe://operator/op-b?as=op-a",), None),
    "fragment": (("fairshoe://operator/op-b#op-a",), None),
    "userinfo": (("fairshoe://op-a@operator/op-b",), None),
    "port": (("fairshoe://operator:443/op-b",), None),
    "no-name": (("fairshoe://operator/",), None),
    "unknown-role": (("fairshoe://admin/op-b",), None),
    "no-fairshoe-uri": (("spiffe://example.org/op-b",), None),
    "other-uris-ignored": (("spiffe://example.org/x", "fairshoe://operator/op-b",
                            "https://op-a.example"), "op-b"),
    "no-san": ((), None),
    # a CA's certificate names an issuer, not a caller (it passes gRPC's handshake)
    "ca-certificate": (("fairshoe://operator/op-b",), None),
}

#: certificates of the dev CA that must fail the handshake
REFUSED_AT_HANDSHAKE: dict[str, dict[str, Any]] = {
    "expired": {"valid": (NOW - 3 * DAY, NOW - DAY)},
    "not-yet-valid": {"valid": (NOW + DAY, NOW + 3 * DAY)},
    "server-auth-only": {"eku": (ExtendedKeyUsageOID.SERVER_AUTH,)},
    "usage-without-signature": {"usage": CA_USAGE},
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev certificates, and the odd ones above signed by the same CA."""
    where = make_dev_certs(tmp_path_factory.mktemp("certs"))
    for name, (uris, _) in ODD_SANS.items():
        _sign(where, name, uris, ca=name == "ca-certificate")
    for name, options in REFUSED_AT_HANDSHAKE.items():
        _sign(where, name, ("fairshoe://operator/op-a",), **options)
    return where


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(certs: Path, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """mTLS, operators op-a and op-b, auditor-1 granted op-a only; stacked shoes."""
    url = str(request.getfixturevalue("pg_module_url")) if request.param == "postgresql" else None
    proc = ServerProcess(tmp_path_factory.mktemp("attacks"), database_url=url,
                         tls=Tls(certs, mutual=True), operators=["op-a", "op-b"],
                         args=["--auditor-grants", "auditor-1=op-a"]).start()
    yield proc
    assert proc.stop() == 0, proc.log()
    assert all(line.startswith("{") for line in proc.log().splitlines()), proc.log()


@pytest.fixture(scope="module")
def channels(server: ServerProcess) -> Iterator[dict[str, grpc.Channel]]:
    opened = {name: server.open_channel(name) for name in ("operator-a", "operator-b", "auditor")}
    yield opened
    for channel in opened.values():
        channel.close()


@pytest.fixture(scope="module")
def funded(channels: dict[str, grpc.Channel]) -> dict[str, Client]:
    """Both operators' PLAYER, funded: op-a with 50 000, op-b with 7."""
    a, b = Client(channels["operator-a"]), Client(channels["operator-b"])
    a.deposit(PLAYER, 50_000)
    b.deposit(PLAYER, 7)
    return {"op-a": a, "op-b": b}


@pytest.fixture(scope="module")
def played(funded: dict[str, Client]) -> rt.RoundView:
    """A finished round of op-a's PLAYER (a one-round shoe: its reveal exists)."""
    a = funded["op-a"]
    return a.play_out(PLAYER, a.start(PLAYER, "snap", [1000]))


def _code(call: Callable[[], Any]) -> grpc.StatusCode:
    """The status of ``call`` (a stream read to its end)."""
    try:
        result = call()
        if hasattr(result, "__iter__") and not hasattr(result, "DESCRIPTOR"):
            list(result)
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return OK


def _md(*pairs: tuple[str, str | bytes]) -> tuple[tuple[str, str | bytes], ...]:
    return pairs


def _export(channel: grpc.Channel, **kw: Any) -> list[bytes]:
    request = audit_pb2.ExportRecordsRequest(start_time=Timestamp(seconds=0),
                                             end_time=Timestamp(seconds=4_000_000_000))
    items = audit_pb2_grpc.AuditServiceStub(channel).ExportRecords(request, **kw)
    return [item.SerializeToString() for item in items]


# -- one operator reaching for another's data ----------------------------------------------------


def test_a_request_id_two_operators_use_is_two_requests(
        server: ServerProcess, channels: dict[str, grpc.Channel],
        funded: dict[str, Client]) -> None:
    """Idempotency keys are per operator: op-b's request never gets op-a's stored answer."""
    a, b = funded["op-a"], funded["op-b"]
    first = a.deposit(PLAYER, 300, request_id="shared-deposit")
    theirs = b.deposit(PLAYER, 300, request_id="shared-deposit")
    assert theirs.transaction_id != first.transaction_id
    b.deposit(PLAYER, 10_000, request_id="shared-funding")
    view_a = a.start(PLAYER, "snap", [1000], request_id="shared-start")
    view_b = b.start(PLAYER, "snap", [1000], request_id="shared-start")
    assert view_b.round_id != view_a.round_id
    assert b.get(PLAYER, view_b.round_id).round_id == view_b.round_id
    a.play_out(PLAYER, view_a)
    b.play_out(PLAYER, view_b)
    draw = rng_pb2.ShuffleRequest(n=52, request_id="shared-draw")
    drawn_a = rng_pb2_grpc.RngServiceStub(channels["operator-a"]).Shuffle(draw)
    drawn_b = rng_pb2_grpc.RngServiceStub(channels["operator-b"]).Shuffle(draw)
    assert drawn_a.proof.commitment != drawn_b.proof.commitment
    assert rows(server, "SELECT operator FROM rounds WHERE round_id IN (?, ?) ORDER BY operator",
                view_a.round_id, view_b.round_id) == ["op-a", "op-b"]
    assert rows(server, "SELECT operator FROM idempotency WHERE request_id = 'shared-start' "
                "ORDER BY operator") == ["op-a", "op-b"]


def rows(server: ServerProcess, query: str, *params: Any) -> list[Any]:
    return [row[0] for row in server.sql(query, *params)]


def test_another_operators_ids_name_nothing_in_any_rpc(
        channels: dict[str, grpc.Channel], funded: dict[str, Client],
        played: rt.RoundView) -> None:
    a, b = funded["op-a"], funded["op-b"]
    audit_b = audit_pb2_grpc.AuditServiceStub(channels["operator-b"])
    stand = rt.PlayerAction(stand=rt.PlayerAction.Stand())
    codes = {
        "GetRound": _code(lambda: b.get(PLAYER, played.round_id)),
        "Act": _code(lambda: b.rounds.Act(round_pb2.ActRequest(
            player_id=PLAYER, round_id=played.round_id, hand_id=1, action=stand,
            expected_version=played.version, request_id=Client.rid()))),
        "GetRoundRecord": _code(lambda: audit_b.GetRoundRecord(
            audit_pb2.GetRoundRecordRequest(round_id=played.round_id))),
        "GetShoeReveal": _code(lambda: audit_b.GetShoeReveal(
            audit_pb2.GetShoeRevealRequest(shoe_id=played.shoe.shoe_id))),
    }
    assert codes == dict.fromkeys(codes, NOT_FOUND)
    # the round's ledger entries, and every listing: only op-b's own
    by_round = b.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(
        account=Client.account(PLAYER), round_id=played.round_id))
    assert list(by_round.transactions) == []
    assert [t.amount_minor for t in b.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(
        account=Client.account(PLAYER))).transactions if t.amount_minor == 50_000] == []
    a.play_out(PLAYER, a.start(PLAYER, "snap", [1000]))  # two rounds at least: two pages
    token = a.rounds.ListRounds(round_pb2.ListRoundsRequest(player_id=PLAYER, page_size=1))
    assert token.next_page_token
    page = b.rounds.ListRounds(round_pb2.ListRoundsRequest(
        player_id=PLAYER, page_token=token.next_page_token))
    assert played.round_id not in {view.round_id for view in page.rounds}
    # the whole time range exports nothing of op-a's
    assert not set(_export(channels["operator-b"])) & set(_export(channels["operator-a"]))


def test_an_operator_cannot_seed_or_see_another_operators_next_shoe(
        funded: dict[str, Client]) -> None:
    a, b = funded["op-a"], funded["op-b"]
    ask = round_pb2.GetNextShoeRequest(player_id="seedy", game="snap", mode=REAL)
    shoe_a = a.rounds.GetNextShoe(ask).shoe
    seed = round_pb2.SetClientSeedRequest(player_id="seedy", game="snap", mode=REAL,
                                          shoe_id=shoe_a.shoe_id, client_seed=b"op-b was here",
                                          request_id="shared-seed")
    assert _code(lambda: b.rounds.SetClientSeed(seed)) is grpc.StatusCode.FAILED_PRECONDITION
    assert b.rounds.GetNextShoe(ask).shoe.shoe_id != shoe_a.shoe_id
    assert _code(lambda: b.rounds.SetClientSeed(seed)) is grpc.StatusCode.FAILED_PRECONDITION
    assert a.rounds.GetNextShoe(ask).shoe == shoe_a  # its client seed untouched


# -- an auditor's metadata ----------------------------------------------------------------------


@pytest.mark.parametrize(("metadata", "expected"), [
    (_md((OPERATOR_METADATA, "op-a")), OK),
    (_md(), INVALID),
    (_md((f"{OPERATOR_METADATA}-bin", b"op-a")), INVALID),  # another key altogether
    (_md((OPERATOR_METADATA, "op-a"), (OPERATOR_METADATA, "op-a")), INVALID),
    (_md((OPERATOR_METADATA, "op-a"), (OPERATOR_METADATA, "op-b")), INVALID),
    (_md((OPERATOR_METADATA, "op-b"), (OPERATOR_METADATA, "op-a")), INVALID),
    (_md((OPERATOR_METADATA, "op-a,op-b")), DENIED),
    (_md((OPERATOR_METADATA, " op-a")), DENIED),
    (_md((OPERATOR_METADATA, "OP-A")), DENIED),
    (_md((OPERATOR_METADATA, "")), DENIED),
    (_md((OPERATOR_METADATA, "op-b")), DENIED),
    (_md((OPERATOR_METADATA, "op-b"), (f"{OPERATOR_METADATA}-bin", b"op-a")), DENIED),
], ids=["granted", "missing", "binary-only", "repeated", "two", "two-reversed", "comma-list",
        "padded", "other-case", "empty", "not-granted", "binary-does-not-count"])
@pytest.mark.parametrize("rpc", ["unary", "stream"])
def test_the_auditors_metadata_names_one_granted_operator_exactly(
        rpc: str, metadata: tuple[tuple[str, str | bytes], ...], expected: grpc.StatusCode,
        channels: dict[str, grpc.Channel], played: rt.RoundView) -> None:
    audit = audit_pb2_grpc.AuditServiceStub(channels["auditor"])
    if rpc == "unary":
        request = audit_pb2.GetRoundRecordRequest(round_id=played.round_id)
        assert _code(lambda: audit.GetRoundRecord(request, metadata=metadata)) is expected
    else:
        assert _code(lambda: _export(channels["auditor"], metadata=metadata)) is expected


def test_an_upper_case_metadata_key_never_leaves_the_client(
        channels: dict[str, grpc.Channel], played: rt.RoundView) -> None:
    """HTTP/2 header names are lower case: gRPC refuses the call before sending it."""
    audit = audit_pb2_grpc.AuditServiceStub(channels["auditor"])
    request = audit_pb2.GetRoundRecordRequest(round_id=played.round_id)
    code = _code(lambda: audit.GetRoundRecord(request, metadata=(("X-Fairshoe-Operator",
                                                                  "op-a"),)))
    assert code is not OK


def test_the_auditor_reads_only_the_granted_operators_export(
        channels: dict[str, grpc.Channel], played: rt.RoundView, funded: dict[str, Client]
        ) -> None:
    granted = _export(channels["auditor"], metadata=_md((OPERATOR_METADATA, "op-a")))
    assert set(granted) == set(_export(channels["operator-a"]))
    assert not set(granted) & set(_export(channels["operator-b"]))


def test_huge_metadata_is_refused_and_the_server_keeps_serving(
        server: ServerProcess, channels: dict[str, grpc.Channel]) -> None:
    wallet = Client(channels["operator-a"]).wallet
    request = wallet_pb2.GetBalanceRequest(account=Client.account(PLAYER))
    huge = [("x-junk", "x" * 100_000), *((f"x-k{i}", "v" * 64) for i in range(2_000))]
    for metadata in ([huge[0]], huge[1:]):
        assert _code(lambda md=metadata: wallet.GetBalance(request, metadata=md)) is (
            grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert server.health() == health_pb2.HealthCheckResponse.SERVING
    wallet.GetBalance(request)


# -- certificates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ODD_SANS))
def test_only_one_plain_fairshoe_uri_names_a_caller(
        name: str, server: ServerProcess, funded: dict[str, Client]) -> None:
    _uris, acts_as = ODD_SANS[name]
    with server.open_channel(name) as channel:
        request = wallet_pb2.GetBalanceRequest(account=Client.account(PLAYER))
        wallet = Client(channel).wallet
        if acts_as is None:
            assert _code(lambda: wallet.GetBalance(request)) is DENIED
        else:
            own = {op: client.balance(PLAYER) for op, client in funded.items()}
            assert own[acts_as] != own["op-a"]  # funded so: op-b's balance is op-b's
            assert wallet.GetBalance(request).balance_minor == own[acts_as]
        # health and reflection: open to whoever passed the handshake
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        assert "fairshoe.audit.v1.AuditService" in _reflected_services(channel)


def _reflected_services(channel: grpc.Channel) -> set[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
        list_services="")]))
    return {service.name for answer in answers
            for service in answer.list_services_response.service}


def _handshake_accepted(server: ServerProcess, certs: Path, name: str) -> bool:
    """Whether the server takes an HTTP/2 connection presenting ``name``'s certificate: Python's
    TLS (OpenSSL) sends what gRPC's own client library would refuse to present, and under
    TLS 1.3 the server's verdict on a client certificate comes after the client's handshake, so
    the answer is whether the server sends its HTTP/2 SETTINGS or closes."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(certs / "ca.pem")
    context.load_cert_chain(certs / f"{name}.pem", certs / f"{name}.key")
    context.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000"))
        try:
            frame = tls.recv(9)
        except (ssl.SSLError, ConnectionError):
            return False
    return len(frame) == 9 and frame[3] == 0x4  # a SETTINGS frame


def test_the_handshake_probe_tells_accepted_from_refused(server: ServerProcess,
                                                         certs: Path) -> None:
    assert _handshake_accepted(server, certs, "operator-a")
    assert not _handshake_accepted(server, certs, "other-client")  # another CA's


@pytest.mark.parametrize("name", sorted(REFUSED_AT_HANDSHAKE))
def test_a_certificate_not_for_client_auth_now_fails_the_handshake(
        name: str, server: ServerProcess, certs: Path) -> None:
    assert not _handshake_accepted(server, certs, name)
    before = [line for line in server.log().splitlines() if '"rpc"' in line]
    try:
        with server.open_channel(name) as channel:
            code = _code(lambda: Client(channel).wallet.GetBalance(
                wallet_pb2.GetBalanceRequest(account=Client.account(PLAYER)), timeout=10))
    except grpc.RpcError as exc:  # gRPC's client may refuse to present it at all
        code = exc.code()
    assert code is grpc.StatusCode.UNAVAILABLE
    after = [line for line in server.log().splitlines() if '"rpc"' in line]
    assert [json.loads(line)["method"] for line in after[len(before):]] == []


def test_a_certificate_that_expires_on_an_open_connection_stops_naming_its_caller(
        server: ServerProcess, certs: Path) -> None:
    """TLS checks dates at the handshake only: a connection made just before the certificate
    expired used to act as its operator for as long as it stayed open."""
    request = wallet_pb2.GetBalanceRequest(account=Client.account(PLAYER))
    for seconds in (4, 8, 16, 32):
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
        _sign(certs, "expiring", ("fairshoe://operator/op-a",), valid=(NOW - DAY, expires))
        channel = server.open_channel("expiring")
        try:
            Client(channel).wallet.GetBalance(request)  # the connection made while it is valid
            break
        except grpc.RpcError:
            channel.close()
            # refused only if it expired before the first call ended (a loaded machine took
            # longer than its validity to sign, connect and answer): then a longer one
            if datetime.datetime.now(datetime.UTC) < expires:
                raise
    else:
        pytest.fail("no certificate stayed valid long enough for a first call")
    with channel:
        wallet = Client(channel).wallet
        wait = (expires - datetime.datetime.now(datetime.UTC)).total_seconds() + 1
        time.sleep(max(0.0, wait))
        with pytest.raises(grpc.RpcError) as err:
            wallet.GetBalance(request)
        assert err.value.code() is DENIED
        assert "expired" in (err.value.details() or "")
        # health, which needs no caller, still answers on it
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
