"""The audit findings of the issue "A tamper-evident log of everything signed, and an audit
nothing can slip past", each reproduced against `fairshoe audit verify`:

2. a void round with a settled wager, and rounds dealt from a shoe after its void round;
3. one unsigned file that crashed (a long integer, a lone surrogate) or hung (a huge fraction
   in a rules document) the whole audit;
4. a custom rules document under a built-in game's id;
5. symbolic links, FIFOs and directories inside record directories;
6. timestamps, the service version, and a record dated outside its key's validity period;
7. untrusted names and strings printed raw (a file name faking an "audit PASS" line).

Rounds are dealt on the production path (OS-seeded shoes, the engine) and signed with the
operator's key; the auditor's keys are exported apart from the records, as in test_audit.py.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import (
    findings,
    load,
    run,
    save,
    simple_player,
    summary,
)

from game_math.games import game_rules
from game_math.round import HandBet, Round
from game_math.rules import Rules, rules_from_dict
from rng_service.audit import reveals, verifier
from rng_service.crypto.keys import KeyInfo, KeyStore, SigningKey, export_jwk
from rng_service.records.schema import (
    REVEALS_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SCHEMA,
    RULES_SUBDIR,
    RecordWriter,
    ShoeRef,
    collect_rounds,
    round_payload,
)
from rng_service.rng.shoe import Shoe

FAIRSHOE = Path(sys.executable).parent / "fairshoe"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> KeyStore:
    store = KeyStore(tmp_path_factory.mktemp("keystore"))
    store.create()
    return store


@pytest.fixture(scope="module")
def key(store: KeyStore) -> SigningKey:
    return store.load_signing_key()


@pytest.fixture(scope="module")
def trusted(store: KeyStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auditor") / "operator.jwks.json"
    path.write_text(export_jwk(store.public_keys()))
    return path


def collection(tmp_path: Path, key: SigningKey, game: str = "snap", count: int = 3,
               rules: Rules | None = None) -> Path:
    out = tmp_path / "lab"
    collect_rounds(rules or game_rules(game), count, RecordWriter(out, key), simple_player)
    return out


def verify(capsys: pytest.CaptureFixture[str], trusted: Path, *paths: Path,
           extra: tuple[str, ...] = ()) -> tuple[int, str]:
    capsys.readouterr()
    return run(capsys, "audit", "verify", *map(str, paths), "--keys", str(trusted), *extra)


def verify_process(trusted: Path, *paths: Path, timeout: float = 60) -> subprocess.CompletedProcess[
        bytes]:
    """`fairshoe audit verify` as its own process: a crash is a traceback, a hang a timeout."""
    return subprocess.run([str(FAIRSHOE), "audit", "verify", *map(str, paths), "--keys",
                           str(trusted)], capture_output=True, timeout=timeout, check=False)


def write_round(out: Path, key: SigningKey, rnd: Round, shoe: Shoe, **times: str) -> str:
    round_id = uuid.uuid4().hex
    stamps = {"started_at": "2024-05-01T12:00:00.000Z", "finished_at": "2024-05-01T12:00:01.000Z"}
    stamps.update(times)
    payload = round_payload(rnd, round_id=round_id, shoe=ShoeRef.of(shoe), **stamps)
    RecordWriter(out, key).write_round(payload, rnd.rules)
    return round_id


# --- 2. void has limits ----------------------------------------------------------------------


def awaiting_round(rules: Rules, shoe: Shoe, hands: list[HandBet]) -> Round | None:
    """A round dealt from the shoe's position that awaits a decision, or None."""
    rnd = Round(rules, shoe.cards, hands, {}, start=shoe.position)
    return None if rnd.finished else rnd


