"""A leaf-range export over real gRPC to a `fairshoe serve` process: ExportRecords with
``leaf_range`` streams every leaf of the caller's log (all six kinds) in index order after one
``log_start`` (checkpoint and frontier), each with its inclusion proof; an RNG draw's answer
carries its leaf and proof; and ``fairshoe audit export --address`` writes from that stream a
collection whose completeness ``fairshoe audit verify --checkpoint [--since]`` checks."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from support.cli_helpers import run
from support.live_server import REAL, Client, ServerProcess

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.crypto.keys import SigningKey, jwk_to_public_key
from rng_service.log import (
    Checkpoint,
    CompactRange,
    checkpoint_verifier,
    leaf_hash,
    parse_checkpoint,
    sign_checkpoint,
    verify_checkpoint,
    verify_inclusion,
)
from rng_service.service.ports import DEFAULT_OPERATOR
from rng_service.service.translog import log_origin

ORIGIN = log_origin(DEFAULT_OPERATOR)
KINDS = {"key_record", "shoe_commitment", "round_record", "shoe_reveal", "rng_record",
         "rng_reveal"}


def _audit(server: ServerProcess) -> audit_pb2_grpc.AuditServiceStub:
    return audit_pb2_grpc.AuditServiceStub(server.channel)


def _verified(server: ServerProcess, note: str) -> Checkpoint:
    keys = _audit(server).GetSigningKeys(audit_pb2.GetSigningKeysRequest()).keys
    trusted = [checkpoint_verifier(jwk_to_public_key(json.loads(k.jwk_json)), ORIGIN)
               for k in keys]
    return verify_checkpoint(note, trusted, origin=ORIGIN)


def _play(client: Client, player: str) -> None:
    """A round of a per-round-shoe game, and double-exposure rounds up to the shoe's cut card
    (so that every round's shoe is revealed and the collection verifies)."""
    client.deposit(player, 1_000_000)
    client.play_out(player, client.start(player, "double-deck", [1000]))
    shoe_id = client.play_out(player, client.start(player, "double-exposure", [1000])).shoe.shoe_id
    request = round_pb2.GetNextShoeRequest(player_id=player, game="double-exposure", mode=REAL)
    while client.rounds.GetNextShoe(request).shoe.shoe_id == shoe_id:
        client.play_out(player, client.start(player, "double-exposure", [1000]))


def _draw(server: ServerProcess) -> rng_pb2.GenerateIntegersResponse:
    rng = rng_pb2_grpc.RngServiceStub(server.channel)
    return rng.GenerateIntegers(rng_pb2.GenerateIntegersRequest(
        count=3, min=1, max=6, request_id=Client.rid()))


def _export(server: ServerProcess, first: int) -> list[audit_pb2.ExportRecordsResponse]:
    request = audit_pb2.ExportRecordsRequest(
        leaf_range=audit_pb2.LeafRange(from_tree_size=first))
    return list(_audit(server).ExportRecords(request))


def test_a_leaf_range_export_streams_every_leaf_with_its_proof(server: ServerProcess,
                                                                client: Client) -> None:
    _play(client, "lx-ann")
    _draw(server)
    start, *items = _export(server, 0)
    assert start.WhichOneof("item") == "log_start" and not start.HasField("log")
    checkpoint = _verified(server, start.log_start.checkpoint)
    assert (start.log_start.from_tree_size, list(start.log_start.frontier_hashes)) == (0, [])
    assert [item.log.leaf_index for item in items] == list(range(checkpoint.size))
    assert {item.WhichOneof("item") for item in items} == KINDS
    for item in items:
        record = getattr(item, str(item.WhichOneof("item")))
        assert item.log.tree_size == checkpoint.size and not item.log.checkpoint
        verify_inclusion(leaf_hash(record.envelope), item.log.leaf_index, checkpoint.size,
                         list(item.log.hashes), checkpoint.root_hash)
    # from a later size: the frontier of the leaves before it recomputes the root with the rest
    first = checkpoint.size // 2
    start, *rest = _export(server, first)
    tree = CompactRange(first, list(start.log_start.frontier_hashes))
    for item in rest:
        tree.append(leaf_hash(getattr(item, str(item.WhichOneof("item"))).envelope))
    assert tree.root() == _verified(server, start.log_start.checkpoint).root_hash
    assert rest[0].log.leaf_index == first


@pytest.mark.parametrize(("request_", "field"), [
    (audit_pb2.ExportRecordsRequest(leaf_range=audit_pb2.LeafRange(from_tree_size=10**9)),
     "from_tree_size"),
    (audit_pb2.ExportRecordsRequest(leaf_range=audit_pb2.LeafRange(),
                                    start_time={"seconds": 10}), "leaf_range"),
])
def test_leaf_range_errors_name_the_field(server: ServerProcess, client: Client,
                                          request_: audit_pb2.ExportRecordsRequest,
                                          field: str) -> None:
    _play(client, "lx-bob")
    with pytest.raises(grpc.RpcError) as info:
        list(_audit(server).ExportRecords(request_))
    err: grpc.Call = info.value  # type: ignore[assignment]
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(f"{field}: ")


def test_a_draw_carries_its_leaf_and_proof(server: ServerProcess) -> None:
    proof = _draw(server).proof
    checkpoint = _verified(server, proof.log.checkpoint)
    assert checkpoint.size == proof.log.tree_size > proof.log.leaf_index
    verify_inclusion(leaf_hash(proof.record.envelope), proof.log.leaf_index,
                     proof.log.tree_size, list(proof.log.hashes), checkpoint.root_hash)


def test_audit_export_over_grpc_verifies_complete(server: ServerProcess, client: Client,
                                                  tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    trusted = tmp_path / "trusted.jwks.json"
    trusted.write_text(_audit(server).GetSigningKeys(audit_pb2.GetSigningKeysRequest())
                       .jwks_json)
    where = ["--address", f"127.0.0.1:{server.port}"]
    _play(client, "lx-cid")
    _draw(server)
    cp, cp2, out, out2 = (tmp_path / name for name in ("cp", "cp2", "out", "out2"))
    assert run(["log", "checkpoint", *where, "--keys", str(trusted), "--out", str(cp)]) == 0
    assert run(["audit", "export", *where, "--out", str(out)]) == 0
    assert run(["audit", "verify", str(out), "--keys", str(trusted), "--checkpoint",
                str(cp)]) == 0, capsys.readouterr().out
    _play(client, "lx-dot")
    _draw(server)
    assert run(["log", "checkpoint", *where, "--keys", str(trusted), "--out", str(cp2)]) == 0
    assert run(["audit", "export", *where, "--out", str(out2), "--since", str(cp)]) == 0
    capsys.readouterr()
    assert run(["audit", "verify", str(out2), "--keys", str(trusted), "--checkpoint",
                str(cp2), "--since", str(cp)]) == 0, capsys.readouterr().out
    assert not (out2 / "log" / "frontier.json").read_text().count('"hashes": []')
    # a round deleted from the export: verify fails naming its leaf index
    line = next(json.loads(text) for text in
                (out2 / "log" / "leaves.jsonl").read_text().splitlines()
                if json.loads(text)["path"].startswith("rounds/"))
    (out2 / line["path"]).unlink()
    capsys.readouterr()
    assert run(["audit", "verify", str(out2), "--keys", str(trusted), "--checkpoint",
                str(cp2), "--since", str(cp)]) == 1
    assert f"leaf {line['index']}" in capsys.readouterr().out


def test_audit_export_over_grpc_refuses_what_it_cannot_trust(
        server: ServerProcess, client: Client, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--address", f"127.0.0.1:{server.port}"]
    _play(client, "lx-eve")
    saved = tmp_path / "cp"
    assert run(["log", "checkpoint", *where, "--out", str(saved)]) == 0
    old = parse_checkpoint(saved.read_text()).checkpoint
    forged = tmp_path / "forged"  # same origin and size, another history
    forged.write_text(sign_checkpoint(Checkpoint(old.origin, old.size, bytes(32)),
                                      SigningKey.generate()))
    capsys.readouterr()
    assert run(["audit", "export", *where, "--out", str(tmp_path / "a"), "--since",
                str(forged)]) == 2
    assert "not only appended to" in capsys.readouterr().err
    assert run(["audit", "export", *where, "--out", str(tmp_path / "b"), "--start",
                "2020-01-01T00:00:00Z"]) == 2
    full = tmp_path / "full"
    full.mkdir()
    (full / "something").write_text("")
    assert run(["audit", "export", *where, "--out", str(full)]) == 2
    assert run(["audit", "export", "--address", "127.0.0.1:1", "--timeout", "2", "--out",
                str(tmp_path / "c")]) == 2
    assert "127.0.0.1:1: UNAVAILABLE" in capsys.readouterr().err
