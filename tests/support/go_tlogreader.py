"""Go's golang.org/x/mod/sumdb/tlog as the tiles' reader (tests/log/tlogreader/main.go).

Built with Debian's golang-go against Debian's golang-golang-x-mod-dev sources under
``/usr/share/gocode`` (``GO111MODULE=off``, ``GOPROXY=off``: nothing is fetched; scripts/setup-tests
installs both when missing), once per test session, with Go's build cache in a fixed temporary
directory so that a later session rebuilds in moments.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SOURCE = TESTS / "log" / "tlogreader"
GOPATH = Path("/usr/share/gocode")
X_MOD = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb" / "tlog"


def go_env() -> dict[str, str]:
    """The environment of a GOPATH build from Debian's Go sources, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GO")}
    env.update({"GOPATH": str(GOPATH), "GO111MODULE": "off", "GOPROXY": "off", "GOFLAGS": "",
                "GOTOOLCHAIN": "local",
                "GOCACHE": str(Path(tempfile.gettempdir()) / "fairshoe-go-build-cache")})
    return env


def build_tlogreader(into: Path) -> Path:
    """Build the reader into ``into``; its path. A missing Go or x/mod says how to get them."""
    go = shutil.which("go")
    assert go is not None and X_MOD.is_dir(), (
        "the tiles' Go reader needs golang-go and golang-golang-x-mod-dev: run "
        "scripts/setup-tests")
    binary = into / "tlogreader"
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=SOURCE, env=go_env(),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return binary


def run_tlogreader(binary: Path, prefix: str, vkey: str, *, old: Path | None = None,
                   record: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run the reader on the log at URL ``prefix`` (ending in ``/``) with its ``vkey``."""
    argv = [str(binary), "-prefix", prefix, "-vkey", vkey]
    if old is not None:
        argv += ["-old", str(old)]
    if record is not None:
        argv += ["-record", str(record)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
