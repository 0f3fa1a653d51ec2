"""AuditService and RngService over real gRPC (build_server on port 0 with a temp key store and a
SQLite file or a fresh PostgreSQL database): every RPC, the error codes, the export stream, and
draws that verify offline."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from support.record_helpers import GAMES, OP, Dealer, payload

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.api.server import ServerConfig, build_server
from rng_service.audit.verifier import audit_paths
from rng_service.crypto.keys import KeyStore, load_trusted_public_keys
from rng_service.crypto.signing import decode_envelope, verify_envelope
from rng_service.records.schema import RNG_REVEALS_SUBDIR, RNG_SUBDIR
from rng_service.rng.draws import DrawRequest, draw
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.ports import Mode
from rng_service.storage import open_storage

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)


@dataclass
class Api:
    audit: audit_pb2_grpc.AuditServiceStub
    rng: rng_pb2_grpc.RngServiceStub
    dealer: Dealer
    trusted: dict[str, Any]
    finished_round: str
    finished_shoe: str
    database: str


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Api]:
    root = tmp_path_factory.mktemp("server")
    store = KeyStore(root / "keys")
    store.create()
    database = (str(request.getfixturevalue("pg_module_url")) if request.param == "postgresql"
                else str(root / "fairshoe.db"))
    storage = open_storage(database)
    dealer = Dealer(storage, store.load_signing_key(), SeedVault(secrets.token_bytes(32)))
    view = dealer.play("double-deck")
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2), storage=storage,
                                key_store=store)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield Api(audit_pb2_grpc.AuditServiceStub(channel), rng_pb2_grpc.RngServiceStub(channel),
                  dealer, store.public_keys(), view.round_id, view.shoe.shoe_id, database)
    server.stop(grace=None)
    storage.close()


def fails(call: Any, request: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        result = call(request)
        if not hasattr(result, "ListFields"):  # a stream: the error comes when it is read
            list(result)
    return err.value


def opened(api: Api, record: Any, schema: str) -> dict[str, Any]:
    assert record.schema == schema
    assert record.key_id in api.trusted
    return verify_envelope(decode_envelope(record.envelope), api.trusted, schema=schema)


# ----- AuditService ----------------------------------------------------------------------------


def test_get_signing_keys(api: Api, tmp_path: Path) -> None:
    response = api.audit.GetSigningKeys(audit_pb2.GetSigningKeysRequest())
    (key,) = response.keys
    assert key.key_id in api.trusted
    assert json.loads(key.jwk_json)["kid"] == key.key_id
    assert key.HasField("valid_from") and not key.HasField("valid_until")
    path = tmp_path / "keys.jwks.json"
    path.write_text(response.jwks_json)
    assert set(load_trusted_public_keys(path)) == set(api.trusted)


def test_get_round_record(api: Api) -> None:
    response = api.audit.GetRoundRecord(
        audit_pb2.GetRoundRecordRequest(round_id=api.finished_round))
    assert opened(api, response.record, "fairshoe.round/v1")["round_id"] == api.finished_round


@pytest.mark.parametrize(("round_id", "code"), [
    ("0" * 32, grpc.StatusCode.NOT_FOUND), ("", grpc.StatusCode.INVALID_ARGUMENT),
    ("ROUND", grpc.StatusCode.INVALID_ARGUMENT),
])
def test_get_round_record_errors(api: Api, round_id: str, code: grpc.StatusCode) -> None:
    err = fails(api.audit.GetRoundRecord, audit_pb2.GetRoundRecordRequest(round_id=round_id))
    assert err.code() is code
    assert (err.details() or "").startswith("round_id: ")


def test_get_shoe_reveal(api: Api) -> None:
    response = api.audit.GetShoeReveal(
        audit_pb2.GetShoeRevealRequest(shoe_id=api.finished_shoe))
    assert opened(api, response.reveal, "fairshoe.shoe-reveal/v1")["shoe_id"] == api.finished_shoe


def test_get_shoe_reveal_of_an_unfinished_shoe_fails_the_precondition(api: Api) -> None:
    shoe = api.dealer.rounds.get_next_shoe(OP, api.dealer.player, "double-exposure",
                                           mode=Mode.REAL)
    err = fails(api.audit.GetShoeReveal, audit_pb2.GetShoeRevealRequest(shoe_id=shoe.shoe_id))
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "revealed once it is finished" in (err.details() or "")


@pytest.mark.parametrize(("shoe_id", "code"), [
    ("a" * 32, grpc.StatusCode.NOT_FOUND), ("x", grpc.StatusCode.INVALID_ARGUMENT),
])
def test_get_shoe_reveal_errors(api: Api, shoe_id: str, code: grpc.StatusCode) -> None:
    err = fails(api.audit.GetShoeReveal, audit_pb2.GetShoeRevealRequest(shoe_id=shoe_id))
    assert err.code() is code
    assert (err.details() or "").startswith("shoe_id: ")


def exported(api: Api, request: audit_pb2.ExportRecordsRequest | None = None
             ) -> list[tuple[str, Any]]:
    stream = api.audit.ExportRecords(request or audit_pb2.ExportRecordsRequest())
    return [(item.WhichOneof("item"), getattr(item, item.WhichOneof("item"))) for item in stream]


def test_export_records_streams_every_kind_oldest_first(api: Api) -> None:
    for game in GAMES:
        api.dealer.play_until_shoe_finished(game)
    api.rng.Shuffle(rng_pb2.ShuffleRequest(n=10, request_id="export-1"))
    items = exported(api)
    kinds = [kind for kind, _ in items]
    assert set(kinds) == {"round_record", "shoe_reveal", "rng_record", "rng_reveal"}
    records = [payload(r.envelope) for kind, r in items if kind == "round_record"]
    assert [r["finished_at"] for r in records] == sorted(r["finished_at"] for r in records)
    for kind, record in items:
        schema = {"round_record": "fairshoe.round/v1", "shoe_reveal": "fairshoe.shoe-reveal/v1",
                  "rng_record": "fairshoe.rng/v1", "rng_reveal": "fairshoe.rng-reveal/v1"}[kind]
        opened(api, record, schema)
    assert kinds.count("round_record") >= 5 and kinds.count("rng_record") >= 1


def _at(seconds: int, nanos: int = 0) -> Timestamp:
    return Timestamp(seconds=seconds, nanos=nanos)


def test_export_records_time_range(api: Api) -> None:
    everything = exported(api)
    assert exported(api, audit_pb2.ExportRecordsRequest(start_time=_at(0))) == everything
    assert exported(api, audit_pb2.ExportRecordsRequest(end_time=_at(1))) == []
    assert exported(api, audit_pb2.ExportRecordsRequest(end_time=_at(4_000_000_000))) == everything


@pytest.mark.parametrize("request_", [
    audit_pb2.ExportRecordsRequest(start_time=_at(2_000), end_time=_at(1_000)),
    audit_pb2.ExportRecordsRequest(start_time=_at(1_000), end_time=_at(1_000)),
    audit_pb2.ExportRecordsRequest(start_time=_at(1_000, nanos=-1)),
    audit_pb2.ExportRecordsRequest(end_time=_at(2**40)),
    audit_pb2.ExportRecordsRequest(start_time=_at(4_000_000_000)),  # after now
])
def test_export_records_refuses_bad_ranges(api: Api,
                                           request_: audit_pb2.ExportRecordsRequest) -> None:
    err = fails(api.audit.ExportRecords, request_)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").split(":")[0] in ("start_time", "end_time")


# ----- RngService ------------------------------------------------------------------------------


def test_generate_integers_in_range_and_recomputed_from_the_reveal(api: Api) -> None:
    response = api.rng.GenerateIntegers(rng_pb2.GenerateIntegersRequest(
        count=100, min=-3, max=3, client_seed=b"mine", request_id="ints-1"))
    assert len(response.values) == 100 and all(-3 <= v <= 3 for v in response.values)
    record = opened(api, response.proof.record, "fairshoe.rng/v1")
    reveal = opened(api, response.proof.reveal, "fairshoe.rng-reveal/v1")
    assert record["commitment"] == reveal["commitment"] == response.proof.commitment
    assert record["results"] == list(response.values)
    seed = bytes.fromhex(reveal["seed"])
    assert draw(seed, DrawRequest.integers(100, -3, 3), b"mine") == list(response.values)
    again = api.rng.GenerateIntegers(rng_pb2.GenerateIntegersRequest(
        count=100, min=-3, max=3, client_seed=b"mine", request_id="ints-1"))
    assert again == response  # a retry returns the first draw


def test_shuffle_is_a_permutation_recomputed_from_the_reveal(api: Api) -> None:
    response = api.rng.Shuffle(rng_pb2.ShuffleRequest(n=52, request_id="shuffle-1"))
    assert sorted(response.permutation) == list(range(52))
    seed = bytes.fromhex(opened(api, response.proof.reveal, "fairshoe.rng-reveal/v1")["seed"])
    assert draw(seed, DrawRequest.shuffle(52)) == list(response.permutation)


@pytest.mark.parametrize(("request_", "field"), [
    (rng_pb2.GenerateIntegersRequest(count=0, min=1, max=6, request_id="e"), "count"),
    (rng_pb2.GenerateIntegersRequest(count=10_001, min=1, max=6, request_id="e"), "count"),
    (rng_pb2.GenerateIntegersRequest(count=1, min=6, max=1, request_id="e"), "max"),
    (rng_pb2.GenerateIntegersRequest(count=1, min=-(2**60), max=1, request_id="e"), "min"),
    (rng_pb2.GenerateIntegersRequest(count=1, min=1, max=6, client_seed=b"x" * 257,
                                     request_id="e"), "client_seed"),
    (rng_pb2.GenerateIntegersRequest(count=1, min=1, max=6), "request_id"),
])
def test_generate_integers_refuses_bad_input(api: Api, request_: Any, field: str) -> None:
    err = fails(api.rng.GenerateIntegers, request_)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(f"{field}: ")


@pytest.mark.parametrize("n", [0, -5, 10_001])
def test_shuffle_refuses_bad_sizes(api: Api, n: int) -> None:
    err = fails(api.rng.Shuffle, rng_pb2.ShuffleRequest(n=n, request_id="bad"))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith("n: ")


def test_draws_verify_offline_and_tampering_fails(api: Api, tmp_path: Path) -> None:
    ints = api.rng.GenerateIntegers(rng_pb2.GenerateIntegersRequest(
        count=30, min=1, max=49, request_id="offline-1"))
    perm = api.rng.Shuffle(rng_pb2.ShuffleRequest(n=30, request_id="offline-2"))
    for sub in (RNG_SUBDIR, RNG_REVEALS_SUBDIR):
        (tmp_path / sub).mkdir()
    for i, proof in enumerate((ints.proof, perm.proof)):
        (tmp_path / RNG_SUBDIR / f"{i}.json").write_bytes(proof.record.envelope)
        (tmp_path / RNG_REVEALS_SUBDIR / f"{i}.json").write_bytes(proof.reveal.envelope)
    assert audit_paths([tmp_path], api.trusted).passed
    victim = tmp_path / RNG_SUBDIR / "1.json"
    victim.write_bytes(victim.read_bytes().replace(b'"n":30', b'"n":31'))
    report = audit_paths([tmp_path], api.trusted)
    assert not report.passed
    assert [f.field for f in report.findings if f.status.value == "FAIL"] == ["signature.value"]


def test_a_server_without_storage_has_no_record_services() -> None:
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=1))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rng_pb2_grpc.RngServiceStub(channel)
            err = fails(stub.Shuffle, rng_pb2.ShuffleRequest(n=3, request_id="x"))
            assert err.code() is grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop(grace=None)
