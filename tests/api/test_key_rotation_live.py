"""`fairshoe keys rotate` while the service runs: the very next record, reveal, RNG draw and
checkpoint are signed with the new key, without a restart, and the whole log still audits
complete. (A service that kept signing with the retired key would date records after its key's
validity: every audit would fail them.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.live_server import FAIRSHOE, Client, ServerProcess, audit_with_checkpoint

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.crypto.keys import KeyStore, load_trusted_public_keys
from rng_service.log import checkpoint_verifier, verify_checkpoint

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)


def _record_key(server: ServerProcess, round_id: str) -> str:
    audit = audit_pb2_grpc.AuditServiceStub(server.channel)
    found = audit.GetRoundRecord(audit_pb2.GetRoundRecordRequest(round_id=round_id))
    return str(json.loads(found.record.envelope)["signature"]["key_id"])


def _round(client: Client, player: str) -> str:
    return str(client.play_out(player, client.start(player, "double-deck", [1000])).round_id)


def _rotate(server: ServerProcess) -> str:
    done = subprocess.run([str(FAIRSHOE), "keys", "rotate", "--dir", str(server.data_dir / "keys")],
                          env=server.env, capture_output=True, text=True, check=True)
    return done.stdout


def test_a_key_rotated_while_serving_signs_the_next_records(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "srv", stacked=False).start()
    try:
        client = server.client()
        client.deposit("rot-ann", 100_000)
        old = _record_key(server, _round(client, "rot-ann"))
        _rotate(server)
        new = _record_key(server, _round(client, "rot-ann"))
        assert new != old
        draw = rng_pb2_grpc.RngServiceStub(server.channel).GenerateIntegers(
            rng_pb2.GenerateIntegersRequest(count=3, min=1, max=6, request_id="rot-draw"))
        assert json.loads(draw.proof.record.envelope)["signature"]["key_id"] == new
        assert json.loads(draw.proof.reveal.envelope)["signature"]["key_id"] == new
        audit = audit_pb2_grpc.AuditServiceStub(server.channel)
        answer = audit.GetCheckpoint(audit_pb2.GetCheckpointRequest())
        only_new = load_trusted_public_keys(KeyStore(server.data_dir / "keys").public_path(new))
        verify_checkpoint(answer.checkpoint, [checkpoint_verifier(only_new[new], answer.origin)],
                          origin=answer.origin)  # signed by the new key alone
        summary = audit_with_checkpoint(server, server.data_dir / "keys", tmp_path)
        assert summary.startswith("audit PASS"), summary
        assert "2 key records: 2 OK" in summary, summary
    finally:
        server.stop()
