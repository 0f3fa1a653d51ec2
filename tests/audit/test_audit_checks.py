"""The audit's checks as named objects (:mod:`rng_service.audit.checks`): every check is
registered under a name of its own, every finding names the check that wrote it, a tampered
record is failed by the check of its concern, and no FAIL wording comes from two checks."""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import json
import pkgutil
import re
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import load, pick_round, save
from support.audit_tampers import TAMPERS

import rng_service.audit
from rng_service.audit import round_checks
from rng_service.audit.checks import CHECKS, Check, Named, Subject
from rng_service.audit.log_audit import LogSource
from rng_service.audit.verifier import AuditOptions, Auditor, AuditReport, Finding, Status
from rng_service.cli.main import main
from rng_service.crypto.keys import KeyStore, SigningKey, load_trusted_public_keys
from rng_service.records.schema import KEYS_FILE, REVEALS_SUBDIR, ROUNDS_SUBDIR

NOW = datetime(2030, 1, 1, tzinfo=UTC)
_NAME = re.compile(r"[a-z]+(-[a-z]+)*(\.[a-z]+(-[a-z]+)*)?")


def _modules() -> Iterator[Any]:
    for info in pkgutil.iter_modules(rng_service.audit.__path__):
        yield importlib.import_module(f"rng_service.audit.{info.name}")


def _named_classes() -> set[type[Named]]:
    found: set[type[Named]] = set()
    todo: list[type[Named]] = [Named]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if "name" in sub.__dict__:
                found.add(sub)
    return found


def test_every_named_check_is_registered_once_by_a_name_of_its_concern() -> None:
    modules = list(_modules())  # every audit module imported: each check class defined
    classes = _named_classes()
    assert {c.__module__ for c in classes} <= {m.__name__ for m in modules}
    assert {CHECKS[c.name] for c in classes} == classes
    assert set(CHECKS) == {c.name for c in classes}
    for name, cls in CHECKS.items():
        assert _NAME.fullmatch(name), name
        assert cls.__doc__, f"{cls.__qualname__} ({name}) says what it checks"
    # the kinds of the checks of records, each in the module of its concern
    where = {name.split(".")[0]: CHECKS[name].__module__.rsplit(".", 1)[1] for name in CHECKS
             if name.startswith(("key.", "commitment.", "rng.", "rules.", "file."))}
    assert where == {"key": "key_records", "commitment": "commitments", "rng": "rng_checks",
                     "rules": "rules_index", "file": "file_checks"}


def test_a_second_check_of_a_name_taken_is_refused() -> None:
    with pytest.raises(TypeError, match=r"two checks are named 'round\.place'") as refused:
        class Again(Check[Subject]):
            name = "round.place"

            def check(self, subject: Subject) -> None:
                """Never run."""
    assert CHECKS["round.place"] is round_checks.RoundPlace
    # The refused class exists all the same, one of Check's subclasses, held by the error's
    # frames until the cycle collector runs: left there, it made the registry's test (which
    # reads every subclass of Named) fail when it ran after this one.
    del refused
    gc.collect()
    assert not [c for c in _named_classes() if c.__module__ == __name__]


def test_the_round_checks_run_in_the_order_their_module_lists_them() -> None:
    names = [check.name for check in Auditor({}).round_checks]
    listed = list(dict.fromkeys(re.findall(r"``(round\.[a-z-]+)``", round_checks.__doc__ or "")))
    assert names == listed
    assert len(names) == len(set(names)) == len([n for n in CHECKS if n.startswith("round.")])


# --- every finding of tampered collections ------------------------------------------------------


