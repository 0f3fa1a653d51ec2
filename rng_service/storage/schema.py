"""The versioned schema both databases share: one migration history, one SQL file per dialect.

``migrations/<dialect>/NNNN_name.sql`` holds migration ``NNNN`` written for that database
(``sqlite`` or ``postgresql``). Every dialect has the same versions under the same file names, so
``schema_version`` reads the same on either database and a dump can be compared row for row.
Adding a migration is adding one file per dialect with the next number; each storage applies the
ones its database lacks, in order, each in its own transaction with its ``schema_version`` row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Final, Literal, get_args

Dialect = Literal["sqlite", "postgresql"]
DIALECTS: Final[tuple[Dialect, ...]] = get_args(Dialect)

_MIGRATION_NAME = re.compile(r"(\d{4})_[a-z0-9_]+\.sql\Z")


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its version, its file name and the dialect's SQL."""

    version: int
    name: str
    sql: str


def migrations(dialect: Dialect) -> list[Migration]:
    """The bundled migrations of ``dialect``, in version order, numbered 1..n without gaps."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r} (known: {', '.join(DIALECTS)})")
    folder = resources.files("rng_service.storage").joinpath("migrations", dialect)
    found = []
    for item in folder.iterdir():
        match = _MIGRATION_NAME.match(item.name)
        if match:
            found.append(Migration(int(match.group(1)), item.name,
                                   item.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{dialect} migrations must be numbered 1..n without gaps, "
                           f"found {versions}")
    return found


def history(dialect: Dialect) -> list[tuple[int, str]]:
    """(version, file name) of every migration of ``dialect``: what ``schema_version`` holds
    once all are applied."""
    return [(m.version, m.name) for m in migrations(dialect)]
