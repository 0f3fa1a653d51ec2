"""CPU and SQL statements per round transition, in process (no gRPC), on a real database.

    .venv/bin/python bench/bench_transition.py [--rounds 400] [--database URL] [--profile N]

One thread plays complete rounds of all four games in turn through ``RoundService`` exactly as
the live server wires it (OS-seeded shoes, a real seed vault and signing key, SQLite in WAL mode
with ``synchronous=FULL`` in a temporary directory unless ``--database`` names another file or a
``postgresql://`` URL): ``start_round``, then ``act`` until the round is settled (the strategy of
``bench_service.py``). For ``start_round`` and ``act`` separately it reports the calls, the
thread's CPU time per call (``time.thread_time``: what the machine's other load does not
change, unlike wall time), the wall time per call (each transaction waits for its own fsync here:
nothing shares a COMMIT) and, on SQLite, the SQL statements each call ran (``BEGIN``/``COMMIT``
and savepoints included). ``--profile N`` prints the N functions with the most own CPU time
(``BENCH_SORT=cumulative`` sorts by time including callees).

On SQLite it also measures a **durable floor** in the same run: the least a transition could
cost and still be a durable, signed step of a round. One transaction on a connection of its own
(same pragmas, its own file beside the storage's) that writes what a transition writes at the
sizes this run stored (the round's state, the stored answer, a log leaf with its envelope) and
commits, plus one Ed25519 signature over an envelope-sized payload. ``/floor`` is each call's
CPU in units of it: what the Python around the storage and the engine costs beyond the
irreducible write and signature.

``--turns N`` measures instead what a SQLite write costs when the writer's turn comes from
another process (``serve --processes 2`` with both busy): two storages on one file (two writer
connections, as two serving processes have), the thread playing on the first alone for a block of
transitions, then on both in turn (each transaction then begins after the other storage's
COMMIT), ``N`` blocks of each alternated. SQLite drops a connection's whole page cache when it
finds that another connection wrote the database (WAL mode), so every page the transaction touches
is read again; printed are the thread's CPU and the read system calls (``/proc/thread-self/io``)
per transition, and the difference per turn. Each transaction is its own COMMIT here, the worst
case: a served batch of several shares one re-read.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import itertools
import os
import pstats
import secrets
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from tables import print_table

from game_math.round import Action, ActionKind, HandBet
from rng_service.core.logs import configure_logging
from rng_service.crypto.keys import SigningKey
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.ports import DEFAULT_OPERATOR, Mode, Storage
from rng_service.service.rounds import RoundService
from rng_service.service.views import RoundView
from rng_service.service.wallet import WalletService
from rng_service.storage import backend_of, open_storage

GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
BET = 1000
COLUMNS = ("call", "calls", "CPU us/call", "wall us/call", "SQL statements/call", "/floor")
T = TypeVar("T")


@dataclass
class Tally:
    """What the calls of one kind cost, summed."""

    calls: int = 0
    cpu: float = 0.0
    wall: float = 0.0
    statements: int = 0


class Statements:
    """Counts the statements SQLite runs on the storage's connections (every connection the
    storage opens after :meth:`attach`): each ``execute`` is one, each row of an
    ``executemany`` one (as SQLite steps the statement once per row).

    Counted in the connection's ``execute``/``executemany`` (a :class:`sqlite3.Connection`
    subclass given to ``connect`` as its ``factory``), not with ``set_trace_callback``: on
    Python 3.11 a trace callback has SQLite expand every bound parameter into the statement's
    text (the hex of kilobyte blobs), a cost the measured CPU would include. Statements run
    through a cursor of the connection's own are not counted (the storage runs none)."""

    def __init__(self) -> None:
        self.count = 0

    def connection_class(self) -> type[sqlite3.Connection]:
        """A connection class that adds its statements to this counter."""
        counter = self

        class Counting(sqlite3.Connection):
            def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
                counter.count += 1
                return super().execute(*args, **kwargs)

            def executemany(self, sql: str, rows: Any, /) -> sqlite3.Cursor:
                rows = rows if isinstance(rows, list | tuple) else list(rows)
                counter.count += len(rows)
                return super().executemany(sql, rows)

        return Counting

    @contextmanager
    def attach(self) -> Iterator[None]:
        real = sqlite3.connect
        factory = self.connection_class()

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            kwargs.setdefault("factory", factory)
            conn: sqlite3.Connection = real(*args, **kwargs)
            return conn

        sqlite3.connect = connect  # type: ignore[assignment]
        try:
            yield
        finally:
            sqlite3.connect = real