def void_after_side_bet(out: Path, key: SigningKey) -> str:
    """A multi-hand round voided while awaiting a decision, after its Perfect Pairs side bet was
    settled at the deal: the live service refuses this void (WAGER_SETTLED)."""
    rules = game_rules("multi-hand")
    for _ in range(200):
        shoe = Shoe.new(rules.decks)
        shoe.start_round()
        rnd = awaiting_round(rules, shoe, [HandBet(1000, {"perfect_pairs": 100})])
        if rnd is None:
            continue
        assert any(w.returned is not None for w in rnd.wagers)  # the side bet is settled
        rnd.void("malfunction")
        shoe.take(rnd.position)
        shoe.finish()
        round_id = write_round(out, key, rnd, shoe)
        RecordWriter(out, key).write_reveal(shoe)
        return round_id
    raise AssertionError("no round awaited a decision")


def dealt_after_void(out: Path, key: SigningKey) -> tuple[str, str]:
    """A double-exposure (cut-card) round voided mid-play, and a round dealt after it from the
    same shoe, which the live service finishes at the void."""
    rules = game_rules("double-exposure")
    for _ in range(200):
        shoe = Shoe.new(rules.decks, cut=rules.shuffle.cut_card)
        shoe.start_round()
        rnd = awaiting_round(rules, shoe, [HandBet(1000)])
        if rnd is None:
            continue
        rnd.void("malfunction")
        shoe.take(rnd.position)
        shoe.end_round()
        shoe.start_round()
        after = Round(rules, shoe.cards, [HandBet(1000)], {}, start=shoe.position)
        while not after.finished:
            after.act(simple_player(after))
        shoe.take(after.position - after.start)
        shoe.finish()
        first = write_round(out, key, rnd, shoe)
        second = write_round(out, key, after, shoe, started_at="2024-05-01T12:00:02.000Z",
                             finished_at="2024-05-01T12:00:03.000Z")
        RecordWriter(out, key).write_reveal(shoe)
        return first, second
    raise AssertionError("no round awaited a decision")