def _main(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        main(list(argv))
    assert not info.value.code, out.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Collections of a cut-card game and a shoe-per-round game, with their commitments, key
    records and logs, the checkpoints kept apart, and the trusted keys exported."""
    root = tmp_path_factory.mktemp("checks")
    for game, rounds in (("double-exposure", 40), ("multi-hand", 10)):
        _main("collect", "rounds", "--game", game, "--rounds", str(rounds), "--out",
              str(root / game), "--key-store", str(root / "keystore"), "--checkpoint-out",
              str(root / f"{game}.checkpoint"))
    _main("keys", "export", "--dir", str(root / "keystore"), "--out", str(root / "trusted.json"))
    return root


def _key(base: Path) -> SigningKey:
    return KeyStore(base / "keystore").load_signing_key()


def _audit(base: Path, lab: Path, *, checkpoint: bool = False) -> AuditReport:
    log = LogSource()
    if checkpoint:
        note = base / f"{lab.name}.checkpoint"
        log = LogSource(checkpoint=note, origin=note.read_text().splitlines()[0])
    trusted = load_trusted_public_keys(base / "trusted.json")
    return Auditor(trusted, AuditOptions(now=NOW, log=log)).run([lab])


def _ordered_rounds(lab: Path) -> list[Path]:
    """The round files in shoe order, the shoe that dealt the most rounds first: each collect
    worker leaves a short last shoe (one round, perhaps), which sorted first by its random id
    would make "the second round" the first of another shoe."""
    shoes: dict[str, list[tuple[int, Path]]] = {}
    for path in (lab / ROUNDS_SUBDIR).iterdir():
        shoe = load(path)["payload"]["shoe"]
        shoes.setdefault(shoe["id"], []).append((shoe["start"], path))
    ordered = sorted(shoes.items(), key=lambda item: (-len(item[1]), item[0]))
    return [path for _, rounds in ordered for _, path in sorted(rounds)]


def _resign(base: Path, path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    env = load(path)
    edit(env["payload"])
    save(path, env, _key(base))


def _first_reveal(lab: Path) -> Path:
    return sorted((lab / REVEALS_SUBDIR).iterdir())[0]


def _envelope_of_no_kind(base: Path, lab: Path) -> None:
    path = lab / ROUNDS_SUBDIR / "odd.json"
    path.write_text(json.dumps({"format": "x", "payload": {"schema": "odd/v1"},
                                "signature": {}}))


def _unsigned(base: Path, lab: Path) -> None:
    path, env = pick_round(lab, lambda p: True)
    env["payload"]["level"] = "x"
    save(path, env, None)  # the old signature kept


def _bare(base: Path, lab: Path) -> None:
    path = _ordered_rounds(lab)[0]
    path.write_text(json.dumps(load(path)["payload"]))


def _reveal_unsigned(base: Path, lab: Path) -> None:
    path = _first_reveal(lab)
    env = load(path)
    env["payload"]["decks"] = 3
    save(path, env, None)


def _rules_altered(base: Path, lab: Path) -> None:
    path = next((lab / "rules").iterdir())
    data = json.loads(path.read_text())
    data["rules"]["payouts"]["blackjack"] = "6:5"
    path.write_text(json.dumps(data))


def _in_shoe(index: int, member: str, value: object) -> Callable[[Path, Path], None]:
    """Re-sign the round ``index`` (in shoe order) with ``member`` set to ``value``."""
    def tamper(base: Path, lab: Path) -> None:
        _resign(base, _ordered_rounds(lab)[index], lambda p: p.__setitem__(member, value))
    return tamper


def _first(directory: str, member: str, value: object) -> Callable[[Path, Path], None]:
    """Re-sign the first file of ``directory`` with ``member`` of its payload set to ``value``."""
    def tamper(base: Path, lab: Path) -> None:
        _resign(base, sorted((lab / directory).iterdir())[0],
                lambda p: p.__setitem__(member, value))
    return tamper


def _write(name: str, text: str) -> Callable[[Path, Path], None]:
    def tamper(base: Path, lab: Path) -> None:
        (lab / name).write_text(text)
    return tamper


def _retampered(tamper: Callable[[dict[str, Any]], str],
                wanted: Callable[[dict[str, Any]], bool]) -> Callable[[Path, Path], None]:
    def edit(base: Path, lab: Path) -> None:
        _resign(base, pick_round(lab, wanted)[0], tamper)
    return edit


def _copy_round(base: Path, lab: Path) -> None:
    shutil.copy(_ordered_rounds(lab)[1], lab / ROUNDS_SUBDIR / "copy.json")


def _delete_round(base: Path, lab: Path) -> None:
    _ordered_rounds(lab)[1].unlink()  # the second of its shoe: the third then fails its place


#: (name, game, tamper, the kind of finding and the check expected to fail it, whether that
#: finding is on a file the tamper changed)
Case = tuple[str, str, Callable[[Path, Path], object], str, str, bool]
_RESIGNED = ("round.cards", "round.outcome", "round.replay", "round.replay", "round.rules",
             "round.commitment", "round.outcome", "round.place", "round.decks")
CASES: list[Case] = [
    *((f"re-signed {name}", "multi-hand" if name != "rules" else "double-exposure",
       _retampered(tamper, wanted), "round", expected, True)
      for (name, tamper, wanted), expected in zip(TAMPERS, _RESIGNED, strict=True)),
    ("unsigned", "multi-hand", _unsigned, "round", "round.signature", True),
    ("bare payload", "multi-hand", _bare, "round", "file.bare-payload", True),
    ("a round twice", "double-exposure", _copy_round, "round", "round.id", False),
    ("a round deleted", "double-exposure", _delete_round, "round", "round.place", False),
    ("started before the previous finished", "double-exposure",
     _in_shoe(1, "started_at", "2000-01-01T00:00:00Z"), "round", "round.times", True),
    ("in the future", "double-exposure",
     _in_shoe(1, "finished_at", "2099-01-01T00:00:00Z"), "round", "round.times", True),
    # before year 1 in UTC: no time (it stopped the audit with an OverflowError)
    ("a time outside the calendar", "double-exposure",
     _in_shoe(1, "started_at", "0001-01-01T00:00:00+01:00"), "round", "round.times", True),
    ("not a version", "double-exposure", _in_shoe(1, "service_version", "1 2"), "round",
     "round.version", True),
    ("a void round mid-shoe", "double-exposure", _in_shoe(1, "status", "void"), "round",
     "round.outcome", True),
    ("a reveal's seed", "double-exposure", _first(REVEALS_SUBDIR, "seed", "ab" * 32), "shoe",
     "shoe.seed", True),
    ("a reveal unsigned", "double-exposure", _reveal_unsigned, "shoe", "shoe.signature", True),
    ("a reveal's decks", "double-exposure", _first(REVEALS_SUBDIR, "decks", 0), "shoe",
     "shoe.reveal", True),
    ("a commitment's decks", "double-exposure", _first("shoes", "decks", 2), "shoe",
     "shoe.commitment", False),
    ("a commitment's mode", "double-exposure", _first("shoes", "mode", "PLAY"), "commitment",
     "commitment.record", True),
    ("a key record's time", "double-exposure",
     _first("keys", "valid_from", "2099-01-01T00:00:00Z"), "key", "key.record", True),
    ("a rules document altered", "double-exposure", _rules_altered, "rules", "rules.document",
     True),
    ("not JSON", "double-exposure", _write("rounds/junk.json", "{no"), "file", "file.read",
     True),
    ("not an envelope", "double-exposure", _write("rounds/other.json", '{"a": 1}'), "file",
     "file.envelope", True),
    ("a keys file that is no JWK Set", "double-exposure", _write(KEYS_FILE, '{"a": 1}'), "file",
     "file.envelope", True),
    ("an envelope of no kind", "double-exposure", _envelope_of_no_kind, "file", "file.schema",
     True),
]


@pytest.fixture(scope="module")
def tampered(base: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, tuple[AuditReport, AuditReport, set[Path]]]:
    """Each case's report, without and with the checkpoint, and the files it changed."""
    out = {}
    for name, game, tamper, *_ in CASES:
        lab = tmp_path_factory.mktemp("case") / game
        shutil.copytree(base / game, lab)
        before = {p: p.read_bytes() for p in lab.rglob("*") if p.is_file()}
        tamper(base, lab)
        changed = {p for p in lab.rglob("*") if p.is_file() and before.get(p) != p.read_bytes()}
        out[name] = (_audit(base, lab), _audit(base, lab, checkpoint=True), changed)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_tampered_file_fails_by_the_check_of_its_concern(
        tampered: dict[str, tuple[AuditReport, AuditReport, set[Path]]], case: Case) -> None:
    name, _, _, kind, expected, own = case
    report, _, changed = tampered[name]
    assert not report.passed
    failed = [f for f in report.findings if f.status is not Status.OK and f.kind == kind
              and (f.path in changed or not own)]
    assert failed and {f.check for f in failed} == {expected}, [f.line() for f in failed]


def _wording(finding: Finding) -> tuple[str, str, str]:
    """A FAIL line's wording: its kind, field and message with the values masked."""
    masked = re.sub(r'"[^"]*"|\S*[/:]\S*|\b[0-9a-f]{16,}\b|\d+', "#", finding.message)
    return finding.kind, re.sub(r"\d+", "#", finding.field or ""), masked


def test_every_line_names_its_check_and_no_wording_comes_from_two(
        tampered: dict[str, tuple[AuditReport, AuditReport, set[Path]]]) -> None:
    writers: dict[tuple[str, str, str], set[str]] = {}
    for reports in tampered.values():
        for report in reports[:2]:
            for finding in report.findings:
                assert finding.check in CHECKS, finding
                if finding.status is not Status.OK:
                    writers.setdefault(_wording(finding), set()).add(finding.check)
    assert len(writers) > 30  # the cases above fail many ways
    assert {w: c for w, c in writers.items() if len(c) > 1} == {}
    # every kind of check of a record failed at least once above
    failed = set().union(*writers.values())
    assert {"round.place", "round.replay", "shoe.signature", "key.record", "log",
            "rules.document", "file.bare-payload"} <= failed
