"""`fairshoe audit verify DIR --checkpoint CP --witness VKEY [--quorum N]`: the checkpoint must
carry cosignatures (c2sp.org/tlog-cosignature, Ed25519 cosignature/v1) of a quorum of the
witnesses the auditor trusts, so a tree the operator shows this auditor alone fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.audit_kit import run, simple_player
from support.audit_kit import summary as audit_summary
from support.log_export_helpers import logged_collection, signed_checkpoint, write_log

from rng_service.cli.main import main
from rng_service.crypto.keys import SigningKey, export_jwk
from rng_service.log import vkey
from rng_service.log.cosignature import Cosigner, cosign
from rng_service.log.note import split_note

KEY = SigningKey.generate()
W1, W2 = SigningKey.generate(), SigningKey.generate()
V1 = Cosigner.from_public_key("w1.example/witness", W1.public_key).vkey()
V2 = Cosigner.from_public_key("w2.example/witness", W2.public_key).vkey()
WHEN = 1735787045  # the checkpoints' time (log_export_helpers.WHEN)


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A complete collection with its log, the checkpoint note, and the trusted keys."""
    root = tmp_path_factory.mktemp("witnessed") / "lab"
    order = logged_collection(root, KEY, (("snap", 2),), simple_player)
    store = write_log(root, order, KEY)
    keys = root.parent / "operator.jwks.json"
    keys.write_text(export_jwk({KEY.key_id: KEY.public_key}))
    return root, signed_checkpoint(store, store.size, KEY), keys


def cosigned(note: str, *witnesses: tuple[SigningKey, str]) -> str:
    text, _ = split_note(note)
    return note + "".join(cosign(text, key, name, WHEN + 1).line() for key, name in witnesses)


def verify(capsys: pytest.CaptureFixture[str], collection: tuple[Path, str, Path],
           tmp_path: Path, note: str, *extra: str) -> tuple[int, str]:
    root, _, keys = collection
    lab = tmp_path / "lab"
    if not lab.exists():
        shutil.copytree(root, lab)
    checkpoint = tmp_path / "checkpoint.note"
    checkpoint.write_text(note, encoding="utf-8")
    return run(capsys, "audit", "verify", str(lab), "--keys", str(keys), "--checkpoint",
               str(checkpoint), *extra)


def test_a_checkpoint_cosigned_by_the_witnesses_passes(
        collection: tuple[Path, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    note = cosigned(collection[1], (W1, "w1.example/witness"), (W2, "w2.example/witness"))
    code, out = verify(capsys, collection, tmp_path, note, "--witness", V1, "--witness", V2)
    assert code == 0, out
    assert "cosigned by w1.example/witness, w2.example/witness" in out
    assert audit_summary(out).splitlines()[-1].startswith("audit PASS, complete against")


def test_too_few_cosignatures_fail(collection: tuple[Path, str, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    one = cosigned(collection[1], (W1, "w1.example/witness"))
    # the operator's checkpoint alone (a split view looks like this to its victim)
    code, out = verify(capsys, collection, tmp_path, collection[1], "--witness", V1)
    assert code == 1 and "cosignature 0 of the 1 witnesses given cosigned it (none), fewer " \
                         "than the quorum of 1" in out, out
    # both required by default; one of two with --quorum 1
    code, out = verify(capsys, collection, tmp_path, one, "--witness", V1, "--witness", V2)
    assert code == 1 and "1 of the 2 witnesses given cosigned it (w1.example/witness)" in out
    code, out = verify(capsys, collection, tmp_path, one, "--witness", V1, "--witness", V2,
                       "--quorum", "1")
    assert code == 0, out
    # a cosignature by a key that is not the witness's counts for nothing
    forged = cosigned(collection[1], (SigningKey.generate(), "w1.example/witness"))
    code, out = verify(capsys, collection, tmp_path, forged, "--witness", V1)
    assert code == 1 and "0 of the 1 witnesses" in out, out


def test_a_cosignature_that_does_not_verify_fails(
        collection: tuple[Path, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    text, _ = split_note(collection[1])
    # a cosignature of another checkpoint (another size) moved onto this one
    line = cosign(text.replace(f"\n{text.splitlines()[1]}\n", "\n1\n"), W1,
                  "w1.example/witness", WHEN)
    code, out = verify(capsys, collection, tmp_path, collection[1] + line.line(), "--witness",
                       V1)
    assert code == 1 and "the cosignature of w1.example/witness does not verify" in out, out
    # dated in the future
    future = collection[1] + cosign(text, W1, "w1.example/witness", 4102444800).line()
    code, out = verify(capsys, collection, tmp_path, future, "--witness", V1,
                       "--now", "2026-01-01T00:00:00Z")
    assert code == 1 and "in the future" in out, out


def test_witness_arguments_are_checked(collection: tuple[Path, str, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root, note, keys = collection
    checkpoint = tmp_path / "checkpoint.note"
    checkpoint.write_text(note, encoding="utf-8")

    def refused(*extra: str) -> str:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(["audit", "verify", str(root), "--keys", str(keys), *extra])
        assert exited.value.code == 2
        return capsys.readouterr().err

    assert "--quorum must be between 1 and the 1 distinct --witness keys given, got 2" in \
        refused("--checkpoint", str(checkpoint), "--witness", V1, "--quorum", "2")
    log_key = vkey("w1.example/witness", W1.public_key)  # a log's key (0x01), not a witness's
    assert "0x01 is a log's key" in refused("--checkpoint", str(checkpoint), "--witness",
                                            log_key)
    assert "--witness needs --checkpoint" in refused("--witness", V1)