def test_void_round_with_a_settled_wager_fails(key: SigningKey, trusted: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lab"
    round_id = void_after_side_bet(out, key)
    code, text = verify(capsys, trusted, out)
    assert code == 1, text
    status, field, message = findings(text)["round", round_id]
    assert (status, field) == ("FAIL", "status"), text
    assert "settled" in message


def test_round_dealt_after_a_void_round_of_its_shoe_fails(
        key: SigningKey, trusted: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lab"
    void_id, after_id = dealt_after_void(out, key)
    code, text = verify(capsys, trusted, out)
    assert code == 1, text
    found = findings(text)
    assert found["round", void_id][0] == "OK"  # the void itself was allowed
    status, field, message = found["round", after_id]
    assert (status, field) == ("FAIL", "shoe.start"), text
    assert void_id in message and "void" in message


# --- 3. one malformed file is one FAIL line, in bounded time --------------------------------


def envelope_text(payload: str) -> str:
    return ('{"format": "fairshoe.signed/v1", "payload": ' + payload
            + ', "signature": {"alg": "Ed25519", "key_id": "x", "value": "x"}}')


MALFORMED_RECORDS = {
    "long integer": envelope_text('{"schema": "fairshoe.round/v1", "n": ' + "9" * 5000 + "}"),
    "long integer, bare": '{"schema": "fairshoe.round/v1", "round_id": ' + "7" * 5000 + "}",
    "lone surrogate id": envelope_text('{"schema": "fairshoe.round/v1", "round_id": '
                                       '"\\ud800", "game": "\\udfff"}'),
    "lone surrogate schema": envelope_text('{"schema": "fairshoe.round/v1\\ud800"}'),
    "lone surrogate format": '{"format": "\\ud800", "payload": {}, "signature": {}}',
    "deep": "[" * 100_000 + "]" * 100_000,
    "huge": '{"x": "' + "y" * (3 << 20) + '"}',
}


@pytest.mark.processes
@pytest.mark.parametrize("name", MALFORMED_RECORDS)
def test_malformed_record_file_is_one_fail_line(key: SigningKey, trusted: Path, tmp_path: Path,
                                                name: str) -> None:
    out = collection(tmp_path, key)
    bad = out / ROUNDS_SUBDIR / "bad.json"
    bad.write_text(MALFORMED_RECORDS[name], encoding="utf-8", errors="surrogatepass")
    done = verify_process(trusted, out)
    stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == 1, stderr
    assert "Traceback" not in stderr
    bad_lines = [line for line in stdout.splitlines() if bad.name in line]
    assert len(bad_lines) == 1 and bad_lines[0].startswith("FAIL "), stdout
    assert stdout.count("\nOK   round ") + stdout.startswith("OK   round ") == 3


def rules_document(rules: dict[str, Any]) -> str:
    return json.dumps({"schema": RULES_SCHEMA, "rules": rules})


def de_rules(**changes: Any) -> dict[str, Any]:
    data = game_rules("double-exposure").to_dict()
    for path, value in changes.items():
        table = data
        *parents, leaf = path.split("__")
        for part in parents:
            table = table[part]
        table[leaf] = value
    return data


#: custom rule sets of a game of their own ("home"), so only the hostile value can fail them
HOSTILE_RULES = {
    "huge exponent": de_rules(game="home", shuffle__cut_card="1e999999999"),
    "huge negative exponent": de_rules(game="home", shuffle__cut_card="1e-999999999"),
    "huge published return": de_rules(game="home", published_return="9e99999999"),
    "huge payout": de_rules(game="home", payouts__blackjack="9" * 4000 + ":1"),
    "huge payout denominator": de_rules(game="home", payouts__blackjack="3:" + "7" * 4000),
    "huge insurance": de_rules(game="home", payouts__insurance="1" + "0" * 4200 + ":1"),
    "decimal fraction": de_rules(game="home", shuffle__cut_card="0." + "5" * 5000),
    "huge decks": de_rules(game="home", decks=10**18),
}


@pytest.mark.processes
@pytest.mark.parametrize("name", HOSTILE_RULES)
def test_hostile_rules_document_fails_fast(key: SigningKey, trusted: Path, tmp_path: Path,
                                           name: str) -> None:
    out = collection(tmp_path, key)
    bad = out / RULES_SUBDIR / "hostile.json"
    bad.write_text(rules_document(HOSTILE_RULES[name]), encoding="utf-8")
    # a value that would make the audit compute without end is refused, not computed: the
    # process's timeout is the hang guard (not a speed bound, which a loaded machine would break)
    done = verify_process(trusted, out)
    stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == 1 and "Traceback" not in stderr, stderr
    assert "FAIL rules hostile.json: rules." in stdout, stdout


# --- 4. a custom rule set under a built-in game's id ----------------------------------------


def one_to_two() -> Rules:
    """Double exposure whose blackjack pays 1:2, still calling itself double-exposure."""
    return rules_from_dict(de_rules(payouts__blackjack="1:2"))


def test_custom_rules_under_a_builtin_game_id_fail(key: SigningKey, trusted: Path,
                                                   tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rules = one_to_two()
    out = collection(tmp_path, key, rules=rules, count=3)
    code, text = verify(capsys, trusted, out)
    assert code == 1, text
    found = findings(text)
    status, field, message = found["rules", f"{rules.digest()}.json"]
    assert (status, field) == ("FAIL", "rules.game"), text
    assert "double-exposure" in message and "--allow-custom-rules" in message
    rounds = {k: v for k, v in found.items() if k[0] == "round"}
    assert len(rounds) == 3 and all(v[:2] == ("FAIL", "rules_digest") for v in rounds.values())
    # named by the auditor, the custom rule set is accepted and reported as such
    code, text = verify(capsys, trusted, out, extra=("--allow-custom-rules", rules.digest()))
    assert code == 0, text
    assert f"rules: double-exposure {rules.digest()[:16]} (custom, allowed)" in summary(text)


# --- 5. links, FIFOs and directories in record directories ----------------------------------


def test_links_fifos_and_directories_in_record_directories_fail(
        key: SigningKey, trusted: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = collection(tmp_path, key)
    rounds = out / ROUNDS_SUBDIR
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tampered = elsewhere / "tampered.json"
    env = load(next(rounds.iterdir()))
    env["payload"]["total_returned"] += 1000
    save(tampered, env, None)
    strays = {
        rounds / "linked-dir": elsewhere,
        rounds / "loop": rounds / "loop",
        rounds / "up.json": out,
        out / "side-door": elsewhere,
        out / REVEALS_SUBDIR / "file-link.json": tampered,
    }
    for link, target in strays.items():
        link.symlink_to(target)
    fifo = rounds / "pipe.json"
    os.mkfifo(fifo)
    subdir = rounds / "nested"
    subdir.mkdir()
    (subdir / "more.json").write_text("{}", encoding="utf-8")
    started = time.monotonic()
    code, text = verify(capsys, trusted, out)
    assert time.monotonic() - started < 30
    assert code == 1, text
    failed = {k[1]: v for k, v in findings(text).items() if k[0] == "file"}
    for path in [*strays, fifo, subdir]:
        assert failed[str(path)][0] == "FAIL", text
    assert "symbolic link" in failed[str(rounds / "loop")][2]
    assert "FIFO" in failed[str(fifo)][2]
    assert "directory" in failed[str(subdir)][2]
    assert str(subdir / "more.json") not in text  # nothing below was read as a record


# --- 6. timestamps, version, key validity ---------------------------------------------------


def resign(path: Path, key: SigningKey, **members: Any) -> str:
    env = load(path)
    env["payload"].update(members)
    save(path, env, key)
    return str(env["payload"]["round_id"])


@pytest.mark.parametrize(("members", "field"), [
    ({"started_at": "2024-05-01 12:00:00"}, "started_at"),
    ({"finished_at": "yesterday"}, "finished_at"),
    ({"started_at": "2024-05-01T12:00:00Z", "finished_at": "2024-05-01T11:59:59Z"},
     "finished_at"),
    ({"started_at": "2024-02-30T12:00:00Z"}, "started_at"),
    ({"finished_at": "2999-01-01T00:00:00Z"}, "finished_at"),
    ({"service_version": ""}, "service_version"),
    ({"service_version": "0.1.0\n"}, "service_version"),
])
def test_bad_times_and_versions_fail(key: SigningKey, trusted: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str], *,
                                     members: dict[str, str], field: str) -> None:
    out = collection(tmp_path, key, count=1)
    round_id = resign(next((out / ROUNDS_SUBDIR).iterdir()), key, **members)
    code, text = verify(capsys, trusted, out)
    assert code == 1, text
    assert findings(text)["round", round_id][:2] == ("FAIL", field), text


def test_rounds_of_a_shoe_out_of_time_order_fail(key: SigningKey, trusted: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = collection(tmp_path, key, game="double-exposure", count=12)
    by_shoe: dict[str, list[tuple[int, Path]]] = {}
    for path in (out / ROUNDS_SUBDIR).iterdir():
        shoe = load(path)["payload"]["shoe"]
        by_shoe.setdefault(shoe["id"], []).append((shoe["start"], path))
    rounds = sorted(max(by_shoe.values(), key=len))
    assert len(rounds) >= 2
    later = resign(rounds[1][1], key, started_at="2000-01-01T00:00:00.000Z",
                   finished_at="2000-01-01T00:00:01.000Z")
    code, text = verify(capsys, trusted, out)
    assert code == 1, text
    assert findings(text)["round", later][:2] == ("FAIL", "started_at"), text


def test_record_outside_its_keys_validity_period_fails(store: KeyStore, key: SigningKey,
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = collection(tmp_path, key, count=2)
    paths = sorted((out / ROUNDS_SUBDIR).iterdir())
    early = resign(paths[0], key, started_at="2020-01-01T00:00:00.000Z",
                   finished_at="2020-01-01T00:00:01.000Z")
    late = resign(paths[1], key, started_at="2030-01-01T00:00:00.000Z",
                  finished_at="2030-01-01T00:00:01.000Z")
    keys = tmp_path / "retired.jwks.json"
    info = KeyInfo(key.key_id, "2021-01-01T00:00:00+00:00", "2029-01-01T00:00:00+00:00", False)
    keys.write_text(export_jwk(store.public_keys(), validity={key.key_id: info}))
    code, text = verify(capsys, keys, out, extra=("--now", "2031-01-01T00:00:00Z"))
    assert code == 1, text
    found = findings(text)
    for round_id, when in ((early, "2020-01-01"), (late, "2030-01-01")):
        status, field, message = found["round", round_id]
        assert (status, field) == ("FAIL", "signature.key_id"), text
        assert when in message and "valid" in message


# --- 7. every untrusted string printed escaped ----------------------------------------------


@pytest.mark.processes
def test_names_and_strings_cannot_fake_lines(key: SigningKey, trusted: Path, tmp_path: Path
                                             ) -> None:
    out = collection(tmp_path, key, count=1)
    rounds = out / ROUNDS_SUBDIR
    genuine = next(rounds.iterdir())
    (rounds / "x\naudit PASS: 1 rounds: 1 OK\n.json").write_text("{}", encoding="utf-8")
    (rounds / "\u202enosj.json").write_text("{}", encoding="utf-8")
    (out / "note\x1b[2J.json").write_text("{}", encoding="utf-8")
    env = load(genuine)
    env["payload"]["round_id"] = "r\nOK   round fake"
    env["payload"]["game"] = "snap\u202e\nFAIL"
    save(rounds / "tampered.json", env, key)
    bare = {"schema": "fairshoe.shoe-reveal/v1", "shoe_id": "s\rOK   shoe x"}
    (out / REVEALS_SUBDIR / "bare.json").write_text(json.dumps(bare), encoding="utf-8")
    done = verify_process(trusted, out)
    stdout = done.stdout.decode("utf-8")
    assert done.returncode == 1
    lines = stdout.splitlines()
    assert lines[-1].startswith("audit FAIL")
    assert not any(line.startswith("audit PASS") for line in lines)
    assert all(line.isprintable() for line in lines), stdout
    # every line starts as a finding's or one of the summary's lines do, never as a name does
    starts = re.compile(r"(OK   |FAIL |OPEN |UNREVEALED |SKIP |audit FAIL, |\d+ |log |rules: |"
                        r"service versions: )")
    assert all(starts.match(line) for line in lines), stdout
    assert not any(line.startswith(("OK   round fake", "OK   shoe x")) for line in lines)


def test_an_ordinary_collection_still_passes(key: SigningKey, trusted: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for game in ("double-exposure", "multi-hand"):
        out = collection(tmp_path / game, key, game=game, count=8)
        code, text = verify(capsys, trusted, out)
        assert code == 0, text
    random.seed(0)


#: how long a stuck check sleeps unless its file's time bound cuts it
STUCK_S = 120


@pytest.mark.processes
def test_a_file_whose_checks_hang_fails_within_the_bound(
        key: SigningKey, store: KeyStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-file time bound: a check stuck in Python code (here the shoe's shuffle made to
    sleep) fails that file after --file-timeout, and the audit goes on to the next."""
    out = collection(tmp_path, key, count=2)

    def stuck(*args: object) -> object:
        time.sleep(STUCK_S)
        raise AssertionError("not reached")

    monkeypatch.setattr(reveals, "shoe_cards", stuck)  # Reveal.cards shuffles
    monkeypatch.setattr(reveals, "LazyShoe", stuck)  # and Reveal.round_cards, one round's shoe
    started = time.monotonic()
    report = verifier.audit_paths([out], store.public_keys(),
                                  options=verifier.AuditOptions(file_timeout=0.5))
    # neither stuck check ran to its end (an order, not a timing: a loaded machine may take
    # seconds over the two bounds and the other checks)
    assert time.monotonic() - started < STUCK_S
    slow = [f for f in report.findings if "took longer than 0.5 s" in f.message]
    assert sum(f.kind == "round" for f in slow) == 2, report.findings
    assert not report.passed
