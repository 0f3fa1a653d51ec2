"""Rounds on the seamless wallet: ``StartRound`` and ``Act`` over gRPC with the operator's wallet
answering in 0, 5 and 50 ms, beside the internal ledger in the same run.

    .venv/bin/python bench/bench_wallet.py [--clients 4] [--seconds 8] [--warmup 1]
                                           [--latencies 0,5,50]

Three processes are started for the whole run (issue 17's last bullet):

* the reference operator wallet, ``tests/support/ref_wallet_server.py`` (its gRPC face, its own
  durable SQLite ledger), whose ``latency_ms`` fault makes it sleep that long before answering
  each call (set for each row by ``RefWallet.faults``);
* two real ``fairshoe serve`` as ``bench_service.py`` starts them (SQLite in WAL mode with
  ``synchronous=FULL``, OS-seeded shoes, logs to a file, metrics on), each on a data directory
  of its own: one whose default operator is on the seamless wallet (``fairshoe operators wallet
  default --kind grpc --endpoint <the reference wallet> --timeout-ms 5000``, run before it
  starts, as ``tests/api/test_seamless_live.py`` does), and one left on the internal ledger, the
  yardstick. Two servers rather than a second operator on one: an operator other than the
  default is chosen by the client certificate under mutual TLS, which this bench would have to
  set up, and two databases keep each setup's outbox, ledger and caches apart. The rows run one
  after the other, so the idle server only wakes once a second.

Each row drives one server with ``--clients`` threads for ``--seconds`` after ``--warmup`` (not
counted), each thread a player (real money, EUR) playing complete rounds of the four games in turn
with ``bench_service.py``'s strategy (stand on 12 or more, else hit; insurance and even money
declined): ``StartRound``, then ``Act`` until the round is settled. Real money is what goes
through the wallet (demo play stays on the internal ledger): a seamless player is funded in the
reference wallet (``RefWallet.fund``), an internal one with ``Deposit``, once each, new players
for every row. A transition is a ``StartRound`` or an ``Act`` answered OK and begun in the
measured window; latencies are the client's, of the whole call, per method.

On the seamless wallet a ``StartRound`` debits the stake and waits for the wallet's answer
before it deals (one call, as this strategy never doubles, splits or insures); an ``Act`` sends
nothing, and the round's credit, written when it finishes, is sent by the server's dispatcher
thread afterwards, one movement at a time (docs/wallet.md). So ``sync wallet calls/transition``
(the window's ``StartRound`` calls over its transitions) is the share of transitions that wait
for the wallet, and two columns say what latency would allow: ``latency bound`` = clients /
(latency x sync wallet calls per transition), each client waiting on nothing but the wallet;
``model`` = 1 / (1 / R0 + (latency - L0) x sync wallet calls per transition / clients), a
transition costing what it costs in the seamless row of the lowest latency L0 (R0, its
transitions/s) plus its share of the extra wait. The model is pessimistic: a client waiting on
the wallet is not queueing in the server, so the others' transitions get cheaper meanwhile.
``credit delay`` is the time from a round's credit being written (the round finished) to the
wallet's acknowledgement recorded, for every round of the row, read from the outbox after it
drained. ``server CPU ms/transition`` is the serve's CPU in the window over the window's
transitions; credits the dispatcher sends after the window (``outbox pending``) are not in it.

After each seamless row the bench waits for the server's outbox to drain (no movement
``pending``), then prints what the reference wallet's own ledger recorded during the row (its
debits, credits and rollbacks, by state) beside the ``StartRound`` calls answered OK in the row
(warm-up included) and the rounds finished: the rounds driven did go through the wallet. It also
prints each server's rounds by ledger (``rounds.wallet``) and its outbox's movements by kind and
state, read from its database. ``outbox pending`` is the server's outbox's pending movements just
after the window (credits the dispatcher has not sent yet: it sends one at a time).

Errors of every call of the run, warm-up included, are counted by method, status code and the
server's reason code and printed with their first messages, never hidden: a failed ``StartRound``
is retried with a new request; a failed ``Act`` re-reads the round and carries on, and a round
failing three times is abandoned (counted).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
from bench_service import (
    BETS,
    CALL_TIMEOUT,
    ENV,
    FAIRSHOE,
    GAMES,
    Clock,
    CpuWindow,
    Process,
    cpu_seconds,
    decide,
    start_fairshoe,
    wait_ready,
)
from tables import print_table

from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.ref_wallet import RefWallet  # type: ignore[import-not-found,unused-ignore]

try:  # the server's reason code, as tests/api/test_rounds_e2e.py reads it
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status
except ImportError:  # pragma: no cover - grpcio-status is a dependency of the server
    rpc_status = None

COLUMNS = ("wallet", "wallet latency ms", "clients", "transitions/s", "/internal", "rounds/s",
           "StartRound p50 ms", "p99 ms", "Act p50 ms", "p99 ms", "errors",
           "server CPU ms/transition", "sync wallet calls/transition", "latency bound", "model",
           "outbox pending", "credit delay p50 s", "p99 s")
INTERNAL, SEAMLESS = "internal", "seamless"
FUNDS = 10**9  # minor units per player: no stake is ever short
DRAIN_TIMEOUT = 60.0  # seconds the outbox may go without progress after a row
SAMPLES = 5  # distinct error messages kept


# ----- errors, counted and never hidden -------------------------------------------------------


class Errors:
    """Failed calls by method, status code and reason code; the first distinct messages."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.samples: list[str] = []
        self._lock = threading.Lock()

    def add(self, method: str, exc: grpc.RpcError) -> None:
        code = exc.code().name if isinstance(exc, grpc.Call) else "?"
        key = " ".join(filter(None, (method, code, reason_of(exc))))
        message = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        with self._lock:
            self.counts[key] += 1
            sample = f"{key}: {message}"
            if len(self.samples) < SAMPLES and sample not in self.samples:
                self.samples.append(sample)

    def total(self) -> int:
        return sum(self.counts.values())


