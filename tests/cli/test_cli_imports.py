"""Parsing the command line loads no heavy library: each command loads what it uses, when run.

Every command module registers its subcommands on every invocation, so a heavy import at the top
of any of them would be paid by every command, ``--help`` included. Each case runs ``fairshoe``
in a fresh interpreter (this process has imported everything already) and lists the heavy
top-level packages it loaded. Timings are bench/bench_cli.py's business; this checks behaviour.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rng_service.cli import help_values
from rng_service.log import DEFAULT_ORIGIN
from rng_service.records import schema
from rng_service.rng import shoe

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

HEAVY = ("numpy", "scipy", "matplotlib", "grpc", "cryptography", "google.protobuf", "rich")

# Runs the command line as the console script does, then reports the heavy packages loaded.
PROBE = """
import json, sys
from rng_service.cli.main import main
heavy = json.loads(sys.argv[1])
try:
    main(sys.argv[2:])
finally:
    print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""

REPLAY_SCRIPT = {"game": "snap", "hands": [{"bet": 1000}],
                 "shoe": ["8S", "6H", "8D", "TC", "3D", "9S", "KD", "5C"], "actions": ["stand"]}


def heavy_modules_loaded(*argv: str) -> list[str]:
    """The packages of HEAVY that ``fairshoe ARGV`` imported; the command must succeed."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), *argv],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["rules", "show", "snap"],
    ["par", "--help"],
    ["simulate", "--help"],
    ["serve", "--help"],
    ["health", "--help"],
    ["keys", "list", "--help"],
    ["rng-test", "--help"],
    ["shoe", "--help"],
    ["collect", "rounds", "--help"],
    ["audit", "verify", "--help"],
    ["play", "--help"],
    ["log", "prove", "--help"],
    ["log", "verify", "--help"],
], ids=" ".join)
def test_parsing_loads_no_heavy_library(argv: list[str]) -> None:
    assert heavy_modules_loaded(*argv) == []


def test_replay_loads_no_heavy_library(tmp_path: Path) -> None:
    script = tmp_path / "round.json"
    script.write_text(json.dumps(REPLAY_SCRIPT), encoding="utf-8")
    assert heavy_modules_loaded("replay", str(script)) == []


def test_par_json_loads_the_analysis_but_not_the_charts() -> None:
    assert heavy_modules_loaded("par", "snap", "--json") == ["numpy"]


def test_help_quotes_the_defining_modules_figures() -> None:
    """The help texts quote copies (help_values) so as not to import their modules."""
    assert help_values.SEED_BYTES == shoe.SEED_BYTES
    assert help_values.INSURANCE_RATE == schema.INSURANCE_RATE
    assert help_values.LOG_ORIGIN == DEFAULT_ORIGIN
