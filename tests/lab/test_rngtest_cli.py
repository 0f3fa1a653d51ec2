"""`fairshoe rng-test`: options, outputs and exit status (small sizes; the statistics are tested in
test_sp800_22.py and test_shuffle_stats.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rng_service.cli import main as cli
from rng_service.cli import rngtest
from rng_service.lab.stats import sp800_22

SEED = "5e" * 32
SMALL = ["--sequences", "2", "--shuffles", "300", "--seed", SEED]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["rng-test", *argv])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_registered_in_the_cli() -> None:
    assert "rng_service.cli.rngtest" in cli.COMMAND_MODULES


def test_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run([*SMALL, "--json"], capsys)
    report = json.loads(out)
    assert status == 0
    assert report["verdict"] == "PASS"
    assert report["parameters"] | {"elapsed_seconds": 0} == {
        "sequences": 2, "bits": 1_000_000, "shuffles": 300, "seeded": True, "elapsed_seconds": 0}
    battery = report["sp800_22"]
    assert battery["sequences"] == 2
    assert len(battery["rows"]) == 188
    assert {row["test"] for row in battery["rows"]} == set(sp800_22.TEST_NAMES)
    frequency = next(row for row in battery["rows"] if row["test"] == "Frequency")
    assert frequency["sequences"] == 2
    assert frequency["uniformity_p"] is None  # fewer than 55 sequences
    assert [s["df"] for s in report["shuffles"]] == [5253, 15861, 119]
    assert all(s["shuffles"] == 300 for s in report["shuffles"])


def test_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(SMALL, capsys)
    assert status == 0
    assert "NIST SP 800-22 rev1a: 2 sequences of 1000000 bits" in out
    assert "NonOverlappingTemplate    148" in out
    assert "card x position, 6 decks" in out
    assert out.rstrip().endswith("verdict: PASS")


def test_write_bits_is_the_tested_stream(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    base = ["--sequences", "1", "--bits", "1000003", "--shuffles", "0", "--json"]
    run([*base, "--seed", SEED, "--write-bits", str(first)], capsys)
    run([*base, "--seed", SEED, "--write-bits", str(second)], capsys)
    data = first.read_bytes()
    assert len(data) == 125_001  # every tested bit, the last byte partly
    assert data == second.read_bytes()  # the seed fixes the stream
    run([*base, "--seed", "6f" * 32, "--write-bits", str(second)], capsys)
    assert second.read_bytes() != data


def test_a_failing_generator_exits_one(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    def biased(n_bytes: int, seed: bytes | None) -> Iterator[bytes]:
        rng = np.random.default_rng(0)
        bits = (rng.random(n_bytes * 8) < 0.51).astype(np.uint8)
        yield np.packbits(bits).tobytes()

    monkeypatch.setattr(rngtest, "_bitstream", biased)
    status, out, _ = run([*SMALL, "--json"], capsys)
    report = json.loads(out)
    assert status == 1
    assert report["verdict"] == report["sp800_22"]["verdict"] == "FAIL"
    assert report["sp800_22"]["reasons"]
    frequency = next(row for row in report["sp800_22"]["rows"] if row["test"] == "Frequency")
    assert (frequency["passed"], frequency["proportion_ok"]) == (0, False)


@pytest.mark.parametrize(("argv", "message"), [
    (["--bits", "999999"], "--bits must be at least 1000000"),
    (["--sequences", "0"], "--sequences must be at least 1"),
    (["--shuffles", "-1"], "--shuffles must not be negative"),
    (["--seed", "xyz"], "--seed must be hexadecimal"),
    (["--seed", "ab"], "--seed must have at least 32 bytes"),
])
def test_bad_options(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(argv, capsys)
    assert status == 2
    assert message in err


def test_unwritable_bits_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run([*SMALL, "--write-bits", str(tmp_path / "missing" / "x.bin")], capsys)
    assert status == 2
    assert "cannot write" in err