def reason_of(exc: grpc.RpcError) -> str:
    """The server's reason code (google.rpc.ErrorInfo, else the ``fairshoe-reason`` trailer)."""
    if not isinstance(exc, grpc.Call):
        return ""
    if rpc_status is not None:
        status = rpc_status.from_call(exc)
        for packed in status.details if status is not None else ():
            if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                packed.Unpack(info)
                if info.reason:
                    return str(info.reason)
    return str(dict(exc.trailing_metadata() or ()).get("fairshoe-reason", ""))


# ----- the client -----------------------------------------------------------------------------


@dataclass
class Tally:
    """What one player thread saw."""

    starts: list[float] = field(default_factory=list)  # StartRound latencies in the window, s
    acts: list[float] = field(default_factory=list)  # Act latencies in the window, s
    rounds: int = 0  # rounds finished within the window
    started_ok: int = 0  # StartRounds answered OK, warm-up and tail included
    finished: int = 0  # rounds settled, warm-up and tail included
    abandoned: int = 0  # rounds left after three failed Acts


@dataclass(frozen=True)
class Run:
    """One row's drive: the players' tallies, the window and the CPU spent in it."""

    tallies: list[Tally]
    seconds: float
    cpu: dict[str, float]
    errors: Errors

    def latencies(self, method: str) -> list[float]:
        return sorted(x for t in self.tallies for x in (t.starts if method == "StartRound"
                                                          else t.acts))

    @property
    def transitions(self) -> int:
        return len(self.latencies("StartRound")) + len(self.latencies("Act"))

    def total(self, name: str) -> int:
        return sum(int(getattr(t, name)) for t in self.tallies)


def quantile(ordered: Sequence[float], q: float) -> float | None:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def in_window(clock: Clock, started: float) -> bool:
    return clock.counts(started) and started < clock.end


