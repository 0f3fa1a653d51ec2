"""The logs as C2SP tlog-tiles over HTTP from a real `fairshoe serve --tiles-port` process, read
by a reader that is not ours: Go's golang.org/x/mod/sumdb/note and sumdb/tlog
(tests/log/tlogreader), which verifies the checkpoint's signature, recomputes the tree hash from
the tiles, proves every record's inclusion and the consistency with an earlier checkpoint the
GetCheckpoint RPC signed. Then what is published per operator (under mutual TLS, two tenants): an
operator listed in --tiles-entries in full, one in --tiles-logs without its entries, any other
not at all; the caching headers; and a start-up that could not be meant."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest
from support.go_tlogreader import build_tlogreader, run_tlogreader
from support.live_server import Client, ServerProcess, Tls, make_dev_certs

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.crypto.keys import jwk_to_public_key
from rng_service.log import checkpoint_verifier, decode_bundle, leaf_hash, verify_checkpoint
from rng_service.service.translog import log_origin

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

PLAYER = "tiles-ann"


@pytest.fixture(scope="session")
def tlogreader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tlogreader(tmp_path_factory.mktemp("go"))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(certs: Path, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """mTLS, operators op-a (published with its entries), op-b (checkpoints and hash tiles
    only) and op-c (not published); tiles on a free port."""
    url = str(request.getfixturevalue("pg_module_url")) if request.param == "postgresql" else None
    proc = ServerProcess(tmp_path_factory.mktemp("tiles"), stacked=False, database_url=url,
                         tls=Tls(certs, mutual=True), operators=["op-a", "op-b", "op-c"],
                         args=["--tiles-port", "any", "--tiles-entries", "op-a",
                               "--tiles-logs", "op-b"])
    proc.start()
    yield proc
    assert proc.stop() == 0, proc.log()


def _url(server: ServerProcess, path: str) -> str:
    return f"http://127.0.0.1:{server.tiles_port}{path}"


def _get(url: str, headers: dict[str, str] | None = None, method: str = "GET"
         ) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as page:
            return page.status, dict(page.headers.items()), page.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


@pytest.fixture(scope="module")
def channels(server: ServerProcess) -> Iterator[dict[str, grpc.Channel]]:
    opened = {name: server.open_channel(name) for name in ("operator-a", "operator-b")}
    yield opened
    for channel in opened.values():
        channel.close()


def _draw(channel: grpc.Channel, times: int) -> None:
    stub = rng_pb2_grpc.RngServiceStub(channel)
    for _ in range(times):
        stub.GenerateIntegers(rng_pb2.GenerateIntegersRequest(count=1, min=1, max=6,
                                                              request_id=Client.rid()))


def _checkpoint(channel: grpc.Channel) -> audit_pb2.GetCheckpointResponse:
    stub = audit_pb2_grpc.AuditServiceStub(channel)
    found: audit_pb2.GetCheckpointResponse = stub.GetCheckpoint(audit_pb2.GetCheckpointRequest())
    return found


def _vkey(channel: grpc.Channel, origin: str) -> str:
    keys = audit_pb2_grpc.AuditServiceStub(channel).GetSigningKeys(
        audit_pb2.GetSigningKeysRequest()).keys
    (key,) = keys
    return checkpoint_verifier(jwk_to_public_key(json.loads(key.jwk_json)), origin).vkey()


@pytest.fixture(scope="module")
def logs(channels: dict[str, grpc.Channel], tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, object]:
    """op-a: a few draws, a checkpoint by RPC (kept as a file), then past 256 leaves (a full
    tile, a level-1 tile) and a round; op-b: one round. What the tests compare with."""
    a, b = channels["operator-a"], channels["operator-b"]
    _draw(a, 3)
    early = _checkpoint(a)
    old = tmp_path_factory.mktemp("old") / "checkpoint"
    old.write_text(early.checkpoint)
    _draw(a, 130)
    client = Client(a)
    client.deposit(PLAYER, 50_000)
    round_id = client.play_out(PLAYER, client.start(PLAYER, "snap", [1000])).round_id
    record = audit_pb2_grpc.AuditServiceStub(a).GetRoundRecord(
        audit_pb2.GetRoundRecordRequest(round_id=round_id))
    assert record.HasField("log")  # its leaf found, even if still queued when asked for
    other = Client(b)
    other.deposit(PLAYER, 50_000)
    b_round = other.play_out(PLAYER, other.start(PLAYER, "snap", [1000])).round_id
    b_record = audit_pb2_grpc.AuditServiceStub(b).GetRoundRecord(
        audit_pb2.GetRoundRecordRequest(round_id=b_round))
    return {"old": old, "early": early, "record": record, "b_record": b_record,
            "vkey_a": _vkey(a, log_origin("op-a")), "vkey_b": _vkey(b, log_origin("op-b"))}


def test_go_reader_verifies_the_tiles_a_record_and_consistency(
        server: ServerProcess, channels: dict[str, grpc.Channel], logs: dict[str, object],
        tlogreader: Path) -> None:
    record = logs["record"]
    assert isinstance(record, audit_pb2.GetRoundRecordResponse)
    latest = _checkpoint(channels["operator-a"])
    assert latest.tree_size > 256 + 1  # a full level-0 tile and a partial level-1 tile
    status, _, body = _get(_url(server, "/log/op-a/checkpoint"))
    assert status == 200
    assert body.decode() == latest.checkpoint  # the very note the RPC signed
    done = run_tlogreader(tlogreader, _url(server, "/log/op-a/"), str(logs["vkey_a"]),
                          old=logs["old"], record=record.log.leaf_index)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    early = logs["early"]
    assert isinstance(early, audit_pb2.GetCheckpointResponse)
    assert found["origin"] == log_origin("op-a")
    assert found["size"] == found["records_checked"] == latest.tree_size
    assert base64.b64decode(found["root"]) == latest.root_hash
    assert found["consistent_with"] == early.tree_size
    assert base64.b64decode(found["record"]) == record.record.envelope
    assert found["tiles_fetched"] >= 3  # level 0 full and partial, level 1 partial


class _Tamper(BaseHTTPRequestHandler):
    """Forwards to the real tiles port, with one bit of one resource flipped."""

    upstream = ""
    target = ""

    def do_GET(self) -> None:
        with urllib.request.urlopen(self.upstream + self.path, timeout=30) as page:
            data = bytearray(page.read())
        if self.path.endswith(self.target):
            data[-1] ^= 0x01  # inside the last hash, or the last entry (not a length)
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(bytes(data))

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(("target", "message"), [
    # the hash of the first 256 leaves: the tiles no longer hash to the checkpoint's root
    ("/tile/1/000.p/1", "tree hash from the tiles: downloaded inconsistent tile"),
    # a leaf hash: the proofs made from it fail (x/mod 0.7.0's TileHashReader does not check
    # this tile against its parent: it skips len(stx) tiles, not the stx tiles' count)
    ("/tile/0/000", "record 0: inclusion: invalid transparency proof"),
    # an entry: its record hash is not the tile's
    ("/tile/entries/000", "record 255: inclusion: invalid transparency proof"),
])
def test_go_reader_refuses_a_tampered_tile_or_entry(
        server: ServerProcess, logs: dict[str, object], tlogreader: Path, target: str,
        message: str) -> None:
    handler = type("Tamper", (_Tamper,), {"upstream": _url(server, ""), "target": target})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        done = run_tlogreader(tlogreader, f"http://127.0.0.1:{proxy.server_address[1]}"
                              "/log/op-a/", str(logs["vkey_a"]))
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert done.returncode == 1
    assert message in done.stderr, done.stderr


def test_go_reader_refuses_another_logs_key(server: ServerProcess, logs: dict[str, object],
                                            tlogreader: Path) -> None:
    done = run_tlogreader(tlogreader, _url(server, "/log/op-a/"), str(logs["vkey_b"]))
    assert done.returncode == 1
    assert "checkpoint signature" in done.stderr, done.stderr


def test_caching_headers_and_compression(server: ServerProcess, logs: dict[str, object]) -> None:
    status, headers, note = _get(_url(server, "/log/op-a/checkpoint"))
    assert (status, headers["Content-Type"]) == (200, "text/plain; charset=utf-8")
    assert headers["Cache-Control"] == "public, max-age=5"
    size = int(note.decode().split("\n")[1])
    status, headers, full = _get(_url(server, "/log/op-a/tile/0/000"))
    assert (status, len(full), headers["Content-Type"]) == (200, 8192,
                                                            "application/octet-stream")
    assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
    status, headers, partial = _get(_url(server, f"/log/op-a/tile/0/001.p/{size - 256}"))
    assert (status, len(partial)) == (200, 32 * (size - 256))
    assert headers["Cache-Control"] == "public, max-age=60"
    status, headers, _ = _get(_url(server, f"/log/op-a/tile/0/001.p/{size - 256 + 1}"))
    assert (status, headers["Cache-Control"]) == (404, "no-store")  # not yet: never cached
    status, headers, body = _get(_url(server, "/log/op-a/tile/0/000"), method="HEAD")
    assert (status, headers["Content-Length"], body) == (200, "8192", b"")
    status, plain_headers, plain = _get(_url(server, "/log/op-a/tile/entries/000"))
    assert "Content-Encoding" not in plain_headers
    status, headers, packed = _get(_url(server, "/log/op-a/tile/entries/000"),
                                   {"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"], headers["Vary"]) == (200, "gzip",
                                                                     "Accept-Encoding")
    assert gzip.decompress(packed) == plain
    assert [leaf_hash(e) for e in decode_bundle(plain)] == [full[i : i + 32]
                                                            for i in range(0, 8192, 32)]


def test_what_each_operator_publishes(server: ServerProcess, channels: dict[str, grpc.Channel],
                                      logs: dict[str, object]) -> None:
    b_record = logs["b_record"]
    assert isinstance(b_record, audit_pb2.GetRoundRecordResponse)
    # op-b: its checkpoint (the RPC's, verifying under op-b's origin) and hash tiles, no entries
    status, _, note = _get(_url(server, "/log/op-b/checkpoint"))
    assert status == 200
    assert note.decode() == _checkpoint(channels["operator-b"]).checkpoint
    size = verify_checkpoint(note, [str(logs["vkey_b"])], origin=log_origin("op-b")).size
    status, _, b_hashes = _get(_url(server, f"/log/op-b/tile/0/000.p/{size}"))
    assert status == 200
    assert leaf_hash(b_record.record.envelope) in [b_hashes[i : i + 32]
                                                   for i in range(0, len(b_hashes), 32)]
    status, _, body = _get(_url(server, f"/log/op-b/tile/entries/000.p/{size}"))
    assert status == 403
    assert b"not published" in body
    # op-a's tiles hold none of op-b's leaves
    _, _, a_hashes = _get(_url(server, "/log/op-a/tile/0/000"))
    assert leaf_hash(b_record.record.envelope) not in [a_hashes[i : i + 32]
                                                       for i in range(0, 8192, 32)]
    # op-c (an operator, unpublished), default, an unknown one, outside the prefix: all alike
    answers = {_get(_url(server, path))[0:3:2] for path in (
        "/log/op-c/checkpoint", "/log/default/checkpoint", "/log/op-z/checkpoint",
        "/log/op-c/tile/0/000.p/1", "/op-a/checkpoint", "/", "/log/", "/log/op-c/")}
    assert answers == {(404, b"no log here\n")}
    for path in ("/log/op-a/tile/0/00", "/log/op-a/../op-c/checkpoint", "/log/op-a/"):
        status, _, body = _get(_url(server, path))
        assert (status, b"is not a tile path" in body) == (404, True), path


def test_only_get_and_head(server: ServerProcess) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.tiles_port, timeout=30)
    try:
        conn.request("POST", "/log/op-a/checkpoint", body=b"x")
        assert conn.getresponse().status == 501
    finally:
        conn.close()


@pytest.mark.parametrize(("args", "message"), [
    (["--tiles-port", "{port}"], "--tiles-port publishes nothing without --tiles-logs"),
    (["--tiles-logs", "default"], "--tiles-logs, --tiles-entries and --tiles-rounds need"),
    (["--tiles-port", "{port}", "--tiles-logs", "default,bad name"], "--tiles-logs:"),
    (["--tiles-port", "{port}", "--tiles-entries", "ghost"],
     "cannot publish the log of ghost: no such operator"),
])
def test_a_tiles_configuration_that_cannot_be_meant_does_not_start(
        args: list[str], message: str, tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, stacked=False,
                           args=[a.replace("{port}", "any") for a in args])
    done = subprocess.run(server.command(), env=server.env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    events = [line["event"] for line in lines]
    assert events[-1] == "start_failed" and "serving" not in events, done.stderr
    assert message in str(lines[-1]["error"])


def test_a_tiles_port_in_use_does_not_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ServerProcess(tmp_path, stacked=False,
                               args=["--tiles-port", str(port), "--tiles-logs", "default"])
        done = subprocess.run(server.command(), env=server.env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    last = json.loads(done.stderr.splitlines()[-1])
    assert last["event"] == "start_failed"
    assert f"cannot serve tiles on 127.0.0.1:{port}" in last["error"]
