"""What only the PostgreSQL storage has to show, on the real test server: migrations applied
once by replicas starting together, transactions killed half-way, lost races between
connections (versioned update, unique index, deadlock) as Conflicts, acknowledged writes kept
across a server crash, and a pool that survives the server going away and coming back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from support.pg_server import PgServer
from support.service_helpers import EUR, OP, run_sql
from support.storage_helpers import bumped, round_row, shoe
from support.waits import wait_until

from rng_service.core.errors import Conflict, FairshoeError, Unavailable
from rng_service.service.ports import AccountKey, AccountKind, EntryKind, Mode, Posting
from rng_service.service.wallet import WalletService
from rng_service.storage.postgres import MIGRATION_LOCK, PostgresStorage, migrate
from rng_service.storage.schema import history


@contextmanager
def opened(url: str, **options: float) -> Iterator[PostgresStorage]:
    storage = PostgresStorage(url, **options)
    try:
        yield storage
    finally:
        storage.close()


def wait_for(condition: Callable[[], bool]) -> None:
    # polled, bounded only against a hung server (20 s once: a loaded machine can outlast it)
    wait_until(condition, "the database's state")


# --- migrations --------------------------------------------------------------------------


def test_migrations_apply_once_and_a_newer_schema_is_refused(pg_empty_url: str) -> None:
    assert migrate(pg_empty_url) == [v for v, _ in history("postgresql")]
    assert migrate(pg_empty_url) == []
    assert run_sql(pg_empty_url, "SELECT version, name FROM schema_version ORDER BY version"
                   ) == history("postgresql")
    run_sql(pg_empty_url, "INSERT INTO schema_version VALUES (99, 'future', 'now')")
    with pytest.raises(Unavailable, match="schema version 99") as info:
        PostgresStorage(pg_empty_url)
    assert info.value.reason == "SCHEMA_TOO_NEW"


_MIGRATOR = textwrap.dedent("""
    import sys
    from rng_service.storage.postgres import migrate
    print(migrate(sys.argv[1]), flush=True)
""")


def test_two_replicas_starting_together_migrate_once(pg_empty_url: str) -> None:
    """Both starters queue on the advisory lock (held here until both wait); the first applies
    every migration, the second finds nothing left to do."""
    with psycopg.connect(pg_empty_url, autocommit=True) as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        procs = [subprocess.Popen([sys.executable, "-c", _MIGRATOR, pg_empty_url],
                                  stdout=subprocess.PIPE, text=True) for _ in range(2)]

        def both_waiting() -> bool:
            (waiting,), = gate.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchall()
            return int(waiting) == 2

        wait_for(both_waiting)
        gate.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    outputs = sorted(proc.communicate(timeout=60)[0].strip() for proc in procs)
    assert outputs == ["[1]", "[]"] or outputs == sorted(
        [str([v for v, _ in history("postgresql")]), "[]"])
    assert run_sql(pg_empty_url, "SELECT version, name FROM schema_version ORDER BY version"
                   ) == history("postgresql")


# --- transactions killed half-way --------------------------------------------------------------

_HALF_WAY = textwrap.dedent("""
    import sys, time
    from rng_service.service.ports import AccountKey, AccountKind, EntryKind, Mode, Posting
    from rng_service.storage.postgres import PostgresStorage
    storage = PostgresStorage(sys.argv[1])
    ann = AccountKey("default", "ann", "EUR", Mode.REAL)
    with storage.transaction() as uow:
        uow.open_account(ann, AccountKind.PLAYER)
        uow.open_account(ann.other("@cash"), AccountKind.SYSTEM)
        uow.post(Posting(ann.other("@cash"), ann, 100, EntryKind.DEPOSIT))
        print("half-way", flush=True)
        time.sleep(60)
