"""The transparency log's tables, shared by both databases: one SQL text, two drivers.

:class:`LogTables` is mixed into each database's unit of work; its statements
(:class:`LogSql`) are built once per dialect (:mod:`rng_service.storage.sql.dialect`), and lock
the sequencer row ``FOR UPDATE`` on PostgreSQL (SQLite's single writer needs no lock).

Appending. ``append_leaf`` only collects; the storage calls :meth:`LogTables.flush_log` as the
last step of a write transaction, just before COMMIT. Then, by :attr:`LogTables.sequence_at_commit`:

* **SQLite** sequences the leaves there: the sequencer row (``log_state``, one per operator) is
  the last lock taken and the single writer's turn is held anyway, so nothing waits longer.
  The row is not even read when a committed transaction of this storage left the log's state
  (:class:`rng_service.storage.known.LogHead`): the state's write, ``UPDATE ... WHERE size``,
  comes first and is the check; if it finds the log grown (another process's appends, or an
  earlier transaction of the same group commit), nothing was written and the row is read.
* **PostgreSQL** queues them (``log_queue``) and takes no lock on the log at all: replicas'
  transactions of one operator no longer take turns on its one row from the append to the
  COMMIT (with fsync). A sequencer (:meth:`LogTables.integrate_queue`, run by
  :class:`rng_service.storage.postgres.LogSequencer` in every replica, ``SKIP LOCKED`` so one
  at a time) takes up to :data:`MERGE_BATCH` committed leaves oldest first, appends them under
  the row's lock and deletes them from the queue in one transaction: nothing is merged twice or
  lost, and indices stay dense. The merge delay is bounded (stated there), and any read that
  needs the log complete (a checkpoint, a record's proof) integrates the queue first, so every
  checkpoint covers every leaf committed before it was asked for.

Either way a transaction that rolls back rolls its leaves back with it: no gap, no leaf of
something that was not stored.

Entries. A leaf row keeps the envelope bytes itself only for keys and shoe commitments; round
records, shoe reveals and RNG records and reveals are already stored once in their own tables
(records, reveals, rng_draws) and are joined in by (kind, id) when leaves are listed. Storing them
twice would double the largest table for nothing, and the leaf hash kept in the row still pins the
exact bytes: a listing recomputes it and refuses a mismatch (IntegrityFailure).

Prerequisites. Every append names its signing key's leaf as prerequisite, appended unless the log
has it. The storage remembers the prerequisites that a transaction found or appended, once that
transaction's COMMIT has returned (:mod:`rng_service.storage.known`), and looks up only the
others: a leaf row is never deleted, so a key once seen logged by a committed transaction stays
logged. Nothing is remembered before its COMMIT (the transaction may roll back, with what it
appended); another replica's appends are found in the database, as before. A queued key leaf
counts as logged: it committed before any transaction that relies on it began, so it is queued
before their leaves and the sequencer, taking the queue in order, appends it first. A key leaf
queued by two transactions (neither saw the other's) is appended once: the sequencer drops a
prerequisite the log already has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import structlog

from rng_service.core.errors import IntegrityFailure, NotFound
from rng_service.log import CompactRange, NodeID, leaf_hash
from rng_service.service.ports import LeafKind, LogLeaf, NewLeaf, StoredCheckpoint, utc_now
from rng_service.storage.known import LogHead
from rng_service.storage.sql.dialect import SharedSql, SqlDialect

_LIST_LEAVES: Final = (
    "SELECT l.leaf_index, l.kind, l.ident, l.leaf_hash, COALESCE(l.entry, r.envelope, "
    "v.envelope, CASE l.kind WHEN 'rng' THEN d.record WHEN 'rng_reveal' THEN d.reveal END) "
    "FROM log_leaves l "
    "LEFT JOIN records r ON l.kind = 'round' AND r.operator = l.operator "
    "AND r.round_id = l.ident "
    "LEFT JOIN reveals v ON l.kind = 'shoe_reveal' AND v.operator = l.operator "
    "AND v.shoe_id = l.ident "
    "LEFT JOIN rng_draws d ON l.kind IN ('rng', 'rng_reveal') AND d.operator = l.operator "
    "AND d.draw_id = l.ident "
)
#: the leaves ``[start, end)``
_LEAF_RANGE: Final = ("WHERE l.operator = ? AND l.leaf_index >= ? AND l.leaf_index < ? "
                      "ORDER BY l.leaf_index")

#: node ids, leaf ids or leaf indices per query
_NODE_BATCH: Final = 200


class _Leaf(NamedTuple):  # one a leaf appended: 4,000 instructions, 10,500 a frozen dataclass
    """A leaf on its way into the log: what its row will hold."""

    kind: LeafKind
    ident: str
    digest: bytes
    entry: bytes | None  # the envelope, for kinds the log stores itself (else its own table's)
    prerequisite: bool
    created_at: str

    @classmethod
    def of(cls, leaf: NewLeaf, now: str, *, prerequisite: bool) -> _Leaf:
        return cls(leaf.kind, leaf.ident, leaf_hash(leaf.entry),
                   leaf.entry if leaf.kind.stored_in_log else None, prerequisite, now)


class LogSql:
    """The log's statements in one dialect."""

    __slots__ = ("advance_state", "checkpoint", "create_state", "find_leaf", "insert_leaves",
                 "insert_nodes",
                 "latest_checkpoint", "leaves", "leaves_at", "locked_state", "newest_queued",
                 "param", "queue", "queued_operators", "queued_up_to", "size", "state",
                 "take_queue", "try_locked_state", "update_state")

    def __init__(self, d: SqlDialect) -> None:
        self.insert_leaves = d.q("INSERT INTO log_leaves (operator, leaf_index, kind, ident, "
                                 "leaf_hash, entry, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
        self.insert_nodes = d.q("INSERT INTO log_nodes (operator, level, node_index, hash) "
                                "VALUES (?, ?, ?, ?)")
        self.update_state = d.q("UPDATE log_state SET size = ?, state = ?, updated_at = ? "
                                "WHERE operator = ?")
        # the state moved on from a size known without reading it: no row if it is not that
        self.advance_state = d.q("UPDATE log_state SET size = ?, state = ?, updated_at = ? "
                                 "WHERE operator = ? AND size = ?")
        self.locked_state = d.q(f"SELECT size, state FROM log_state WHERE operator = ?"
                                f"{d.locked()}")
        # the background sequencer's: a row another replica's sequencer holds is skipped
        self.try_locked_state = d.q(f"SELECT size, state FROM log_state WHERE operator = ?"
                                    f"{d.locked()}{' SKIP LOCKED' if d.row_locks else ''}")
        self.queue = d.q("INSERT INTO log_queue (operator, kind, ident, leaf_hash, entry, "
                         "prerequisite, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
        # taken (deleted) and read in one statement: exactly the rows it returns leave the
        # queue, whatever commits meanwhile (a separate DELETE would see, and drop, rows that
        # committed after the SELECT)
        self.take_queue = d.q("DELETE FROM log_queue WHERE seq IN (SELECT seq FROM log_queue "
                              "WHERE operator = ? ORDER BY seq LIMIT ?) RETURNING seq, kind, "
                              "ident, leaf_hash, entry, prerequisite, created_at")
        self.queued_operators = "SELECT DISTINCT operator FROM log_queue"
        # a read-only storage's wait for the sequencers (operator NULL: every operator's)
        of = "(CAST(? AS TEXT) IS NULL OR operator = ?)"
        self.newest_queued = d.q(f"SELECT MAX(seq) FROM log_queue WHERE {of}")
        self.queued_up_to = d.q(f"SELECT COUNT(*) FROM log_queue WHERE {of} AND seq <= ?")
        self.create_state = d.q("INSERT INTO log_state (operator, size, state, updated_at) "
                                "VALUES (?, 0, ?, ?) ON CONFLICT DO NOTHING")
        self.checkpoint = d.q("INSERT INTO log_checkpoints (operator, size, note, created_at) "
                              "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING")
        self.size = d.q("SELECT size FROM log_state WHERE operator = ?")
        self.state = d.q("SELECT state FROM log_state WHERE operator = ?")
        self.find_leaf = d.q("SELECT leaf_index, kind, ident, leaf_hash FROM log_leaves "
                             "WHERE operator = ? AND kind = ? AND ident = ?")
        self.leaves = d.q(f"{_LIST_LEAVES} {_LEAF_RANGE}")
        #: the head of a listing of chosen leaves (:meth:`LogTables.list_leaves_at` adds the
        #: ``IN`` list of their indices)
        self.leaves_at = d.q(f"{_LIST_LEAVES} WHERE l.operator = ? AND l.leaf_index IN ")
        self.latest_checkpoint = d.q("SELECT size, note, created_at FROM log_checkpoints "
                                     "WHERE operator = ? ORDER BY size DESC LIMIT 1")
        self.param = d.param


log = structlog.get_logger("fairshoe.storage")

#: queued leaves integrated per transaction at most (a read needing them all loops)
MERGE_BATCH: Final = 1000


class LogTables(SharedSql):
    """The log half of a unit of work. The driver calls :meth:`flush_log` before COMMIT;
    after the COMMIT returned, the storage adds :attr:`seen` to its :attr:`_committed`."""

    _pending_leaves: list[tuple[str, NewLeaf, NewLeaf | None]]
    #: True: leaves are sequenced in the transaction that logs them, under the sequencer row's
    #: lock (SQLite, whose one writer is a turn anyway). False: they are queued, and integrated
    #: later by :meth:`integrate_queue` (PostgreSQL, whose replicas would queue on that row)
    sequence_at_commit: bool = True

    # --- writes ------------------------------------------------------------------------------

    def append_leaf(self, operator: str, leaf: NewLeaf, *, prerequisite: NewLeaf | None = None
                    ) -> None:
        """Queue ``leaf`` (after ``prerequisite`` unless that is logged already); appended by
        :meth:`flush_log` when the transaction commits."""
        self._write_check()
        self._pending_leaves.append((operator, leaf, prerequisite))

    def flush_log(self) -> None:
        """Append the transaction's leaves, operator by operator, each log under its sequencer
        lock, or queue them (:attr:`sequence_at_commit`)."""
        pending = self._pending_leaves
        if not pending:  # a transaction that logs nothing
            return
        self._pending_leaves = []
        # logs locked in one fixed order: two transactions appending to the same two logs
        # cannot deadlock
        for operator in sorted({op for op, _, _ in pending}):
            items = self._with_prerequisites(
                operator, [(leaf, pre) for op, leaf, pre in pending if op == operator])
            if not self.sequence_at_commit:
                self._queue(operator, items)
            elif not self._sequence_after_head(operator, items):
                state = self._locked_state(operator)
                assert state is not None  # a waiting lock returns the row
                self._sequence(operator, state, items)

    def _with_prerequisites(self, operator: str, items: list[tuple[NewLeaf, NewLeaf | None]]
                            ) -> list[_Leaf]:
        """The leaves to log, each after its prerequisite unless the log has that already."""
        out: list[_Leaf] = []
        logged: set[tuple[LeafKind, str]] = set()
        now = utc_now()
        for leaf, pre in items:
            if pre is not None and (pre.kind, pre.ident) not in logged and self._unlogged(
                    operator, pre):
                out.append(_Leaf.of(pre, now, prerequisite=True))
                logged.add((pre.kind, pre.ident))
            out.append(_Leaf.of(leaf, now, prerequisite=False))
        return out

    def _queue(self, operator: str, leaves: list[_Leaf]) -> None:
        """Queue ``leaves`` for the sequencer: no lock on the log's state."""
        self._write_many(self._sql.log.queue, [
            (operator, str(leaf.kind), leaf.ident, leaf.digest, leaf.entry,
             leaf.prerequisite, leaf.created_at) for leaf in leaves])

    def integrate_queue(self, operator: str, *, wait: bool = True) -> int | None:
        """Sequence up to :data:`MERGE_BATCH` of the operator's queued leaves, oldest first,
        under the sequencer row's lock (``wait`` False: None at once if another transaction
        holds it); how many left the queue. A prerequisite already logged is dropped."""
        state = self._locked_state(operator, wait=wait)
        if state is None:
            return None
        taken = sorted(self._all(self._sql.log.take_queue, (operator, MERGE_BATCH)))
        leaves = [_Leaf(LeafKind(kind), ident, bytes(digest),
                        None if entry is None else bytes(entry), bool(pre), created)
                  for _, kind, ident, digest, entry, pre, created in taken]
        logged = self._logged(operator, leaves)
        kept = []
        for leaf in leaves:
            key = (leaf.kind, leaf.ident)
            if key in logged:
                if not leaf.prerequisite:  # no envelope is stored twice under one id: a bug
                    log.error("log_leaf_queued_twice", operator=operator, kind=str(leaf.kind),
                              ident=leaf.ident, same_envelope=leaf.digest == logged[key])
                continue  # a key queued by two transactions, or logged before it was merged
            logged[key] = leaf.digest
            kept.append(leaf)
        if kept:
            self._sequence(operator, state, kept)
        return len(taken)

    def _logged(self, operator: str, leaves: Sequence[_Leaf]) -> dict[tuple[LeafKind, str], bytes]:
        """Which of ``leaves``' (kind, ident) the log has already, with their leaf hashes (a
        few queries per batch, not one per leaf)."""
        return {(found.kind, found.ident): found.leaf_hash
                for kind in sorted({leaf.kind for leaf in leaves})
                for found in self.find_leaves(
                    operator, kind, sorted({leaf.ident for leaf in leaves if leaf.kind is kind}))}

    def newest_queued(self, operator: str | None) -> int | None:
        """The queue position of the newest leaf of ``operator`` (None: of any) still queued,
        or None if none is."""
        row = self._one(self._sql.log.newest_queued, (operator, operator))
        return None if row is None or row[0] is None else int(row[0])

    def queued_up_to(self, operator: str | None, seq: int) -> int:
        """How many leaves of ``operator`` (None: of any) at queue positions up to ``seq`` are
        still queued."""
        row = self._one(self._sql.log.queued_up_to, (operator, operator, seq))
        return 0 if row is None else int(row[0])

    def queued_operators(self) -> list[str]:
        """The operators with leaves waiting in the queue."""
        return sorted(str(row[0]) for row in self._all(self._sql.log.queued_operators, ()))

    def _sequence(self, operator: str, state: CompactRange, leaves: list[_Leaf]) -> None:
        """Append ``leaves`` at the end of the log whose locked state is ``state``."""
        rows, nodes = self._appended(operator, state, leaves)
        sql = self._sql.log
        self._write_many(sql.insert_leaves, rows)
        self._write_many(sql.insert_nodes, nodes)
        data = state.to_bytes()
        self._write(sql.update_state, (state.size, data, utc_now(), operator))
        self.seen.append(LogHead(operator, state.size, data))

    def _sequence_after_head(self, operator: str, leaves: list[_Leaf]) -> bool:
        """Append ``leaves`` after the log's state that a committed transaction of this storage
        left (:class:`LogHead`) without reading the state's row, if the log is still of that
        size: the state's write is then the check (``WHERE size``), made first. False, with
        nothing written, if no state is known or the log has grown since (another process, or
        a transaction of this batch not yet committed, appended): the caller reads it."""
        head = None if self._committed is None else self._committed.log_head(operator)
        if head is None:
            return False
        state = CompactRange.from_bytes(head.state)
        rows, nodes = self._appended(operator, state, leaves)
        sql = self._sql.log
        data = state.to_bytes()
        if self._write(sql.advance_state,
                       (state.size, data, utc_now(), operator, head.size)).rowcount != 1:
            return False
        self._write_many(sql.insert_leaves, rows)
        self._write_many(sql.insert_nodes, nodes)
        self.seen.append(LogHead(operator, state.size, data))
        return True

    @staticmethod
    def _appended(operator: str, state: CompactRange, leaves: list[_Leaf]
                  ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """``leaves`` appended to ``state`` (in place): the rows of the leaves and of the nodes
        they complete."""
        rows: list[tuple[Any, ...]] = []
        nodes: list[tuple[Any, ...]] = []
        for leaf in leaves:
            rows.append((operator, state.size, str(leaf.kind), leaf.ident, leaf.digest,
                         leaf.entry, leaf.created_at))
            state.append(leaf.digest, lambda node, value: nodes.append(
                (operator, node.level, node.index, value)))
        return rows, nodes

    def _unlogged(self, operator: str, pre: NewLeaf) -> bool:
        """Whether prerequisite ``pre`` is missing from the operator's log (the caller appends
        it then); looked up unless a committed transaction already saw it logged."""
        fact = ("leaf", operator, pre.kind, pre.ident)
        if self._committed is not None and fact in self._committed:
            return False
        self.seen.append(fact)  # logged (found, or appended by the caller) if this commits
        return self.find_leaf(operator, pre.kind, pre.ident) is None

    def _locked_state(self, operator: str, *, wait: bool = True) -> CompactRange | None:
        """The operator's compact range, its row locked until the transaction ends (created,
        empty, the first time: a concurrent creator waits on the primary key, then finds it);
        None if ``wait`` is False and another transaction holds the row."""
        sql = self._sql.log
        select = sql.locked_state if wait else sql.try_locked_state
        row = self._one(select, (operator,))
        if row is None:
            self._write(sql.create_state, (operator, CompactRange().to_bytes(), utc_now()))
            row = self._one(select, (operator,))
            if row is None:  # created by another, who holds it now
                return None
        state = CompactRange.from_bytes(bytes(row[1]))
        if state.size != int(row[0]):
            raise IntegrityFailure(f"log of {operator}: state is of size {state.size}, row says "
                                   f"{row[0]}", reason="LOG_STATE_CORRUPT")
        return state

    def put_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        """Store a signed checkpoint unless one of its size is stored (a concurrent signer's)."""
        self._write(self._sql.log.checkpoint,
                    (checkpoint.operator, checkpoint.size, checkpoint.note,
                     checkpoint.created_at))

    # --- reads -------------------------------------------------------------------------------

    def log_size(self, operator: str) -> int:
        """How many leaves the operator's log has."""
        row = self._one(self._sql.log.size, (operator,))
        return 0 if row is None else int(row[0])

    def log_state(self, operator: str) -> bytes | None:
        """The stored compact range of the operator's log, or None while it is empty."""
        row = self._one(self._sql.log.state, (operator,))
        return None if row is None else bytes(row[0])

    def find_leaf(self, operator: str, kind: LeafKind, ident: str) -> LogLeaf | None:
        """The leaf of ``kind`` under ``ident`` (no entry), or None."""
        row = self._one(self._sql.log.find_leaf, (operator, str(kind), ident))
        if row is None:
            return None
        return LogLeaf(int(row[0]), LeafKind(row[1]), row[2], bytes(row[3]))

    def find_leaves(self, operator: str, kind: LeafKind, idents: Sequence[str]
                    ) -> list[LogLeaf]:
        """The leaves of ``kind`` logged under any of ``idents`` (no entries), in no set order:
        a few queries per batch, not one per leaf. By kind: each query is a look-up in the
        (operator, kind, ident) index, whatever the log's size (an ``ident IN`` alone, without
        the kind, would read every index entry of the operator's log, every pass)."""
        sql, out = self._sql.log, []
        for at in range(0, len(idents), _NODE_BATCH):
            batch = idents[at : at + _NODE_BATCH]
            marks = ", ".join([sql.param] * len(batch))
            for index, ident, digest in self._all(
                    f"SELECT leaf_index, ident, leaf_hash FROM log_leaves WHERE operator = "
                    f"{sql.param} AND kind = {sql.param} AND ident IN ({marks})",
                    [operator, str(kind), *batch]):
                out.append(LogLeaf(int(index), kind, ident, bytes(digest)))
        return out

    def list_leaves(self, operator: str, start: int, end: int) -> list[LogLeaf]:
        """Leaves ``[start, end)`` with their entries, each checked against its leaf hash."""
        return self._entries(operator, self._all(self._sql.log.leaves, (operator, start, end)))

    def list_leaves_at(self, operator: str, indices: Sequence[int]) -> list[LogLeaf]:
        """The leaves at ``indices`` that the log has, in index order, with their entries, each
        checked against its leaf hash (a time-range export's leaves are not contiguous)."""
        sql, out = self._sql.log, []
        for at in range(0, len(indices), _NODE_BATCH):
            batch = indices[at : at + _NODE_BATCH]
            marks = ", ".join([sql.param] * len(batch))
            out += self._entries(operator, self._all(
                f"{sql.leaves_at}({marks}) ORDER BY l.leaf_index", [operator, *batch]))
        return sorted(out, key=lambda leaf: leaf.index)

    @staticmethod
    def _entries(operator: str, rows: Sequence[Sequence[Any]]) -> list[LogLeaf]:
        out = []
        for index, kind, ident, digest, entry in rows:
            data = None if entry is None else bytes(entry)
            if data is None or leaf_hash(data) != bytes(digest):
                raise IntegrityFailure(f"log of {operator}: leaf {index} ({kind} {ident}) does "
                                       "not match its stored envelope", reason="LOG_LEAF")
            out.append(LogLeaf(int(index), LeafKind(kind), ident, bytes(digest), data))
        return out

    def get_log_nodes(self, operator: str, ids: Sequence[NodeID]) -> list[bytes]:
        """The stored hashes of the perfect nodes ``ids``, in order; NotFound for a missing one."""
        sql = self._sql.log
        found: dict[tuple[int, int], bytes] = {}
        for at in range(0, len(ids), _NODE_BATCH):
            batch = ids[at : at + _NODE_BATCH]
            # one look-up of the (operator, level, node_index) key per level: an OR of
            # (level, index) pairs had SQLite scan every node of the operator's log, each batch
            levels: dict[int, list[int]] = {}
            for node in batch:
                levels.setdefault(node.level, []).append(node.index)
            selects, params = [], []
            for level, indices in levels.items():
                marks = ", ".join([sql.param] * len(indices))
                selects.append(f"SELECT level, node_index, hash FROM log_nodes WHERE operator = "
                               f"{sql.param} AND level = {sql.param} AND node_index IN ({marks})")
                params += [operator, level, *indices]
            for level, index, value in self._all(" UNION ALL ".join(selects), params):
                found[(int(level), int(index))] = bytes(value)
        try:
            return [found[(node.level, node.index)] for node in ids]
        except KeyError as missing:
            raise NotFound("tree_size", f"the log of {operator} has no node {missing}") from None

    def latest_checkpoint(self, operator: str) -> StoredCheckpoint | None:
        """The stored checkpoint of the largest size, or None."""
        row = self._one(self._sql.log.latest_checkpoint, (operator,))
        return None if row is None else StoredCheckpoint(operator, int(row[0]), row[1], row[2])
