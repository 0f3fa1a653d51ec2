"""`fairshoe log prove|verify|checkpoint` against a hostile server: a real gRPC AuditService run
here by an operator who holds the signing key and answers with real, signed, but misleading
checkpoints and proofs. The client trusts only the key; it must not print OK for a proof bound to
another tree size or leaf index, a log that shrank, or a checkpoint dated in the future."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.cli_helpers import run

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.crypto.keys import SigningKey, public_key_jwk
from rng_service.log import Checkpoint, CompactRange, leaf_hash, sign_checkpoint
from rng_service.service.ports import DEFAULT_OPERATOR
from rng_service.service.translog import log_origin

ORIGIN = log_origin(DEFAULT_OPERATOR)
ENTRIES = [f"entry {i}".encode() for i in range(4)] + [
    b'{"payload":{"round_id":"' + b"b" * 32 + b'"}}']


def _root(entries: list[bytes]) -> bytes:
    tree = CompactRange()
    for entry in entries:
        tree.append(leaf_hash(entry))
    return tree.root()


@dataclass
class Hostile(audit_pb2_grpc.AuditServiceServicer):
    """What the operator's server answers, set by each test."""

    key: SigningKey
    inclusion: audit_pb2.GetInclusionProofResponse | None = None
    consistency: audit_pb2.GetConsistencyProofResponse | None = None
    latest: str = ""
    asked: list[Any] = field(default_factory=list)

    def note(self, size: int, when: datetime | None = None) -> str:
        """A checkpoint of the first ``size`` entries, signed with the operator's key."""
        return sign_checkpoint(Checkpoint(ORIGIN, size, _root(ENTRIES[:size]),
                                          when or datetime.now(UTC)), self.key)

    def GetCheckpoint(self, request: Any, context: Any) -> audit_pb2.GetCheckpointResponse:
        return audit_pb2.GetCheckpointResponse(checkpoint=self.latest)

    def GetInclusionProof(self, request: Any, context: Any
                          ) -> audit_pb2.GetInclusionProofResponse:
        self.asked.append(request)
        assert self.inclusion is not None
        return self.inclusion

    def GetRoundRecord(self, request: Any, context: Any) -> audit_pb2.GetRoundRecordResponse:
        return audit_pb2.GetRoundRecordResponse(record=common_pb2.SignedRecord(
            envelope=ENTRIES[4]))

    def GetConsistencyProof(self, request: Any, context: Any
                            ) -> audit_pb2.GetConsistencyProofResponse:
        assert self.consistency is not None
        return self.consistency


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[tuple[Hostile, list[str]]]:
    """The hostile server and the command line options that reach it with its key trusted."""
    key = SigningKey.generate()
    trusted = tmp_path / "trusted.jwks.json"
    trusted.write_text(json.dumps({"keys": [public_key_jwk(key.public_key)]}))
    service = Hostile(key)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    audit_pb2_grpc.add_AuditServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield service, ["--address", f"127.0.0.1:{port}", "--keys", str(trusted)]
    server.stop(None)