""")


def test_a_writer_killed_mid_transaction_leaves_nothing(pg_url: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _HALF_WAY, pg_url], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "half-way"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: run_sql(pg_url, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                             "current_database() AND application_name = 'fairshoe'") == [(0,)])
    for table in ("accounts", "ledger_entries"):
        assert run_sql(pg_url, f"SELECT count(*) FROM {table}") == [(0,)]


def test_a_connection_killed_mid_transaction_is_unavailable_and_leaves_nothing(pg_url: str
                                                                              ) -> None:
    ann = AccountKey(OP, "ann", EUR, Mode.REAL)
    with opened(pg_url) as storage:
        with pytest.raises(Unavailable) as info, storage.transaction() as uow:
            uow.open_account(ann, AccountKind.PLAYER)
            run_sql(pg_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    "datname = current_database() AND application_name = 'fairshoe' "
                    "AND state = 'idle in transaction'")
            uow.open_account(ann.other("@cash"), AccountKind.SYSTEM)
        assert info.value.reason == "DATABASE_UNAVAILABLE"
        assert run_sql(pg_url, "SELECT count(*) FROM accounts") == [(0,)]
        with storage.transaction() as uow:  # the pool replaced the broken connection
            assert uow.open_account(ann, AccountKind.PLAYER)


def test_a_pooled_connection_whose_backend_ended_while_idle_is_replaced_unseen(pg_url: str
                                                                                ) -> None:
    """The pool's check lends no connection whose server went away while it was idle (its
    socket has the end to read): the next transactions work, on new connections."""
    ann = AccountKey(OP, "ann", EUR, Mode.REAL)
    with opened(pg_url) as storage:
        with storage.transaction() as uow:
            assert uow.open_account(ann, AccountKind.PLAYER)
        mine = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'fairshoe'")
        before = {pid for pid, in run_sql(pg_url, mine)}
        assert before
        run_sql(pg_url, f"SELECT pg_terminate_backend(pid) FROM ({mine}) AS idle")
        wait_for(lambda: not before & {pid for pid, in run_sql(pg_url, mine)})
        for n in range(3):
            with storage.transaction() as uow:
                assert uow.open_account(ann.other(f"bob-{n}"), AccountKind.PLAYER)
        assert {pid for pid, in run_sql(pg_url, mine)}.isdisjoint(before)


# --- lost races between connections ------------------------------------------------------------


def race(*steps: Callable[[], None]) -> list[BaseException | None]:
    """Run each step in its own thread; what each raised (None if nothing)."""
    outcomes: list[BaseException | None] = [None] * len(steps)

    def run(i: int) -> None:
        try:
            steps[i]()
        except BaseException as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(steps))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


def test_two_connections_updating_one_version_one_conflicts(pg_url: str) -> None:
    """Both read version 1 (outside their write transactions, as a replica without the row lock
    would); the second UPDATE waits for the first's row lock, then finds version 2 and updates
    nothing: Conflict CONCURRENT_UPDATE, and its whole transaction rolls back."""
    with opened(pg_url) as storage:
        with storage.transaction() as uow:
            uow.insert_shoe(shoe())
            uow.insert_round(round_row("r1"))
        both_read = threading.Barrier(2)

        def update(n: int) -> Callable[[], None]:
            def step() -> None:
                with storage.snapshot() as uow:
                    row = uow.get_round(OP, "r1")
                assert row is not None and row.version == 1
                with storage.transaction() as uow:
                    both_read.wait(10)
                    uow.update_round(bumped(row, 2), expected_version=1)
                    uow.put_record(OP, "r1", f"writer {n}".encode())
                    time.sleep(0.2)  # hold the row lock while the other UPDATE queues on it
            return step

        outcomes = race(update(1), update(2))
        conflicts = [o for o in outcomes if isinstance(o, Conflict)]
        assert len(conflicts) == 1 and outcomes.count(None) == 1, outcomes
        assert conflicts[0].reason == "CONCURRENT_UPDATE"
        winner = f"writer {outcomes.index(None) + 1}".encode()
        assert run_sql(pg_url, "SELECT version FROM rounds") == [(2,)]
        assert run_sql(pg_url, "SELECT envelope FROM records") == [(winner,)]


def test_a_second_open_round_inserted_concurrently_is_round_in_progress(pg_url: str) -> None:
    with opened(pg_url) as storage:
        with storage.transaction() as uow:
            uow.insert_shoe(shoe())
        first_inserted = threading.Event()

        def first() -> None:
            with storage.transaction() as uow:
                uow.insert_round(round_row("r1"))
                first_inserted.set()
                time.sleep(0.3)  # uncommitted: the second insert waits on the unique index

        def second() -> None:
            first_inserted.wait(10)
            with storage.transaction() as uow:
                uow.insert_round(round_row("r2"))

        outcomes = race(first, second)
        assert outcomes[0] is None and isinstance(outcomes[1], Conflict), outcomes
        assert outcomes[1].reason == "ROUND_IN_PROGRESS"


def test_a_deadlock_is_a_retryable_conflict_and_the_other_commits(pg_url: str) -> None:
    """Two transactions each post twice, to the same account pairs in opposite orders:
    PostgreSQL aborts one (deadlock detected), which surfaces as Conflict; the other commits."""
    ann = AccountKey(OP, "ann", EUR, Mode.REAL)
    bob, cash, house = ann.other("bob"), ann.other("@cash"), ann.other("@house")
    with opened(pg_url) as storage:
        with storage.transaction() as uow:
            for account, kind in ((ann, AccountKind.PLAYER), (bob, AccountKind.PLAYER),
                                  (cash, AccountKind.SYSTEM), (house, AccountKind.SYSTEM)):
                uow.open_account(account, kind)
        first_posted = threading.Barrier(2)

        def transfer(one: Posting, two: Posting) -> Callable[[], None]:
            def step() -> None:
                with storage.transaction() as uow:
                    uow.post(one)
                    first_posted.wait(10)
                    uow.post(two)
            return step

        to_ann = Posting(cash, ann, 10, EntryKind.DEPOSIT)
        to_bob = Posting(house, bob, 10, EntryKind.DEMO_CREDIT)
        outcomes = race(transfer(to_ann, to_bob), transfer(to_bob, to_ann))
        conflicts = [o for o in outcomes if isinstance(o, Conflict)]
        assert len(conflicts) == 1 and outcomes.count(None) == 1, outcomes
        assert conflicts[0].reason == "CONCURRENT_UPDATE" and "40P01" in str(conflicts[0])
        assert run_sql(pg_url, "SELECT count(*) FROM ledger_entries") == [(2,)]


# --- the server going away ---------------------------------------------------------------------

_DEPOSITOR = textwrap.dedent("""
    import sys
    from rng_service.storage.postgres import PostgresStorage
    from rng_service.service.wallet import WalletService
    wallet = WalletService(PostgresStorage(sys.argv[1]))
    n = 0
    while True:
        n += 1
        wallet.deposit("default", "ann", "EUR", 1, request_id=f"dep-{n}")
        print(n, flush=True)  # acknowledged only after COMMIT returned
