"""`fairshoe audit export --address` through a hostile proxy in front of a real `fairshoe serve`:
the proxy forwards GetSigningKeys and ExportRecords and rewrites the leaf stream. What the proxy
cannot sign it cannot hide from `audit verify --checkpoint`; what the export cannot write as a
collection (two leaves at one path) it refuses instead of overwriting the first leaf's file."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.live_server import FAIRSHOE, ServerProcess

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.crypto.keys import SigningKey
from rng_service.log import DEFAULT_ORIGIN, Checkpoint, parse_checkpoint, sign_checkpoint

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

Items = list[audit_pb2.ExportRecordsResponse]


class Proxy(audit_pb2_grpc.AuditServiceServicer):
    """Forwards to the real server; ``rewrite`` edits the leaf-range stream."""

    def __init__(self, upstream: audit_pb2_grpc.AuditServiceStub) -> None:
        self.upstream = upstream
        self.rewrite: Callable[[Items], Items] = lambda items: items

    def GetSigningKeys(self, request: Any, context: Any) -> Any:
        return self.upstream.GetSigningKeys(request)

    def ExportRecords(self, request: Any, context: Any) -> Iterator[Any]:
        yield from self.rewrite(list(self.upstream.ExportRecords(request)))


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("mitm")).start()
    client = server.client()
    client.deposit("mitm-ann", 1_000_000)
    for _ in range(3):
        client.play_out("mitm-ann", client.start("mitm-ann", "double-deck", [1000]))
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture
def proxy(real: ServerProcess) -> Iterator[tuple[Proxy, str]]:
    service = Proxy(audit_pb2_grpc.AuditServiceStub(real.channel))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    audit_pb2_grpc.add_AuditServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield service, f"127.0.0.1:{port}"
    server.stop(None)


def _fairshoe(server: ServerProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FAIRSHOE), *argv], env=server.env, capture_output=True,
                          text=True, check=False)


def _rounds(items: Items) -> list[int]:
    return [i for i, item in enumerate(items) if item.WhichOneof("item") == "round_record"]


def test_two_leaves_at_one_path_are_refused(real: ServerProcess, proxy: tuple[Proxy, str],
                                            tmp_path: Path) -> None:
    service, address = proxy

    def replay(items: Items) -> Items:  # the second round's leaf carries the first's record
        first, second = _rounds(items)[:2]
        items[second].round_record.CopyFrom(items[first].round_record)
        return items

    service.rewrite = replay
    done = _fairshoe(real, "audit", "export", "--address", address, "--out", str(tmp_path / "x"))
    assert done.returncode == 2, done.stdout
    assert "is also leaf" in done.stderr, done.stderr


def test_a_rewritten_leaf_fails_verify_naming_it(real: ServerProcess, proxy: tuple[Proxy, str],
                                                 tmp_path: Path) -> None:
    service, address = proxy
    keys, trusted, checkpoint = (real.data_dir / "keys", tmp_path / "trusted.jwks.json",
                                 tmp_path / "checkpoint")
    assert _fairshoe(real, "keys", "export", "--dir", str(keys), "--out",
                     str(trusted)).returncode == 0
    assert _fairshoe(real, "log", "checkpoint", "--address", f"127.0.0.1:{real.port}",
                     "--keys", str(trusted), "--out", str(checkpoint)).returncode == 0
    at = 0

    def rewrite(items: Items) -> Items:  # a round's record, one byte more (still JSON)
        nonlocal at
        at = _rounds(items)[1]
        record = items[at].round_record
        record.envelope = record.envelope.replace(b'"payload"', b' "payload"', 1)
        return items

    service.rewrite = rewrite
    out = tmp_path / "out"
    assert _fairshoe(real, "audit", "export", "--address", address, "--out",
                     str(out)).returncode == 0  # the export checks no proof: verify does
    verify = _fairshoe(real, "audit", "verify", str(out), "--keys", str(trusted),
                       "--checkpoint", str(checkpoint), "--quiet")
    assert verify.returncode == 1
    leaf = at - 1  # items[0] is log_start
    assert f"FAIL leaf {leaf}: proof" in verify.stdout, verify.stdout


def test_an_export_since_another_operators_checkpoint_is_refused(real: ServerProcess,
                                                                 tmp_path: Path) -> None:
    where = ["--address", f"127.0.0.1:{real.port}"]
    saved = tmp_path / "cp"
    assert _fairshoe(real, "log", "checkpoint", *where, "--out", str(saved)).returncode == 0
    mine = parse_checkpoint(saved.read_text()).checkpoint
    other = tmp_path / "other"  # the same tree, as another operator's log would name it
    other.write_text(sign_checkpoint(Checkpoint(f"{DEFAULT_ORIGIN}/other", mine.size,
                                                mine.root_hash), SigningKey.generate()))
    done = _fairshoe(real, "audit", "export", *where, "--out", str(tmp_path / "x"), "--since",
                     str(other))
    assert done.returncode == 2 and "--since is a checkpoint of" in done.stderr, done.stderr
    local = _fairshoe(real, "audit", "export", "--out", str(tmp_path / "y"), "--database",
                      real.database_url, "--key-store", str(real.data_dir / "keys"),
                      "--since", str(other))
    assert local.returncode == 2 and "since: a checkpoint of" in local.stderr, local.stderr


def test_leaves_beyond_the_checkpoint_are_refused(real: ServerProcess, proxy: tuple[Proxy, str],
                                                  tmp_path: Path) -> None:
    service, address = proxy

    def more(items: Items) -> Items:  # one leaf past the checkpoint's size (so: without end)
        extra = audit_pb2.ExportRecordsResponse()
        extra.CopyFrom(items[-1])
        extra.log.leaf_index += 1
        reveal = extra.shoe_reveal
        shoe_id = json.loads(reveal.envelope)["payload"]["shoe_id"]
        reveal.envelope = reveal.envelope.replace(shoe_id.encode(), b"f" * 32)
        return [*items, extra]

    service.rewrite = more
    done = _fairshoe(real, "audit", "export", "--address", address, "--out", str(tmp_path / "x"))
    assert done.returncode == 2, done.stdout
    assert "beyond its checkpoint" in done.stderr, done.stderr
