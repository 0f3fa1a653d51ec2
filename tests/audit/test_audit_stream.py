"""The audit streams through a collection (issue 21 goal 3): directory names and the rounds' claims
are sorted in runs kept off the heap, what is looked up by key is in a scratch SQLite file, work is
handed to the workers a window at a time, and ``audit verify`` counts the rounds rather than
holding their findings. None of it may change what the audit prints: checked here with every
sort forced to spill (a run of 3 items) on collections that fail many ways, for 1 and 2 workers.
Peak memory itself is measured by ``bench/bench_audit_memory.py``, never here."""

from __future__ import annotations

import gc
import os
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import load, save
from support.audit_labs import verify

from game_math.autoplay import basic_strategy_action
from game_math.games import game_rules
from rng_service.audit import spill
from rng_service.audit.files import Status
from rng_service.audit.reveals import Reveal
from rng_service.audit.round_checks import Pending
from rng_service.audit.spill import SortedRuns, SpillDb, sorted_names
from rng_service.audit.verifier import AuditOptions, Auditor, Finding
from rng_service.audit.workers import Workers, ordered_map
from rng_service.crypto.keys import SigningKey, load_trusted_public_keys
from rng_service.records.schema import ROUNDS_SUBDIR, RecordWriter, collect_rounds

_NOW = datetime(2030, 1, 1, tzinfo=UTC)  # the --now the shared fixture's audits are run with


@pytest.mark.parametrize(("merge", "runs_left"), [(16, 13), (2, 3)])
def test_sorted_runs_sort_as_sorted_does_stably(monkeypatch: pytest.MonkeyPatch, merge: int,
                                                runs_left: int) -> None:
    """200 items in runs of 7 (28 runs): merged by tiers as they come, the runs kept few (a
    binary counter's bits with merges of 2), and drained as ``sorted`` sorts them."""
    monkeypatch.setattr(spill, "MERGE_RUNS", merge)
    rng = random.Random(21)
    words = ["".join(rng.choice("ab\udc80é") for _ in range(rng.randrange(4)))
             for _ in range(200)]
    items = [(word, i) for i, word in enumerate(words)]
    runs: SortedRuns[tuple[str, int]] = SortedRuns(key=lambda item: item[0], run=7)
    for item in items:
        runs.add(item)
    assert runs.count == 200
    assert len(runs._runs) == runs_left
    assert list(runs.drain()) == sorted(items, key=lambda item: item[0])  # ties keep their order


