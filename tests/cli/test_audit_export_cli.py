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

import pytest
from cli_helpers import run
from record_helpers import OP, Dealer

from rng_service.crypto.keys import KeyStore
from rng_service.records.schema import (
    KEYS_FILE,
    REVEALS_SUBDIR,
    RNG_REVEALS_SUBDIR,
    RNG_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SUBDIR,
)
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.rng_draws import RngDrawService
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
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("audit PASS") and "2 RNG draws: 2 OK" in summary


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
    assert export(operator, tmp_path / "before", "--until", stamp) == 0
    assert export(operator, tmp_path / "after", "--since", stamp) == 0
    assert not any((tmp_path / "before" / RNG_SUBDIR).iterdir())
    assert len(list((tmp_path / "after" / RNG_SUBDIR).iterdir())) == 2
    assert not any((tmp_path / "after" / ROUNDS_SUBDIR).iterdir())
    assert verify(operator, tmp_path / "before") == 0
    assert verify(operator, tmp_path / "after") == 0


def test_bad_arguments_exit_2(operator: Operator, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert export(operator, tmp_path / "x", "--since", "yesterday") == 2
    assert export(operator, tmp_path / "y", "--since", "2999-01-01T00:00:00Z") == 2
    assert "end_time" in capsys.readouterr().err
    missing = tmp_path / "none.db"
    assert run(["audit", "export", "--out", str(tmp_path / "z"), "--database", str(missing),
                "--key-store", str(operator.keys)]) == 2
    assert not missing.exists()  # read-only: nothing is created
    full = tmp_path / "full"
    full.mkdir()
    (full / "something").write_text("")
    assert export(operator, full) == 2
