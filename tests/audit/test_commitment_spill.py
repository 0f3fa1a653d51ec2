"""The shoe commitments are kept in the audit's scratch store, not in memory (issue 21 goal 3: a
collection that reshuffles every round commits a shoe per record). What the audit says of them
must not change: a copy's line of its own in the walk's order, two commitments of one shoe that
differ failing both, a value two committed shoes share failing both (found by a query on the
store), the shoes in play (committed, never revealed) listed sorted, a round and a reveal checked
against their shoe's commitment; the same for any number of workers, with the store's writes and
look-ups split into batches of 2. Peak memory itself is measured by
``bench/bench_audit_memory.py --committed``, never here."""

from __future__ import annotations

import gc
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import load, save
from support.audit_labs import cli

from rng_service.audit import spill
from rng_service.audit.files import Status
from rng_service.audit.spill import SpillDb
from rng_service.audit.verifier import AuditOptions, Auditor, AuditReport, Finding
from rng_service.crypto.keys import KeyStore, load_trusted_public_keys
from rng_service.records.schema import REVEALS_SUBDIR, ROUNDS_SUBDIR, SHOES_SUBDIR

_NOW = datetime(2030, 1, 1, tzinfo=UTC)
_ONLY = "zz-committed-only"  # a shoe committed and never dealt nor revealed


def test_kept_values_beside_another_and_keys_absent_from_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kept read beside another of the same store (a join by key, in the first one's order,
    None where the other keeps nothing), its keys the other does not keep (in its order), and
    values appended already pickled read back in order."""
    monkeypatch.setattr(spill, "_BATCH", 2)
    store = SpillDb()
    try:
        first: spill.Kept[Any] = spill.Kept(store)
        other: spill.Kept[Any] = spill.Kept(store)
        for key in ("s3", "s\udc80", "s1", "s2"):
            assert first.add(key, "t", (key, "first"))
        for key in ("s2", "x", "s3"):
            assert other.add(key, "t", (key, "other"))
        other.replace("s2", ("s2", "replaced"))  # not yet sent: the join sends it first
        assert list(first.values_beside(other)) == [
            (("s3", "first"), ("s3", "other")), (("s\udc80", "first"), None),
            (("s1", "first"), None), (("s2", "first"), ("s2", "replaced"))]
        assert list(first.keys_absent(other)) == ["s\udc80", "s1"]
        assert list(other.keys_absent(first)) == ["x"]
        with pytest.raises(ValueError, match="one store"):
            list(first.keys_absent(spill.Kept(SpillDb())))
        appended: spill.Appended[Any] = spill.Appended(store)
        appended.append(("a", 1))
        appended.append_pickled(spill.pickle.dumps(("b", 2)))
        appended.append(("c", 3))
        assert list(appended) == [("a", 1), ("b", 2), ("c", 3)] and appended.count == 3
    finally:
        store.close()


def _collected(root: Path, rounds: int) -> tuple[Path, Path]:
    """``rounds`` snap rounds by ``collect rounds`` (a shoe a round, each committed) under
    ``root/snap``, and the keys that signed them, exported."""
    lab = root / "snap"
    code, out = cli("collect", "rounds", "--game", "snap", "--rounds", str(rounds), "--out",
                    str(lab), "--key-store", str(root / "keystore"), "--checkpoint-out",
                    str(root / "checkpoint"))
    assert code == 0, out
    assert cli("keys", "export", "--dir", str(root / "keystore"), "--out",
               str(root / "trusted.json"))[0] == 0
    return lab, root / "trusted.json"


def _other_decks(payload: dict[str, Any]) -> int:
    return 1 if payload["decks"] != 1 else 2


@pytest.fixture(scope="module")
def tampered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A committed collection whose commitments go wrong every way the index judges across its
    store: a copy, a shoe committed twice differently, three shoes sharing a value of which one
    is also committed twice, two sharing one of which is committed twice, a shoe whose reveal is
    gone (in play), a shoe committed alone (in play, no rounds), a shoe whose reveal fails."""
    root = tmp_path_factory.mktemp("commitment-spill")
    lab, keys = _collected(root, 12)
    shutil.rmtree(lab / "log")  # its checks are the log's: tampering fails them all
    key = KeyStore(root / "keystore").load_signing_key()
    shoes = sorted((lab / SHOES_SUBDIR).iterdir())
    ids = [path.stem for path in shoes]

    def again(index: int, prefix: str) -> None:
        payload = load(shoes[index])
        payload["payload"]["decks"] = _other_decks(payload["payload"])
        save(shoes[index].with_name(prefix + shoes[index].name), payload, key)

    shoes[0].with_name("copy-" + shoes[0].name).write_bytes(shoes[0].read_bytes())
    again(1, "again-")
    for index in (3, 4):  # 2, 3 and 4 share a value; 4 is also committed twice
        shared = load(shoes[index])
        shared["payload"]["commitment"] = load(shoes[2])["payload"]["commitment"]
        save(shoes[index], shared, key)
    again(4, "b-")
    shared = load(shoes[6])  # 5 and 6 share a value; 6 is also committed twice
    shared["payload"]["commitment"] = load(shoes[5])["payload"]["commitment"]
    save(shoes[6], shared, key)
    again(6, "c-")
    (lab / REVEALS_SUBDIR / shoes[7].name).unlink()  # in play
    only = load(shoes[9])
    only["payload"].update(shoe_id=_ONLY, commitment="ab" * 32)
    save(shoes[9].with_name(f"{_ONLY}.json"), only, key)
    broken = load(lab / REVEALS_SUBDIR / shoes[8].name)
    broken["payload"]["decks"] += 1
    save(lab / REVEALS_SUBDIR / shoes[8].name, broken, None)  # its old signature kept
    return {"lab": lab, "keys": keys, "ids": ids}


