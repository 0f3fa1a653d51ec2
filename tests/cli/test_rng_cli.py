"""`fairshoe shoe` and `fairshoe collect raw|shoes`, run through the real CLI entry point."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from support.cli_helpers import run

from game_math.cards import card_codes, ordered_shoe
from rng_service.cli import rng as rng_commands
from rng_service.cli.main import build_parser
from rng_service.rng import selftest
from rng_service.rng.shoe import shoe_cards

KAT_SEED_HEX = bytes(range(48)).hex()
KAT_CLIENT_SEED = "fairshoe known-answer test"


def test_shoe_prints_the_cards_of_a_revealed_seed(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["shoe", "--seed", KAT_SEED_HEX, "--client-seed", KAT_CLIENT_SEED, "--decks", "1"])
    assert code == 0
    expected = card_codes(shoe_cards(bytes(range(48)), KAT_CLIENT_SEED.encode(), 1))
    assert capsys.readouterr().out == " ".join(expected) + "\n"


def test_shoe_client_seed_is_utf8_and_defaults_to_empty(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["shoe", "--seed", KAT_SEED_HEX, "--decks", "2"]) == 0
    plain = capsys.readouterr().out.split()
    assert plain == card_codes(shoe_cards(bytes(range(48)), b"", 2))
    assert run(["shoe", "--seed", KAT_SEED_HEX, "--client-seed", "Grüße", "--decks", "2"]) == 0
    accented = capsys.readouterr().out.split()
    assert accented == card_codes(shoe_cards(bytes(range(48)), "Grüße".encode(), 2))


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--seed", "xyz", "--decks", "1"], "--seed"),
        (["--seed", "ab" * 47, "--decks", "1"], "--seed"),
        (["--seed", "ab" * 49, "--decks", "1"], "--seed"),
        (["--seed", KAT_SEED_HEX, "--decks", "0"], "--decks"),
        (["--seed", KAT_SEED_HEX, "--decks", "17"], "--decks"),
        (["--seed", KAT_SEED_HEX, "--decks", "1", "--client-seed", "x" * 257], "--client-seed"),
    ],
)
def test_shoe_names_the_bad_argument(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["shoe", *argv]) == 2
    err = capsys.readouterr().err
    assert named in err
    assert len(err.strip().splitlines()) == 1


def test_collect_raw_writes_fresh_output(tmp_path: Path) -> None:
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    assert run(["collect", "raw", "--bytes", "70000", "--out", str(first)]) == 0
    assert run(["collect", "raw", "--bytes", "70000", "--out", str(second)]) == 0
    a, b = first.read_bytes(), second.read_bytes()
    assert len(a) == len(b) == 70000
    assert a != b
    # Not a constant or a short cycle: every byte value occurs in 70 kB of DRBG output.
    assert len(set(a)) == 256


def test_collect_shoes_writes_one_shoe_per_line(tmp_path: Path) -> None:
    out = tmp_path / "shoes.txt"
    assert run(["collect", "shoes", "--decks", "2", "--count", "5", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 5
    assert len(set(lines)) == 5
    full = Counter(card_codes(ordered_shoe(2)))
    for line in lines:
        assert Counter(line.split()) == full


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["raw", "--bytes", "0"], "--bytes"),
        (["shoes", "--decks", "0", "--count", "1"], "--decks"),
        (["shoes", "--decks", "1", "--count", "0"], "--count"),
    ],
)
def test_collect_names_the_bad_argument(
    argv: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["collect", *argv, "--out", str(tmp_path / "out")]) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_collect_refuses_when_the_self_test_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(selftest, "_status", selftest._Status.FAILED)
    out = tmp_path / "shoes.txt"
    assert run(["collect", "shoes", "--decks", "2", "--count", "1", "--out", str(out)]) == 2
    assert "self-test" in capsys.readouterr().err
    assert not out.exists()


def test_other_modules_can_add_collect_subcommands() -> None:
    build_parser()
    collect = rng_commands.collect_subparsers()
    # `collect rounds` is added by rng_service.cli.audit, registered after this module
    assert {"raw", "shoes", "rounds"} <= set(collect.choices)
