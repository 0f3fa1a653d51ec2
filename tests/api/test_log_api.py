"""The transparency log over real gRPC to a `fairshoe serve` process, on SQLite and PostgreSQL:
GetCheckpoint's note verifies with the key GetSigningKeys publishes, GetRoundRecord and
GetShoeReveal carry a leaf index and an inclusion proof to a signed checkpoint, the proof RPCs'
answers verify with the pure verifier, and their errors name the field."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from support.cli_helpers import run
from support.live_server import Client, ServerProcess

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.crypto.keys import SigningKey, jwk_to_public_key
from rng_service.log import (
    Checkpoint,
    checkpoint_verifier,
    leaf_hash,
    parse_checkpoint,
    sign_checkpoint,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
)
from rng_service.service.ports import DEFAULT_OPERATOR
from rng_service.service.translog import log_origin

ORIGIN = log_origin(DEFAULT_OPERATOR)


def _audit(server: ServerProcess) -> audit_pb2_grpc.AuditServiceStub:
    return audit_pb2_grpc.AuditServiceStub(server.channel)


def _verified(server: ServerProcess, note: str) -> Checkpoint:
    keys = _audit(server).GetSigningKeys(audit_pb2.GetSigningKeysRequest()).keys
    trusted = [checkpoint_verifier(jwk_to_public_key(json.loads(k.jwk_json)), ORIGIN)
               for k in keys]
    return verify_checkpoint(note, trusted, origin=ORIGIN)


def _round(client: Client, player: str) -> str:
    client.deposit(player, 100_000)
    view = client.play_out(player, client.start(player, "double-deck", [1000]))
    return str(view.round_id)


def test_round_records_and_reveals_carry_inclusion_proofs(server: ServerProcess,
                                                          client: Client) -> None:
    audit = _audit(server)
    round_id = _round(client, "log-ann")
    found = audit.GetRoundRecord(audit_pb2.GetRoundRecordRequest(round_id=round_id))
    checkpoint = _verified(server, found.log.checkpoint)
    assert checkpoint.size == found.log.tree_size > found.log.leaf_index
    verify_inclusion(leaf_hash(found.record.envelope), found.log.leaf_index,
                     found.log.tree_size, list(found.log.hashes), checkpoint.root_hash)
    shoe_id = json.loads(found.record.envelope)["payload"]["shoe"]["id"]
    reveal = audit.GetShoeReveal(audit_pb2.GetShoeRevealRequest(shoe_id=shoe_id))
    assert reveal.log.leaf_index > found.log.leaf_index
    verify_inclusion(leaf_hash(reveal.reveal.envelope), reveal.log.leaf_index,
                     reveal.log.tree_size, list(reveal.log.hashes),
                     _verified(server, reveal.log.checkpoint).root_hash)
    by_ref = audit.GetInclusionProof(audit_pb2.GetInclusionProofRequest(
        leaf_ref=audit_pb2.LeafRef(kind=audit_pb2.LeafRef.KIND_ROUND, id=round_id)))
    assert by_ref.leaf_index == found.log.leaf_index


def test_checkpoints_and_consistency(server: ServerProcess, client: Client) -> None:
    audit = _audit(server)
    _round(client, "log-bob")
    first = audit.GetCheckpoint(audit_pb2.GetCheckpointRequest())
    old = _verified(server, first.checkpoint)
    assert (first.origin, first.tree_size, first.root_hash) == (ORIGIN, old.size, old.root_hash)
    assert audit.GetCheckpoint(audit_pb2.GetCheckpointRequest()).checkpoint == first.checkpoint
    _round(client, "log-cid")
    proof = audit.GetConsistencyProof(audit_pb2.GetConsistencyProofRequest(
        from_size=old.size))
    new = _verified(server, proof.checkpoint)
    assert (proof.from_size, proof.to_size) == (old.size, new.size) and new.size > old.size
    verify_consistency(old.size, new.size, list(proof.hashes), old.root_hash, new.root_hash)
    leaf = audit.GetInclusionProof(audit_pb2.GetInclusionProofRequest(leaf_index=0,
                                                                      tree_size=old.size))
    assert leaf.tree_size == old.size and not leaf.checkpoint


@pytest.mark.parametrize(("request_", "code", "field"), [
    (audit_pb2.GetInclusionProofRequest(leaf_index=10**9), grpc.StatusCode.NOT_FOUND,
     "leaf_index"),
    (audit_pb2.GetInclusionProofRequest(leaf_index=0, tree_size=10**9),
     grpc.StatusCode.INVALID_ARGUMENT, "tree_size"),
    (audit_pb2.GetInclusionProofRequest(), grpc.StatusCode.INVALID_ARGUMENT, "leaf"),
    (audit_pb2.GetInclusionProofRequest(leaf_ref=audit_pb2.LeafRef(id="x")),
     grpc.StatusCode.INVALID_ARGUMENT, "leaf_ref.kind"),
    (audit_pb2.GetInclusionProofRequest(leaf_ref=audit_pb2.LeafRef(
        kind=audit_pb2.LeafRef.KIND_ROUND, id="f" * 32)), grpc.StatusCode.NOT_FOUND, "leaf"),
    (audit_pb2.GetConsistencyProofRequest(from_size=10**9, to_size=10**9 + 1),
     grpc.StatusCode.INVALID_ARGUMENT, "to_size"),
    # hostile sizes: the largest uint64, 2**63 (negative as a signed 64-bit), reversed
    (audit_pb2.GetInclusionProofRequest(leaf_index=2**63, tree_size=2**63),
     grpc.StatusCode.NOT_FOUND, "leaf_index"),
    (audit_pb2.GetInclusionProofRequest(leaf_index=0, tree_size=2**64 - 1),
     grpc.StatusCode.INVALID_ARGUMENT, "tree_size"),
    (audit_pb2.GetConsistencyProofRequest(from_size=2**64 - 1),
     grpc.StatusCode.INVALID_ARGUMENT, "from_size"),
    (audit_pb2.GetConsistencyProofRequest(from_size=2, to_size=1),
     grpc.StatusCode.INVALID_ARGUMENT, "from_size"),
    (audit_pb2.GetConsistencyProofRequest(from_size=1, to_size=2**63),
     grpc.StatusCode.INVALID_ARGUMENT, "to_size"),
])
def test_proof_errors_name_the_field(server: ServerProcess, client: Client, request_: object,
                                     code: grpc.StatusCode, field: str) -> None:
    _round(client, "log-dan")
    audit = _audit(server)
    method = (audit.GetInclusionProof if isinstance(request_, audit_pb2.GetInclusionProofRequest)
              else audit.GetConsistencyProof)
    with pytest.raises(grpc.RpcError) as info:
        method(request_)
    err: grpc.Call = info.value  # type: ignore[assignment]
    assert err.code() == code
    assert (err.details() or "").startswith(f"{field}: ")


def test_the_log_command_line(server: ServerProcess, client: Client, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    keys = _audit(server).GetSigningKeys(audit_pb2.GetSigningKeysRequest()).jwks_json
    trusted = tmp_path / "trusted.jwks.json"
    trusted.write_text(keys)
    where = ["--address", f"127.0.0.1:{server.port}", "--keys", str(trusted)]
    round_id = _round(client, "log-eve")
    saved = tmp_path / "checkpoint"
    assert run(["log", "checkpoint", *where, "--out", str(saved)]) == 0
    assert capsys.readouterr().out == saved.read_text()
    _round(client, "log-fay")
    assert run(["log", "prove", *where, "--round", round_id]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK leaf ")
    assert run(["log", "prove", *where, "--since", str(saved)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK the log of ")
    assert run(["log", "verify", *where, str(saved)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("OK ") and out[-1].startswith("OK the log of ")
    # a checkpoint of another history (same size, other root) is signed but inconsistent
    old = parse_checkpoint(saved.read_text()).checkpoint
    forged = tmp_path / "forged"
    forged.write_text(sign_checkpoint(Checkpoint(old.origin, old.size, bytes(32)),
                                      SigningKey.generate()))
    assert run(["log", "verify", *where, str(forged)]) == 1  # not signed by a trusted key
    assert capsys.readouterr().out.startswith("FAIL ")
    assert run(["log", "prove", "--address", f"127.0.0.1:{server.port}", "--since",
                str(forged)]) == 1  # unsigned check skipped: the proof itself fails
    assert capsys.readouterr().out.splitlines()[-1].startswith("FAIL ")