def test_a_directory_is_listed_in_the_order_iterdir_sorts_it(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setattr(spill, "RUN_ITEMS", 3)
    # UTF-8 and not (surrogate escapes): bytes order would put b"\x80x" before "é"
    for name in (b"b.json", b"a.json", b"\xff.json", b"\xc3\xa9.json", b"\x80x", b"A", b"a"):
        (tmp_path / os.fsdecode(name)).touch()
    assert list(sorted_names(tmp_path)) == [p.name for p in sorted(tmp_path.iterdir())]


def test_the_scratch_store_keeps_the_first_and_the_last() -> None:
    store = SpillDb()
    try:
        first = spill.FirstSeen(store)
        assert first.first("r\udc80", "a") == "a"
        assert first.first("r\udc80", "b") == "a"
        values: spill.KeyedValues[Any] = spill.KeyedValues(store)
        values["/x/a"], values["/x/b"], values["/y/a"] = 1, (2, b"h"), 3
        values["/x/a"] = 4  # a later value replaces the earlier, as in a dict
        assert (values.get("/x/a"), values.get("/x/b"), values.get("/z")) == (4, (2, b"h"), None)
        assert sorted(values.keys_under("/x/")) == ["/x/a", "/x/b"]
        assert sorted(values) == ["/x/a", "/x/b", "/y/a"] and len(values) == 3
        assert spill.smallest(iter(["c", "a", "b"]), 2) == (["a", "b"], 3)
    finally:
        store.close()


def test_the_log_checks_look_up_a_chunk_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the log checks ask of the store a chunk of leaves at a time, or once for them all,
    is what a look-up per leaf gives: the values of many keys (writes not yet sent included),
    the files no leaf lists, and the leaves in the order listed (appends buffered)."""
    monkeypatch.setattr(spill, "_LOOKUP", 2)  # several IN queries for one chunk
    monkeypatch.setattr(spill, "_BATCH", 3)  # writes sent in batches as they go
    store = SpillDb()
    try:
        files: spill.KeyedValues[Any] = spill.KeyedValues(store)
        listed: spill.KeyedValues[int] = spill.KeyedValues(store)
        for key in ("/c/r/a", "/c/r/b", "/c/r/\udc80", "/c/s/x", "/d/r/a"):
            files[key] = (key, b"h")
        listed["/c/r/b"] = 0
        asked = ["/c/r/a", "/none", "/c/r/b", "/c/r/a", "/c/r/\udc80"]
        assert files.get_many(asked) == [files.get(key) for key in asked]
        assert files.get_many(asked)[4] == ("/c/r/\udc80", b"h")
        assert listed.get_many(["/c/r/b", "/c/r/a"]) == [0, None]  # the write not yet sent
        assert sorted(files.keys_absent(listed, "/c/")) == ["/c/r/a", "/c/r/\udc80", "/c/s/x"]
        listed["/c/s/x"] = 1
        assert sorted(files.keys_absent(listed)) == ["/c/r/a", "/c/r/\udc80", "/d/r/a"]
        other: spill.KeyedValues[int] = spill.KeyedValues(SpillDb())
        with pytest.raises(ValueError, match="one store"):
            files.keys_absent(other)
        order: spill.Appended[int] = spill.Appended(store)
        for value in range(7):
            order.append(value)
        assert list(order) == list(range(7)) and order.count == 7  # the last one not yet sent
        order.append(7)
        assert list(order) == list(order) == list(range(8))
    finally:
        store.close()


def test_round_ids_judged_together_are_judged_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "_LOOKUP", 2)  # several IN queries for one batch
    store = SpillDb()
    try:
        first = spill.FirstSeen(store)
        assert first.first_many([("a", "1"), ("b", "2")]) == ["1", "2"]
        assert first.first_many([("c", "3"), ("a", "4"), ("c", "5"), ("d", "6"), ("b", "7")]) == [
            "3", "1", "3", "6", "2"]
        assert first.first("d", "8") == "6"
        memory = spill.FirstSeen()
        assert memory.first_many([("x", "1"), ("x", "2")]) == ["1", "1"]
    finally:
        store.close()


@pytest.mark.parametrize("bits", [8, 64, 1 << 23])
@pytest.mark.parametrize("seed", range(12))
def test_round_ids_claimed_are_judged_as_without_claims(monkeypatch: pytest.MonkeyPatch,
                                                        bits: int, seed: int) -> None:
    """Every round claims its id before any is judged; those given with the id they claimed,
    claimed by no other, are not stored. The firsts are those of the judge that claims nothing
    and keeps every id in memory, with 8 bits (every claim shares its bit: every id stored), 64
    and the default; duplicates across batches and within one included, and ids given other
    than claimed, which no round claimed (the audit's: a round whose round_id is empty claims
    its file's name)."""
    monkeypatch.setattr(spill, "_SEEN_BITS", bits)
    rng = random.Random(seed)
    claims = [f"r{rng.randrange(40)}" for _ in range(rng.randrange(1, 60))]
    given = [claim if rng.random() < 0.85 else rng.choice(["", "z"]) for claim in claims]
    store = SpillDb()
    try:
        stored, memory = spill.FirstSeen(store), spill.FirstSeen()
        for claim in claims:
            stored.claim(claim)
        at = 0
        while at < len(given):
            n = rng.randrange(1, 9)
            batch = [(round_id, f"/c/rounds/{at + i}.json")
                     for i, round_id in enumerate(given[at:at + n])]
            assert stored.first_many(batch, claims[at:at + n]) == memory.first_many(batch)
            at += n
    finally:
        store.close()


def test_an_id_claimed_once_is_not_stored() -> None:
    store = SpillDb()
    try:
        first = spill.FirstSeen(store)
        for claim in ("a", "b", "b", "c"):
            first.claim(claim)
        assert first.first_many([("a", "1"), ("b", "2"), ("c", "3"), ("b", "4")],
                                ["a", "b", "c", "b"]) == ["1", "2", "3", "2"]
        # given other than claimed: stored and looked up
        assert first.first_many([("", "5"), ("", "6")], ["d", "e"]) == ["5", "5"]
        rows = store.db.execute(f"SELECT key FROM {first._table} ORDER BY key").fetchall()
        assert [bytes(key) for (key,) in rows] == [b"", b"b"]
    finally:
        store.close()


def test_kept_values_come_back_in_the_order_first_put(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "_BATCH", 2)  # replacements sent in batches as they go
    store = SpillDb()
    try:
        kept: spill.Kept[Any] = spill.Kept(store)
        for key, tag in (("s3", "c1"), ("s1", "c2"), ("s\udc80", "c1"), ("s2", "c3")):
            assert kept.add(key, tag, (key, 0))
        assert not kept.add("s1", "c9", "refused")  # a key kept is not put again
        kept.replace("s1", ("s1", 1))
        kept.replace("s3", ("s3", 1))
        kept.replace("s2", ("s2", 1))
        assert kept.get("s2") == ("s2", 1) and kept.get("s1") == ("s1", 1)  # sent or not
        assert kept.sharing_tags() == [["s3", "s\udc80"]]
        kept.pop("s1")
        assert "s1" not in kept and "s2" in kept and kept.get("s1") is None
        assert list(kept.values()) == [("s3", 1), ("s\udc80", 0), ("s2", 1)]
    finally:
        store.close()


def _pid(item: int) -> tuple[int, int]:
    return item, os.getpid()


def _marked() -> None:
    os.environ["FAIRSHOE_TEST_STARTED"] = "yes"


def _started(item: int) -> tuple[int, str]:
    return -item, os.environ.get("FAIRSHOE_TEST_STARTED", "")


def test_the_workers_are_forked_once_for_every_map() -> None:
    """Two maps (the audit's two passes) are served by the same processes, forked once, each
    having run ``started``; with one worker, every task runs here."""
    with Workers(2, {"pid": _pid, "started": _started}, started=_marked) as workers:
        assert workers.forked
        first = list(workers.ordered("pid", range(40), chunk=3))
        assert list(workers.ordered("started", range(5))) == [(-i, "yes") for i in range(5)]
        second = list(workers.ordered("pid", range(40), chunk=3))
    assert [i for i, _ in first] == [i for i, _ in second] == list(range(40))  # in order
    pids = {pid for _, pid in first + second}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    with Workers(1, {"pid": _pid}, started=_marked) as alone:
        assert not alone.forked
        assert list(alone.ordered("pid", range(3))) == [(i, os.getpid()) for i in range(3)]
    assert "FAIRSHOE_TEST_STARTED" not in os.environ


def test_sorted_runs_spill_by_the_bytes_their_items_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "RUN_BYTES", 100)
    runs: SortedRuns[tuple[int, bytes]] = SortedRuns(key=lambda item: item[0])
    items = [(i % 7, bytes([i]) * 30) for i in range(50)]
    for item in items:
        runs.add(item, len(item[1]))
    assert len(runs._runs) == 12 and len(runs._buffer) == 2  # 4 items (120 bytes) a run
    assert list(runs.drain()) == sorted(items, key=lambda item: item[0])


def test_kept_values_are_read_many_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "_LOOKUP", 2)  # several IN queries for one call
    store = SpillDb()
    try:
        kept: spill.Kept[Any] = spill.Kept(store)
        for key in ("a", "b\udc80", "c", "d"):
            kept.add(key, key, (key, 0))
        kept.replace("c", ("c", 1))  # not yet sent to the store
        assert kept.get_many(["d", "x", "c", "b\udc80", "d", "a"]) == [
            ("d", 0), None, ("c", 1), ("b\udc80", 0), ("d", 0), ("a", 0)]
        assert kept.get_many([]) == []
    finally:
        store.close()