def decide(view: RoundView) -> Action:
    """Decline insurance and even money; hit below 12, else stand (as bench_service.py)."""
    if view.decision == "insurance":
        return Action(ActionKind.INSURANCE, 0)
    if view.decision == "even_money":
        return Action(ActionKind.EVEN_MONEY, accept=False)
    hand = next(h for h in view.hands if h.hand_id == view.turn_hand)
    return Action(ActionKind.HIT if hand.total < 12 else ActionKind.STAND)


def timed(tally: Tally, counter: Statements, call: Callable[[], T]) -> T:
    before = counter.count
    cpu, wall = time.thread_time(), time.perf_counter()
    result = call()
    tally.wall += time.perf_counter() - wall
    tally.cpu += time.thread_time() - cpu
    tally.statements += counter.count - before
    tally.calls += 1
    return result


def play(rounds: RoundService, players: list[str], count: int, counter: Statements
         ) -> dict[str, Tally]:
    tallies = {"start_round": Tally(), "act": Tally()}
    ids = iter(range(10**9))
    run_id = secrets.token_hex(4)  # request ids never repeat: none is a stored answer
    for i in range(count):
        start = partial(rounds.start_round, DEFAULT_OPERATOR, players[i % len(players)],
                        GAMES[i % len(GAMES)], mode=Mode.REAL, currency="EUR",
                        hands=[HandBet(BET)], request_id=f"{run_id}-{next(ids)}")
        view = timed(tallies["start_round"], counter, start)
        while view.status == "awaiting":
            act = partial(rounds.act, DEFAULT_OPERATOR, view.round_id, decide(view),
                          hand_id=view.turn_hand, expected_version=view.version,
                          request_id=f"{run_id}-{next(ids)}")
            view = timed(tallies["act"], counter, act)
    return tallies


def transitions(rounds: RoundService, players: list[str]) -> Iterator[None]:
    """Plays rounds as :func:`play` does, one transition per ``next()``."""
    ids = itertools.count()
    run_id = secrets.token_hex(4)
    for i in itertools.count():
        player, game = players[i % len(players)], GAMES[i % len(GAMES)]
        view = rounds.start_round(DEFAULT_OPERATOR, player, game, mode=Mode.REAL,
                                  currency="EUR", hands=[HandBet(BET)],
                                  request_id=f"{run_id}-{next(ids)}")
        yield
        while view.status == "awaiting":
            view = rounds.act(DEFAULT_OPERATOR, view.round_id, decide(view),
                              hand_id=view.turn_hand, expected_version=view.version,
                              request_id=f"{run_id}-{next(ids)}")
            yield