class Players:
    """One player per thread on one server, funded once before it plays."""

    def __init__(self, channel: grpc.Channel, run_id: str, fund: Callable[[str], None],
                 errors: Errors) -> None:
        self.rounds = round_pb2_grpc.RoundServiceStub(channel)
        self.run_id = run_id
        self.fund = fund
        self.errors = errors
        self.ids = 0
        self.lock = threading.Lock()

    def rid(self) -> str:
        with self.lock:
            self.ids += 1
            return f"{self.run_id}-{self.ids}"

    def player(self, i: int) -> str:
        return f"{self.run_id}-p{i}"

    def worker(self, i: int, clock: Clock, tally: Tally) -> None:
        player = self.player(i)
        turn = i
        while clock.running():
            game = GAMES[turn % len(GAMES)]
            turn += 1
            started = time.perf_counter()
            try:
                view = self.rounds.StartRound(round_pb2.StartRoundRequest(
                    player_id=player, game=game, mode=common_pb2.MODE_REAL, currency="EUR",
                    hands=[rt.HandBet(bet_minor=BETS[game])], request_id=self.rid()),
                    timeout=CALL_TIMEOUT).round
            except grpc.RpcError as exc:
                self.errors.add("StartRound", exc)
                time.sleep(0.01)  # no hot loop on a failing server
                continue
            if in_window(clock, started):
                tally.starts.append(time.perf_counter() - started)
            tally.started_ok += 1
            self.play_out(player, view, clock, tally)

    def play_out(self, player: str, view: Any, clock: Clock, tally: Tally) -> None:
        """``Act`` until the round is settled (past the window's end too: its credit is then
        written, so the wallet's credits match the rounds)."""
        failures = 0
        while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            if failures >= 3:
                tally.abandoned += 1
                return
            request = round_pb2.ActRequest(player_id=player, round_id=view.round_id,
                                           hand_id=view.turn.hand_id, action=decide(view),
                                           expected_version=view.version, request_id=self.rid())
            started = time.perf_counter()
            try:
                view = self.rounds.Act(request, timeout=CALL_TIMEOUT).round
            except grpc.RpcError as exc:
                self.errors.add("Act", exc)
                failures += 1
                view = self.reread(player, view)
                continue
            if in_window(clock, started):
                tally.acts.append(time.perf_counter() - started)
        tally.finished += 1
        if clock.counts(time.perf_counter()) and clock.running():
            tally.rounds += 1

    def reread(self, player: str, view: Any) -> Any:
        try:
            return self.rounds.GetRound(round_pb2.GetRoundRequest(
                player_id=player, round_id=view.round_id), timeout=CALL_TIMEOUT).round
        except grpc.RpcError as exc:
            self.errors.add("GetRound", exc)
            return view


def drive(clients: int, clock: Clock, players: Players, server_pid: int,
          wallet_pid: int | None) -> Run:
    """``clients`` player threads until the clock stops (each finishing its round), and the CPU
    the server (and the reference wallet, given its pid) spent in the window."""
    readers: dict[str, Callable[[], float]] = {"server": lambda: cpu_seconds(server_pid)}
    if wallet_pid is not None:
        readers["wallet"] = lambda: cpu_seconds(wallet_pid)
    window = CpuWindow(clock, readers)
    tallies = [Tally() for _ in range(clients)]
    crashed: list[BaseException] = []

    def run(i: int) -> None:
        try:
            players.worker(i, clock, tallies[i])
        except BaseException as exc:  # not an RPC's failure (those are counted): re-raised
            crashed.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if crashed:
        raise crashed[0]
    return Run(tallies, clock.end - clock.begin, window.result(), players.errors)


# ----- the servers -----------------------------------------------------------------------------


def server_env(data: Path) -> dict[str, str]:
    """The environment start_fairshoe gives a serve on ``data`` (for its command line)."""
    env = {k: v for k, v in ENV.items() if not k.startswith("FAIRSHOE_")}
    env["FAIRSHOE_DATA_DIR"] = str(data)
    return env


def start_seamless(data: Path, wallet: RefWallet, extra: dict[str, str]) -> Process:
    data.mkdir(parents=True, exist_ok=True)
    subprocess.run([FAIRSHOE, "operators", "wallet", "default", "--kind", "grpc", "--endpoint",
                    wallet.endpoint, "--timeout-ms", "5000"], env=server_env(data), cwd=data,
                   check=True, capture_output=True)
    return start_fairshoe(data, extra)


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows from a server's database, read-only (its WAL lets a reader in beside it)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def pending(db: Path) -> int:
    return int(query(db, "SELECT count(*) FROM wallet_movements WHERE state = 'pending'")[0][0])


def drain(db: Path) -> float:
    """Seconds until the server's outbox holds no pending movement; RuntimeError if it went
    DRAIN_TIMEOUT seconds without one fewer (a backlog of any size drains, a stuck one fails)."""
    began = progress = time.monotonic()
    left = pending(db)
    while left:
        time.sleep(0.05)
        now, before = time.monotonic(), left
        left = pending(db)
        if left < before:
            progress = now
        elif now - progress > DRAIN_TIMEOUT:
            raise RuntimeError(f"the outbox's {left} pending movements did not drain")
    return time.monotonic() - began