""")


def test_acknowledged_deposits_survive_a_server_crash(own_pg_server: PgServer) -> None:
    url = own_pg_server.url("fairshoe")
    proc = subprocess.Popen([sys.executable, "-c", _DEPOSITOR, url], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    acked = 0
    for line in proc.stdout:
        acked = int(line)
        if acked >= 40:
            break
    own_pg_server.stop("immediate")  # a crash: no checkpoint, WAL replay at the next start
    proc.kill()
    proc.wait()
    own_pg_server.start()
    with opened(url) as storage:
        balance = WalletService(storage).get_balance(OP, "ann", EUR).balance
        assert balance >= acked  # every acknowledged deposit is there (one more may be)
        with storage.snapshot() as uow:
            assert all(uow.get_response(OP, f"dep-{n}") is not None
                       for n in range(1, acked + 1))


def test_the_pool_recovers_when_the_server_comes_back(own_pg_server: PgServer) -> None:
    """While the server is down, ping and transactions raise Unavailable DATABASE_UNAVAILABLE
    (no traceback from the driver); when it is back the same storage object works again."""
    wallet_ok = 0
    with opened(own_pg_server.url("fairshoe"), pool_timeout=1.0) as storage:
        wallet = WalletService(storage)
        wallet.deposit(OP, "ann", EUR, 5, request_id="before")
        storage.ping()
        own_pg_server.stop()
        for attempt in (lambda: storage.ping(0.5), lambda: wallet.deposit(OP, "ann", EUR, 5,
                                                             request_id="during")):
            with pytest.raises(Unavailable) as info:
                attempt()
            assert info.value.reason == "DATABASE_UNAVAILABLE"
            assert not isinstance(info.value.__cause__, FairshoeError)
        own_pg_server.start()

        def answers() -> bool:
            try:
                storage.ping(timeout=0.5)
            except Unavailable:
                return False
            return True

        wait_for(answers)
        wallet.deposit(OP, "ann", EUR, 5, request_id="after")
        wallet_ok = wallet.get_balance(OP, "ann", EUR).balance
    assert wallet_ok == 10


def test_a_round_read_for_writing_waits_for_its_writer_and_sees_its_result(pg_url: str) -> None:
    """A write transaction reads its round FOR UPDATE: a second one queues behind the first and
    then reads the committed version (what makes a stale expected_version STALE_VERSION on
    PostgreSQL as on SQLite, not a lost race)."""
    with opened(pg_url) as storage:
        with storage.transaction() as uow:
            uow.insert_shoe(shoe())
            uow.insert_round(round_row("r1"))
        first_read = threading.Event()
        seen: list[int] = []

        def first() -> None:
            with storage.transaction() as uow:
                row = uow.get_round(OP, "r1")
                assert row is not None
                first_read.set()
                time.sleep(0.3)
                uow.update_round(bumped(row, 2), expected_version=1)

        def second() -> None:
            assert first_read.wait(10)
            with storage.transaction() as uow:
                row = uow.get_round(OP, "r1")
                assert row is not None
                seen.append(row.version)

        assert race(first, second) == [None, None]
        assert seen == [2]
