"""Collections that fail the audit many ways at once (the ``labs`` fixture), and running
`fairshoe audit verify --workers N` on them: shared by the audit's tests (tests/audit/, where
its conftest.py makes the fixture theirs)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rng_service.cli.main import main
from rng_service.crypto.keys import KeyStore
from rng_service.records.schema import REVEALS_SUBDIR, ROUNDS_SUBDIR
from support.audit_kit import load, save


def cli(*argv: str) -> tuple[int, str]:
    """The exit status and the standard output of ``fairshoe ARGV``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        main(list(argv))
    return int(info.value.code or 0), out.getvalue()


def by_shoe(lab: Path) -> list[list[Path]]:
    """The collection's round files, grouped by shoe, in shoe order and by start within one."""
    shoes: dict[str, list[tuple[int, Path]]] = {}
    for path in (lab / ROUNDS_SUBDIR).iterdir():
        shoe = load(path)["payload"]["shoe"]
        shoes.setdefault(shoe["id"], []).append((shoe["start"], path))
    return [[p for _, p in sorted(rounds)] for _, rounds in sorted(shoes.items())]


@pytest.fixture(scope="module")
def labs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A cut-card collection and a shoe-per-round one, each failing many ways, the checkpoint
    of the first kept apart, and the trusted keys."""
    root = tmp_path_factory.mktemp("workers")
    store = root / "keystore"
    for game, count in (("double-exposure", 110), ("multi-hand", 16)):
        code, out = cli("collect", "rounds", "--game", game, "--rounds", str(count),
                          "--out", str(root / game), "--key-store", str(store),
                          "--checkpoint-out", str(root / f"{game}.checkpoint"))
        assert code == 0, out
    assert cli("keys", "export", "--dir", str(store), "--out", str(root / "trusted.json"))[0] == 0
    key = KeyStore(store).load_signing_key()

    def resign(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
        env = load(path)
        edit(env["payload"])
        save(path, env, key)

    # the shoes tampered with below need 3 rounds each; the shoe ids are random, so the shoe
    # left short when the rounds ran out may sort anywhere: full shoes first
    by_id = by_shoe(root / "double-exposure")
    shoes = [s for s in by_id if len(s) >= 3] + [s for s in by_id if len(s) < 3]
    assert len(shoes) >= 6 and all(len(s) >= 3 for s in shoes[:5]), "cut-card shoes"
    resign(shoes[0][1], lambda p: p["shoe"].__setitem__("start", p["shoe"]["start"] + 1))
    resign(shoes[1][2], lambda p: p["cards"].__setitem__(0, "2S" if p["cards"][0] != "2S"
                                                         else "3S"))
    first_id = load(shoes[0][0])["payload"]["round_id"]  # the same id in a later shoe
    resign(shoes[2][1], lambda p: p.__setitem__("round_id", first_id))
    resign(shoes[2][2], lambda p: p.__setitem__("status", "void"))
    shoes[3][1].unlink()  # a round deleted: the next one's start leaves a gap
    unsigned = load(shoes[4][0])
    unsigned["payload"]["level"] = "x"
    save(shoes[4][0], unsigned, None)  # the old signature kept
    (root / "double-exposure" / ROUNDS_SUBDIR / "junk.json").write_text("{no")
    last = load(shoes[-1][0])["payload"]["shoe"]["id"]
    (root / "double-exposure" / REVEALS_SUBDIR / f"{last}.json").unlink()  # in play

    hands = root / "multi-hand"
    rounds = sorted((hands / ROUNDS_SUBDIR).iterdir())
    resign(rounds[1], lambda p: p["shoe"].__setitem__("start", 1))
    resign(rounds[4], lambda p: p["wagers"][0].__setitem__("returned",
                                                             p["wagers"][0]["returned"] + 5))
    resign(rounds[6], lambda p: p.__setitem__("round_id", load(rounds[9])["payload"]["round_id"]))
    (hands / "notes.json").write_text(json.dumps({"a": 1}))  # skipped
    return {"de": root / "double-exposure", "mh": hands, "keys": root / "trusted.json",
            "checkpoint": root / "double-exposure.checkpoint"}


def verify(labs: dict[str, Path], workers: int, *args: str) -> tuple[int, str]:
    """`fairshoe audit verify ARGS` with ``labs``'s trusted keys, by ``workers`` processes."""
    return cli("audit", "verify", "--keys", str(labs["keys"]), "--now", "2030-01-01T00:00:00Z",
                 "--workers", str(workers), *args)

