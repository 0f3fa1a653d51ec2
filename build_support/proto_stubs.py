"""Generates the Python gRPC stubs from ``proto/`` at build time (``setup.py``) and for
development (``scripts/gen-proto``): one generator, so an installed package and a dev tree hold
the same stubs.

It lives outside the packages because it needs grpcio-tools, a build dependency only: the
installed service imports the generated modules, never this one.

    python build_support/proto_stubs.py        # regenerate rng_service/api/proto_gen in place
"""

from __future__ import annotations

import re
import shutil
import sys
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
#: where the stubs live inside the installed packages, and the import prefix they get
PACKAGE = "rng_service.api.proto_gen"


def generate(out_dir: Path, proto_dir: Path = PROTO_DIR, package: str = PACKAGE) -> list[Path]:
    """Writes the stubs (``*_pb2.py``, ``*_pb2_grpc.py``, ``*_pb2.pyi``) of every ``.proto``
    under ``proto_dir`` into ``out_dir``, replacing what was there; returns the files written.

    protoc emits absolute imports of the proto packages (``from fairshoe.game.v1 import ...``):
    they are rewritten under ``package``, which ``out_dir`` must be, and every directory gets an
    ``__init__.py`` so the stubs import as regular subpackages."""
    from grpc_tools import protoc  # noqa: PLC0415  (a build dependency, not a runtime one)

    protos = sorted(str(p.relative_to(proto_dir)) for p in proto_dir.rglob("*.proto"))
    if not protos:
        raise RuntimeError(f"no .proto files under {proto_dir}")
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    well_known = resources.files("grpc_tools") / "_proto"  # google/protobuf/*.proto
    status = protoc.main(["grpc_tools.protoc", f"-I{proto_dir}", f"-I{well_known}",
                          f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                          f"--pyi_out={out_dir}", *protos])
    if status != 0:
        raise RuntimeError(f"protoc failed (status {status}) on {', '.join(protos)}")
    _rewrite_imports(out_dir, _proto_roots(protos), package)
    _add_init_files(out_dir)
    return sorted(p for p in out_dir.rglob("*") if p.is_file())


def _proto_roots(protos: list[str]) -> set[str]:
    """The top-level proto package directories (``fairshoe``): the imports to rewrite."""
    return {Path(p).parts[0] for p in protos}


def _rewrite_imports(out_dir: Path, roots: set[str], package: str) -> None:
    pattern = re.compile(rf"^from ({'|'.join(map(re.escape, sorted(roots)))})([. ])", re.M)
    for path in [*out_dir.rglob("*.py"), *out_dir.rglob("*.pyi")]:
        text = path.read_text(encoding="utf-8")
        path.write_text(pattern.sub(rf"from {package}.\1\2", text), encoding="utf-8")


def _add_init_files(out_dir: Path) -> None:
    for directory in [out_dir, *(p for p in out_dir.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()


def main() -> None:
    """Regenerates the stubs inside this source tree."""
    out = ROOT.joinpath(*PACKAGE.split("."))
    written = generate(out)
    print(f"{len(written)} files in {out.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
