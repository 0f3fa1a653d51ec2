"""Each package shows a public face: its ``__init__`` lists in ``__all__`` what is meant for use
outside it (modules, or names it defines or re-exports), and nothing outside the package, in the
product or in ``bench/``, reaches past that list into its internals. ``bench/`` imports no
underscore name of the product. Read from the source (``ast``), nothing imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("rng_service", "game_math")
GENERATED = "proto_gen"  # protoc's modules: their face is the protos'


def packages() -> dict[str, Path]:
    """Every package of the product (dotted name -> its directory), generated code aside."""
    return {".".join(init.parent.relative_to(ROOT).parts): init.parent
            for top in PRODUCT for init in (ROOT / top).rglob("__init__.py")
            if GENERATED not in init.parts}


def declared(directory: Path) -> list[str] | None:
    """The package's ``__all__`` (a literal list of strings), None when it has none."""
    tree = ast.parse((directory / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert node.value is not None
            return [str(item) for item in ast.literal_eval(node.value)]
    return None


def children(directory: Path) -> set[str]:
    """The package's modules and subpackages."""
    return ({p.stem for p in directory.glob("*.py") if p.stem != "__init__"}
            | {d.name for d in directory.iterdir() if (d / "__init__.py").exists()})


def defined(directory: Path) -> set[str]:
    """The names the package's ``__init__`` binds (defines or imports)."""
    tree = ast.parse((directory / "__init__.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def imports(top: str) -> Iterator[tuple[str, str, list[str]]]:
    """(importing module, imported module, names taken from it) for every absolute import of
    the product made by the files under ``top``."""
    for path in (ROOT / top).rglob("*.py"):
        if GENERATED in path.parts:
            continue
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield module, node.module, [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield module, alias.name, []


def test_every_package_declares_its_public_face() -> None:
    for name, directory in packages().items():
        face = declared(directory)
        assert face is not None, f"{name}/__init__.py has no __all__"
        unknown = set(face) - children(directory) - defined(directory)
        assert not unknown, f"{name}.__all__ names what it does not have: {sorted(unknown)}"


def test_nothing_outside_a_package_reaches_its_internals() -> None:
    found = packages()
    faces = {name: set(declared(directory) or ()) for name, directory in found.items()}
    strays = []
    for top in (*PRODUCT, "bench"):
        for importer, imported, names in imports(top):
            dotted = [f"{imported}.{n}" for n in names] + [imported]
            for target in dotted:
                parts = target.split(".")
                for depth in range(1, len(parts)):
                    package, child = ".".join(parts[:depth]), parts[depth]
                    inside = (importer + ".").startswith(package + ".")
                    if package in faces and not inside and child not in faces[package]:
                        strays.append(f"{importer} imports {package}.{child}")
    assert sorted(set(strays)) == []


def test_bench_imports_no_private_name() -> None:
    private = [f"{importer}: {imported}.{name}"
               for importer, imported, names in imports("bench")
               if imported.split(".")[0] in PRODUCT
               for name in names + imported.split(".") if name.startswith("_")
               and not name.startswith("__")]
    assert private == []