def grouped(db: Path, sql: str) -> str:
    rows = query(db, sql)
    return ", ".join(f"{' '.join(map(str, row[:-1]))}: {row[-1]}" for row in rows) or "none"


def credit_delays(db: Path, run_id: str) -> list[float]:
    """Seconds from each credit's writing (its round finished) to its acknowledgement, for the
    rounds of the players of ``run_id``, sorted."""
    rows = query(db, "SELECT created_at, updated_at FROM wallet_movements WHERE kind = 'credit' "
                     f"AND state = 'acked' AND player LIKE '{run_id}-p%'")
    return sorted((datetime.fromisoformat(acked) - datetime.fromisoformat(written))
                  .total_seconds() for written, acked in rows)


def statement(transactions: Sequence[dict[str, Any]]) -> Counter[str]:
    return Counter(f"{t['kind']} {t['state']}" for t in transactions)


# ----- the table -------------------------------------------------------------------------------


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f}"


@dataclass(frozen=True)
class Row:
    wallet: str
    latency_ms: float | None
    clients: int
    run: Run
    outbox_pending: int | None = None
    debits: int = 0  # the wallet's debits in the row, from its ledger
    delays: list[float] = field(default_factory=list)  # credit delays, seconds, sorted

    @property
    def rate(self) -> float:
        return self.run.transitions / self.run.seconds

    def calls_per_transition(self) -> float | None:
        if self.wallet != SEAMLESS or not self.run.transitions:
            return None
        return len(self.run.latencies("StartRound")) / self.run.transitions


def cells(row: Row, yardstick: float | None, base: Row | None) -> list[str]:
    run = row.run
    starts, acts = run.latencies("StartRound"), run.latencies("Act")
    per = row.calls_per_transition()
    bound = model = "-"
    if per and row.latency_ms:
        bound = f"{row.clients / (row.latency_ms / 1000 * per):.0f}"
    if per is not None and base is not None and base.rate and row.latency_ms is not None:
        wait = (row.latency_ms - (base.latency_ms or 0)) / 1000 * per / row.clients
        model = f"{1 / (1 / base.rate + wait):.0f}"
    cpu = run.cpu.get("server", 0.0)
    return [row.wallet, "-" if row.latency_ms is None else f"{row.latency_ms:g}",
            str(row.clients), f"{row.rate:.0f}",
            f"{row.rate / yardstick:.2f}" if yardstick else "-",
            f"{run.total('rounds') / run.seconds:.1f}",
            ms(quantile(starts, 0.5)), ms(quantile(starts, 0.99)),
            ms(quantile(acts, 0.5)), ms(quantile(acts, 0.99)), str(run.errors.total()),
            f"{cpu * 1000 / run.transitions:.2f}" if run.transitions else "-",
            "-" if per is None else f"{per:.2f}", bound, model,
            "-" if row.outbox_pending is None else str(row.outbox_pending),
            *(f"{d:.2f}" if d is not None else "-"
              for d in (quantile(row.delays, 0.5), quantile(row.delays, 0.99)))]


