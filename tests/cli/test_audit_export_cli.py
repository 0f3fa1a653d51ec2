"""`fairshoe audit export` then `fairshoe audit verify`: rounds of every game dealt by the service
from production shoes, and RNG draws, exported straight from the database (read-only) pass the
offline audit; one byte changed fails it. On a SQLite file and on a PostgreSQL database (URL)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.cli_helpers import run
from support.record_helpers import OP, Dealer

from rng_service.cli.audit_export import verify_hint
from rng_service.crypto.keys import KeyStore, load_trusted_public_keys
from rng_service.log import (
    Checkpoint,
    CompactRange,
    checkpoint_verifier,
    leaf_hash,
    sign_checkpoint,
    verify_checkpoint,
    verify_inclusion,
)
from rng_service.records.schema import (
    KEYS_FILE,
    KEYS_SUBDIR,
    REVEALS_SUBDIR,
    RNG_REVEALS_SUBDIR,
    RNG_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SUBDIR,
    SHOES_SUBDIR,
)
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.rng_draws import RngDrawService
from rng_service.service.translog import LogReader, log_origin
from rng_service.storage import open_storage


@dataclass
class Operator:
    database: str  # a SQLite file or a postgresql:// URL
    keys: Path
    trusted: Path  # the public keys as the auditor obtains them, apart from any export
    middle: datetime  # between the rounds and the draws


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def operator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Operator]:
    root = tmp_path_factory.mktemp("operator")
    store = KeyStore(root / "keys")
    store.create()
    database = (str(request.getfixturevalue("pg_module_url")) if request.param == "postgresql"
                else str(root / "fairshoe.db"))
    storage = open_storage(database)
    dealer = Dealer(storage, store.load_signing_key(), SeedVault(secrets.token_bytes(32)))
    dealer.play_every_game()
    middle = datetime.now(UTC)
    draws = RngDrawService(storage, signer=dealer.signer)
    draws.generate_integers(OP, count=20, minimum=1, maximum=6, client_seed=b"c",
                            request_id="draw-1")
    draws.shuffle(OP, n=52, request_id="draw-2")
    storage.close()
    trusted = root / "trusted.jwks.json"
    assert run(["keys", "export", "--dir", str(store.root), "--out", str(trusted)]) == 0
    yield Operator(database, store.root, trusted, middle)


def export(op: Operator, out: Path, *extra: str) -> int:
    return run(["audit", "export", "--out", str(out), "--database", op.database,
                "--key-store", str(op.keys), *extra])


def verify(op: Operator, *paths: Path) -> int:
    return run(["audit", "verify", *map(str, paths), "--keys", str(op.trusted), "--quiet"])


def test_export_then_verify_passes(operator: Operator, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "collection"
    assert export(operator, out) == 0
    for sub in (ROUNDS_SUBDIR, REVEALS_SUBDIR, RULES_SUBDIR, RNG_SUBDIR, RNG_REVEALS_SUBDIR):
        assert any((out / sub).iterdir()), sub
    assert len(list((out / RULES_SUBDIR).iterdir())) == 4  # every game played
    assert all("valid_from" in k for k in json.loads((out / KEYS_FILE).read_text())["keys"])
    capsys.readouterr()
    assert verify(operator, out) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("audit PASS, completeness not judged")
    assert any(line.startswith("2 RNG draws: 2 OK") for line in lines)


def test_the_hint_asks_for_a_checkpoint_as_the_remote_export_does(
        operator: Operator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An export with its log is verified against a checkpoint kept apart from it: --database
    says so as --address does (one hint for both)."""
    out = tmp_path / "collection"
    assert export(operator, out) == 0
    hint = capsys.readouterr().out.splitlines()[-1]
    assert hint == verify_hint(out)
    assert hint.startswith(f"verify with: fairshoe audit verify {out} --keys TRUSTED_KEYS "
                           "--checkpoint CHECKPOINT ")
    assert "fairshoe log checkpoint --out" in hint


@pytest.mark.parametrize("sub", [ROUNDS_SUBDIR, REVEALS_SUBDIR, RNG_SUBDIR, RNG_REVEALS_SUBDIR])
def test_one_byte_changed_fails(operator: Operator, tmp_path: Path, sub: str) -> None:
    out = tmp_path / "collection"
    assert export(operator, out) == 0
    victim = sorted((out / sub).iterdir())[0]
    data = bytearray(victim.read_bytes())
    at = data.index(b'"signature"') - 3  # a byte of the signed payload
    data[at] = ord("7") if data[at] != ord("7") else ord("8")
    victim.write_bytes(bytes(data))
    assert verify(operator, out) != 0


def test_time_ranges_split_the_export(operator: Operator, tmp_path: Path) -> None:
    stamp = operator.middle.isoformat()
    assert export(operator, tmp_path / "before", "--end", stamp) == 0
    assert export(operator, tmp_path / "after", "--start", stamp) == 0
    assert not any((tmp_path / "before" / RNG_SUBDIR).iterdir())
    assert len(list((tmp_path / "after" / RNG_SUBDIR).iterdir())) == 2
    assert not any((tmp_path / "after" / ROUNDS_SUBDIR).iterdir())
    assert verify(operator, tmp_path / "before") == 0
    assert verify(operator, tmp_path / "after") == 0


