"""``audit verify --workers N``: the rounds are checked shoe by shoe by N processes, and what the
audit prints is the same, byte for byte, for any N: every line, the FAIL lines and their order
included, the summary and the exit status. Checked on collections that fail many ways at once,
among them a round id repeated in another shoe (judged across the workers' shoes), and on logs
tampered with (their lines read and their proofs verified by the workers, a chunk at a time);
and a worker that dies: a pool replaces it but loses the chunk it held, whose results would never
come, so the audit must fail then rather than wait for ever."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path

import pytest
from support.audit_kit import load, save
from support.audit_labs import cli, verify
from support.audit_tampers import LOG_TAMPERS, LogTamper

from rng_service.audit import log_lines
from rng_service.audit.verifier import AuditOptions, Auditor, AuditReport
from rng_service.audit.workers import WorkerDied, ordered_map
from rng_service.crypto.keys import KeyStore, SigningKey, load_trusted_public_keys
from rng_service.records.schema import REVEALS_SUBDIR, SHOES_SUBDIR


@pytest.mark.parametrize("args", [
    ("de", "mh"),
    ("--quiet", "de", "mh"),
    ("--checkpoint", "checkpoint", "--operator", "OPERATOR", "de"),
], ids=["two collections", "quiet", "against the checkpoint"])
def test_every_line_is_the_same_for_any_number_of_workers(labs: dict[str, Path],
                                                          args: tuple[str, ...]) -> None:
    operator = labs["checkpoint"].read_text().splitlines()[0].removeprefix(
        "fairshoe.example/log/")
    argv = [str(labs[a]) if a in labs else operator if a == "OPERATOR" else a for a in args]
    code, out = verify(labs, 1, *argv)
    assert code == 1
    lines = out.splitlines()
    fails = [line for line in lines if line.startswith("FAIL ")]
    assert len(fails) >= 8, out  # the collections fail many ways
    assert any("round_id is also the id of" in line for line in fails), out
    assert any(line.startswith("OPEN round") for line in lines), out
    assert lines[-1].startswith("audit FAIL")
    for workers in (2, 3, 5):
        assert verify(labs, workers, *argv) == (code, out), f"--workers {workers}"


def _report(labs: dict[str, Path], workers: int) -> AuditReport:
    trusted = load_trusted_public_keys(labs["keys"])
    return Auditor(trusted, AuditOptions(workers=workers)).run([labs["de"], labs["mh"]])


def test_the_findings_and_the_checks_that_wrote_them_are_the_same(labs: dict[str, Path]) -> None:
    one, two = _report(labs, 1), _report(labs, 2)
    assert [(f, f.check) for f in two.findings] == [(f, f.check) for f in one.findings]
    assert (two.summary(), two.rule_sets, two.versions, two.open_shoes) == (
        one.summary(), one.rule_sets, one.versions, one.open_shoes)
    assert [f.check for f in one.findings if f.message.startswith("is also the id of")] == [
        "round.id", "round.id"]


def _snap_collection(tmp_path_factory: pytest.TempPathFactory, name: str
                     ) -> tuple[Path, Path, SigningKey]:
    """14 snap rounds made by ``collect rounds`` under a new directory ``name`` (its ``snap``,
    with the checkpoint of its log kept apart as ``checkpoint``), the keys that signed them
    exported beside it as ``trusted.json``, and the signing key."""
    root = tmp_path_factory.mktemp(name)
    store = root / "keystore"
    lab = root / "snap"
    code, out = cli("collect", "rounds", "--game", "snap", "--rounds", "14", "--out", str(lab),
                      "--key-store", str(store), "--checkpoint-out", str(root / "checkpoint"))
    assert code == 0, out
    assert cli("keys", "export", "--dir", str(store), "--out", str(root / "trusted.json"))[0] == 0
    return root, lab, KeyStore(store).load_signing_key()


@pytest.fixture(scope="module")
def snap_lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A shoe-per-round collection whose reveals fail every way a reveal can (the reveals are
    verified by the workers as they read them, and travel with their shoe to pass 2): a copy
    under another name, a second reveal of one shoe that differs, a seed that does not open its
    commitment, a broken signature, and one seed revealed as two shoes."""
    root, lab, key = _snap_collection(tmp_path_factory, "snap-workers")
    reveals = sorted((lab / REVEALS_SUBDIR).iterdir())
    assert len(reveals) == 14, "a shoe per round"
    copy = reveals[0].with_name("copy-" + reveals[0].name)
    copy.write_bytes(reveals[0].read_bytes())
    other = load(reveals[1])
    other["payload"]["client_seed"] = "00" + other["payload"]["client_seed"]
    save(reveals[1].with_name("again-" + reveals[1].name), other, key)
    wrong = load(reveals[2])
    wrong["payload"]["seed"] = wrong["payload"]["seed"][::-1]
    save(reveals[2], wrong, key)
    broken = load(reveals[3])
    broken["payload"]["decks"] += 1
    save(reveals[3], broken, None)  # the old signature kept
    twin, shared = load(reveals[4]), load(reveals[5])
    for member in ("seed", "commitment", "client_seed"):
        shared["payload"][member] = twin["payload"][member]
    save(reveals[5], shared, key)
    return {"snap": lab, "keys": root / "trusted.json"}


