"""The offline verifier fuzzed: envelopes, records, reveals, rules documents, file trees, and the
transparency log's files (leaves.jsonl, frontier.json, the collection's checkpoint and the one the
auditor names).

Whatever the input, the audit must finish without a traceback and within the per-file time
bound, give every file it reads exactly one line (a finding, a skip, or a keys file passed over),
print every line as one printable physical line, and never pass anything that is not genuine:
a payload changed under its old signature, a bare payload, a file in a record directory that is
not an envelope, a symbolic link, a FIFO, a directory inside a record directory.

Records re-signed with the operator's key after a change may still be consistent (the operator
signs what they like, within the rules): for those only the first three properties are asserted.
Example counts are modest so the module runs in seconds; raise ``FUZZ_EXAMPLES`` to dig deeper.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.audit_kit import simple_player
from support.log_export_helpers import (
    ORIGIN,
    logged_collection,
    read_lines,
    signed_checkpoint,
    write_log,
)

from game_math.games import game_rules
from rng_service.audit.log_audit import LogSource
from rng_service.audit.verifier import AuditOptions, Auditor, AuditReport, Finding, Status
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import CanonicalEncodingError, encode_envelope, sign_payload
from rng_service.records.schema import (
    KEYS_FILE,
    LOG_CHECKPOINT_FILE,
    LOG_FRONTIER_FILE,
    LOG_LEAVES_FILE,
    LOG_SUBDIR,
    REVEALS_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SCHEMA,
    RULES_SUBDIR,
    RecordWriter,
    collect_rounds,
)

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
FILE_TIMEOUT = 2.0
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])  # fresh() resets it

KEY = SigningKey.generate()
TRUSTED = {KEY.key_id: KEY.public_key}

_LAB: dict[str, Path] = {}


def genuine_lab() -> Path:
    """A small genuine collection (snap, and a cut-card double-exposure shoe), made once."""
    if not _LAB:
        base = Path(tempfile.mkdtemp(prefix="fuzz-lab-"))
        for game, rounds in (("snap", 2), ("double-exposure", 3)):
            collect_rounds(game_rules(game), rounds, RecordWriter(base / game, KEY),
                           simple_player)
        _LAB["base"] = base
    return _LAB["base"]


def envelopes(kind: str) -> list[dict[str, Any]]:
    lab = genuine_lab()
    return [json.loads(p.read_bytes()) for p in sorted(lab.glob(f"*/{kind}/*.json"))]


# --- values ------------------------------------------------------------------------------------

HOSTILE_TEXT = ["1e999999999", "9" * 5000 + ":1", "3:" + "7" * 4000, "\ud800", "a\udfffb",
                "\u202egnp.json", "x\naudit PASS: 1 rounds: 1 OK", "\x1b[2J", "", "0" * 70_000,
                "2024-05-01T12:00:00Z", "2999-01-01T00:00:00Z", "void", "1/2", "-1"]
LEAVES = (st.none() | st.booleans() | st.integers(-(2**60), 2**60)
          | st.sampled_from([10**4000, -(2**53), 2**53 - 1, 0, 1])
          | st.floats(allow_nan=False, allow_infinity=False)
          | st.text(max_size=12) | st.sampled_from(HOSTILE_TEXT))
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


def paths_in(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a member or element of ``value``."""
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        yield (*prefix, key)
        yield from paths_in(item, (*prefix, key))


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one member replaced, removed, or a member added."""
    value = copy.deepcopy(value)
    spots = list(paths_in(value))
    if not spots:
        return draw(VALUES)
    *parent_path, last = draw(st.sampled_from(spots))
    parent = value
    for part in parent_path:
        parent = parent[part]
    how = draw(st.sampled_from(["replace", "remove", "add"]))
    if how == "remove":
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(VALUES)
    else:
        parent[last] = draw(VALUES)
    return value


def to_bytes(value: Any) -> bytes:
    """JSON as a writer might send it: lone surrogates go out as escapes."""
    return json.dumps(value).encode("ascii")


# --- one input file -----------------------------------------------------------------------------


@st.composite
def record_file(draw: st.DrawFn) -> tuple[bytes, bool]:
    """(file content, whether it surely is not genuine) for a file under rounds/ or reveals/."""
    kind = draw(st.sampled_from([ROUNDS_SUBDIR, REVEALS_SUBDIR]))
    envelope = draw(st.sampled_from(envelopes(kind)))
    how = draw(st.sampled_from(["unsigned", "re-signed", "bare", "raw", "envelope-member"]))
    if how == "raw":
        return draw(st.binary(max_size=300)), True
    if how == "envelope-member":
        return to_bytes(draw(mutated(envelope))), True  # the signature may be what changed
    payload = draw(mutated(envelope["payload"]))
    if how == "bare":
        return to_bytes(payload), True
    if how == "unsigned":
        changed = payload != envelope["payload"]
        return to_bytes({**envelope, "payload": payload}), changed
    try:
        return encode_envelope(sign_payload(payload, KEY)), False
    except CanonicalEncodingError:  # outside the signable domain: written unsigned instead
        return to_bytes({**envelope, "payload": payload}), True


@st.composite
def rules_file(draw: st.DrawFn) -> bytes:
    data = game_rules(draw(st.sampled_from(["snap", "double-exposure"]))).to_dict()
    doc = {"schema": RULES_SCHEMA, "rules": draw(mutated(data))}
    return to_bytes(draw(st.just(doc) | mutated(doc)))


NAME = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=["Cs"]),
               min_size=1, max_size=16).filter(lambda n: n not in (".", ".."))
WEIRD_NAME = NAME | st.sampled_from(["x\naudit PASS.json", "\u202enosj.json", "a b.json",
                                     "\x1b[2J.json", "note\r.json"])


def _fits(name: str) -> bool:
    try:
        return len(os.fsencode(name)) <= 200
    except UnicodeEncodeError:
        return False


# --- trees --------------------------------------------------------------------------------------

#: an entry: (directory under the collection, name, what) with what one of the kinds below
ENTRY_KINDS = ["record", "rules", "bytes", "link-dir", "link-loop", "link-file", "link-missing",
               "fifo", "dir"]
PLACES = [ROUNDS_SUBDIR, REVEALS_SUBDIR, RULES_SUBDIR, ".", "nested/deeper"]


@st.composite
def tree(draw: st.DrawFn) -> list[tuple[str, str, str, bytes, bool]]:
    entries = []
    for _ in range(draw(st.integers(1, 4))):
        place = draw(st.sampled_from(PLACES))
        name = draw(WEIRD_NAME.filter(_fits))
        kind = draw(st.sampled_from(ENTRY_KINDS))
        content, bad = b"", True
        if kind == "record":
            content, bad = draw(record_file())
        elif kind == "rules":
            content, bad = draw(rules_file()), False
        elif kind == "bytes":
            content = draw(st.binary(max_size=200))
        entries.append((place, name, kind, content, bad))
    return entries


def build(root: Path, entries: list[tuple[str, str, str, bytes, bool]]) -> list[Path]:
    """The entries made under ``root`` (a copy of the genuine snap collection); the paths of
    those that must fail the audit."""
    must_fail = []
    for place, name, kind, content, bad in entries:
        directory = root / place
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        if path.exists() or path.is_symlink():
            continue
        strict = place in (ROUNDS_SUBDIR, REVEALS_SUBDIR)
        read = strict or name.endswith(".json")  # elsewhere only *.json files are read
        if kind in ("record", "rules", "bytes"):
            path.write_bytes(content)
            surely_bad = read and (bad or kind == "bytes")
        elif kind == "dir":
            path.mkdir()
            (path / "inner.json").write_bytes(b"{}")
            if not strict:  # walked: its file is read, and fails or is skipped
                path = path / "inner.json"
            surely_bad = True
        elif kind == "fifo":
            os.mkfifo(path)
            surely_bad = True
        else:
            target = {"link-dir": root.parent / "outside", "link-loop": path,
                      "link-file": root / KEYS_FILE, "link-missing": root / "gone"}[kind]
            path.symlink_to(target)
            surely_bad = True
        if surely_bad:
            must_fail.append(path)
    return must_fail


def audit(root: Path) -> tuple[AuditReport, float]:
    started = time.monotonic()
    report = Auditor(TRUSTED, AuditOptions(file_timeout=FILE_TIMEOUT)).run([root])
    return report, time.monotonic() - started


def lines_of(report: AuditReport) -> list[str]:
    return [f.line() for f in report.findings] + report.summary_lines()


def accounted(report: AuditReport, path: Path) -> int:
    """How many lines (or entries of the summary) the audit gave ``path``."""
    return (sum(1 for f in report.findings if f.path == path) + report.skipped.count(path)
            + report.keys_files.count(path))


def check(report: AuditReport, elapsed: float, files: int) -> None:
    assert elapsed < FILE_TIMEOUT * (files + 2) + 5
    for line in lines_of(report):
        assert line.isprintable() and "\n" not in line
        line.encode("utf-8")


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def fresh(workdir: Path) -> Path:
    for child in workdir.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    root = workdir / "lab"
    shutil.copytree(genuine_lab() / "snap", root)
    (workdir / "outside").mkdir()
    shutil.copy(next((genuine_lab() / "snap" / ROUNDS_SUBDIR).iterdir()),
                workdir / "outside" / "tampered.json")
    (root / KEYS_FILE).write_text('{"keys": []}')
    return root


def test_the_genuine_lab_passes() -> None:
    report, _ = audit(genuine_lab())
    assert report.passed, "\n".join(lines_of(report))


@FUZZ
@given(entries=tree())
def test_any_tree_gives_a_line_per_file_and_never_passes_what_is_not_genuine(
        workdir: Path, entries: list[tuple[str, str, str, bytes, bool]]) -> None:
    root = fresh(workdir)
    must_fail = build(root, entries)
    report, elapsed = audit(root)
    check(report, elapsed, len(entries) + 8)
    for path in must_fail:
        assert accounted(report, path) == 1, (path, lines_of(report))
        assert not any(f.path == path and f.status.value == "OK" for f in report.findings)
    if must_fail:
        assert not report.passed
    for file in (root / ROUNDS_SUBDIR).iterdir():  # every file of a record directory: one line
        assert accounted(report, file) == 1, (file, lines_of(report))


@FUZZ
@given(content=record_file(), into=st.sampled_from([ROUNDS_SUBDIR, REVEALS_SUBDIR]))
def test_a_changed_record_or_reveal_is_one_line(workdir: Path, content: tuple[bytes, bool],
                                                into: str) -> None:
    root = fresh(workdir)
    path = root / into / "changed.json"
    path.write_bytes(content[0])
    report, elapsed = audit(root)
    check(report, elapsed, 8)
    assert accounted(report, path) == 1, lines_of(report)
    if content[1]:
        assert not report.passed


@FUZZ
@given(content=rules_file())
def test_any_rules_document_is_one_line(workdir: Path, content: bytes) -> None:
    root = fresh(workdir)
    path = root / RULES_SUBDIR / "fuzzed.json"
    path.write_bytes(content)
    report, elapsed = audit(root)
    check(report, elapsed, 8)
    assert accounted(report, path) == 1, lines_of(report)


@FUZZ
@given(value=VALUES, as_envelope=st.booleans())
def test_any_json_in_a_record_directory_fails(workdir: Path, value: Any,
                                              as_envelope: bool) -> None:
    root = fresh(workdir)
    path = root / ROUNDS_SUBDIR / "any.json"
    if as_envelope:
        value = {"format": "fairshoe.signed/v1", "payload": value,
                 "signature": {"alg": "Ed25519", "key_id": KEY.key_id, "value": "AAAA"}}
    path.write_bytes(to_bytes(value))
    report, elapsed = audit(root)
    check(report, elapsed, 8)
    assert accounted(report, path) == 1 and not report.passed, lines_of(report)


def test_findings_are_single_lines_whatever_they_hold() -> None:
    finding = Finding("round", "a\nb\u202e\ud800", Path("x"), Status.FAIL, "f\n", "m\r\n\x00")
    line = finding.line()
    assert line.isprintable() and "\n" not in line


# --- the transparency log's files ----------------------------------------------------------------

_LOGGED: dict[str, Path] = {}


def logged_lab() -> Path:
    """A small genuine collection with its log (key record, commitments, snap rounds), and the
    checkpoint the auditor keeps of it beside it (``checkpoint.note``), made once."""
    if not _LOGGED:
        base = Path(tempfile.mkdtemp(prefix="fuzz-log-"))
        order = logged_collection(base / "lab", KEY, [("snap", 2)], simple_player, discarded=1)
        store = write_log(base / "lab", order, KEY)
        (base / "checkpoint.note").write_text(signed_checkpoint(store, store.size, KEY))
        _LOGGED["base"] = base
    return _LOGGED["base"]


def fresh_logged(workdir: Path) -> tuple[Path, Path]:
    for child in workdir.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    shutil.copytree(logged_lab(), workdir / "base")
    return workdir / "base" / "lab", workdir / "base" / "checkpoint.note"


def audit_log(root: Path, checkpoint: Path | None) -> tuple[AuditReport, float]:
    started = time.monotonic()
    options = AuditOptions(file_timeout=FILE_TIMEOUT,
                           log=LogSource(checkpoint=checkpoint, origin=ORIGIN))
    report = Auditor(TRUSTED, options).run([root])
    return report, time.monotonic() - started


def genuine_lines() -> list[dict[str, Any]]:
    return read_lines(logged_lab() / "lab")


@st.composite
def leaves_file(draw: st.DrawFn) -> tuple[bytes, bool]:
    """(content of leaves.jsonl, whether it surely differs from the genuine one)."""
    lines: list[Any] = list(genuine_lines())
    at = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["mutate", "value", "text", "raw", "drop", "duplicate", "swap",
                                "path"]))
    if how == "mutate":
        lines[at] = draw(mutated(lines[at]))
    elif how == "value":
        lines[at] = draw(VALUES)
    elif how == "text":
        lines[at] = draw(st.sampled_from(HOSTILE_TEXT) | st.text(max_size=40))
    elif how == "drop":
        del lines[at]
    elif how == "duplicate":
        lines.insert(at, lines[at])
    elif how == "swap":
        other = draw(st.integers(0, len(lines) - 1))
        lines[at], lines[other] = lines[other], lines[at]
    elif how == "path":
        lines[at] = {**lines[at], "path": draw(st.sampled_from(
            ["../lab/" + lines[at]["path"], "/" + lines[at]["path"], "rounds", "",
             "rules/x.json", "log/leaves.jsonl", "rounds/../" + lines[at]["path"],
             lines[(at + 1) % len(lines)]["path"], "x\naudit PASS"]) | NAME)}
    if how == "raw":
        content = b"\n".join(to_bytes(line) for line in lines[:at]) + draw(st.binary(max_size=80))
    else:
        content = b"".join((line.encode("utf-8", "surrogatepass") if isinstance(line, str)
                            else to_bytes(line)) + b"\n" for line in lines)
    return content, parse_jsonl(content) != genuine_lines()


def parse_jsonl(content: bytes) -> list[Any] | None:
    try:
        return [json.loads(line) for line in content.decode("utf-8").splitlines()]
    except ValueError:
        return None


def mutated_note(draw: st.DrawFn, note: bytes) -> bytes:
    how = draw(st.sampled_from(["flip", "insert", "delete", "line", "raw", "size"]))
    at = draw(st.integers(0, len(note) - 1))
    if how == "flip":
        return note[:at] + bytes([note[at] ^ draw(st.integers(1, 255))]) + note[at + 1:]
    if how == "insert":
        return note[:at] + draw(st.binary(min_size=1, max_size=4)) + note[at:]
    if how == "delete":
        return note[:at] + note[at + 1:]
    if how == "size":
        lines = note.split(b"\n")
        lines[1] = draw(st.sampled_from([b"9" * 30, b"18446744073709551616", b"-1", b"01",
                                         b"0", str(2**64 - 1).encode()]))
        return b"\n".join(lines)
    if how == "line":
        lines = note.split(b"\n")
        lines[draw(st.integers(0, len(lines) - 1))] = draw(st.sampled_from(
            HOSTILE_TEXT)).encode("utf-8", "surrogatepass")
        return b"\n".join(lines)
    return draw(st.binary(max_size=200))


@st.composite
def log_files(draw: st.DrawFn) -> dict[str, bytes | str]:
    """Changes to the log: a file's new content, or "fifo", "link", "dir", "missing"."""
    changes: dict[str, bytes | str] = {}
    for name in draw(st.sets(st.sampled_from(["leaves", "frontier", "checkpoint", "kept"]),
                             min_size=1, max_size=2)):
        kind = draw(st.sampled_from(["content"] * 4 + ["fifo", "link", "dir", "missing"]))
        if kind != "content":
            changes[name] = kind
        elif name == "leaves":
            changes[name] = draw(leaves_file())[0]
        elif name == "frontier":
            changes[name] = to_bytes(draw(VALUES | mutated({"size": 0, "hashes": []})))
        else:
            changes[name] = mutated_note(draw, (logged_lab() / "checkpoint.note").read_bytes())
    return changes


