"""The audit export's peak memory as the number of records grows: flat, not O(records).

    .venv/bin/python bench/bench_export.py [--sizes 20000 100000 200000] [--dir /dev/shm]
                                           [--code DIR] [--modes range log remote]

One SQLite database is grown to each ``--sizes`` in turn. Its records are real signed envelopes:
a sample of rounds is played through the service (``RoundService``, OS-seeded shoes), then each
further record is a sample round's payload under a new round id and shoe id, signed with the same
key and stored with its log leaf as the service stores them (``put_record`` and the log writer's
append, a batch of rounds per transaction): a new shoe every ``--per-shoe`` rounds, with its
signed commitment leaf before its first round and its reveal after its last. A checkpoint is
stored after each growth, so every export of one size is made against the same checkpoint and
its output is the same bytes whatever the code.

At each size, each export runs in a process of its own and its peak RSS (its ``VmHWM`` as it
exits) is printed beside the yardstick, ``bare``: a process that imports the same code,
opens the database and reads the signing keys, and exports nothing. The modes:

* ``range``: ``AuditService.export_collection`` (``fairshoe audit export --start/--end``), the
  whole time range;
* ``half``: the same from the middle record's time on (a range whose leaves are not the log's
  first ones: the key's leaf comes from the log's start);
* ``log``: ``AuditService.export_log`` (``fairshoe audit export``), every leaf of the log;
* ``remote``: ``fairshoe audit export --address`` against a process serving the AuditService
  (``AuditApi`` over the read-only database): the client's peak and the server's.

``digest`` is a SHA-256 over the output directory (each file's relative path and bytes, sorted):
equal digests at one size mean byte-for-byte equal collections. ``--code DIR`` runs the export
processes with ``DIR`` first on ``PYTHONPATH`` (e.g. a ``git archive`` of main's ``rng_service``
and ``game_math``), to measure the code before a change against the same database. The output
goes to ``--dir`` (default ``/dev/shm`` when it exists: each record is a file written with an
fsync, which on a disk would time the disk, not the export).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from datetime import datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import grpc
from tables import print_table

from game_math.round import Action, ActionKind, HandBet
from rng_service.api.audit_api import AuditApi
from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2_grpc
from rng_service.crypto.keys import KeyStore
from rng_service.crypto.signing import sign_and_encode
from rng_service.records.schema import shoe_commitment_payload
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.audit import AuditService
from rng_service.service.ports import LeafKind, Mode, utc_now
from rng_service.service.rounds import RoundService
from rng_service.service.shoes import OsShoeSource
from rng_service.service.translog import LogWriter
from rng_service.service.wallet import WalletService
from rng_service.storage import open_storage

OP = "default"
MODES = ("range", "half", "log", "remote")


# --- the database ----------------------------------------------------------------------------

def _decide(view: Any) -> Any:
    legal = {a.action for a in view.legal_actions}
    if "even_money" in legal:
        return Action(ActionKind.EVEN_MONEY, accept=False)
    if "insurance" in legal:
        return Action(ActionKind.INSURANCE, 0)
    hand = next(h for h in view.hands if h.hand_id == view.turn_hand)
    return Action(ActionKind.HIT if hand.total < 12 else ActionKind.STAND)


def play_sample(database: str, keys: Path, rounds: int) -> None:
    """``rounds`` real rounds of each game through the service: the payloads cloned later."""
    storage = open_storage(database)
    try:
        service = RoundService(storage, vault=SeedVault(secrets.token_bytes(32)),
                               signer=KeyStore(keys).load_signing_key(),
                               shoe_source=OsShoeSource())
        WalletService(storage).deposit(OP, "bench", "EUR", 10**9, request_id="fund")
        for n in range(rounds):
            for game in ("snap", "double-deck", "double-exposure", "multi-hand"):
                view = service.start_round(OP, "bench", game, mode=Mode.REAL, currency="EUR",
                                           hands=[HandBet(1000)], request_id=f"s-{game}-{n}")
                while view.status == "awaiting":
                    view = service.act(OP, view.round_id, _decide(view),
                                       hand_id=view.turn_hand, expected_version=view.version,
                                       request_id=f"a-{view.round_id}-{view.version}")
    finally:
        storage.close()


class Grower:
    """Clones the sample's records under new ids, signed, with their leaves."""

    def __init__(self, database: str, keys: Path, per_shoe: int) -> None:
        self.keys = KeyStore(keys)
        self.signer = self.keys.load_signing_key()
        self.writer = LogWriter(self.signer)  # its key leaf is logged already: not again
        self.storage = open_storage(database)
        self.per_shoe = per_shoe
        rows = _sql(database, "SELECT envelope FROM records")
        self.templates = [json.loads(bytes(env))["payload"] for env, in rows]
        self.reveal = json.loads(bytes(_sql(database, "SELECT envelope FROM reveals")[0][0]))[
            "payload"]
        self.records = len(rows)
        # the rows a record and a reveal refer to (foreign keys), copied from the sample's
        shoe = _sql(database, "SELECT shoe_id FROM shoes WHERE status = 'revealed'")[0][0]
        played = _sql(database, "SELECT round_id FROM rounds WHERE status = 'finished'")[0][0]
        self.copy_shoe = (_copy(database, "shoes", {"shoe_id"}), (OP, shoe))
        self.copy_round = (_copy(database, "rounds", {"round_id", "shoe_id"}), (OP, played))
        self.shoe: str | None = None  # the cloned shoe in play
        self.in_shoe = 0

    def grow(self, target: int, batch: int = 500) -> None:
        """Records until the database holds ``target``."""
        while self.records < target:
            with self.storage.transaction() as uow:
                for _ in range(min(batch, target - self.records)):
                    self._one(uow)
        self._close_shoe_and_checkpoint()

    def _one(self, uow: Any) -> None:
        if self.shoe is None or self.in_shoe >= self.per_shoe:
            if self.shoe is not None:
                self._reveal(uow, self.shoe)
            self.shoe, self.in_shoe = secrets.token_hex(16), 0
            sql, where = self.copy_shoe
            uow._write(sql, (self.shoe, *where))
            template = self.templates[self.records % len(self.templates)]
            commitment = shoe_commitment_payload(
                shoe_id=self.shoe, commitment=secrets.token_hex(32), game=template["game"],
                rules_digest=template["rules_digest"], decks=template["shoe"]["decks"],
                mode="REAL", created_at=utc_now())
            self.writer.append(uow, OP, LeafKind.SHOE_COMMITMENT, self.shoe,
                               sign_and_encode(commitment, self.signer))
        payload = dict(self.templates[self.records % len(self.templates)])
        payload["round_id"] = secrets.token_hex(16)
        payload["shoe"] = {**payload["shoe"], "id": self.shoe}
        envelope = sign_and_encode(payload, self.signer)
        sql, where = self.copy_round
        uow._write(sql, (payload["round_id"], self.shoe, *where))
        uow.put_record(OP, payload["round_id"], envelope)
        self.writer.append(uow, OP, LeafKind.ROUND, payload["round_id"], envelope)
        self.records += 1
        self.in_shoe += 1

    def _reveal(self, uow: Any, shoe: str) -> None:
        envelope = sign_and_encode({**self.reveal, "shoe_id": shoe}, self.signer)
        uow.put_reveal(OP, shoe, envelope)
        self.writer.append(uow, OP, LeafKind.SHOE_REVEAL, shoe, envelope)

    def _close_shoe_and_checkpoint(self) -> None:
        if self.shoe is not None:  # every shoe finished: exports of it are complete
            with self.storage.transaction() as uow:
                self._reveal(uow, self.shoe)
            self.shoe = None
        AuditService(self.storage, self.keys).checkpoint(OP)  # stored: every export's

    def close(self) -> None:
        self.storage.close()


