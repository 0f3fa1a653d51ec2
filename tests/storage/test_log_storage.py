"""The transparency log's tables on SQLite and PostgreSQL: appends are dense and in order, are
sequenced at commit (SQLite) or queued at commit and integrated after it (PostgreSQL; a read
that needs them calls ``integrate_log``), a rolled-back transaction leaves no leaf, a
prerequisite (key) leaf is appended once, stored nodes serve proofs that the pure verifier
accepts, and two storages on one PostgreSQL (two replicas) appending concurrently keep one
dense, ordered log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import AbstractContextManager

import pytest
from support.service_helpers import OP
from support.storage_helpers import round_row, shoe

from rng_service.core.errors import IntegrityFailure, NotFound, Unavailable
from rng_service.log import (
    CompactRange,
    MemoryNodeStore,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_at,
    verify_consistency,
    verify_inclusion,
)
from rng_service.service.ports import LeafKind, NewLeaf, Storage, StoredCheckpoint, UnitOfWork
from rng_service.storage import open_storage, postgres
from rng_service.storage.sequencer import LogSequencer
from rng_service.storage.sql.log import MERGE_BATCH

KEY = NewLeaf(LeafKind.KEY, "ed25519:k", b'{"key":1}')


class _Nodes:
    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def get_nodes(self, ids):  # type: ignore[no-untyped-def]
        return self.uow.get_log_nodes(OP, ids)


def _commitment(n: int) -> NewLeaf:
    return NewLeaf(LeafKind.SHOE_COMMITMENT, f"shoe-{n}", f'{{"shoe":{n}}}'.encode())


def _append(storage: Storage, *leaves: NewLeaf, prerequisite: NewLeaf | None = KEY) -> None:
    with storage.transaction() as uow:
        for leaf in leaves:
            uow.append_leaf(OP, leaf, prerequisite=prerequisite)


def _merged(storage: Storage) -> AbstractContextManager[UnitOfWork]:
    """A snapshot of the log with every committed leaf sequenced (PostgreSQL queues them)."""
    storage.integrate_log()
    return storage.snapshot()


def test_leaves_are_appended_at_commit_dense_and_in_order(storage: Storage) -> None:
    _append(storage, _commitment(0), _commitment(1))
    _append(storage, _commitment(2))
    reference = MemoryNodeStore()
    with _merged(storage) as uow:
        leaves = uow.list_leaves(OP, 0, 10)
        assert uow.log_size(OP) == 4
        state = CompactRange.from_bytes(uow.log_state(OP) or b"")
        for leaf in leaves:
            assert leaf.entry is not None
            reference.append_entry(leaf.entry)
        assert root_at(_Nodes(uow), 4) == reference.root() == state.root()
    # the key leaf once, before the first leaf needing it; then the leaves in call order
    assert [(leaf.index, leaf.kind, leaf.ident) for leaf in leaves] == [
        (0, LeafKind.KEY, "ed25519:k"), (1, LeafKind.SHOE_COMMITMENT, "shoe-0"),
        (2, LeafKind.SHOE_COMMITMENT, "shoe-1"), (3, LeafKind.SHOE_COMMITMENT, "shoe-2")]
    assert leaves[1].leaf_hash == leaf_hash(b'{"shoe":0}')


def test_a_rolled_back_transaction_leaves_no_leaf(storage: Storage) -> None:
    _append(storage, _commitment(0))
    with pytest.raises(RuntimeError), storage.transaction() as uow:
        uow.append_leaf(OP, _commitment(1), prerequisite=KEY)
        raise RuntimeError("crash before commit")
    _append(storage, _commitment(2))
    with _merged(storage) as uow:
        assert [leaf.ident for leaf in uow.list_leaves(OP, 0, 10)] == [
            "ed25519:k", "shoe-0", "shoe-2"]
        assert uow.find_leaf(OP, LeafKind.SHOE_COMMITMENT, "shoe-1") is None


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_failed_append_rolls_back_the_whole_transaction(storage: Storage) -> None:
    """A leaf id logged twice fails at commit on SQLite, which sequences there: the shoe written
    with it is not stored. (PostgreSQL queues it; see the next test. The service never logs one
    id twice: each envelope's own table keys it.)"""
    _append(storage, _commitment(0))
    with pytest.raises(Exception), storage.transaction() as uow:  # noqa: B017
        uow.insert_shoe(shoe("s9"))
        uow.append_leaf(OP, _commitment(0))
    with storage.snapshot() as uow:
        assert uow.get_shoe(OP, "s9") is None
        assert uow.log_size(OP) == 2


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_leaf_queued_twice_is_logged_once_and_does_not_stop_the_sequencer(
        storage: Storage) -> None:
    """Were a bug to log one id twice, the queue must not jam on the log's unique index: the
    sequencer keeps the first, reports the second, and goes on with the leaves after it."""
    _append(storage, _commitment(0))
    _append(storage, _commitment(0), _commitment(1))
    with _merged(storage) as uow:
        assert [leaf.ident for leaf in uow.list_leaves(OP, 0, 10)] == [
            "ed25519:k", "shoe-0", "shoe-1"]
        assert uow.queued_operators() == []  # type: ignore[attr-defined]


def test_round_records_are_read_from_their_table_and_checked(storage: Storage) -> None:
    with storage.transaction() as uow:
        uow.insert_shoe(shoe())
        uow.insert_round(round_row("r1"))
        uow.put_record(OP, "r1", b'{"record":1}')
        uow.append_leaf(OP, NewLeaf(LeafKind.ROUND, "r1", b'{"record":1}'))
    with _merged(storage) as uow:
        (leaf,) = uow.list_leaves(OP, 0, 1)
        assert leaf.entry == b'{"record":1}'
        found = uow.find_leaf(OP, LeafKind.ROUND, "r1")
        assert found is not None and found.index == 0 and found.entry is None
    from support.service_helpers import run_sql  # noqa: PLC0415
    url = getattr(storage, "url", None) or str(storage.path)  # type: ignore[attr-defined]
    run_sql(url, "UPDATE records SET envelope = ? WHERE round_id = 'r1'", b'{"record":2}')
    with pytest.raises(IntegrityFailure), storage.snapshot() as uow:
        uow.list_leaves(OP, 0, 1)


def test_proofs_from_stored_nodes_verify(storage: Storage) -> None:
    _append(storage, *[_commitment(i) for i in range(12)])
    with _merged(storage) as uow:
        leaves = uow.list_leaves(OP, 0, 13)
        nodes = _Nodes(uow)
        for size in (1, 5, 8, 13):
            root = root_at(nodes, size)
            for index in range(size):
                proof = inclusion_proof(nodes, index, size)
                verify_inclusion(leaves[index].leaf_hash, index, size, proof, root)
        proof = consistency_proof(nodes, 5, 13)
        verify_consistency(5, 13, proof, root_at(nodes, 5), root_at(nodes, 13))
        with pytest.raises(NotFound):
            root_at(nodes, 14)


def test_checkpoints_are_kept_one_per_size(storage: Storage) -> None:
    with storage.snapshot() as uow:
        assert uow.latest_checkpoint(OP) is None
    with storage.transaction() as uow:
        uow.put_checkpoint(StoredCheckpoint(OP, 0, "first\n", "2026-01-01T00:00:00.000000Z"))
        uow.put_checkpoint(StoredCheckpoint(OP, 3, "three\n", "2026-01-01T00:00:01.000000Z"))
        uow.put_checkpoint(StoredCheckpoint(OP, 3, "other\n", "2026-01-01T00:00:02.000000Z"))
    with storage.snapshot() as uow:
        latest = uow.latest_checkpoint(OP)
    assert latest is not None and (latest.size, latest.note) == (3, "three\n")


def test_a_snapshot_cannot_append(storage: Storage) -> None:
    with pytest.raises(RuntimeError), storage.snapshot() as uow:
        uow.append_leaf(OP, _commitment(0))


@pytest.mark.parametrize("backend", ["postgresql"])
def test_two_replicas_appending_concurrently_keep_one_dense_ordered_log(
        database_url: str) -> None:
    replicas = [open_storage(database_url), open_storage(database_url)]
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(15):
                _append(replicas[n], _commitment(100 * n + i), _commitment(100 * n + i + 50))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with _merged(replicas[0]) as uow:
        leaves = uow.list_leaves(OP, 0, 1000)
        assert uow.log_size(OP) == len(leaves) == 61
        reference = MemoryNodeStore()
        for leaf in leaves:
            reference.append(leaf.leaf_hash)
        assert root_at(_Nodes(uow), 61) == reference.root()
    assert [leaf.index for leaf in leaves] == list(range(61))
    assert [leaf.kind for leaf in leaves].count(LeafKind.KEY) == 1
    assert leaves[0].kind is LeafKind.KEY  # before every leaf it signs
    # each transaction's leaves in its own order
    at = {leaf.ident: leaf.index for leaf in leaves}
    for n in range(2):
        for i in range(15):
            assert at[f"shoe-{100 * n + i + 50}"] > at[f"shoe-{100 * n + i}"]
    for replica in replicas:
        replica.close()



_HOLDS_THE_SEQUENCER = textwrap.dedent("""
    import sys, time
    from rng_service.storage.postgres import PostgresStorage
    storage = PostgresStorage(sys.argv[1])
    storage._sequencer.stop()  # this test's own integration only
    with storage.transaction() as uow:
        assert uow.integrate_queue("default") == 1  # taken, appended, not committed
        print("half-way", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_replica_killed_while_integrating_loses_no_leaf_and_leaves_no_gap(
        database_url: str) -> None:
    """The sequencer takes leaves off the queue and appends them in one transaction: killed
    before its COMMIT, the leaves are back in the queue, and the next integration (which waited
    for the row meanwhile) appends them at the same indices."""
    other = open_storage(database_url)
    other._sequencer.stop()  # type: ignore[attr-defined]  # integrations here are the test's
    _append(other, _commitment(0))
    other.integrate_log()  # the state row exists
    _append(other, _commitment(1))
    proc = subprocess.Popen([sys.executable, "-c", _HOLDS_THE_SEQUENCER, database_url],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "half-way"
    waiting = threading.Thread(target=other.integrate_log)
    waiting.start()  # queues on the sequencer row
    time.sleep(0.5)
    assert waiting.is_alive()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    waiting.join(30)
    assert not waiting.is_alive()
    with other.snapshot() as uow:
        assert [(leaf.index, leaf.ident) for leaf in uow.list_leaves(OP, 0, 10)] == [
            (0, "ed25519:k"), (1, "shoe-0"), (2, "shoe-1")]
        assert uow.log_size(OP) == 3
        assert uow.queued_operators() == []  # type: ignore[attr-defined]
    other.close()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_transaction_that_logs_holds_no_lock_on_the_log(database_url: str) -> None:
    """The point of the queue: while one transaction that logged a leaf is still open (past its
    flush, before its COMMIT), another replica's transaction logs, commits and is integrated
    without waiting for it; the open one's leaf follows once it commits."""
    first, second = open_storage(database_url), open_storage(database_url)
    try:
        _append(second, _commitment(0))
        second.integrate_log()
        with first.transaction() as uow:
            uow.append_leaf(OP, _commitment(1), prerequisite=KEY)
            uow.flush_log()
            done = threading.Thread(target=lambda: (_append(second, _commitment(2)),
                                                    second.integrate_log()))
            done.start()
            done.join(30)
            assert not done.is_alive()  # it did not wait for this transaction
            with second.snapshot() as read:
                assert [leaf.ident for leaf in read.list_leaves(OP, 0, 10)] == [
                    "ed25519:k", "shoe-0", "shoe-2"]
        with _merged(first) as uow:
            assert [leaf.ident for leaf in uow.list_leaves(OP, 0, 10)] == [
                "ed25519:k", "shoe-0", "shoe-2", "shoe-1"]
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_the_background_sequencer_merges_without_any_read(database_url: str) -> None:
    """Nothing asks for the log; the replica's own sequencer merges the queue, more than one
    batch of it, within its stated delay (waited for here with a wide margin, not timed)."""
    storage = open_storage(database_url)
    try:
        count = MERGE_BATCH + 5
        with storage.transaction() as uow:
            for i in range(count):
                uow.append_leaf(OP, _commitment(i), prerequisite=KEY)
        deadline = time.monotonic() + 60
        while True:
            with storage.snapshot() as uow:
                if uow.log_size(OP) == count + 1:
                    assert uow.queued_operators() == []  # type: ignore[attr-defined]
                    break
            assert time.monotonic() < deadline, "the queue was never merged"
            time.sleep(0.05)
    finally:
        storage.close()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_one_sequencer_pass_merges_the_whole_queue_of_every_operator(database_url: str) -> None:
    """The merge delay's bound rests on this: a pass does not stop at one batch, or a queue
    longer than a batch would wait a whole interval more for each further batch."""
    storage = open_storage(database_url)
    try:
        storage._sequencer.stop()  # type: ignore[attr-defined]  # this test's passes only
        with storage.transaction() as uow:
            uow.add_operator("other")
            for i in range(2 * MERGE_BATCH + 5):
                uow.append_leaf(OP, _commitment(i), prerequisite=KEY)
            uow.append_leaf("other", _commitment(0), prerequisite=KEY)
        assert storage._sequencer.run_once() == 2 * MERGE_BATCH + 8  # type: ignore[attr-defined]
        with storage.snapshot() as uow:
            assert (uow.log_size(OP), uow.log_size("other")) == (2 * MERGE_BATCH + 6, 2)
            assert uow.queued_operators() == []  # type: ignore[attr-defined]
    finally:
        storage.close()


def test_a_failed_sequencer_pass_is_retried_at_the_next_interval() -> None:
    """A database that does not answer, or a bug, fails one pass, never the thread: the queue
    is merged as soon as a pass succeeds again."""
    calls: list[int] = []
    again = threading.Event()

    def integrate() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise Unavailable("database down", reason="DATABASE_UNAVAILABLE")
        if len(calls) == 2:
            raise RuntimeError("a bug")
        again.set()
        return 1

    sequencer = LogSequencer(integrate, interval=0.001)
    sequencer.start()
    try:
        assert again.wait(30)
        assert sequencer.is_alive()
    finally:
        sequencer.stop()
    assert not sequencer.is_alive()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_read_only_storage_waits_for_a_replica_to_merge_the_queue(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only storage (``fairshoe audit export --database``) cannot merge: its
    integrate_log waits until a replica's sequencer has merged what was queued, so its
    checkpoint covers every envelope it read; with no sequencer running it says so
    (Unavailable, LOG_NOT_MERGED) instead of reading a log that lacks them."""
    writer = open_storage(database_url)
    reader = open_storage(database_url, read_only=True)
    try:
        writer._sequencer.stop()  # type: ignore[attr-defined]  # passes run when the test says
        _append(writer, _commitment(0))
        waiting = threading.Thread(target=reader.integrate_log, args=(OP,))
        waiting.start()
        time.sleep(0.3)
        assert waiting.is_alive()  # the leaf is still queued
        writer._sequencer.run_once()  # type: ignore[attr-defined]
        waiting.join(30)
        assert not waiting.is_alive()
        with reader.snapshot() as uow:
            assert uow.log_size(OP) == 2
        _append(writer, _commitment(1))
        monkeypatch.setattr(postgres, "READ_ONLY_MERGE_WAIT_S", 0.2)
        with pytest.raises(Unavailable) as err:
            reader.integrate_log()
        assert err.value.reason == "LOG_NOT_MERGED"
        assert "1 log leaves are still queued" in str(err.value)
    finally:
        reader.close()
        writer.close()


def test_a_key_leaf_rolled_back_is_appended_by_the_next_transaction(storage: Storage) -> None:
    """What a rolled-back transaction appended is not taken as logged: the key it logged first
    is logged again, at index 0, by the next transaction that needs it."""
    with pytest.raises(RuntimeError), storage.transaction() as uow:
        uow.append_leaf(OP, _commitment(0), prerequisite=KEY)
        uow.flush_log()  # appended (not committed) before the body fails
        raise RuntimeError("crash before commit")
    _append(storage, _commitment(1))
    _append(storage, _commitment(2))
    with _merged(storage) as uow:
        assert [(leaf.index, leaf.ident) for leaf in uow.list_leaves(OP, 0, 10)] == [
            (0, "ed25519:k"), (1, "shoe-1"), (2, "shoe-2")]


def test_a_key_another_replica_logged_is_not_logged_again(database_url: str) -> None:
    """Two storages on one database (two replicas): the second finds the key the first logged
    (and each log, one per operator, gets the key once)."""
    first, second = open_storage(database_url), open_storage(database_url)
    try:
        _append(first, _commitment(0))
        _append(second, _commitment(1))
        _append(second, _commitment(2))
        with second.transaction() as uow:
            uow.add_operator("other")
            uow.append_leaf("other", _commitment(3), prerequisite=KEY)
        _append(first, _commitment(4))
        with _merged(second) as uow:
            assert [leaf.ident for leaf in uow.list_leaves(OP, 0, 10)] == [
                "ed25519:k", "shoe-0", "shoe-1", "shoe-2", "shoe-4"]
            assert [leaf.ident for leaf in uow.list_leaves("other", 0, 10)] == [
                "ed25519:k", "shoe-3"]
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_logged_key_is_looked_up_once_per_storage(storage: Storage) -> None:
    """Once a committed transaction has seen the key's leaf, later appends do not look it up:
    the key's leaf is never deleted, and the lookup was one statement of every transition."""
    _append(storage, _commitment(0))
    statements: list[str] = []
    writer = storage._writer_connection()  # type: ignore[attr-defined]
    writer.set_trace_callback(statements.append)
    try:
        _append(storage, _commitment(1))
        _append(storage, _commitment(2))
    finally:
        writer.set_trace_callback(None)
    assert statements and not [s for s in statements if s.startswith("SELECT")
                                and "log_leaves" in s]
    with storage.snapshot() as uow:
        assert uow.log_size(OP) == 4


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_log_state_is_read_only_when_another_writer_moved_it(storage: Storage) -> None:
    """After a committed append the storage knows the log's state: the next append writes the
    new state ``WHERE size`` is the known one, without reading it first. When another storage
    on the file (another process) has appended meanwhile, that write matches no row and the
    state is read: the leaves land after the other's, the log dense and its root right."""
    other = open_storage(str(storage.path))  # type: ignore[attr-defined]
    try:
        _append(storage, _commitment(0))
        statements: list[str] = []
        writer = storage._writer_connection()  # type: ignore[attr-defined]
        writer.set_trace_callback(statements.append)
        try:
            _append(storage, _commitment(1))
            reads_alone = [s for s in statements if "FROM log_state" in s]
            _append(other, _commitment(2), _commitment(3))
            statements.clear()
            _append(storage, _commitment(4))
            reads_after_other = [s for s in statements if "FROM log_state" in s]
        finally:
            writer.set_trace_callback(None)
        assert reads_alone == [] and len(reads_after_other) == 1
        _append(storage, _commitment(5))
        with storage.snapshot() as uow:
            leaves = uow.list_leaves(OP, 0, 10)
            reference = MemoryNodeStore()
            for leaf in leaves:
                reference.append(leaf.leaf_hash)
            state = CompactRange.from_bytes(uow.log_state(OP) or b"")
            assert state.size == uow.log_size(OP) == 7
            assert root_at(_Nodes(uow), 7) == reference.root() == state.root()
        assert [(leaf.index, leaf.ident) for leaf in leaves] == [
            (0, "ed25519:k"), (1, "shoe-0"), (2, "shoe-1"), (3, "shoe-2"), (4, "shoe-3"),
            (5, "shoe-4"), (6, "shoe-5")]
    finally:
        other.close()