LOG_FILES = {"leaves": f"lab/{LOG_SUBDIR}/{LOG_LEAVES_FILE}",
             "frontier": f"lab/{LOG_SUBDIR}/{LOG_FRONTIER_FILE}",
             "checkpoint": f"lab/{LOG_SUBDIR}/{LOG_CHECKPOINT_FILE}", "kept": "checkpoint.note"}


def apply(base: Path, name: str, change: bytes | str) -> None:
    path = base / LOG_FILES[name]
    path.unlink()
    if change == "fifo":
        os.mkfifo(path)
    elif change == "link":
        path.symlink_to(base / "lab" / KEYS_FILE if name != "leaves" else path)
    elif change == "dir":
        path.mkdir()
    elif isinstance(change, bytes):
        path.write_bytes(change)


def test_the_genuine_logged_lab_passes() -> None:
    base = logged_lab()
    report, _ = audit_log(base / "lab", base / "checkpoint.note")
    assert report.passed, "\n".join(lines_of(report))


@FUZZ
@given(content=leaves_file())
def test_any_leaves_file_fails_on_one_line_or_a_leaf(workdir: Path,
                                                     content: tuple[bytes, bool]) -> None:
    root, checkpoint = fresh_logged(workdir)
    (root / LOG_SUBDIR / LOG_LEAVES_FILE).write_bytes(content[0])
    report, elapsed = audit_log(root, checkpoint)
    check(report, elapsed, 12)
    malformed = [f for f in report.findings if f.kind == "log" and f.message.startswith("line ")]
    assert len(malformed) <= 1, lines_of(report)
    if content[1]:
        assert not report.passed, lines_of(report)