def _copy(database: str, table: str, replaced: set[str]) -> str:
    """An INSERT copying one row of ``table`` (by operator and its id) with the ``replaced``
    columns as parameters, in column order."""
    columns = [row[1] for row in _sql(database, f"PRAGMA table_info({table})")]
    values = ", ".join("?" if c in replaced else c for c in columns)
    key = "shoe_id" if table == "shoes" else "round_id"
    return (f"INSERT INTO {table} ({', '.join(columns)}) SELECT {values} FROM {table} "
            f"WHERE operator = ? AND {key} = ?")


def _sql(database: str, query: str) -> list[Any]:
    with contextlib.closing(sqlite3.connect(database)) as conn:
        return conn.execute(query).fetchall()


# --- one export in a process of its own -------------------------------------------------------

def child(args: argparse.Namespace) -> None:
    """What one measured process does (``--child``); its peak RSS is written to ``--report``
    as it exits."""
    mode, database, keys, out = args.child, args.database, args.keys, args.out_path
    atexit.register(lambda: args.report.write_text(str(peak_kib())))
    if mode == "client":  # the `fairshoe` command's own entry point, in this process
        fairshoe, = entry_points(group="console_scripts", name="fairshoe")
        sys.argv = ["fairshoe", "audit", "export", "--address", args.address, "--out", str(out)]
        fairshoe.load()()  # exits
    storage = open_storage(database, read_only=True, pool_size=1)
    service = AuditService(storage, KeyStore(keys), read_only=True)
    service.signing_keys()
    if mode == "range":
        service.export_collection(out, OP)
    elif mode == "half":
        (middle,), = _sql(database, "SELECT created_at FROM records ORDER BY created_at LIMIT 1 "
                                    "OFFSET (SELECT COUNT(*) / 2 FROM records)")
        service.export_collection(out, OP, datetime.fromisoformat(middle))
    elif mode == "log":
        service.export_log(out, OP)
    elif mode == "serve":
        serve(service)
    storage.close()