@pytest.mark.parametrize("bits", [8, 1 << 23])
def test_kept_is_the_mapping_it_stands_for(monkeypatch: pytest.MonkeyPatch, bits: int) -> None:
    """Keys put in any order (a repeat refused), replaced, popped, and read back many at once:
    runs of neighbouring keys (the range read), scattered ones (the range misses them), keys
    never put, duplicates; with a filter of 8 bits (every key's bit set: each put and look-up
    goes to the store) and of the default, against a dict."""
    monkeypatch.setattr(spill, "_SEEN_BITS", bits)
    monkeypatch.setattr(spill, "_BATCH", 7)
    monkeypatch.setattr(spill, "_LOOKUP", 3)
    rng = random.Random(21)
    store = SpillDb()
    try:
        kept: spill.Kept[Any] = spill.Kept(store)
        reference: dict[str, Any] = {}
        names = [f"s{n:03d}" for n in range(120)] + ["s\udc80", "\udcff"]
        for step in range(400):
            key = rng.choice(names)
            action = rng.random()
            if action < 0.5:
                assert kept.add(key, f"t{step % 5}", (key, step)) == (key not in reference)
                reference.setdefault(key, (key, step))
            elif action < 0.6 and key in reference:
                kept.replace(key, (key, -step))
                reference[key] = (key, -step)
            elif action < 0.65:
                kept.pop(key)
                reference.pop(key, None)
            elif action < 0.85:
                start = rng.randrange(len(names))
                asked = (names[start:start + rng.randrange(1, 12)] if rng.random() < 0.5
                         else rng.sample(names, rng.randrange(1, 12)) * rng.randrange(1, 3))
                assert kept.get_many(asked) == [reference.get(k) for k in asked]
            else:
                assert kept.get(key) == reference.get(key)
                assert (key in kept) == (key in reference)
        assert list(kept.values()) == list(reference.values())
    finally:
        store.close()


