"""A real `fairshoe serve` with a witness configured (FAIRSHOE_WITNESSES): each new checkpoint is
submitted over HTTP (C2SP tlog-witness add-checkpoint, with the consistency proof from the size
the witness last cosigned) to the test witness written from the spec
(tests/support/witness_server.py),
and served with its cosignature; an auditor's `audit verify --witness` then passes on it, and
fails on the same checkpoint without the cosignature (what a split view shown to one auditor
looks like). With two operators (mTLS tenants), a witness configured for one operator's log
(``operator=<id> <url> <vkey>``) cosigns that log's checkpoints and is never sent the other's,
while an unscoped witness cosigns both."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from support.live_server import FAIRSHOE, Client, ServerProcess, Tls, make_dev_certs
from support.witness_server import TestWitness, serving

from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.crypto.keys import load_trusted_public_keys
from rng_service.log import checkpoint_verifier
from rng_service.log.cosignature import verify_cosignatures
from rng_service.log.note import split_note
from rng_service.service.translog import log_origin

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

PLAYER = "witnessed-ann"
ORIGIN = log_origin("default")


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[ServerProcess, TestWitness, Path]]:
    witness = TestWitness("witness.test/w1")
    root = tmp_path_factory.mktemp("witnessed")
    with serving(witness) as url:
        server = ServerProcess(root / "data", stacked=False,
                               env={"FAIRSHOE_WITNESSES": f"{url} {witness.cosigner.vkey()}"})
        server.start()
        try:
            trusted = root / "trusted.jwks.json"
            fairshoe(server, "keys", "export", "--dir", str(root / "data" / "keys"), "--out",
                     str(trusted))
            # the witness trusts the operator's log key, obtained as an auditor would
            witness.logs[ORIGIN] = [checkpoint_verifier(key, ORIGIN)
                                    for key in load_trusted_public_keys(trusted).values()]
            yield server, witness, trusted
        finally:
            assert server.stop() == 0, server.log()


def fairshoe(server: ServerProcess, *argv: str, code: int = 0) -> str:
    done = subprocess.run([str(FAIRSHOE), *argv], env=server.env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == code, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def play(server: ServerProcess) -> None:
    client = Client(server.open_channel())
    client.deposit(PLAYER, 100_000)
    client.play_out(PLAYER, client.start(PLAYER, "double-deck", [1000]))


def checkpoint(server: ServerProcess, trusted: Path, out: Path) -> str:
    fairshoe(server, "log", "checkpoint", "--address", f"127.0.0.1:{server.port}", "--keys",
             str(trusted), "--out", str(out))
    return out.read_text(encoding="utf-8")


def test_each_new_checkpoint_is_cosigned_by_the_witness(
        witnessed: tuple[ServerProcess, TestWitness, Path], tmp_path: Path) -> None:
    server, witness, trusted = witnessed
    play(server)
    first = checkpoint(server, trusted, tmp_path / "first")
    [found] = verify_cosignatures(first, [witness.cosigner])
    size = int(split_note(first)[0].splitlines()[1])
    assert witness.state[ORIGIN][0] == size
    play(server)
    second = checkpoint(server, trusted, tmp_path / "second")
    assert verify_cosignatures(second, [witness.cosigner])
    newer = int(split_note(second)[0].splitlines()[1])
    # the witness checked the consistency proof from the size it had cosigned
    assert (size, newer, 200) in witness.requests and newer > size
    # the same checkpoint is served again, cosignature and all, while the log does not grow
    assert checkpoint(server, trusted, tmp_path / "again") == second
    del found


def test_an_auditor_requires_the_witness(
        witnessed: tuple[ServerProcess, TestWitness, Path], tmp_path: Path) -> None:
    server, witness, trusted = witnessed
    play(server)
    note = checkpoint(server, trusted, tmp_path / "checkpoint")
    out = tmp_path / "export"
    fairshoe(server, "audit", "export", "--out", str(out), "--database",
             str(server.data_dir / "fairshoe.db"), "--key-store", str(server.data_dir / "keys"))
    vkey = witness.cosigner.vkey()
    verdict = fairshoe(server, "audit", "verify", str(out), "--keys", str(trusted),
                       "--checkpoint", str(tmp_path / "checkpoint"), "--witness", vkey,
                       "--quiet")
    assert "cosigned by witness.test/w1" in verdict, verdict
    assert verdict.strip().splitlines()[-1].startswith("audit PASS, complete against")
    # the operator's signature alone, as a checkpoint shown to this auditor only would be
    alone = tmp_path / "alone"
    text, lines = split_note(note)
    alone.write_text(text + "\n" + "".join(line.line() for line in lines
                                           if line.name == ORIGIN), encoding="utf-8")
    verdict = fairshoe(server, "audit", "verify", str(out), "--keys", str(trusted),
                       "--checkpoint", str(alone), "--witness", vkey, "--quiet", code=1)
    assert "0 of the 1 witnesses given cosigned it" in verdict, verdict


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ServerProcess, TestWitness, TestWitness]]:
    """An mTLS server with operators op-a and op-b: witness ``only-a`` configured for op-a's
    log, witness ``every`` for every operator's. Both witnesses trust both logs' keys, so what
    keeps op-b's checkpoints from ``only-a`` is the configuration alone. Both operators' rounds
    can be looked up for the verifier page (``--tiles-rounds``)."""
    only_a, every = TestWitness("witness.test/only-a"), TestWitness("witness.test/every")
    root = tmp_path_factory.mktemp("tenants")
    with ExitStack() as stack:
        url_a, url_every = (stack.enter_context(serving(w)) for w in (only_a, every))
        server = ServerProcess(
            root / "data", stacked=False, tls=Tls(make_dev_certs(root / "certs"), mutual=True),
            operators=["op-a", "op-b"],
            args=["--tiles-port", "any", "--tiles-rounds", "op-a,op-b"],
            env={"FAIRSHOE_WITNESSES": f"operator=op-a {url_a} {only_a.cosigner.vkey()}, "
                                       f"{url_every} {every.cosigner.vkey()}"}).start()
        try:
            trusted = root / "trusted.jwks.json"
            fairshoe(server, "keys", "export", "--dir", str(root / "data" / "keys"), "--out",
                     str(trusted))
            keys = load_trusted_public_keys(trusted).values()
            for operator in ("op-a", "op-b"):
                origin = log_origin(operator)
                for witness in (only_a, every):
                    witness.logs[origin] = [checkpoint_verifier(key, origin) for key in keys]
            yield server, only_a, every
        finally:
            assert server.stop() == 0, server.log()


def tenant_checkpoint(server: ServerProcess, client: str, operator: str) -> tuple[str, list[str]]:
    """A round played as ``client``'s operator (``operator``): its log's checkpoint
    (GetCheckpoint), and the witnesses the round's evidence for the verifier page names."""
    with server.open_channel(client) as channel:
        player = Client(channel)
        player.deposit(PLAYER, 100_000)
        rid = player.play_out(PLAYER, player.start(PLAYER, "double-deck", [1000])).round_id
        audit = audit_pb2_grpc.AuditServiceStub(channel)
        note = str(audit.GetCheckpoint(audit_pb2.GetCheckpointRequest()).checkpoint)
    port = server.tiles_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/log/{operator}/round/{rid}",
                                timeout=30) as answer:
        witnesses: list[str] = json.loads(answer.read())["witnesses"]
    return note, witnesses