def serve(service: Any) -> None:
    """The AuditService over gRPC on a free port (printed), until SIGTERM."""


    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    audit_pb2_grpc.add_AuditServiceServicer_to_server(AuditApi(service), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    done = False

    def stop(*_: object) -> None:
        nonlocal done
        done = True

    signal.signal(signal.SIGTERM, stop)
    print(port, flush=True)
    while not done:
        time.sleep(0.05)
    server.stop(None)


def peak_kib() -> int:
    """This process's peak RSS since its exec, KiB: VmHWM, its own memory's high-water mark
    (``wait4``'s ``ru_maxrss`` would also count the parent's, which a child is forked from)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status: this bench needs Linux")


class Measure:
    """Runs child processes with ``code`` first on the path; their peak RSS, MB."""

    def __init__(self, database: str, keys: Path, code: Path | None) -> None:
        self.database, self.keys = database, keys
        self.env = dict(os.environ)
        if code is not None:
            self.env["PYTHONPATH"] = os.pathsep.join(
                [str(code), self.env.get("PYTHONPATH", "")]).rstrip(os.pathsep)

    def _argv(self, mode: str, out: Path, address: str = "") -> list[str]:
        return [sys.executable, __file__, "--child", mode, "--database", self.database,
                "--keys", str(self.keys), "--out-path", str(out), "--address", address,
                "--report", str(self._report(mode))]

    def _report(self, mode: str) -> Path:
        return Path(self.keys).parent / f"peak-{mode}"

    def _reap(self, proc: subprocess.Popen[Any], mode: str) -> float:
        """The peak RSS, MB, of a child that exited."""
        if proc.wait() != 0:
            raise SystemExit(f"a measured process ({mode}) failed with status {proc.returncode}")
        return int(self._report(mode).read_text()) / 1024

    def run(self, mode: str, out: Path) -> tuple[float, float]:
        """(peak RSS MB, wall seconds) of one child."""
        start = time.perf_counter()
        proc = subprocess.Popen(self._argv(mode, out), env=self.env)
        proc.wait()
        return self._reap(proc, mode), time.perf_counter() - start

    def remote(self, out: Path) -> tuple[float, float, float]:
        """(client peak MB, server peak MB, wall seconds) of a remote export."""
        server = subprocess.Popen(self._argv("serve", out), env=self.env,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            port = server.stdout.readline().strip()
            start = time.perf_counter()
            client = subprocess.Popen(self._argv("client", out, f"127.0.0.1:{port}"),
                                      env=self.env, stdout=subprocess.DEVNULL)
            client.wait()
            wall = time.perf_counter() - start
        finally:
            server.send_signal(signal.SIGTERM)
        return self._reap(client, "client"), self._reap(server, "serve"), wall


def digest(out: Path) -> str:
    """SHA-256 over every file's relative path and bytes, in path order (12 hex digits)."""
    h = hashlib.sha256()
    for rel in sorted(os.path.relpath(os.path.join(where, name), out)
                      for where, _, names in os.walk(out) for name in names):
        with open(os.path.join(out, rel), "rb") as file:
            h.update(rel.encode() + b"\0" + file.read() + b"\0")
    return h.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000, 200_000])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--per-shoe", type=int, default=10, help="rounds per cloned shoe")
    parser.add_argument("--sample", type=int, default=5, help="played rounds of each game")
    parser.add_argument("--dir", type=Path,
                        default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    parser.add_argument("--code", type=Path, action="append", default=[],
                        help="another tree of the code to measure as well (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the database (its path is "
                        "printed)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    parser.add_argument("--keys", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out-path", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    root = Path(tempfile.mkdtemp(prefix="bench-export-", dir=args.dir))
    try:
        run(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, root: Path) -> None:
    os.environ.setdefault("FAIRSHOE_DATA_DIR", str(root))
    keys, database = root / "keys", str(root / "fairshoe.db")
    KeyStore(keys).create()
    print(f"database {database}", flush=True)
    play_sample(database, keys, args.sample)
    grower = Grower(database, keys, args.per_shoe)
    codes: list[tuple[str, Path | None]] = [("this", None)]
    codes += [(str(code), code.resolve()) for code in args.code]
    rows = []
    try:
        for size in args.sizes:
            began = time.perf_counter()
            grower.grow(size)
            leaves = _sql(database, f"SELECT size FROM log_state WHERE operator = '{OP}'")[0][0]
            print(f"{size} records ({leaves} log leaves) stored in "
                  f"{time.perf_counter() - began:.0f} s", flush=True)
            for name, code in codes:
                measure = Measure(database, keys, code)
                bare, _ = measure.run("bare", root / "bare")
                rows.append([f"{size:,}", name, "bare", f"{bare:.0f}", "", "1.00x", "-", "-"])
                print("  ".join(rows[-1]), flush=True)
                for mode in args.modes:
                    out = root / f"out-{mode}"
                    also = ""
                    if mode == "remote":
                        mb, server_mb, wall = measure.remote(out)
                        also = f"server {server_mb:.0f} MB ({server_mb / bare:.2f}x)"
                    else:
                        mb, wall = measure.run(mode, out)
                    rows.append([f"{size:,}", name, mode, f"{mb:.0f}", also,
                                 f"{mb / bare:.2f}x", f"{wall:.1f}", digest(out)])
                    shutil.rmtree(out)
                    print("  ".join(rows[-1]), flush=True)
    finally:
        grower.close()
    print()
    print_table(["records", "code", "export", "peak MB", "also", "vs bare", "wall s", "digest"],
                rows)


if __name__ == "__main__":
    main()
