"""A real `fairshoe serve` with a witness configured (FAIRSHOE_WITNESSES): each new checkpoint is
submitted over HTTP (C2SP tlog-witness add-checkpoint, with the consistency proof from the size
the witness last cosigned) to the test witness written from the spec
(tests/support/witness_server.py),
and served with its cosignature; an auditor's `audit verify --witness` then passes on it, and
fails on the same checkpoint without the cosignature (what a split view shown to one auditor
looks like)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.live_server import FAIRSHOE, Client, ServerProcess
from support.witness_server import TestWitness, serving

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