def test_a_witness_of_one_operators_log_cosigns_it_and_never_sees_the_others(
        tenants: tuple[ServerProcess, TestWitness, TestWitness]) -> None:
    server, only_a, every = tenants
    of_a, named_a = tenant_checkpoint(server, "operator-a", "op-a")
    of_b, named_b = tenant_checkpoint(server, "operator-b", "op-b")
    assert named_a == [only_a.cosigner.vkey(), every.cosigner.vkey()]
    assert named_b == [every.cosigner.vkey()]
    assert split_note(of_a)[0].startswith(log_origin("op-a") + "\n")
    assert split_note(of_b)[0].startswith(log_origin("op-b") + "\n")
    assert [f.cosigner for f in verify_cosignatures(of_a, [only_a.cosigner, every.cosigner])] \
        == [only_a.cosigner, every.cosigner]
    assert [f.cosigner for f in verify_cosignatures(of_b, [only_a.cosigner, every.cosigner])] \
        == [every.cosigner]
    # op-b's log never reached the witness of op-a's, not even refused
    assert set(only_a.state) == {log_origin("op-a")}
    assert len(only_a.requests) == 1
    assert set(every.state) == {log_origin("op-a"), log_origin("op-b")}


def test_a_malformed_witness_entry_fails_the_start_naming_it(tmp_path: Path) -> None:
    probe = ServerProcess(tmp_path, stacked=False,
                          env={"FAIRSHOE_WITNESSES": "operator=@a http://w.test witness+1+AA"})
    done = subprocess.run([str(FAIRSHOE), "serve", "--address", "127.0.0.1:0",
                           "--metrics-port", "0"], env=probe.env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    [error] = [line["error"] for line in map(json.loads, filter(None, done.stderr.splitlines()))
               if line.get("level") == "error"]
    assert "FAIRSHOE_WITNESSES: 'operator=@a http://w.test witness+1+AA'" in error, error
