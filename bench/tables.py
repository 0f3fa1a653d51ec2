"""Printing benchmark tables: right-aligned columns sized to their widest cell."""

from __future__ import annotations

from collections.abc import Sequence


def print_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