# ----- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:  # noqa: PLR0915 (one run, told in order)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default="4",
                        help="comma-separated client counts (default 4)")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per row")
    parser.add_argument("--warmup", type=float, default=1.0, help="uncounted seconds first")
    parser.add_argument("--latencies", default="0,5,50",
                        help="comma-separated wallet latencies in ms (default 0,5,50)")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for both fairshoe serve; repeatable")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.clients.split(",")]
    latencies = [float(x) for x in args.latencies.split(",")]
    root = Path(tempfile.mkdtemp(prefix="bench-wallet-"))
    extra = dict(item.split("=", 1) for item in args.server_env)
    wallet = RefWallet(root / "ref-wallet")
    servers: list[Process] = []
    load_before = os.getloadavg()
    try:
        wallet.start()
        seamless = start_seamless(root / "seamless", wallet, extra)
        servers.append(seamless)
        internal = start_fairshoe(root / "internal", extra)
        servers.append(internal)
        options: Any = [("grpc.max_concurrent_streams", 1000)]
        channels = {INTERNAL: grpc.insecure_channel(f"127.0.0.1:{internal.port}", options=options),
                    SEAMLESS: grpc.insecure_channel(f"127.0.0.1:{seamless.port}", options=options)}
        for channel in channels.values():
            wait_ready(channel)
        deposits = wallet_pb2_grpc.WalletServiceStub(channels[INTERNAL])
        dbs = {INTERNAL: root / "internal" / "fairshoe.db",
               SEAMLESS: root / "seamless" / "fairshoe.db"}
        table: list[list[str]] = []
        notes: list[str] = []
        failures: list[str] = []
        for n in counts:
            rows: list[Row] = []
            # the yardstick: the internal ledger, funded by Deposit
            errors = Errors()

            def deposit(player: str) -> None:
                account = wallet_pb2.Account(player_id=player, currency="EUR",
                                             mode=common_pb2.MODE_REAL)
                deposits.Deposit(wallet_pb2.DepositRequest(
                    account=account, amount_minor=FUNDS, request_id=f"{player}-funds"),
                    timeout=CALL_TIMEOUT)

            players = Players(channels[INTERNAL], f"i{n}", deposit, errors)
            for i in range(n):
                players.fund(players.player(i))
            rows.append(Row(INTERNAL, None, n, drive(n, Clock(args.warmup, args.seconds),
                                                     players, internal.proc.pid, None)))
            for latency in latencies:
                wallet.faults(**({"latency_ms": latency} if latency else {}))
                run_id = f"s{n}-{latency:g}ms"
                players = Players(channels[SEAMLESS], run_id,
                                  lambda player: wallet.fund(player, FUNDS), Errors())
                for i in range(n):
                    players.fund(players.player(i))
                seen = len(wallet.transactions())
                run = drive(n, Clock(args.warmup, args.seconds), players, seamless.proc.pid,
                            wallet.proc.pid if wallet.proc else None)
                backlog = pending(dbs[SEAMLESS])
                drained = drain(dbs[SEAMLESS])
                moved = statement(wallet.transactions()[seen:])
                kinds = ", ".join(f"{k}: {v}" for k, v in sorted(moved.items()))
                debits = sum(v for k, v in moved.items() if k.startswith("debit"))
                credits = sum(v for k, v in moved.items() if k.startswith("credit"))
                rows.append(Row(SEAMLESS, latency, n, run, backlog, debits,
                                credit_delays(dbs[SEAMLESS], run_id)))
                notes.append(
                    f"seamless {latency:g} ms, {n} clients: the wallet saw {debits} debits and "
                    f"{credits} credits ({kinds}) for {run.total('started_ok')} StartRounds "
                    "answered OK and "
                    f"{run.total('finished')} rounds finished (warm-up and tail included); "
                    f"{backlog} movements pending after the window, drained in {drained:.1f} s; "
                    f"wallet process {run.cpu.get('wallet', 0.0) / run.seconds:.2f} cores")
            wallet.faults()
            base = min((r for r in rows if r.wallet == SEAMLESS),
                       key=lambda r: r.latency_ms or 0.0, default=None)
            yardstick = rows[0].rate
            table += [cells(r, yardstick, base) for r in rows]
            for r in rows:
                where = f"{r.wallet} {'' if r.latency_ms is None else f'{r.latency_ms:g} ms '}"
                if r.run.errors.total() or r.run.total("abandoned"):
                    failures.append(
                        f"{where}{n} clients: {r.run.errors.total()} failed calls "
                        f"{dict(r.run.errors.counts)}, {r.run.total('abandoned')} rounds "
                        f"abandoned; first: {'; '.join(r.run.errors.samples)}")
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.seconds:g} s per row after {args.warmup:g} s warm-up; Python "
              f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
              f"{', '.join(f'{x:.1f}' for x in load_before)} before, {load} after; two fairshoe "
              "serve (SQLite WAL, synchronous=FULL), one on the internal ledger, one on the "
              "reference wallet (gRPC, its own SQLite ledger, latency_ms before each answer); "
              "a transition is a StartRound or an Act answered OK in the window")
        print_table(COLUMNS, table)
        print()
        for line in notes:
            print(line)
        for name, db in dbs.items():
            print(f"{name} server: rounds by ledger "
                  f"{grouped(db, 'SELECT wallet, count(*) FROM rounds GROUP BY wallet')}; "
                  "outbox " + grouped(db, "SELECT kind, state, count(*) FROM wallet_movements "
                                          "GROUP BY kind, state ORDER BY kind, state"))
        if failures:
            print()
        for line in failures:
            print(line)
    finally:
        for proc in servers:
            proc.stop()
        wallet.stop()
        if args.keep:
            print(f"data kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
