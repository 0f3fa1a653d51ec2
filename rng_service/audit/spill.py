"""What the audit holds of a whole collection, kept off the heap, so that its memory stays flat in
the number of records.

A collection is one file per record, round records named by their id, so nothing in the layout
groups a shoe's rounds: the audit reads every file once to learn what it claims, then checks the
rounds shoe by shoe. What that needs of every record is kept here rather than in Python objects:

* :class:`SortedRuns`: items given back sorted (an external merge sort, stable): at most
  :data:`RUN_ITEMS` of them in memory, the rest in sorted runs pickled to temporary files. The
  rounds' claims are sorted by shoe with it, and a directory's names (:func:`sorted_names`);
* :class:`SpillDb`: a temporary SQLite database (on disk, past a page cache of
  :data:`_CACHE_KIB`) for what is looked up by key: the first record of
  each round id (:class:`FirstSeen`, whose filter of a megabyte spares the look-up of an id never
  put), the envelope files read and the leaves ``leaves.jsonl``
  lists (:mod:`rng_service.audit.log_audit`), the shoe reveals and the shoe commitments in the
  order read (:class:`Kept`: a game that reshuffles every round has one of each per record), and
  every commitment's line in the walk's order (:class:`Appended`).

What the audit's one serial process writes per record is batched (``executemany``, a ``IN``
query for a piece's round ids): a statement per record would cost it more than the record's
bookkeeping itself, and it is the part of the audit that more workers do not speed up.

Strings are stored as their UTF-8 bytes with lone surrogates passed through (a file name that is
not UTF-8 reaches Python as surrogate escapes), and values pickled, so that whatever was put in
comes back equal. Only the process that made a store uses it: the audit's forked workers never
touch it, and leave without closing it (``os._exit``).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import pickle
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final, Generic, TypeVar

from rng_service.core import sqlite_binding

T = TypeVar("T")
U = TypeVar("U")

#: items of a SortedRuns held in memory at once (and so the size of one run on disk)
RUN_ITEMS: Final = 20_000
#: and the most bytes they may hold, as their adder counts them (a round's bytes travel with it)
RUN_BYTES: Final = 8 * 1024 * 1024
#: runs of one size merged into one once there are this many: the runs (and open files) of a
#: SortedRuns stay fewer than this many per tier, a few tiers for any collection, each item
#: rewritten once per tier
MERGE_RUNS: Final = 16
#: the SQLite page cache, KiB: what the store holds in memory whatever it holds on disk
_CACHE_KIB: Final = 8 * 1024
#: writes a table buffers before it sends them in one statement (``executemany``): a statement
#: per record would cost the audit's one serial process more than the record's own bookkeeping
_BATCH: Final = 512
#: keys looked up in one ``IN (...)`` query (SQLite allows at least 999 parameters)
_LOOKUP: Final = 500
#: the bits of :class:`FirstSeen`'s filter of the keys it holds (a megabyte, whatever the
#: collection: past some millions of keys most bits are set, and most keys are looked up)
_SEEN_BITS: Final = 1 << 23


# bytes (and None) bound without sqlite3's adaptation protocol, as the service's storage binds
# them (:mod:`rng_service.core.sqlite_binding`). What is written for every record is bound as a
# bytearray instead (:func:`_blob`), which is not adapted at all: the same bytes, stored as the
# same BLOB (read back as bytes).
sqlite_binding.bind_as_they_are()


_blob: Final = bytearray  # a parameter bound without adaptation, as a BLOB of its bytes


def _key_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _keys(cursor: sqlite3.Cursor) -> Iterator[str]:
    """The keys a query found, read in batches, never all at once."""
    while batch := cursor.fetchmany(1024):
        yield from (_text(key) for (key,) in batch)


class SortedRuns(Generic[T]):
    """Items added in any order, given back by :meth:`drain` sorted by ``key`` (stably: items of
    equal keys in the order they were added), as ``sorted`` would, holding at most ``run`` of
    them in memory (default :data:`RUN_ITEMS`)."""

    def __init__(self, key: Callable[[T], Any] | None = None, run: int = 0) -> None:
        self._key = key
        self._run = run or RUN_ITEMS
        self._buffer: list[T] = []
        self._bytes = 0  # what the items buffered hold, as added
        self._runs: list[IO[bytes]] = []
        self._tiers: list[int] = []  # each run's tier: 0 for a run of the buffer, then 1, ...
        self.count = 0

    def add(self, item: T, size: int = 0) -> None:
        """One more item, holding ``size`` bytes beside its own few (the buffer spills at
        :data:`RUN_ITEMS` items or :data:`RUN_BYTES` of these)."""
        self._buffer.append(item)
        self.count += 1
        self._bytes += size
        if len(self._buffer) >= self._run or self._bytes >= RUN_BYTES:
            self._spill()

    def _spill(self) -> None:
        self._buffer.sort(key=self._key)
        self._runs.append(self._written(self._buffer))
        self._tiers.append(0)
        self._buffer, self._bytes = [], 0
        # the last MERGE_RUNS runs of one tier become one run of the next: they are the newest,
        # so merging them keeps the runs in the order their items were added (a stable sort)
        while (len(self._tiers) >= MERGE_RUNS
               and len(set(self._tiers[-MERGE_RUNS:])) == 1):
            tier = self._tiers[-1]
            merged = self._runs[-MERGE_RUNS:]
            del self._runs[-MERGE_RUNS:], self._tiers[-MERGE_RUNS:]
            self._runs.append(self._written(
                heapq.merge(*map(self._read, merged), key=self._key)))  # type: ignore[arg-type]
            self._tiers.append(tier + 1)

    @staticmethod
    def _written(items: Iterable[T]) -> IO[bytes]:
        """A run: ``items`` pickled one after another to a temporary file, read from its start."""
        run = tempfile.TemporaryFile(prefix="fairshoe-audit-")  # noqa: SIM115 (closed by _read)
        for item in items:
            run.write(pickle.dumps(item, pickle.HIGHEST_PROTOCOL))
        run.seek(0)
        return run

    @staticmethod
    def _read(run: IO[bytes]) -> Iterator[T]:
        with run:
            while True:
                try:
                    yield pickle.load(run)
                except EOFError:
                    return

    def drain(self) -> Iterator[T]:
        """Every item, sorted; the store is empty once they are all taken."""
        self._buffer.sort(key=self._key)
        last, self._buffer, self._bytes = self._buffer, [], 0
        runs, self._runs, self._tiers = self._runs, [], []
        if not runs:
            yield from last
            return
        # heapq.merge is stable across its inputs in their order: the runs were made in order,
        # and the items still in memory are the last of them
        yield from heapq.merge(*(self._read(run) for run in runs), last,
                               key=self._key)  # type: ignore[arg-type]

    def close(self) -> None:
        """Drop what is held (the runs' files are deleted)."""
        for run in self._runs:
            run.close()
        self._runs, self._tiers, self._buffer, self._bytes = [], [], [], 0


def sorted_names(directory: Path) -> Iterator[str]:
    """The names in ``directory``, sorted as ``sorted(directory.iterdir())`` sorts its entries,
    without holding them all: listed in full first (an :class:`OSError` is raised before any
    name is given), then merged from sorted runs."""
    return (name for name, _ in sorted_entries(directory))


def sorted_entries(directory: Path) -> Iterator[tuple[str, bool]]:
    """:func:`sorted_names`, each with whether the listing said it is a regular file (not a
    link): the directory's own file types, which spare the walk a ``stat`` per record (False:
    not known to be one, so the walk looks)."""
    entries: SortedRuns[tuple[str, bool]] = SortedRuns()
    try:
        with os.scandir(directory) as listing:
            for entry in listing:
                try:
                    regular = entry.is_file(follow_symlinks=False)
                except OSError:
                    regular = False
                entries.add((entry.name, regular))
    except BaseException:
        entries.close()
        raise
    return entries.drain()


class SpillDb:
    """A temporary SQLite file for what the audit looks up by key: SQLite's own temporary
    database (the name ``""``), a file in the temporary directory that is unlinked as it is
    made, so nothing is left behind even if the audit is killed."""

    def __init__(self) -> None:
        # a scratch file: no journal, no syncing; it is never read after the audit
        self.db = sqlite3.connect("", isolation_level=None)
        for pragma in ("temp_store = FILE", "journal_mode = OFF", "synchronous = OFF",
                       f"cache_size = -{_CACHE_KIB}"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.execute("BEGIN")  # one transaction: nothing is committed, nothing synced
        self._tables = 0

    def table(self, columns: str, *, without_rowid: bool = False) -> str:
        """A new table of ``columns`` (SQL), its name. ``without_rowid``: a table of small
        rows looked up by their primary key alone, kept in that key's B-tree only (a rowid
        table writes its rows to a second one, and a row costs more the more B-trees it is
        written to)."""
        self._tables += 1
        name = f"t{self._tables}"
        self.db.execute(f"CREATE TABLE {name} ({columns})"
                        + (" WITHOUT ROWID" if without_rowid else ""))
        return name

    def close(self) -> None:
        """Close the store (its file is gone with it)."""
        with contextlib.suppress(sqlite3.Error):
            self.db.close()


class FirstSeen:
    """The first value given for each key (the first record of a round id, in the audit's
    order): in a :class:`SpillDb`, or in memory without one."""

    def __init__(self, spill: SpillDb | None = None) -> None:
        self._memory: dict[str, str] = {}
        self._db = spill.db if spill is not None else None
        self._table = (spill.table("key BLOB PRIMARY KEY, value BLOB", without_rowid=True)
                       if spill else "")
        #: a bit for each key put in the store, at its hash (:data:`_SEEN_BITS` of them, some
        #: shared): a key whose bit is clear was never put, and is not looked up. Every round
        #: id is new but for a duplicate, and the look-up of one costs about as much as its
        #: insert
        self._bits = bytearray(_SEEN_BITS // 8) if spill else bytearray()
        #: the keys claimed (:meth:`claim`): a bit at each one's hash, and a bit where a second
        #: claim fell on a bit set (made at the first claim)
        self._claimed = bytearray()
        self._again = bytearray()

    def first(self, key: str, value: str) -> str:
        """The value first given for ``key``: ``value`` itself if ``key`` is new."""
        return self.first_many([(key, value)])[0]

    def claim(self, key: str) -> None:
        """``key`` may be given later, by the one claiming it (a round's id as pass 1 read it;
        :meth:`first_many`'s ``claimed``). Every key given with its claim must be claimed before
        any is given."""
        if not self._claimed:
            self._claimed, self._again = bytearray(_SEEN_BITS // 8), bytearray(_SEEN_BITS // 8)
        at = hash(key) & (_SEEN_BITS - 1)
        byte, bit = at >> 3, 1 << (at & 7)
        if self._claimed[byte] & bit:
            self._again[byte] |= bit
        else:
            self._claimed[byte] |= bit

    def _claimed_once(self, key: str) -> bool:
        """No other claim fell on ``key``'s bit: if ``key`` was claimed, it was claimed once."""
        at = hash(key) & (_SEEN_BITS - 1)
        bit = 1 << (at & 7)
        return bool(self._claimed[at >> 3] & bit) and not self._again[at >> 3] & bit

    def first_many(self, pairs: Sequence[tuple[str, str]],
                   claimed: Sequence[str] | None = None) -> list[str]:
        """:meth:`first` of each ``(key, value)`` in turn (a key repeated among them is judged
        against the first of them), with a query and an insert for all of them together.

        ``claimed``: the key each pair's giver claimed (:meth:`claim`). A pair whose key is the
        one its giver claimed, a key no other giver claimed, is its own first, and is neither
        looked up nor kept: no pair given before or after it can have its key (a round id
        repeated nowhere in a collection, as every one but a duplicate's, is not written to the
        store, a row of SQLite's a record)."""
        if claimed is None or not self._claimed:
            return self._first_many(pairs)
        out = [value for _, value in pairs]
        rest = [i for i, ((key, _), claim) in enumerate(zip(pairs, claimed, strict=True))
                if key != claim or not self._claimed_once(key)]
        for i, first in zip(rest, self._first_many([pairs[i] for i in rest]), strict=True):
            out[i] = first
        return out

    def _first_many(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """:meth:`first_many` of pairs each looked up (and kept, if new)."""
        if not pairs:
            return []
        if self._db is None:
            return [self._memory.setdefault(key, value) for key, value in pairs]
        raws = [_key_bytes(key) for key, _ in pairs]
        known: dict[bytes, str] = {}
        bits, mask = self._bits, _SEEN_BITS - 1
        unique = [raw for raw in dict.fromkeys(raws)
                  if bits[(hash(raw) & mask) >> 3] & (1 << (hash(raw) & 7))]
        for at in range(0, len(unique), _LOOKUP):
            chunk = unique[at:at + _LOOKUP]
            marks = ", ".join("?" * len(chunk))
            known.update((raw, _text(value)) for raw, value in self._db.execute(
                f"SELECT key, value FROM {self._table} WHERE key IN ({marks})",
                list(map(_blob, chunk))))
        new: dict[bytes, str] = {}
        out = []
        for raw, (_, value) in zip(raws, pairs, strict=True):
            seen = known.get(raw)
            seen = new.get(raw) if seen is None else seen
            if seen is None:
                new[raw] = seen = value
            out.append(seen)
        self._db.executemany(f"INSERT INTO {self._table} VALUES (?, ?)",
                             [(_blob(raw), _blob(value, "utf-8", "surrogatepass"))
                              for raw, value in new.items()])
        for raw in new:
            bit = hash(raw) & mask
            bits[bit >> 3] |= 1 << (bit & 7)
        return out


class KeyedValues(Generic[T]):
    """A mapping of text keys to picklable values in a :class:`SpillDb` (a later value for a key
    replaces the earlier one, as in a dict). Writes are buffered, up to :data:`_BATCH` of them,
    and sent together; every read sends them first."""

    def __init__(self, spill: SpillDb) -> None:
        self._db = spill.db
        self._table = spill.table("key BLOB PRIMARY KEY, value BLOB", without_rowid=True)
        self._writes: dict[bytes, bytes] = {}  # the last value of each key, not yet sent

    def __setitem__(self, key: str, value: T) -> None:
        self.put_pickled(key, pickle.dumps(value, pickle.HIGHEST_PROTOCOL))

    def put_pickled(self, key: str, data: bytes) -> None:
        """``self[key] = pickle.loads(data)``, the value pickled by the caller (perhaps in
        another process)."""
        self._writes[_key_bytes(key)] = data
        if len(self._writes) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._writes:
            self._db.executemany(f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?)",
                                 [(_blob(key), _blob(data))
                                  for key, data in self._writes.items()])
            self._writes = {}

    def _query(self, sql: str, *args: object) -> sqlite3.Cursor:
        self._flush()
        return self._db.execute(sql.format(table=self._table), args)

    def get(self, key: str) -> T | None:
        """The value of ``key``, or None."""
        row = self._query("SELECT value FROM {table} WHERE key = ?", _key_bytes(key)).fetchone()
        return None if row is None else pickle.loads(row[0])

    def get_many(self, keys: Sequence[str]) -> list[T | None]:
        """:meth:`get` of each of ``keys``, with a query per :data:`_LOOKUP` of them: the log
        checks look up a chunk of leaves at a time."""
        raws = [_key_bytes(key) for key in keys]
        self._flush()
        found: dict[bytes, bytes] = {}
        unique = list(dict.fromkeys(raws))
        for at in range(0, len(unique), _LOOKUP):
            chunk = unique[at:at + _LOOKUP]
            marks = ", ".join("?" * len(chunk))
            found.update(self._db.execute(
                f"SELECT key, value FROM {self._table} WHERE key IN ({marks})",
                list(map(_blob, chunk))))
        return [None if data is None else pickle.loads(data)
                for data in map(found.get, raws)]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._query(
            "SELECT 1 FROM {table} WHERE key = ?", _key_bytes(key)).fetchone() is not None

    def __len__(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM {table}").fetchone()[0])

    def keys_under(self, prefix: str) -> Iterator[str]:
        """The keys that start with ``prefix``, in no particular order."""
        low = _key_bytes(prefix)
        # UTF-8 never holds the byte 0xff: every key starting with the prefix sorts below this
        return _keys(self._query(
            "SELECT key FROM {table} WHERE key >= ? AND key < ?", low, low + b"\xff"))

    def __iter__(self) -> Iterator[str]:
        """Every key, in no particular order."""
        return _keys(self._query("SELECT key FROM {table}"))

    def keys_absent(self, other: KeyedValues[Any], prefix: str = "") -> Iterator[str]:
        """The keys that start with ``prefix`` and are not keys of ``other`` (a mapping of the
        same store), in no particular order: one query, not a look-up per key."""
        if other._db is not self._db:
            raise ValueError("keys_absent compares two mappings of one store")
        other._flush()
        low = _key_bytes(prefix)
        return _keys(self._query(
            f"SELECT key FROM {{table}} WHERE key >= ? AND key < ? AND key NOT IN "
            f"(SELECT key FROM {other._table})", low, low + b"\xff"))


class Kept(Generic[T]):
    """Values by text key, each with a text tag, given back in the order their keys were first
    put (a key put again is refused, as long as it is kept): in a :class:`SpillDb`. A value
    replaced keeps its place. Keys first put and replacements are buffered, up to
    :data:`_BATCH` of each, and sent together (every read sends them first): a key is known to
    be new, without a query, when its bit in a filter of the keys put (as :class:`FirstSeen`'s)
    is clear; a key whose bit is set is put at once, the store saying whether it is kept."""

    def __init__(self, spill: SpillDb) -> None:
        self._db = spill.db
        self._table = spill.table("seq INTEGER PRIMARY KEY, key BLOB UNIQUE, tag BLOB, "
                                  "value BLOB")
        self._adds: dict[bytes, tuple[bytes, bytes]] = {}  # new keys not yet sent, in order
        self._updates: dict[bytes, bytes] = {}  # replaced values not yet sent, by key
        #: a bit for each key ever put, at its hash (:data:`_SEEN_BITS` of them): a key whose
        #: bit is clear is not kept. A reveal's or a commitment's row put by a statement of its
        #: own cost the audit's one serial process twice a batched one
        self._bits = bytearray(_SEEN_BITS // 8)
        self._mask = _SEEN_BITS - 1

    def _may_hold(self, raw: bytes) -> bool:
        at = hash(raw) & self._mask
        return bool(self._bits[at >> 3] & (1 << (at & 7)))

    def add(self, key: str, tag: str, value: T) -> bool:
        """Keep ``value`` under ``key``, last; False (and nothing kept) if ``key`` is kept."""
        return self.add_pickled(key, tag, pickle.dumps(value, pickle.HIGHEST_PROTOCOL))

    def add_pickled(self, key: str, tag: str, data: bytes) -> bool:
        """:meth:`add` of ``pickle.loads(data)``, pickled by the caller (perhaps in another
        process)."""
        raw = _key_bytes(key)
        at = hash(raw) & self._mask
        bit = 1 << (at & 7)
        if not self._bits[at >> 3] & bit:  # never put: new, sent with others
            self._bits[at >> 3] |= bit
            self._adds[raw] = (_key_bytes(tag), data)
            if len(self._adds) >= _BATCH:
                self._send_adds()
            return True
        if raw in self._adds:
            return False
        self._send_adds()  # in order: the rows before it first
        return self._db.execute(
            f"INSERT OR IGNORE INTO {self._table} (key, tag, value) VALUES (?, ?, ?)",
            (raw, _key_bytes(tag), data)).rowcount == 1

    def _send_adds(self) -> None:
        if self._adds:
            # plain INSERT: a key in the buffer is new (its bit was clear), so none is ignored
            self._db.executemany(f"INSERT INTO {self._table} (key, tag, value) VALUES (?, ?, ?)",
                                 [(_blob(raw), _blob(tag), _blob(data))
                                  for raw, (tag, data) in self._adds.items()])
            self._adds = {}

    def get_many(self, keys: Sequence[str]) -> list[T | None]:
        """:meth:`get` of each of ``keys``, with one query for all of them."""
        return [None if data is None else pickle.loads(data)
                for data in self.get_many_pickled(keys)]

    def get_many_pickled(self, keys: Sequence[str]) -> list[bytes | None]:
        """:meth:`get_many`, each value as it is kept, pickled (to be sent on as it is); the
        keys never put are not asked for (a collection without commitments asks for none)."""
        self._send_adds()
        raws = [_key_bytes(key) for key in keys]
        found: dict[bytes, bytes] = {}
        updates, bits, mask = self._updates, self._bits, self._mask
        asked = sorted({raw for raw in raws if raw not in updates
                        and bits[(hash(raw) & mask) >> 3] & (1 << (hash(raw) & 7))})
        if asked:
            # the keys kept from the least asked on, as many as asked, read along the key's
            # index: pass 2 asks for a piece's shoes in their order, which in a collection of a
            # reveal a shoe are next to one another there (6.6 k instructions a key, counted,
            # against 11.7 k for an IN query); those the range missed are asked for by key
            wanted = set(asked)
            found.update(row for row in self._db.execute(
                f"SELECT key, value FROM {self._table} WHERE key >= ? ORDER BY key LIMIT ?",
                (_blob(asked[0]), len(asked))) if row[0] in wanted)
            asked = [raw for raw in asked if raw not in found]
        for at in range(0, len(asked), _LOOKUP):
            chunk = asked[at:at + _LOOKUP]
            marks = ", ".join("?" * len(chunk))
            found.update(self._db.execute(
                f"SELECT key, value FROM {self._table} WHERE key IN ({marks})",
                list(map(_blob, chunk))))
        found.update(self._updates)
        return [found.get(raw) for raw in raws]

    def get(self, key: str) -> T | None:
        """The value kept under ``key``, or None."""
        raw = _key_bytes(key)
        data = self._updates.get(raw)
        if data is None and self._may_hold(raw):
            self._send_adds()
            row = self._db.execute(f"SELECT value FROM {self._table} WHERE key = ?",
                                   (raw,)).fetchone()
            data = None if row is None else row[0]
        return None if data is None else pickle.loads(data)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        raw = _key_bytes(key)
        if not self._may_hold(raw):
            return False
        self._send_adds()
        return self._db.execute(
            f"SELECT 1 FROM {self._table} WHERE key = ?", (raw,)).fetchone() is not None

    def replace(self, key: str, value: T) -> None:
        """The value under ``key`` (kept) is now ``value``, in the same place."""
        self._updates[_key_bytes(key)] = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        if len(self._updates) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        self._send_adds()
        if self._updates:
            self._db.executemany(f"UPDATE {self._table} SET value = ? WHERE key = ?",
                                 [(value, key) for key, value in self._updates.items()])
            self._updates = {}

    def pop(self, key: str) -> None:
        """Keep nothing under ``key``."""
        raw = _key_bytes(key)
        self._send_adds()
        self._updates.pop(raw, None)
        self._db.execute(f"DELETE FROM {self._table} WHERE key = ?", (raw,))

    def values(self) -> Iterator[T]:
        """Every value, in the order of their keys, read in batches (the caller may replace
        values meanwhile)."""
        self._flush()
        last = 0
        while True:
            rows = self._db.execute(f"SELECT seq, value FROM {self._table} WHERE seq > ? "
                                    "ORDER BY seq LIMIT 1024", (last,)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield from (pickle.loads(value) for _, value in rows)

    def values_beside(self, other: Kept[U]) -> Iterator[tuple[T, U | None]]:
        """:meth:`values`, each with the value ``other`` (kept in the same store) keeps under
        its key, or None: a query per batch of them, not a look-up per value."""
        self._same_store(other)
        self._flush()
        other._flush()
        last = 0
        while True:
            rows = self._db.execute(
                f"SELECT a.seq, a.value, b.value FROM {self._table} AS a LEFT JOIN "
                f"{other._table} AS b ON b.key = a.key WHERE a.seq > ? ORDER BY a.seq "
                "LIMIT 1024", (last,)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield from ((pickle.loads(value), None if beside is None else pickle.loads(beside))
                        for _, value, beside in rows)

    def keys_absent(self, other: Kept[Any]) -> Iterator[str]:
        """The keys that ``other`` (kept in the same store) does not keep, in their order: one
        query, not a look-up per key."""
        self._same_store(other)
        self._send_adds()
        other._send_adds()
        return _keys(self._db.execute(
            f"SELECT key FROM {self._table} WHERE key NOT IN (SELECT key FROM {other._table}) "
            "ORDER BY seq"))

    def _same_store(self, other: Kept[Any]) -> None:
        if other._db is not self._db:
            raise ValueError("two Kept compared must be of one store")

    def sharing_tags(self) -> list[list[str]]:
        """The keys of each tag that more than one key has, in their order (each of them a
        failure of the audit: few)."""
        self._send_adds()
        groups: dict[bytes, list[str]] = {}
        for tag, key in self._db.execute(
                f"SELECT tag, key FROM {self._table} WHERE tag IN (SELECT tag FROM "
                f"{self._table} GROUP BY tag HAVING COUNT(*) > 1) ORDER BY seq").fetchall():
            groups.setdefault(tag, []).append(_text(key))
        return list(groups.values())


class Appended(Generic[T]):
    """Values appended in order and read back in that order, any number of times. Appends are
    buffered, up to :data:`_BATCH` of them, and sent together; reading sends them first."""

    def __init__(self, spill: SpillDb) -> None:
        self._db = spill.db
        self._table = spill.table("value BLOB")
        self._writes: list[tuple[bytearray]] = []
        self.count = 0

    def append(self, value: T) -> None:
        """One more value, last."""
        self.append_pickled(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))

    def append_pickled(self, data: bytes) -> None:
        """:meth:`append` of ``pickle.loads(data)``, pickled by the caller (perhaps in another
        process)."""
        self._writes.append((_blob(data),))
        self.count += 1
        if len(self._writes) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._writes:
            self._db.executemany(f"INSERT INTO {self._table} VALUES (?)", self._writes)
            self._writes = []

    def __iter__(self) -> Iterator[T]:
        self._flush()
        last = 0
        while True:  # in batches by rowid, so the caller may write to the store meanwhile
            rows = self._db.execute(f"SELECT rowid, value FROM {self._table} WHERE rowid > ? "
                                    "ORDER BY rowid LIMIT 1024", (last,)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield from (pickle.loads(value) for _, value in rows)


def smallest(items: Iterable[str], most: int) -> tuple[list[str], int]:
    """The ``most`` smallest of ``items``, sorted, and how many items there were (holding no
    more than ``most`` of them)."""
    count = 0

    def counted() -> Iterator[str]:
        nonlocal count
        for item in items:
            count += 1
            yield item

    return heapq.nsmallest(most, counted()), count