@FUZZ
@given(changes=log_files(), against=st.booleans())
def test_any_change_to_the_log_files_fails_in_bounded_time(
        workdir: Path, changes: dict[str, bytes | str], against: bool) -> None:
    root, checkpoint = fresh_logged(workdir)
    genuine = {name: (workdir / "base" / rel).read_bytes() for name, rel in LOG_FILES.items()}
    for name, change in changes.items():
        apply(workdir / "base", name, change)
    if "kept" in changes and not (workdir / "base" / LOG_FILES["kept"]).is_file():
        against = False  # not a file the auditor could name
    report, elapsed = audit_log(root, checkpoint if against else None)
    check(report, elapsed, 12)
    for name in ("frontier", "checkpoint", "kept"):
        path = workdir / "base" / LOG_FILES[name]
        assert sum(1 for f in report.findings if f.kind == "log" and f.path == path
                   and f.status is Status.FAIL) <= 1, lines_of(report)
    # without the auditor's checkpoint, leaves may be left out of leaves.jsonl (completeness is
    # not judged), but it must still be a readable file, and the collection's checkpoint genuine
    relevant = {"leaves", "checkpoint", "frontier", "kept"} if against else {"checkpoint"}
    unreadable = {n for n in changes if n == "leaves" and not isinstance(changes[n], bytes)}
    if changes.get("frontier") == "missing":  # the same as the genuine, empty one (from leaf 0)
        relevant.discard("frontier")
    if against and changes.get("checkpoint") == "missing":
        # the auditor's own checkpoint proves completeness: the export's copy adds no fact
        relevant.discard("checkpoint")
    if unreadable or any(changes[n] != genuine[n] for n in changes if n in relevant):
        assert not report.passed, (changes, lines_of(report))