def test_an_inclusion_proof_for_another_tree_size_is_not_ok(
        hostile: tuple[Hostile, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    # the log holds 5 leaves: root = H(root of leaves 0..3, leaf 4). Leaf 4's entry "proves" as
    # leaf 1 of a tree of 2 with the same hash, against the real checkpoint of 5.
    entry = tmp_path / "entry"
    entry.write_bytes(ENTRIES[4])
    service.inclusion = audit_pb2.GetInclusionProofResponse(
        leaf_index=1, tree_size=2, hashes=[_root(ENTRIES[:4])], checkpoint=service.note(5))
    status = run(["log", "prove", *where, "--leaf-index", "1", "--entry", str(entry)])
    out = capsys.readouterr().out
    assert status == 1 and "OK" not in out, out
    assert out.splitlines()[-1].startswith("FAIL ")


def test_an_inclusion_proof_of_another_leaf_is_not_ok(
        hostile: tuple[Hostile, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    # asked for leaf 1, the server proves leaf 4 (a real proof, of another index)
    entry = tmp_path / "entry"
    entry.write_bytes(ENTRIES[4])
    service.inclusion = audit_pb2.GetInclusionProofResponse(
        leaf_index=4, tree_size=5, hashes=[_root(ENTRIES[:4])], checkpoint=service.note(5))
    status = run(["log", "prove", *where, "--leaf-index", "1", "--entry", str(entry)])
    out = capsys.readouterr().out
    assert status == 1 and "OK" not in out, out


def test_a_log_that_shrank_fails_verify(hostile: tuple[Hostile, list[str]], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    saved = tmp_path / "saved"
    saved.write_text(service.note(5))
    # the server rolls back to an older tree of 4 leaves (signed, a real prefix)
    service.consistency = audit_pb2.GetConsistencyProofResponse(
        from_size=5, to_size=4, checkpoint=service.note(4))
    status = run(["log", "verify", *where, str(saved)])
    out = capsys.readouterr().out
    assert status == 1, out
    assert out.splitlines()[-1].startswith("FAIL ") and "4" in out.splitlines()[-1]


def test_a_split_view_fails_verify(hostile: tuple[Hostile, list[str]], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    saved = tmp_path / "saved"
    saved.write_text(sign_checkpoint(Checkpoint(ORIGIN, 5, bytes(32), datetime.now(UTC)),
                                     service.key))
    service.consistency = audit_pb2.GetConsistencyProofResponse(
        from_size=5, to_size=5, checkpoint=service.note(5))
    assert run(["log", "verify", *where, str(saved)]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("FAIL ")


@pytest.mark.parametrize("command", ["checkpoint", "verify"])
def test_a_checkpoint_dated_in_the_future_fails(
        hostile: tuple[Hostile, list[str]], tmp_path: Path, command: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    future = service.note(5, datetime.now(UTC) + timedelta(days=1))
    service.latest = future
    service.consistency = audit_pb2.GetConsistencyProofResponse(
        from_size=4, to_size=5, hashes=[leaf_hash(ENTRIES[4])], checkpoint=future)
    saved = tmp_path / "saved"
    if command == "checkpoint":
        status = run(["log", "checkpoint", *where, "--out", str(saved)])
        assert not saved.exists()
    else:
        saved.write_text(service.note(4))
        status = run(["log", "verify", *where, str(saved)])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "in the future" in out.splitlines()[-1]


@pytest.mark.parametrize("hashes", [[], "extra"], ids=["missing", "extra"])
def test_a_proof_with_missing_or_extra_hashes_fails(
        hostile: tuple[Hostile, list[str]], tmp_path: Path, hashes: object,
        capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    entry = tmp_path / "entry"
    entry.write_bytes(ENTRIES[4])
    proof = [_root(ENTRIES[:4])] + ([bytes(32)] if hashes == "extra" else [])
    service.inclusion = audit_pb2.GetInclusionProofResponse(
        leaf_index=4, tree_size=5, hashes=proof if hashes == "extra" else [],
        checkpoint=service.note(5))
    assert run(["log", "prove", *where, "--leaf-index", "4", "--entry", str(entry)]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("FAIL ")


def test_a_round_proved_by_another_rounds_record_is_not_ok(
        hostile: tuple[Hostile, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    # asked for round aaaa, the server answers with round bbbb's record and its (real) proof
    service.inclusion = audit_pb2.GetInclusionProofResponse(
        leaf_index=4, tree_size=5, hashes=[_root(ENTRIES[:4])], checkpoint=service.note(5))
    status = run(["log", "prove", *where, "--round", "a" * 32])
    out = capsys.readouterr().out
    assert status == 1 and "OK" not in out, out
    assert "b" * 32 in out.splitlines()[-1]


def test_checkpoint_says_its_signature_was_checked(
        hostile: tuple[Hostile, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    service, where = hostile
    service.latest = service.note(5)
    assert run(["log", "checkpoint", *where]) == 0
    captured = capsys.readouterr()
    assert captured.out == service.latest  # stdout is the note alone, to save or pipe
    assert captured.err == (f"OK the checkpoint of 5 leaves ({ORIGIN}) is signed by a trusted "
                            "key\n")


def test_verify_names_a_file_that_is_not_a_checkpoint(
        hostile: tuple[Hostile, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, where = hostile
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("garbage\n")
    assert run(["log", "verify", *where, str(garbage)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fairshoe log: CHECKPOINT_FILE {garbage}: not a signed checkpoint ("), \
        err
    assert err.count("\n") == 1
