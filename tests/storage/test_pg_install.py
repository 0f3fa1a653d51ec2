"""How a fresh machine gets PostgreSQL for the tests, as CI runs it (root, no stdin): when the
server binaries are missing, `apt-get update` and then `apt-get install -y postgresql`, both with
stdin closed and no prompt; nothing when they are there or the tests are switched off. Checked
with a stand-in apt-get on the PATH that records its calls and "installs" fake binaries, never
with the real package manager."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from support import pg_server

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

ROOT = Path(__file__).resolve().parents[2]
ENSURE = ROOT / "scripts" / "ensure-postgres"

FAKE_APT = """#!/bin/sh
# records: its arguments, whether stdin is readable, the frontend; install makes the binaries
{{ echo "$*"; if [ -t 0 ]; then echo "stdin: terminal"; fi
  if read -r line; then echo "stdin: data"; fi; echo "frontend: $DEBIAN_FRONTEND"; }} >> {log}
case "$1" in install)
  mkdir -p {libdir}/17/bin
  for tool in initdb pg_ctl postgres; do printf '#!/bin/sh\\n' > {libdir}/17/bin/$tool;
    chmod +x {libdir}/17/bin/$tool; done;;
esac
"""

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="installs only as root, as CI runs")


def fake_apt(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A PATH directory with a stand-in apt-get, its log, and the libdir it installs into."""
    bindir, log, libdir = tmp_path / "bin", tmp_path / "apt.log", tmp_path / "lib"
    bindir.mkdir()
    apt = bindir / "apt-get"
    apt.write_text(FAKE_APT.format(log=log, libdir=libdir))
    apt.chmod(apt.stat().st_mode | stat.S_IXUSR)
    return bindir, log, libdir


def run_ensure(bindir: Path, libdir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # a PATH without any initdb: only the stand-in apt-get and the basic tools
    environ = {"PATH": f"{bindir}:/usr/bin:/bin", "FAIRSHOE_PG_LIBDIR": str(libdir), **env}
    if Path("/usr/bin/initdb").exists():  # pragma: no cover - Debian keeps it off the PATH
        pytest.skip("initdb on /usr/bin: cannot hide the real binaries")
    return subprocess.run(["bash", str(ENSURE)], env=environ, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False)


@root_only
def test_setup_installs_postgresql_when_missing_with_update_first_and_no_stdin(
        tmp_path: Path) -> None:
    bindir, log, libdir = fake_apt(tmp_path)
    done = run_ensure(bindir, libdir)
    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    calls = [line for line in lines if not line.startswith(("stdin", "frontend"))]
    assert calls == ["update -qq", "install -y -qq --no-install-recommends postgresql"]
    assert not any(line.startswith("stdin") for line in lines)  # closed: no prompt can block
    assert lines.count("frontend: noninteractive") == 2
    # a second run finds the binaries: no apt-get at all
    log.unlink()
    assert run_ensure(bindir, libdir).returncode == 0
    assert not log.exists()


def test_setup_does_nothing_when_postgresql_tests_are_off(tmp_path: Path) -> None:
    bindir, log, libdir = fake_apt(tmp_path)
    assert run_ensure(bindir, libdir, FAIRSHOE_TEST_POSTGRES="0").returncode == 0
    assert not log.exists()


@root_only
def test_the_fixture_installs_once_when_missing(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/support/pg_server.py's fallback for a bare pytest: the same two commands, stdin closed,
    under a lock (xdist workers start together), then the binaries found."""
    bindir, log, libdir = fake_apt(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setattr(pg_server, "INSTALL_LOCK", tmp_path / "install.lock")
    installed = libdir / "17" / "bin"
    monkeypatch.setattr(pg_server, "find_bindir",
                        lambda: installed if (installed / "initdb").exists() else None)
    assert pg_server.ensure_bindir() == installed
    lines = log.read_text().splitlines()
    assert [line for line in lines if not line.startswith(("stdin", "frontend"))] == [
        "update -qq", "install -y -qq --no-install-recommends postgresql"]
    assert not any(line.startswith("stdin") for line in lines)
    log.unlink()
    assert pg_server.ensure_bindir() == installed and not log.exists()