def read_syscalls() -> int:
    """This thread's read system calls so far (``read``, ``pread64`` and the like)."""
    with open("/proc/thread-self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("syscr"))


@dataclass
class TurnTally:
    calls: int = 0
    cpu: float = 0.0
    reads: int = 0
    statements: int = 0

    def step(self, player: Iterator[None], counter: Statements) -> None:
        statements, reads, cpu = counter.count, read_syscalls(), time.thread_time()
        next(player)
        self.cpu += time.thread_time() - cpu
        self.reads += read_syscalls() - reads
        self.statements += counter.count - statements
        self.calls += 1


def turns(database: str, blocks: int, per_block: int = 200) -> None:
    """One storage's transitions alone against two storages' on one file taking turns."""
    counter = Statements()
    with counter.attach(), open(os.devnull, "w") as devnull:
        with contextlib.redirect_stderr(devnull):
            configure_logging("INFO")
        first, second = open_storage(database), open_storage(database)
        try:
            players = []
            for storage in (first, second):
                names = [f"bench-{secrets.token_hex(4)}-{i}" for i in range(4)]
                for name in names:
                    WalletService(storage).deposit(DEFAULT_OPERATOR, name, "EUR", 10**9,
                                                   request_id=f"fund-{name}")
                players.append(transitions(RoundService(
                    storage, vault=SeedVault(secrets.token_bytes(32)),
                    signer=SigningKey.generate()), names))
            a, b = players
            warm = TurnTally()
            for _ in range(per_block):  # imports, caches, first connections
                warm.step(a, counter)
                warm.step(b, counter)
            alone, taking_turns = TurnTally(), TurnTally()
            for _ in range(blocks):
                for _ in range(per_block):
                    alone.step(a, counter)
                for _ in range(per_block // 2):
                    taking_turns.step(a, counter)
                    taking_turns.step(b, counter)
        finally:
            first.close()
            second.close()
    rows = [[name, str(t.calls), f"{t.cpu / t.calls * 1e6:.0f}", f"{t.reads / t.calls:.1f}",
             f"{t.statements / t.calls:.1f}", f"{t.cpu / t.calls / alone.cpu * alone.calls:.3f}"]
            for name, t in (("one storage alone", alone), ("two taking turns", taking_turns))]
    print(f"{blocks} blocks of {per_block} transitions each way, alternated, SQLite, one thread; "
          f"load average {os.getloadavg()[0]:.1f}")
    print_table(("writers", "transitions", "CPU us/transition", "read syscalls/transition",
                 "SQL statements/transition", "/alone"), rows)
    extra_cpu = taking_turns.cpu / taking_turns.calls - alone.cpu / alone.calls
    extra_reads = taking_turns.reads / taking_turns.calls - alone.reads / alone.calls
    print(f"a turn after another writer's COMMIT: {extra_reads:+.1f} read syscalls, "
          f"{extra_cpu * 1e6:+.0f} us of CPU")


def run(database: str, count: int, profile: int) -> None:
    counter = Statements()
    with counter.attach(), open(os.devnull, "w") as devnull:
        with contextlib.redirect_stderr(devnull):  # JSON log lines as served, written nowhere
            configure_logging("INFO")
        storage: Storage = open_storage(database)
        _measure(storage, database, count, profile, counter)


def funded_service(storage: Storage) -> tuple[RoundService, list[str]]:
    """A round service on ``storage`` with a fresh vault and key, and four players funded far
    beyond what a benchmark stakes (the players this module's :func:`play` takes turns with)."""
    rounds = RoundService(storage, vault=SeedVault(secrets.token_bytes(32)),
                          signer=SigningKey.generate())
    wallet = WalletService(storage)
    players = [f"bench-{secrets.token_hex(4)}-{i}" for i in range(4)]
    for p in players:
        wallet.deposit(DEFAULT_OPERATOR, p, "EUR", 10**9, request_id=f"fund-{p}")
    return rounds, players


def _measure(storage: Storage, database: str, count: int, profile: int, counter: Statements
             ) -> None:
    try:
        rounds, players = funded_service(storage)
        play(rounds, players, 8, counter)  # warm-up: imports, caches, first connections
        profiler = cProfile.Profile(time.thread_time) if profile else None
        if profiler is not None:
            profiler.enable()
        tallies = play(rounds, players, count, counter)
        if profiler is not None:
            profiler.disable()
    finally:
        storage.close()
    sqlite = backend_of(database) == "sqlite"
    floor = durable_floor(Path(database), count * 2) if sqlite else None
    rows = [[name, str(t.calls), f"{t.cpu / t.calls * 1e6:.0f}", f"{t.wall / t.calls * 1e6:.0f}",
             f"{t.statements / t.calls:.1f}" if sqlite else "-",
             f"{t.cpu / t.calls / floor.cpu * floor.calls:.1f}" if floor else "-"]
            for name, t in tallies.items()]
    if floor is not None:
        rows.append(["durable floor", str(floor.calls), f"{floor.cpu / floor.calls * 1e6:.0f}",
                     f"{floor.wall / floor.calls * 1e6:.0f}",
                     f"{floor.statements / floor.calls:.1f}", "1.0"])
    print(f"{count} rounds on {backend_of(database)}, one thread")
    print_table(COLUMNS, rows)
    if profiler is not None:
        order = os.environ.get("BENCH_SORT", "tottime")
        pstats.Stats(profiler).sort_stats(order).print_stats(profile)


def stored_sizes(database: Path) -> tuple[int, int, int]:
    """Mean bytes of a round's state, a stored answer and a logged envelope in ``database``."""
    with contextlib.closing(sqlite3.connect(database)) as conn:
        return tuple(int(conn.execute(f"SELECT avg(length({column})) FROM {table}").fetchone()[0])
                     for column, table in (("state", "rounds"), ("response", "idempotency"),
                                           ("envelope", "records")))  # type: ignore[return-value]


#: bytes of the pool the durable floor's blobs are sliced from (more than any blob)
_POOL = 1 << 16


def _slice(pool: bytes, i: int, size: int) -> bytes:
    """``size`` bytes of ``pool`` at an offset that moves with ``i`` (the blobs differ)."""
    size = min(size, len(pool) // 2)
    start = (i * 4099) % (len(pool) - size)
    return pool[start : start + size]


def durable_floor(database: Path, calls: int) -> Tally:
    """The durable floor's cost over ``calls`` transactions (see the module's docstring)."""
    state, answer, envelope = stored_sizes(database)
    key = SigningKey.generate()
    path = database.with_name("floor.db")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE rounds (id INTEGER PRIMARY KEY, version INTEGER, state BLOB)")
        conn.execute("CREATE TABLE answers (id TEXT PRIMARY KEY, response BLOB)")
        conn.execute("CREATE TABLE leaves (leaf_index INTEGER PRIMARY KEY, hash BLOB, entry BLOB)")
        conn.execute("INSERT INTO rounds VALUES (1, 0, ?)", (os.urandom(state),))
        # made before the clock runs, as slices of one random pool of a fixed size: under
        # callgrind (bench_transition_count.py) the whole process is counted, and random bytes
        # drawn per call (from its seeded generator, in Python) were counted in the floor
        pool = os.urandom(_POOL)
        blobs = [tuple(_slice(pool, i, size) for size in (state, answer, envelope))
                 for i in range(calls)]
        tally = Tally()
        for i, (state_bytes, answer_bytes, payload) in enumerate(blobs):
            cpu, wall = time.thread_time(), time.perf_counter()
            entry = payload + key.sign(payload)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE rounds SET version = ?, state = ? WHERE id = 1",
                         (i, state_bytes))
            conn.execute("INSERT INTO answers VALUES (?, ?)", (f"r-{i}", answer_bytes))
            conn.execute("INSERT INTO leaves VALUES (?, ?, ?)",
                         (i, hashlib.sha256(entry).digest(), entry))
            conn.execute("COMMIT")
            tally.wall += time.perf_counter() - wall
            tally.cpu += time.thread_time() - cpu
        tally.calls, tally.statements = calls, 5 * calls
        return tally
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=400, help="measured rounds (default 400)")
    parser.add_argument("--database", default=None,
                        help="a SQLite file or postgresql:// URL (default: a temporary SQLite)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the N functions with the most own CPU time")
    parser.add_argument("--turns", type=int, default=0, metavar="N",
                        help="instead: N blocks of one SQLite writer alone against two taking "
                             "turns (what a second serving process costs a write)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-transition-"))
    try:
        database = args.database or str(root / "fairshoe.db")
        if args.turns:
            turns(database, args.turns)
        else:
            run(database, args.rounds, args.profile)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