@pytest.mark.parametrize("quiet", [(), ("--quiet",)], ids=["every line", "quiet"])
def test_the_reveals_lines_are_the_same_for_any_number_of_workers(snap_lab: dict[str, Path],
                                                                  quiet: tuple[str, ...]) -> None:
    code, out = verify(snap_lab, 1, *quiet, str(snap_lab["snap"]))
    assert code == 1
    lines = out.splitlines()
    fails = [line for line in lines if line.startswith("FAIL ")]
    for wanted in ("is revealed twice, differently", "does not open the commitment",
                   "is also the commitment of shoe", "signature"):
        assert any(wanted in line and line.startswith("FAIL shoe") for line in fails), (wanted,
                                                                                         out)
    assert sum(line.startswith("FAIL round") for line in lines) >= 5, out
    assert any(line.startswith("OK   shoe") and "the same reveal as" in line
               for line in lines) == (not quiet), out
    assert lines[-1].startswith("audit FAIL")
    for workers in (2, 3):
        assert verify(snap_lab, workers, *quiet, str(snap_lab["snap"])) == (code, out), (
            f"--workers {workers}")


@pytest.fixture(scope="module")
def committed_lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A collection with its shoe commitments (``collect rounds`` writes them under ``shoes/``),
    which fail every way a commitment file can (they are verified by the workers as they read
    them, their lines taken in the walk's order): a broken signature, a malformed one (signed),
    a second commitment of one shoe that differs, a copy under another name, and one seed
    committed for two shoes."""
    root, lab, key = _snap_collection(tmp_path_factory, "committed-workers")
    shoes = sorted((lab / SHOES_SUBDIR).iterdir())
    assert len(shoes) == 14, "a shoe per round, each committed"
    broken = load(shoes[0])
    broken["payload"]["decks"] += 1
    save(shoes[0], broken, None)  # the old signature kept
    malformed = load(shoes[1])
    malformed["payload"]["commitment"] = "not hex"
    save(shoes[1], malformed, key)
    twice = load(shoes[2])
    twice["payload"]["decks"] = 1 if twice["payload"]["decks"] != 1 else 2
    save(shoes[2].with_name("again-" + shoes[2].name), twice, key)
    shoes[3].with_name("copy-" + shoes[3].name).write_bytes(shoes[3].read_bytes())
    twin, shared = load(shoes[4]), load(shoes[5])
    shared["payload"]["commitment"] = twin["payload"]["commitment"]
    save(shoes[5], shared, key)
    return {"snap": lab, "keys": root / "trusted.json"}


@pytest.mark.parametrize("quiet", [(), ("--quiet",)], ids=["every line", "quiet"])
def test_the_commitments_lines_are_the_same_for_any_number_of_workers(
        committed_lab: dict[str, Path], quiet: tuple[str, ...]) -> None:
    code, out = verify(committed_lab, 1, *quiet, str(committed_lab["snap"]))
    assert code == 1
    fails = [line for line in out.splitlines() if line.startswith("FAIL commitment")]
    for wanted in ("signature", "commitment \"not hex\" is not a SHA-256 digest",
                   "is committed twice, differently", "a seed serves one shoe"):
        assert any(wanted in line for line in fails), (wanted, out)
    assert sum("is committed twice, differently" in line for line in fails) == 2, out
    assert any(line.startswith("OK   commitment") for line in out.splitlines()) == (not quiet)
    for workers in (2, 3):
        assert verify(committed_lab, workers, *quiet, str(committed_lab["snap"])) == (
            code, out), f"--workers {workers}"


@pytest.fixture(scope="module")
def logged_lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SigningKey]:
    """A collection whose log lists 43 leaves (the key record, then each shoe's commitment,
    round and reveal), untouched, and the key that signed it (its checkpoint too)."""
    root, _, key = _snap_collection(tmp_path_factory, "logged-workers")
    return root, key


@pytest.mark.parametrize("against", [False, True], ids=["own checkpoint", "checkpoint given"])
@pytest.mark.parametrize("log_tamper", LOG_TAMPERS, ids=[n for n, _ in LOG_TAMPERS])
def test_the_log_lines_are_the_same_for_any_number_of_workers(
        logged_lab: tuple[Path, SigningKey], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        log_tamper: LogTamper, against: bool) -> None:
    """Each tampered log is judged as it should be, in the same lines by one process reading
    leaves.jsonl in one chunk and by 1, 2 and 3 workers taking 4 of its lines at a time (its 43
    lines go out in 11 chunks, and the leaves tampered with are read by different workers), or
    2 workers taking chunks bounded by their bytes."""
    name, tamper = log_tamper
    root, key = logged_lab
    shutil.copytree(root, tmp_path, dirs_exist_ok=True)
    lab, checkpoint = tmp_path / "snap", tmp_path / "checkpoint"
    labs = {"keys": tmp_path / "trusted.json"}
    args = [str(lab)]
    if against:
        origin = checkpoint.read_text().splitlines()[0].removeprefix("fairshoe.example/log/")
        args += ["--checkpoint", str(checkpoint), "--operator", origin]
    code, out = verify(labs, 1, *args)
    assert code == 0 and "audit PASS" in out, out  # untouched, it passes
    own, given = tamper(lab, key)
    code, out = verify(labs, 1, *args)
    # a line of leaves.jsonl deleted fails only against a checkpoint given (completeness)
    assert code == (0 if name == "leaf missing" and not against else 1), out
    for wanted in (given if against else own).split("|"):
        assert wanted in out, (name, wanted, out)
    monkeypatch.setattr(log_lines, "LINES_PER_CHUNK", 4)
    for workers in (1, 2, 3):
        assert verify(labs, workers, *args) == (code, out), f"--workers {workers}"
    monkeypatch.setattr(log_lines, "LINES_PER_CHUNK", 256)
    monkeypatch.setattr(log_lines, "BYTES_PER_CHUNK", 2500)  # 2 or 3 lines a chunk
    assert verify(labs, 2, *args) == (code, out), "chunks bounded by their bytes"


def _dies_on_5(item: int) -> int:
    if item == 5:  # as the kernel's out-of-memory killer would end it
        os.kill(os.getpid(), signal.SIGKILL)
    return item * 2


@pytest.mark.parametrize("chunk", [1, 3])
def test_a_worker_killed_in_its_task_fails_the_map_rather_than_hanging_it(chunk: int) -> None:
    """The results before the lost chunk are taken in order; then WorkerDied, naming the
    worker's end. (Run in a thread joined with a bound far past the map's own time: without the
    check it would wait for ever, and the test must fail rather than hang.)"""
    taken: list[int] = []
    raised: list[BaseException] = []

    def take() -> None:
        try:
            with ordered_map(_dies_on_5, range(40), 2, chunk=chunk) as done:
                taken.extend(done)
        except BaseException as exc:
            raised.append(exc)

    runner = threading.Thread(target=take, daemon=True)
    runner.start()
    runner.join(300)
    assert not runner.is_alive(), "the map waits for ever for the dead worker's chunk"
    assert len(raised) == 1 and isinstance(raised[0], WorkerDied), raised
    assert "killed by SIGKILL" in str(raised[0])
    assert taken == [2 * i for i in range(len(taken))] and len(taken) <= 5