def _audit(tampered: dict[str, Any], workers: int) -> AuditReport:
    trusted = load_trusted_public_keys(tampered["keys"])
    return Auditor(trusted, AuditOptions(workers=workers, now=_NOW)).run([tampered["lab"]])


def _commitment_lines(report: AuditReport, shoe_id: str) -> list[tuple[Status, str, str]]:
    return [(f.status, f.check, f.path.name) for f in report.findings
            if f.kind == "commitment" and f.ident == shoe_id]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_commitments_judged_across_the_store(tampered: dict[str, Any], workers: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each way a commitment goes wrong is judged as it always was, the store's writes and
    look-ups in batches of 2; every finding the same for 1, 2 and 3 workers."""
    monkeypatch.setattr(spill, "_BATCH", 2)
    monkeypatch.setattr(spill, "_LOOKUP", 2)
    report = _audit(tampered, workers)
    ids = tampered["ids"]
    ok, one_seed = (Status.OK, "commitment.record"), (Status.FAIL, "commitment.one-seed")
    unique = (Status.FAIL, "commitment.unique")
    assert _commitment_lines(report, ids[0]) == [  # the copy's line of its own, walk order
        (*ok, name) for name in sorted([f"{ids[0]}.json", f"copy-{ids[0]}.json"])]
    for index, prefix in ((1, "again-"), (4, "b-"), (6, "c-")):
        assert sorted(_commitment_lines(report, ids[index])) == sorted(
            [(*unique, f"{ids[index]}.json"), (*unique, f"{prefix}{ids[index]}.json")])
    for index in (2, 3):  # the third of their value is committed twice: they still share it
        assert _commitment_lines(report, ids[index]) == [(*one_seed, f"{ids[index]}.json")]
    assert _commitment_lines(report, ids[5]) == [(*ok, f"{ids[5]}.json")]  # its twin is out
    assert report.open_shoes == sorted([ids[7], _ONLY])
    in_play = [f for f in report.findings if f.kind == "commitment"
               and f.message.endswith("in play (not revealed yet)")]
    assert sorted(f.ident for f in in_play) == sorted([ids[7], _ONLY, ids[8]])
    rounds = {f.ident: f for f in report.findings if f.kind == "round"}
    shoe_of = {load(p)["payload"]["round_id"]: load(p)["payload"]["shoe"]["id"]
               for p in (tampered["lab"] / ROUNDS_SUBDIR).iterdir()}
    for round_id, shoe_id in shoe_of.items():
        status = rounds[round_id].status
        if shoe_id == ids[7]:
            assert status is Status.OPEN
        elif shoe_id in (ids[1], ids[3], ids[4], ids[6], ids[8]):
            assert status is Status.FAIL, rounds[round_id]
        else:
            assert status is Status.OK, rounds[round_id]
    deferred = [f.path for f in report.findings
                if f.kind == "commitment" and f.check != "commitment.unique"]
    assert deferred == sorted(deferred)  # their lines in the walk's order
    one = _audit(tampered, 1) if workers != 1 else report
    assert [(f, f.check) for f in report.findings] == [(f, f.check) for f in one.findings]
    assert (report.summary(), report.open_shoes) == (one.summary(), one.open_shoes)


def test_a_reveal_is_checked_against_its_shoes_commitment(tmp_path: Path) -> None:
    """A reveal's line is checked against its own shoe's commitment, read beside it from the
    store: a reveal whose decks differ from its commitment's fails, its neighbours pass."""
    lab, keys = _collected(tmp_path, 3)
    shutil.rmtree(lab / "log")
    shoes = sorted((lab / SHOES_SUBDIR).iterdir())
    key = KeyStore(tmp_path / "keystore").load_signing_key()
    payload = load(shoes[1])
    payload["payload"]["decks"] = _other_decks(payload["payload"])
    save(shoes[1], payload, key)
    report = Auditor(load_trusted_public_keys(keys), AuditOptions(now=_NOW)).run([lab])
    lines = {f.ident: f for f in report.findings if f.kind == "shoe"}
    assert [lines[p.stem].status for p in shoes] == [Status.OK, Status.FAIL, Status.OK]
    assert lines[shoes[1].stem].field == "decks"
    assert f"the shoe's commitment {shoes[1].name}" in lines[shoes[1].stem].message


def test_the_audit_holds_no_shoes_commitment(tmp_path: Path) -> None:
    """A committed shoe-per-round collection of 30 rounds: while the rounds are checked the
    commitments index holds at most a shoe's worth in memory (each shoe's commitment goes with
    its rounds), and its lines are made one at a time as they are shown, not all held."""
    lab, keys = _collected(tmp_path, 30)
    auditor = Auditor(load_trusted_public_keys(keys), AuditOptions(now=_NOW))
    held: list[int] = []
    lines_alive: list[int] = []

    def on_round(finding: Finding) -> None:
        held.append(max(len(v) for v in vars(auditor.commitments).values()
                        if isinstance(v, dict | list | set)))
        if finding.kind == "commitment":
            lines_alive.append(sum(1 for o in gc.get_objects()
                                   if type(o) is Finding and o.kind == "commitment"))

    # earlier tests' findings may wait in reference cycles for the collector: counted as
    # alive, they would be taken for this audit's
    gc.collect()
    report = auditor.run([lab], on_round, keep_rounds=False)
    assert report.passed, report.summary()
    assert "30 shoe commitments: 30 OK" in report.summary()
    assert len(lines_alive) == 30 and max(lines_alive) <= 2, lines_alive  # 30 if held whole
    assert max(held) <= 1, held  # 30 if every commitment were in a dict