def test_bad_arguments_exit_2(operator: Operator, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert export(operator, tmp_path / "x", "--start", "yesterday") == 2
    assert export(operator, tmp_path / "y", "--start", "2999-01-01T00:00:00Z") == 2
    assert "end_time" in capsys.readouterr().err
    missing = tmp_path / "none.db"
    assert run(["audit", "export", "--out", str(tmp_path / "z"), "--database", str(missing),
                "--key-store", str(operator.keys)]) == 2
    assert not missing.exists()  # read-only: nothing is created
    full = tmp_path / "full"
    full.mkdir()
    (full / "something").write_text("")
    assert export(operator, full) == 2


def _leaves(out: Path) -> list[dict[str, Any]]:
    lines = (out / "log" / "leaves.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _recomputed_root(out: Path) -> tuple[int, bytes]:
    """The root from log/frontier.json and the files log/leaves.jsonl names, in order."""
    frontier = json.loads((out / "log" / "frontier.json").read_text())
    tree = CompactRange(frontier["size"], [bytes.fromhex(h) for h in frontier["hashes"]])
    for line in _leaves(out):
        assert line["index"] == tree.size
        tree.append(leaf_hash((out / line["path"]).read_bytes()))
    return tree.size, tree.root()


def test_a_log_export_is_complete_and_proves_itself(operator: Operator, tmp_path: Path) -> None:
    out = tmp_path / "log-export"
    assert export(operator, out) == 0
    note = (out / "log" / "checkpoint").read_text()
    trusted = [checkpoint_verifier(key, log_origin(OP))
               for key in load_trusted_public_keys(operator.trusted).values()]
    checkpoint = verify_checkpoint(note, trusted, origin=log_origin(OP))
    lines = _leaves(out)
    assert [line["index"] for line in lines] == list(range(checkpoint.size))
    assert _recomputed_root(out) == (checkpoint.size, checkpoint.root_hash)
    for line in lines:
        verify_inclusion(leaf_hash((out / line["path"]).read_bytes()), line["index"],
                         checkpoint.size, [bytes.fromhex(h) for h in line["proof"]],
                         checkpoint.root_hash)
    paths = [line["path"] for line in lines]
    assert paths[0].startswith(KEYS_SUBDIR + "/")
    files = {f"{sub.name}/{f.name}" for sub in out.iterdir() if sub.is_dir()
             and sub.name not in ("log", RULES_SUBDIR) for f in sub.iterdir()}
    assert files == set(paths)  # every file is a listed leaf, and every leaf a file
    for path in paths:  # each shoe's commitment comes before its rounds and its reveal
        if path.startswith(ROUNDS_SUBDIR):
            shoe = json.loads((out / path).read_bytes())["payload"]["shoe"]["id"]
            assert paths.index(f"{SHOES_SUBDIR}/{shoe}.json") < paths.index(path)
    assert verify(operator, out) == 0


def test_a_since_export_holds_the_leaves_after_the_earlier_checkpoint(
        operator: Operator, tmp_path: Path) -> None:
    full = tmp_path / "full"
    assert export(operator, full) == 0
    lines = _leaves(full)
    middle = len(lines) // 2
    # an earlier checkpoint of the log, as an auditor would have kept it
    store = KeyStore(operator.keys)
    storage = open_storage(operator.database)
    try:
        earlier = LogReader(storage, store.load_signing_key()).frontier(OP, middle)
        note = sign_checkpoint(Checkpoint(log_origin(OP), middle, earlier.root()),
                               store.load_signing_key())
    finally:
        storage.close()
    since = tmp_path / "since.checkpoint"
    since.write_text(note)
    out = tmp_path / "since"
    assert export(operator, out, "--since", str(since)) == 0
    frontier = json.loads((out / "log" / "frontier.json").read_text())
    assert frontier["size"] == middle
    assert CompactRange(middle, [bytes.fromhex(h) for h in frontier["hashes"]]).root() == (
        earlier.root())
    assert [line["index"] for line in _leaves(out)] == list(range(middle, len(lines)))
    size, root = _recomputed_root(out)
    assert (size, root) == _recomputed_root(full)
    since.write_text(sign_checkpoint(Checkpoint(log_origin(OP), middle, bytes(32)),
                                     store.load_signing_key()))
    assert export(operator, tmp_path / "bad", "--since", str(since)) == 2
    assert export(operator, tmp_path / "both", "--since", str(since), "--start",
                  "2020-01-01T00:00:00Z") == 2


def test_a_time_range_export_lists_the_leaves_it_holds(operator: Operator,
                                                       tmp_path: Path) -> None:
    out = tmp_path / "after"
    assert export(operator, out, "--start", operator.middle.isoformat()) == 0
    lines = _leaves(out)
    kinds = [line["path"].split("/")[0] for line in lines]
    assert kinds == [KEYS_SUBDIR, RNG_SUBDIR, RNG_REVEALS_SUBDIR, RNG_SUBDIR, RNG_REVEALS_SUBDIR]
    assert [line["index"] for line in lines] == sorted(line["index"] for line in lines)
    assert verify(operator, out) == 0
