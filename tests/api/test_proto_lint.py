"""The API's .proto files pass `buf lint` with the STANDARD rules, and the check has teeth.

buf is installed by scripts/setup-tests (pinned, from npm, into .tools/); without it this fails
rather than skips: an unlinted API is not a passing one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

ROOT = Path(__file__).resolve().parents[2]
BUF = ROOT / ".tools" / "node_modules" / ".bin" / "buf"

BAD_PROTO = """syntax = "proto3";

package fairshoe.game.v1;

// A zero value without the _UNSPECIFIED suffix, and values without the enum's prefix.
enum Colour {
  RED = 0;
  BLACK = 1;
}
"""


def buf_lint(root: Path) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), f"{BUF} is missing: run ./scripts/setup-tests (it installs buf with npm)"
    return subprocess.run([str(BUF), "lint"], cwd=root, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_protos_are_lint_clean() -> None:
    result = buf_lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "STANDARD" in (ROOT / "buf.yaml").read_text()


def test_an_enum_without_unspecified_fails_the_lint(tmp_path: Path) -> None:
    shutil.copy(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    shutil.copytree(ROOT / "proto", tmp_path / "proto")
    (tmp_path / "proto" / "fairshoe" / "game" / "v1" / "colour.proto").write_text(BAD_PROTO)
    result = buf_lint(tmp_path)
    assert result.returncode != 0
    assert 'Enum zero value name "RED" should be suffixed with "_UNSPECIFIED"' in result.stdout
    assert "colour.proto" in result.stdout and "game.proto" not in result.stdout
