"""The Go load generator (bench/loadgen): built from Debian's packages, offline, and run.

Its Go code for the protos is generated at build time, never committed: ``protoc`` (Debian's
protobuf-compiler) with Debian's protoc-gen-go and protoc-gen-go-grpc writes it from ``proto/``
into the build directory, so it cannot fall behind the protos (the Python stubs are made the
same way, build_support/proto_stubs.py), and the repository holds no generated Go to review.
The program is then compiled in GOPATH mode (``GO111MODULE=off``, ``GOPROXY=off``: nothing is
fetched) against Debian's golang-google-grpc-dev and golang-google-protobuf-dev sources under
``/usr/share/gocode``, as tests/support/go_tlogreader.py builds the tiles' reader.
scripts/setup-tests installs all of them.

A build is cached under the temporary directory by the digest of what goes into it (the Go
sources, the protos, the tools' versions): a second build of the same tree is a lookup. Used by
bench/bench_rpc_cpu.py (``--client go``) and tests/clients/test_go_loadgen.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.go_tlogreader import go_env

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "bench" / "loadgen"
PROTO = ROOT / "proto"
GOCODE = Path("/usr/share/gocode/src")
#: the import path the generated packages get (protoc-gen-go's M options: the protos carry no
#: go_package, which is a Go client's concern, not the published API's)
GEN = "fairshoe.invalid/gen"
MAIN = "fairshoe.invalid/loadgen"
TOOLS = ("go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc")
#: gRPC-Go, Go protobuf (APIv2), and golang/protobuf 1.5 (1.3 has no registry.go: gRPC-Go built
#: with it compiles, then panics on the first answer)
NEEDED = (GOCODE / "google.golang.org" / "grpc", GOCODE / "google.golang.org" / "protobuf",
          GOCODE / "github.com" / "golang" / "protobuf" / "proto" / "registry.go")
CACHE = Path(tempfile.gettempdir()) / "fairshoe-go-loadgen"


WELL_KNOWN = Path("/usr/include/google/protobuf/timestamp.proto")  # libprotobuf-dev's


def _missing() -> str:
    return ("the Go load generator needs golang-go, golang-google-grpc-dev, "
            "golang-google-protobuf-dev, golang-github-golang-protobuf-1-5-dev, protoc-gen-go, "
            "protoc-gen-go-grpc, protobuf-compiler and libprotobuf-dev from Debian: run "
            "scripts/setup-tests")


def _tools() -> dict[str, str]:
    found = {tool: shutil.which(tool) for tool in TOOLS}
    if not all(found.values()) or not all(p.exists() for p in (*NEEDED, WELL_KNOWN)):
        raise RuntimeError(_missing())
    return {tool: str(path) for tool, path in found.items() if path}


def _digest(tools: dict[str, str]) -> str:
    """Of everything a build depends on: the Go sources, the protos, the tools' versions."""
    digest = hashlib.sha256()
    for path in sorted([*SOURCE.glob("*.go"), *PROTO.rglob("*.proto")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    for flag, tool in (("version", "go"), ("--version", "protoc"), ("--version", "protoc-gen-go"),
                       ("--version", "protoc-gen-go-grpc")):
        version = subprocess.run([tools[tool], flag], capture_output=True, text=True,
                                 check=False, timeout=60)
        digest.update(version.stdout.encode() + b"\0")
    return digest.hexdigest()[:16]


def _generate(tools: dict[str, str], src: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    options = []
    for proto in protos:  # fairshoe/round/v1/round.proto -> .../fairshoe/round/v1;roundv1
        package = str(Path(proto).parent)
        mapping = f"M{proto}={GEN}/{package};{Path(package).parent.name}v1"
        options += [f"--go_opt={mapping}", f"--go-grpc_opt={mapping}"]
    done = subprocess.run(
        [tools["protoc"], f"-I{PROTO}", "-I/usr/include", f"--go_out={src}",
         f"--go-grpc_out={src}", f"--plugin=protoc-gen-go={tools['protoc-gen-go']}",
         f"--plugin=protoc-gen-go-grpc={tools['protoc-gen-go-grpc']}", *options, *protos],
        capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"protoc failed:\n{done.stderr}")


def build() -> Path:
    """The loadgen binary for this tree: from the cache, or built now (about 20 s of CPU the
    first time, Go's build cache aside)."""
    tools = _tools()
    binary = CACHE / _digest(tools) / "loadgen"
    if binary.exists():
        return binary
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
    try:
        src = work / "src"
        src.mkdir()
        _generate(tools, src)
        main = src / MAIN
        main.mkdir(parents=True)
        for path in SOURCE.glob("*.go"):
            shutil.copy(path, main)
        env = go_env() | {"GOPATH": f"{work}:{GOCODE.parent}"}
        done = subprocess.run([tools["go"], "build", "-o", str(work / "loadgen"), "."], cwd=main,
                              env=env, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"go build failed:\n{done.stderr}")
        binary.parent.mkdir(exist_ok=True)
        os.replace(work / "loadgen", binary)  # atomic: a concurrent build finds it whole
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def run(binary: Path, address: str, *args: str, timeout: float = 300) -> tuple[int, dict[str, Any],
                                                                               str]:
    """Run the loadgen to its end: its exit status, its result (the last line) and its stderr."""
    done = subprocess.run([str(binary), "-address", address, *args], capture_output=True,
                          text=True, timeout=timeout, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    result = lines[-1] if lines and lines[-1].get("event") == "result" else {}
    return done.returncode, result, done.stderr


def argv(binary: Path, address: str, args: Sequence[str]) -> list[str]:
    """The command line of a run (for a caller that reads its events as they come)."""
    return [str(binary), "-address", address, *args]


# `PYTHONPATH=tests .venv/bin/python -m support.go_loadgen`: build, print the path
if __name__ == "__main__":
    print(build())
