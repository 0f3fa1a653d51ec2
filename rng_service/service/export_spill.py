"""The leaves a time-range export holds, kept on disk rather than in memory.

A time-range export (:meth:`rng_service.service.audit.AuditService.export_collection`) lists in
log/leaves.jsonl, in leaf index order, the leaf of every envelope it wrote and the key and shoe
commitment leaves those depend on. The envelopes come oldest first, not in index order, and the
leaves can only be looked up once the export's checkpoint is signed, after the last envelope:
so every (kind, id) seen must be kept until then, and then every index found, sorted. At over
a hundred bytes each as Python objects, a million records would be over a hundred megabytes (and
with their entries and proofs, gigabytes); here they
go to SQLite's own temporary database (the name ``""``: a file in the temporary directory that
SQLite unlinks as it creates it, so an export killed mid-way leaves nothing behind), whose
primary keys deduplicate and sort them, so the export's memory is the page cache's, whatever
the number of records.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Final

from rng_service.service.ports import LeafKind

#: the spill's page cache, KiB: what it holds in memory at most (SQLite's default; 8 MB was no
#: faster on 200,000 leaves, the file's pages being in the OS's cache anyway)
CACHE_KIB: Final = 2048


class LeafSpill:
    """A set of (kind, id) leaf keys, then a set of leaf indices, on disk. A context manager:
    the file, unlinked from the start, is gone once closed."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None)
        try:
            # a scratch file: nothing survives a crash, so no journal and no fsync
            self._db.executescript(f"""
                PRAGMA journal_mode = OFF;
                PRAGMA synchronous = OFF;
                PRAGMA temp_store = FILE;
                PRAGMA cache_size = -{CACHE_KIB};
                CREATE TABLE held (kind TEXT NOT NULL, ident TEXT NOT NULL,
                                   PRIMARY KEY (kind, ident)) WITHOUT ROWID;
                CREATE TABLE found (leaf_index INTEGER PRIMARY KEY);
            """)
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> LeafSpill:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (unlinked already, so its space is freed)."""
        self._db.close()

    def hold(self, keys: Iterable[tuple[LeafKind, str]]) -> None:
        """Add (kind, id) keys (one already held is kept once)."""
        with self._transaction():
            self._db.executemany("INSERT OR IGNORE INTO held VALUES (?, ?)",
                                 ((str(kind), ident) for kind, ident in keys))

    def held(self, page: int) -> Iterator[tuple[LeafKind, list[str]]]:
        """The keys held, a page of at most ``page`` ids of one kind at a time (kinds and ids in
        text order; read by key, so :meth:`find` may write between pages)."""
        after = ("", "")
        while True:
            rows = self._db.execute("SELECT kind, ident FROM held WHERE (kind, ident) > (?, ?) "
                                    "ORDER BY kind, ident LIMIT ?", (*after, page)).fetchall()
            if not rows:
                return
            kinds = sorted({kind for kind, _ in rows})
            for kind in kinds:
                yield LeafKind(kind), [ident for k, ident in rows if k == kind]
            after = rows[-1]

    def find(self, indices: Iterable[int]) -> None:
        """Add leaf indices (one already found is kept once)."""
        with self._transaction():
            self._db.executemany("INSERT OR IGNORE INTO found VALUES (?)",
                                 ((index,) for index in indices))

    def first(self) -> int | None:
        """The smallest index found, or None if none was."""
        row = self._db.execute("SELECT MIN(leaf_index) FROM found").fetchone()
        return None if row[0] is None else int(row[0])

    def indices(self, page: int) -> Iterator[list[int]]:
        """The indices found, ascending, a page of at most ``page`` at a time."""
        after = -1
        while True:
            rows = self._db.execute("SELECT leaf_index FROM found WHERE leaf_index > ? "
                                    "ORDER BY leaf_index LIMIT ?", (after, page)).fetchall()
            if not rows:
                return
            yield [int(index) for index, in rows]
            after = rows[-1][0]

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction (a batch of inserts is one commit, not one each)."""
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
