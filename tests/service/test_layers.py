"""Imports run one way (docs/design.md): the use cases never import storage, the API or the CLI; the
storage implements the service's ports and imports nothing else of the service."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rng_service"


def imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[path.name] = names
    return found


def test_service_imports_no_outer_layer() -> None:
    banned = ("rng_service.storage", "rng_service.api", "rng_service.cli", "rng_service.lab")
    for name, modules in imports("service").items():
        assert not [m for m in modules if m.startswith(banned)], name


def test_storage_sees_only_the_ports() -> None:
    for name, modules in imports("storage").items():
        service = {m for m in modules if m.startswith("rng_service.service")}
        assert service <= {"rng_service.service.ports"}, name
        assert not [m for m in modules if m.startswith(("rng_service.api", "rng_service.cli"))]
