"""What every storage does, run on SQLite and PostgreSQL alike: versioned writes, the unique
"one open round" and "one current shoe", rollback of a failed transaction, read-only snapshots,
a concurrent duplicate request id reading the first one's stored answer (also from two storage
objects, as two replicas), and ping."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from support.service_helpers import EUR, OP, run_sql
from support.storage_helpers import bumped, round_row, shoe
from support.waits import wait_until

from rng_service.core.errors import Conflict, IllegalState, InvalidInput
from rng_service.service.idempotency import request_hash
from rng_service.service.operators import add_operator, list_operators
from rng_service.service.ports import (
    AccountKey,
    AccountKind,
    EntryKind,
    Mode,
    Posting,
    Storage,
    StoredResponse,
    WalletConfig,
    WalletKind,
    utc_now,
)
from rng_service.service.wallet import WalletService
from rng_service.storage import backend_of, open_storage, schema
from rng_service.storage.postgres import REQUEST_LOCK_CLASS


def test_versioned_updates_refuse_a_stale_writer(storage: Storage) -> None:
    with storage.transaction() as uow:
        uow.insert_shoe(shoe())
        uow.insert_round(round_row("r1"))
    row = round_row("r1")
    with storage.transaction() as uow:
        uow.update_round(bumped(row, 2), expected_version=1)
    with pytest.raises(Conflict) as info, storage.transaction() as uow:
        uow.update_round(bumped(row, 2), expected_version=1)
    assert info.value.reason == "CONCURRENT_UPDATE"
    with pytest.raises(Conflict) as info, storage.transaction() as uow:
        uow.insert_round(round_row("r2"))  # a second open round of one player and game
    assert info.value.reason == "ROUND_IN_PROGRESS"
    with pytest.raises(Conflict) as info, storage.transaction() as uow:
        uow.insert_shoe(shoe("s2"))  # a second current shoe of one player and game
    assert info.value.reason == "CONCURRENT_UPDATE"
    with storage.snapshot() as uow:
        found = uow.get_round(OP, "r1")
        assert found is not None and found.version == 2
        assert uow.get_round(OP, "r2") is None and uow.get_shoe(OP, "s2") is None


def test_one_current_shoe_per_player_game_and_mode(storage: Storage) -> None:
    # demo play must never deal from (and so show the cards of) a real-money shoe
    with storage.transaction() as uow:
        uow.insert_shoe(shoe("real"))
        uow.insert_shoe(shoe("demo", mode=Mode.DEMO))
    with pytest.raises(Conflict), storage.transaction() as uow:
        uow.insert_shoe(shoe("demo2", mode=Mode.DEMO))
    with storage.snapshot() as uow:
        real = uow.current_shoe(OP, "ann", "snap", Mode.REAL)
        demo = uow.current_shoe(OP, "ann", "snap", Mode.DEMO)
        assert real is not None and (real.shoe_id, real.mode) == ("real", Mode.REAL)
        assert demo is not None and (demo.shoe_id, demo.mode) == ("demo", Mode.DEMO)
        assert uow.get_shoe(OP, "demo") == demo


def test_a_failed_transaction_leaves_nothing_and_snapshots_are_read_only(storage: Storage
                                                                         ) -> None:
    ann = AccountKey(OP, "ann", EUR, Mode.REAL)
    cash = ann.other("@cash")
    with storage.transaction() as uow:
        uow.open_account(ann, AccountKind.PLAYER)
        uow.open_account(cash, AccountKind.SYSTEM)
        uow.post(Posting(cash, ann, 500, EntryKind.DEPOSIT))
    with pytest.raises(IllegalState) as info, storage.transaction() as uow:
        uow.post(Posting(cash, ann, 100, EntryKind.DEPOSIT))  # applied, then rolled back
        uow.post(Posting(ann, cash, 1000, EntryKind.WITHDRAWAL))
    assert info.value.reason == "INSUFFICIENT_FUNDS"
    with storage.snapshot() as uow:
        assert uow.get_balance(ann) == 500 and uow.get_balance(cash) == -500
        assert len(uow.list_entries(ann, 10, None)) == 1
        with pytest.raises(RuntimeError):
            uow.open_account(ann.other("bob"), AccountKind.PLAYER)
    with pytest.raises(RuntimeError), storage.transaction(), storage.transaction():
        pass  # one transaction per thread at a time


def test_postings_keep_balances_and_entries_in_step(storage: Storage) -> None:
    ann = AccountKey(OP, "ann", EUR, Mode.REAL)
    cash, house = ann.other("@cash"), ann.other("@house")
    with storage.transaction() as uow:
        assert uow.open_account(ann, AccountKind.PLAYER)
        assert not uow.open_account(ann, AccountKind.PLAYER)
        uow.open_account(cash, AccountKind.SYSTEM)
        uow.open_account(house, AccountKind.SYSTEM)
        uow.post(Posting(cash, ann, 700, EntryKind.DEPOSIT, request_id="d1"))
        uow.insert_shoe(shoe())
        uow.insert_round(round_row("r1"))
        stake = uow.post(Posting(ann, house, 200, EntryKind.STAKE, "r1", 0))
    assert (stake.source_balance_after, stake.target_balance_after) == (500, 200)
    with storage.snapshot() as uow:
        entries = uow.list_entries(ann, 10, None)
        assert [e.kind for e in entries] == [EntryKind.STAKE, EntryKind.DEPOSIT]
        assert entries[0].entry_id > entries[1].entry_id
        assert uow.list_entries(ann, 10, entries[0].entry_id) == entries[1:]
        assert uow.round_entries(OP, "r1") == [stake]
        assert uow.get_balance(house) == 200 and uow.get_balance(ann.other("bob")) is None


def test_a_posting_past_the_64_bit_balance_limit_is_refused_and_changes_nothing(
        storage: Storage) -> None:
    ann = AccountKey(OP, "ann", EUR, Mode.REAL)
    cash = ann.other("@cash")
    limit = 2**63 - 1
    with storage.transaction() as uow:
        uow.open_account(ann, AccountKind.PLAYER)
        uow.open_account(cash, AccountKind.SYSTEM)
        uow.post(Posting(cash, ann, limit, EntryKind.DEPOSIT, request_id="d1"))
    for source, target in ((cash, ann), (cash, ann.other("bob"))):
        with pytest.raises(IllegalState) as err, storage.transaction() as uow:
            uow.open_account(target, AccountKind.PLAYER)
            uow.post(Posting(source, target, 1, EntryKind.DEPOSIT, request_id="d2"))
        assert err.value.reason == "BALANCE_LIMIT"
    with storage.snapshot() as uow:
        assert (uow.get_balance(ann), uow.get_balance(cash)) == (limit, -limit)
        assert uow.get_balance(ann.other("bob")) is None


#: a player's account and two system accounts of one operator, currency and mode
PLAYER_CASH_HOUSE: tuple[AccountKey, AccountKey, AccountKey] = (
    AccountKey(OP, "ann", EUR, Mode.REAL), AccountKey(OP, "@cash", EUR, Mode.REAL),
    AccountKey(OP, "@house", EUR, Mode.REAL))


def two_replicas(database_url: str, *, deposit: int, staked: int) -> tuple[Storage, Storage]:
    """Two storages on one database (``here`` and ``there``, as two replicas) with
    :data:`PLAYER_CASH_HOUSE` opened by ``here``, ``deposit`` moved from cash to the player and
    ``staked`` from the player to the house: ``here`` knows all three balances."""
    ann, cash, house = PLAYER_CASH_HOUSE
    here, there = open_storage(database_url), open_storage(database_url)
    with here.transaction() as uow:
        for account, kind in ((ann, AccountKind.PLAYER), (cash, AccountKind.SYSTEM),
                              (house, AccountKind.SYSTEM)):
            uow.open_account(account, kind)
        uow.post(Posting(cash, ann, deposit, EntryKind.DEPOSIT))
        uow.post(Posting(ann, house, staked, EntryKind.DEPOSIT))
    return here, there


def test_postings_from_balances_another_replica_moved_are_made_from_the_stored_ones(
        database_url: str) -> None:
    # SQLite starts a posting from the balances its own committed transactions left, checked
    # by each account's write (storage/sql/ledger.py): another replica's postings in between
    # must be found, whichever account they moved, and a refusal decided on the stored ones
    ann, cash, house = PLAYER_CASH_HOUSE
    here, there = two_replicas(database_url, deposit=1000, staked=100)  # both known to ``here``
    try:
        steps = [
            # (replica, source, target, amount): the target moved elsewhere, the source
            # moved elsewhere (after the target's write), both, neither
            (there, house, ann, 30), (here, ann, house, 50),
            (there, cash, ann, 7), (here, ann, house, 5),
            (there, ann, cash, 11), (here, house, ann, 20),
            (there, house, cash, 3), (there, cash, ann, 2), (here, ann, house, 40),
            (here, ann, house, 1),
        ]
        for replica, source, target, amount in steps:
            with replica.transaction() as uow:
                entry = uow.post(Posting(source, target, amount, EntryKind.DEPOSIT))
            with replica.snapshot() as uow:
                assert (entry.source_balance_after, entry.target_balance_after) == (
                    uow.get_balance(source), uow.get_balance(target))
        # the balance ``here`` knows covers the stake, the stored one does not: refused, and
        # nothing changed
        with there.transaction() as uow:
            uow.post(Posting(ann, cash, 810, EntryKind.WITHDRAWAL))
        with there.snapshot() as uow:
            before = [uow.get_balance(a) for a in (ann, cash, house)]
            entries = len(uow.list_entries(ann, 100, None))
        assert before[0] < 60
        with pytest.raises(IllegalState) as err, here.transaction() as uow:
            uow.post(Posting(ann, house, 60, EntryKind.DEPOSIT))
        assert err.value.reason == "INSUFFICIENT_FUNDS"
        assert err.value.metadata["balance_minor"] == str(before[0])  # the stored one
        with here.snapshot() as uow:
            assert [uow.get_balance(a) for a in (ann, cash, house)] == before
            assert len(uow.list_entries(ann, 100, None)) == entries
        # the other way: the balance ``here`` knows is too low, the stored one is enough
        with there.transaction() as uow:
            uow.post(Posting(cash, ann, 500, EntryKind.DEPOSIT))
        with here.transaction() as uow:
            entry = uow.post(Posting(ann, house, 60, EntryKind.DEPOSIT))
        assert entry.source_balance_after == before[0] + 500 - 60
        with here.snapshot() as uow:
            assert uow.get_balance(ann) == before[0] + 440
            assert uow.get_balance(house) == entry.target_balance_after
            history = uow.list_entries(ann, 100, None)
        # every entry's balances are the running sums of the postings (as reading first gives)
        balance = 0
        for e in reversed(history):
            balance += e.amount if e.target == "ann" else -e.amount
            assert (e.target_balance_after if e.target == "ann" else e.source_balance_after
                    ) == balance
    finally:
        here.close()
        there.close()


def test_a_posting_refused_after_its_target_was_written_changes_nothing(
        database_url: str) -> None:
    # the target's write confirmed its known balance, the source's did not (another replica
    # spent it): the stored source cannot cover the posting, and the target's write is undone
    ann, cash, house = PLAYER_CASH_HOUSE
    here, there = two_replicas(database_url, deposit=100, staked=10)
    try:
        with there.transaction() as uow:
            uow.post(Posting(ann, cash, 80, EntryKind.WITHDRAWAL))  # house untouched
        with here.transaction() as uow:
            with pytest.raises(IllegalState) as err:
                uow.post(Posting(ann, house, 50, EntryKind.DEPOSIT))
            assert err.value.reason == "INSUFFICIENT_FUNDS"
            assert uow.get_balance(house) == 10 and uow.get_balance(ann) == 10
            entry = uow.post(Posting(ann, house, 10, EntryKind.DEPOSIT))  # what it can cover
        assert (entry.source_balance_after, entry.target_balance_after) == (0, 20)
        with here.snapshot() as uow:
            assert (uow.get_balance(ann), uow.get_balance(house)) == (0, 20)
    finally:
        here.close()
        there.close()


def second_writer_waits(storage: Storage, database_url: str) -> bool:
    """Whether another write transaction is blocked behind the open one: on PostgreSQL a backend
    of this database waiting for a request's advisory lock (pg_locks), on SQLite a thread queued
    for the one writer (the storage's write queue)."""
    if backend_of(database_url) == "postgresql":
        rows = run_sql(database_url,
                       "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                       "AND classid::bigint = ? AND database = "
                       "(SELECT oid FROM pg_database WHERE datname = current_database())",
                       REQUEST_LOCK_CLASS)
        return bool(rows[0][0])
    return bool(storage._group.queued)  # type: ignore[attr-defined]


def test_a_concurrent_duplicate_request_reads_the_first_answer(
        storage: Storage, database_url: str) -> None:
    """While one transaction holds request id "dup" (looked up, not yet answered), a second
    looking it up waits, then reads the first one's stored answer: one answer per request id
    across threads (and, on PostgreSQL, across replicas)."""
    first_looked = threading.Event()
    seen: list[StoredResponse | None] = []

    def second() -> None:
        first_looked.wait(10)
        with storage.transaction() as uow:
            seen.append(uow.get_response(OP, "dup"))

    thread = threading.Thread(target=second)
    thread.start()
    with storage.transaction() as uow:
        assert uow.get_response(OP, "dup") is None
        first_looked.set()
        # the answer is stored only once the second transaction is seen waiting for it
        wait_until(lambda: second_writer_waits(storage, database_url),
                   "the second transaction waits for the first")
        assert not seen
        uow.put_response(OP, "dup", StoredResponse("deposit", "h" * 64, b"first"))
    thread.join(20)
    assert seen == [StoredResponse("deposit", "h" * 64, b"first")]


def test_ping_answers(storage: Storage) -> None:
    storage.ping()
    storage.ping(timeout=0.5)


def test_one_request_id_sent_to_two_replicas_at_once_deposits_once(database_url: str) -> None:
    """Two storage objects on one database (two replicas) get the same deposit at once: both
    answer the first answer, and the money moves once."""
    replicas = [open_storage(database_url) for _ in range(2)]
    try:
        wallets = [WalletService(storage) for storage in replicas]
        start = threading.Barrier(2)
        answers: list[object] = [None, None]

        def deposit(i: int) -> None:
            start.wait(10)
            answers[i] = wallets[i].deposit(OP, "ann", EUR, 250, request_id="same")

        threads = [threading.Thread(target=deposit, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert answers[0] is not None and answers[0] == answers[1]
        assert wallets[1].get_balance(OP, "ann", EUR).balance == 250
    finally:
        for storage in replicas:
            storage.close()


def test_operators_are_added_once_and_listed(storage: Storage) -> None:
    """Provisioning a tenant (``fairshoe operators add``): a second add changes nothing; each
    operator's data is apart from the others' (an account of the same player id)."""
    assert add_operator(storage, "op-a") is True
    assert add_operator(storage, "op-a") is False
    with pytest.raises(InvalidInput) as info:
        add_operator(storage, "no spaces")
    assert info.value.field == "operator"
    assert [name for name, _ in list_operators(storage)] == ["default", "op-a"]
    with storage.transaction() as uow:
        assert uow.operator_exists("op-a") and not uow.operator_exists("op-b")
    wallet = WalletService(storage)
    wallet.deposit("op-a", "ann", EUR, 700, request_id="op-a-1")
    assert wallet.get_balance("op-a", "ann", EUR).balance == 700
    assert wallet.get_balance(OP, "ann", EUR).balance == 0


def test_migration_6_gives_existing_entries_public_ids(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # before 0006 a transaction id was entry_id, a counter all operators share; existing entries
    # get random public ids, and a stored deposit answer names its entry by it
    url = (str(request.getfixturevalue("pg_empty_url")) if backend == "postgresql"
           else str(tmp_path / "fairshoe.db"))
    every = schema.migrations
    monkeypatch.setattr(schema, "migrations", lambda dialect: every(dialect)[:5])
    open_storage(url).close()  # schema v5
    now = utc_now()
    run_sql(url, "INSERT INTO operators VALUES ('op-b', ?)", now)
    for op in (OP, "op-b"):
        run_sql(url, "INSERT INTO accounts VALUES (?, 'ann', 'EUR', 'REAL', 'player', 500, ?), "
                "(?, '@cash', 'EUR', 'REAL', 'system', -500, ?)", op, now, op, now)
        (entry_id,), = run_sql(
            url, "INSERT INTO ledger_entries (operator, currency, mode, source, target, amount, "
            "kind, request_id, source_balance_after, target_balance_after, created_at) VALUES "
            "(?, 'EUR', 'REAL', '@cash', 'ann', 500, 'deposit', 'd1', -500, 500, ?) "
            "RETURNING entry_id", op, now)
        answer = {"entry_id": entry_id, "kind": "deposit", "amount": 500, "balance_after": 500,
                  "round_id": None, "wager_id": None, "request_id": "d1", "created_at": now,
                  "reference": None}
        digest = request_hash("deposit", {"player": "ann", "currency": EUR, "amount": 500})
        run_sql(url, "INSERT INTO idempotency VALUES (?, 'd1', 'deposit', ?, ?, ?)",
                op, digest, json.dumps(answer).encode(), now)
    monkeypatch.setattr(schema, "migrations", every)
    migrated = open_storage(url)  # applies 0006
    ids = dict(run_sql(url, "SELECT operator, public_id FROM ledger_entries"))
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids.values())
    assert len(set(ids.values())) == 2
    wallet = WalletService(migrated)
    for op in (OP, "op-b"):
        again = wallet.deposit(op, "ann", EUR, 500, request_id="d1")  # the stored answer
        assert (again.transaction_id, again.created_at) == (ids[op], now)
        listed = wallet.list_transactions(op, "ann", EUR).transactions
        assert [t.transaction_id for t in listed] == [ids[op]]
    migrated.close()


def test_migration_5_gives_existing_shoes_the_money_they_served(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # before 0005 one shoe served demo and real rounds alike; after it, no real round may deal
    # from a shoe whose cards demo play has shown, nor a demo round from a real-money shoe
    url = (str(request.getfixturevalue("pg_empty_url")) if backend == "postgresql"
           else str(tmp_path / "fairshoe.db"))
    every = schema.migrations
    monkeypatch.setattr(schema, "migrations", lambda dialect: every(dialect)[:4])
    open_storage(url).close()  # schema v4
    now = utc_now()
    shoes = {  # shoe id: (status, the modes and statuses of its rounds)
        "demo-only": ("in_play", [("DEMO", "finished")]),
        "real-only": ("in_play", [("REAL", "finished")]),
        "mixed": ("in_play", [("DEMO", "finished"), ("REAL", "finished")]),
        "mixed-open": ("in_play", [("REAL", "finished"), ("DEMO", "open")]),
        "mixed-revealed": ("revealed", [("DEMO", "finished"), ("REAL", "finished")]),
        "unused": ("committed", []),
    }
    for n, (shoe_id, (status, rounds)) in enumerate(shoes.items()):
        player = f"p{n}"
        run_sql(url, "INSERT INTO shoes VALUES (?, ?, ?, 'snap', ?, 2, '1/2', ?, ?, ?, 4, 1, ?, "
                "3, ?, ?)", OP, shoe_id, player, "d" * 64, "c" * 64, b"sealed", b"",
                status, now, now)
        for i, (mode, round_status) in enumerate(rounds):
            run_sql(url, "INSERT INTO rounds VALUES (?, ?, ?, 'snap', ?, 'medium', ?, 'EUR', ?, "
                    "1, ?, ?, ?, ?)", OP, f"{shoe_id}-{i}", player, "d" * 64, mode,
                    round_status, b"{}", shoe_id, now, now)
    monkeypatch.setattr(schema, "migrations", every)
    open_storage(url).close()  # applies 0005
    found = {r[0]: (r[1], r[2], r[3]) for r in run_sql(
        url, "SELECT shoe_id, mode, status, version FROM shoes")}
    assert found == {
        "demo-only": ("DEMO", "in_play", 3), "real-only": ("REAL", "in_play", 3),
        "mixed": ("REAL", "finished", 4),  # retired: start-up recovery reveals it
        "mixed-open": ("REAL", "in_play", 3),  # its open round still deals from it
        "mixed-revealed": ("REAL", "revealed", 3), "unused": ("REAL", "committed", 3)}
    reopened = open_storage(url)
    with reopened.snapshot() as uow:
        assert [s.shoe_id for s in uow.finished_unrevealed_shoes()] == ["mixed"]
        demo = uow.current_shoe(OP, "p0", "snap", Mode.DEMO)
        assert demo is not None and demo.shoe_id == "demo-only"
        assert uow.current_shoe(OP, "p0", "snap", Mode.REAL) is None
    reopened.close()


def test_an_operator_seen_only_by_a_rolled_back_transaction_is_unknown(storage: Storage) -> None:
    """A storage remembers operators that committed transactions saw (they are never deleted);
    one added and seen by a transaction that rolled back is not taken as existing."""
    with pytest.raises(RuntimeError), storage.transaction() as uow:
        assert uow.add_operator("op-gone") and uow.operator_exists("op-gone")
        raise RuntimeError("crash before commit")
    for _ in range(2):
        with storage.transaction() as uow:
            assert not uow.operator_exists("op-gone") and uow.operator_exists(OP)
        with storage.snapshot() as uow:
            assert not uow.operator_exists("op-gone") and uow.operator_exists(OP)


def test_an_operator_another_replica_added_is_found(database_url: str) -> None:
    first, second = open_storage(database_url), open_storage(database_url)
    try:
        with second.snapshot() as uow:
            assert not uow.operator_exists("op-new")
        assert add_operator(first, "op-new") is True
        for _ in range(2):
            with second.transaction() as uow:
                assert uow.operator_exists("op-new")
    finally:
        first.close()
        second.close()


def test_an_account_is_known_only_once_a_transaction_that_opened_it_committed(
        storage: Storage) -> None:
    """Opening an account a committed transaction opened or found runs no statement
    (storage/known.py); one opened by a transaction that rolled back is opened again."""
    ann = AccountKey(OP, "ann-known", EUR, Mode.REAL)
    with pytest.raises(RuntimeError), storage.transaction() as uow:
        assert uow.open_account(ann, AccountKind.PLAYER)
        raise RuntimeError("rolled back")
    with storage.transaction() as uow:
        assert uow.open_account(ann, AccountKind.PLAYER)  # the first one's row is gone
    with storage.transaction() as uow:
        assert not uow.open_account(ann, AccountKind.PLAYER)
        assert uow.get_balance(ann) == 0
    with storage.snapshot() as uow, pytest.raises(RuntimeError):
        uow.open_account(ann, AccountKind.PLAYER)  # still no write through a snapshot


def test_balance_and_wallet_read_together(storage: Storage) -> None:
    """A StartRound's first read: the balance (None without an account) and the operator's
    wallet kind (None until set), as their own reads give them."""
    ann = AccountKey(OP, "ann-bw", EUR, Mode.REAL)
    with storage.transaction() as uow:
        assert uow.balance_and_wallet(ann) == (None, None)
        uow.open_account(ann, AccountKind.PLAYER)
        uow.open_account(ann.other("@cash"), AccountKind.SYSTEM)
        uow.post(Posting(ann.other("@cash"), ann, 700, EntryKind.DEPOSIT))
        uow.put_wallet_config(WalletConfig(OP, WalletKind.GRPC, "wallet:443", 2000))
    with storage.snapshot() as uow:
        assert uow.balance_and_wallet(ann) == (700, WalletKind.GRPC)
        assert uow.balance_and_wallet(ann.other("bob")) == (None, WalletKind.GRPC)
        assert uow.balance_and_wallet(ann)[1] == uow.wallet_config(OP).kind  # type: ignore[union-attr]