def test_a_round_is_checked_on_the_bytes_pass_one_read(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is read once: a round record replaced between the passes (after its claims
    and leaf hash were taken) is checked as it was read, not as it is now."""
    key = SigningKey.generate()
    collect_rounds(game_rules("double-exposure"), 6, RecordWriter(tmp_path, key),
                   basic_strategy_action)
    path = sorted((tmp_path / ROUNDS_SUBDIR).iterdir())[2]
    original = path.read_bytes()
    changed = load(path)
    changed["payload"]["total_returned"] += 7
    carry = Auditor._carry

    def replaced_between_the_passes(self: Auditor, pending: Any) -> None:
        save(path, changed, key)  # signed: only the replay can tell
        carry(self, pending)

    monkeypatch.setattr(Auditor, "_carry", replaced_between_the_passes)
    for workers in (1, 2):
        path.write_bytes(original)
        report = Auditor({key.key_id: key.public_key}, AuditOptions(workers=workers)).run(
            [tmp_path])
        assert report.passed, [f.line() for f in report.findings if f.status is not Status.OK]
    monkeypatch.undo()
    again = Auditor({key.key_id: key.public_key}).run([tmp_path])
    assert [f.field for f in again.findings if f.status is Status.FAIL] == ["total_returned"]


def test_a_slow_spill_of_the_sorted_rounds_fails_no_file(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Spilling (and merging) the sorted runs, which a round's bytes make heavy, is not a file's
    checks: however long it takes, no file fails the per-file time bound for it."""
    key = SigningKey.generate()
    collect_rounds(game_rules("double-exposure"), 4, RecordWriter(tmp_path, key),
                   basic_strategy_action)
    monkeypatch.setattr(spill, "RUN_ITEMS", 2)
    spilled = SortedRuns._spill

    def slow(self: SortedRuns[Any]) -> None:
        time.sleep(1.5)
        spilled(self)

    monkeypatch.setattr(SortedRuns, "_spill", slow)
    report = Auditor({key.key_id: key.public_key}, AuditOptions(file_timeout=1)).run([tmp_path])
    assert report.passed, [f.line() for f in report.findings if f.status is not Status.OK]
    assert report.count("round", Status.OK) == 4


def test_work_is_handed_out_a_window_at_a_time() -> None:
    taken: list[int] = []

    def items() -> Any:
        for i in range(100):
            taken.append(i)
            yield i

    with ordered_map(abs, items(), 2, chunk=1, ahead=3) as done:
        assert len(taken) == 3  # not the whole walk ahead of the checks
        assert next(done) == 0
        assert len(taken) == 4
        assert list(done) == list(range(1, 100))


@pytest.mark.parametrize("workers", [1, 2])
def test_every_line_is_the_same_when_every_sort_spills(labs: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       workers: int) -> None:
    """The lines printed are those of the report kept whole (the rounds as the audit made them,
    then every other finding, the skipped files and the summary), with every directory listing
    and the rounds' claims sorted in runs of 3 spilled to files."""
    trusted = load_trusted_public_keys(labs["keys"])
    rounds: list[Finding] = []
    whole = Auditor(trusted, AuditOptions(workers=workers, now=_NOW)).run(
        [labs["de"], labs["mh"]], rounds.append)
    expected = [f.line() for f in rounds] + [f.line() for f in whole.findings
                                             if f.kind != "round"]
    assert whole.count("round", Status.FAIL) >= 6
    monkeypatch.setattr(spill, "RUN_ITEMS", 3)
    code, out = verify(labs, workers, str(labs["de"]), str(labs["mh"]))
    lines = out.splitlines()
    assert code == 1
    assert lines[:len(expected)] == expected
    assert lines[-len(whole.summary_lines()):] == whole.summary_lines()


def test_the_audit_holds_a_few_rounds_at_a_time(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A shoe-per-round collection of 60 rounds audited with runs of 5: at no round's finding
    are the claims of more than a few of them alive (the runs' heads, the last run, the piece
    being checked), nor more than a few of their shoes' reveals (kept in the scratch store, each
    read back for its shoe's rounds and its line), and the report holds none of their findings
    nor of their reveals' lines: it counts them, once the caller has seen them."""
    key = SigningKey.generate()
    collect_rounds(game_rules("snap"), 60, RecordWriter(tmp_path, key), basic_strategy_action)
    monkeypatch.setattr(spill, "RUN_ITEMS", 5)
    live: list[int] = []
    reveals: list[int] = []
    seen: list[str] = []

    def on_round(finding: Finding) -> None:
        seen.append(finding.kind)
        reveals.append(sum(1 for o in gc.get_objects() if type(o) is Reveal))
        if finding.kind == "round":
            live.append(sum(1 for o in gc.get_objects() if type(o) is Pending))

    report = Auditor({key.key_id: key.public_key}).run([tmp_path], on_round, keep_rounds=False)
    assert report.passed and report.count("round", Status.OK) == 60
    assert report.count("shoe", Status.OK) == 60 and report.count("rules") == 1
    assert len(live) == 60
    assert max(live) <= 30, live  # 60 if every round's claims were held
    assert seen == ["round"] * 60 + ["rules"] + ["shoe"] * 60, seen  # in the order printed
    assert max(reveals) <= 30, reveals  # 60 if every reveal were held
    assert report.findings == []
    assert "60 shoe reveals: 60 OK" in report.summary()
    assert {load(p)["payload"]["shoe"]["start"] for p in (tmp_path / ROUNDS_SUBDIR).iterdir()
            } == {0}, "a shoe per round: the rounds are not grouped by a shared shoe"
