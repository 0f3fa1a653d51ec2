"""Build hook: the gRPC stubs are generated from ``proto/`` whenever the package is built.

Everything else about the package is in ``pyproject.toml``. Without this, ``pip install .`` (or
``pip install git+...``) gave a ``fairshoe`` whose every command failed on the missing
``rng_service.api.proto_gen``: the stubs are not committed. grpcio-tools, which generates them, is
a build requirement (``[build-system]``), not a runtime dependency.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

# the generator is shared with scripts/gen-proto and is not part of the installed packages
sys.path.insert(0, str(Path(__file__).resolve().parent / "build_support"))
from proto_stubs import PACKAGE, generate


class BuildPyWithStubs(build_py):
    """``build_py`` that also writes the gRPC stubs: into the build directory for a wheel, into
    the source tree for an editable install (which imports the packages from there)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            out = Path(self.get_package_dir(PACKAGE.rpartition(".")[0])) / "proto_gen"
        else:
            out = Path(self.build_lib).joinpath(*PACKAGE.split("."))
        generate(out)


setup(cmdclass={"build_py": BuildPyWithStubs})
