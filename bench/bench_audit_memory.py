"""The offline audit's memory: peak RSS of ``fairshoe audit verify`` against the records audited.

    .venv/bin/python bench/bench_audit_memory.py [--sizes 10000 100000 300000 1000000]
        [--workers 1] [--dir /tmp/fairshoe-audit-memory] [--game double-exposure] [--committed]

Issue 21 goal 3: the audit streams through a collection, its memory flat in the number of
records, at most 200 MB for 1,000,000 records.

The records are made quickly rather than by ``collect rounds`` (which makes every file durable,
about 300 rounds/s): shards of ``SHARD`` rounds are played on the production path
(:func:`rng_service.records.schema.collect_rounds`: OS-seeded shoes, the engine, the
basic-strategy player, every record and reveal signed by a test key with ``sign_and_encode``)
by forked processes, each shard a collection of whole shoes, its files written without fsync
(a benchmark's fixture need not survive a crash). A collection of N records is then N / SHARD
shards hard-linked into one directory (``rounds/``, ``reveals/``, ``rules/``): the shards are
made once, under ``--dir``, and kept for the next run. With ``--committed`` every shoe is also
committed as ``collect rounds`` commits it (``shoes/<id>.json``, a signed
``fairshoe.shoe-commitment/v1`` written as the shoe is opened, before its client seed or a card),
so the audit holds what it knows of a committed collection's shoes too (a game that reshuffles
every round has a commitment per record); the log ``collect rounds`` also writes is left out, as
for the uncommitted records (its checks are the log's, not the shoes'). ``--no-rounds`` links the
shoes' files alone (reveals and commitments, each shoe revealed and committed, none of its rounds):
what the audit keeps of every shoe, at sizes whose rounds would take hours to audit on a loaded
machine (the rounds' own share was measured flat to 1,000,000 records without them); its
verdict is FAIL for that alone ("no round or RNG records found"), every file passing.

Each size is audited by the command itself, ``fairshoe audit verify --quiet`` (its ``main``),
in a fresh Python process that reports its own peak RSS (``VmHWM``) and that of its worker
processes, beside the yardstick measured in the same run: the peak RSS of a bare ``python -c``
importing the audit command's modules. What the audit adds to the yardstick is what it holds;
flat means that figure does not grow with the records.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from tables import print_table

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from game_math.rules import GAME_IDS, Rules
from rng_service.crypto.keys import SigningKey, export_pem
from rng_service.crypto.signing import sign_and_encode
from rng_service.records.schema import (
    REVEALS_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SUBDIR,
    SHOES_SUBDIR,
    RecordWriter,
    collect_rounds,
    reveal_payload,
    rfc3339_now,
    rules_digest,
    rules_file_bytes,
    shoe_commitment_payload,
)
from rng_service.rng.shoe import Shoe

#: rounds per shard: a shard is the unit made by one process and linked into a collection
SHARD = 10_000
KEY_FILE = "trusted.pem"
KEY_PEM = "signing.pem"  # the test key, kept with the shards so that a later run may add more

#: what a bare process importing the audit command costs: the yardstick
BARE = ("import rng_service.cli.main, rng_service.cli.audit, rng_service.audit.verifier; "
        "print(next(int(line.split()[1]) for line in open('/proc/self/status') "
        "if line.startswith('VmHWM:')))")
#: the audit command in a process of its own, which then prints its peak RSS and its workers'
AUDITED = """
import contextlib, os, resource, sys
if os.environ.get("BENCH_CODE"):  # another tree's code (before/after), ahead of this one's
    sys.path.insert(0, os.environ["BENCH_CODE"])
from rng_service.cli.main import main
status = 0
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        status = exc.code
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, from the process that forked us
own = next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM:"))
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(status, own, kids)
"""


class FastWriter(RecordWriter):
    """The collection writer's signing and file names, without making each file durable."""

    def write_rules(self, rules: Rules) -> Path:
        path = self.rules_dir / f"{rules_digest(rules)}.json"
        if not path.exists():
            path.write_bytes(rules_file_bytes(rules))
        return path

    def write_round(self, payload: dict[str, Any], rules: Rules) -> Path:
        self.check_rules(payload, rules)
        self.write_rules(rules)
        path = self.rounds_dir / f"{payload['round_id']}.json"
        path.write_bytes(sign_and_encode(payload, self.key))
        return path

    def write_reveal(self, shoe: Shoe) -> Path:
        path = self.reveals_dir / f"{shoe.id}.json"
        path.write_bytes(sign_and_encode(reveal_payload(shoe), self.key))
        return path


class CommittingWriter(FastWriter):
    """:class:`FastWriter`, each shoe committed as it is opened, as ``collect rounds`` commits
    it (its payload and signature; the log it also writes is left out)."""

    def __init__(self, out_dir: Path, key: SigningKey) -> None:
        super().__init__(out_dir, key)
        self.shoes_dir = out_dir / SHOES_SUBDIR
        self.shoes_dir.mkdir(parents=True, exist_ok=True)

    def open_shoe(self, shoe: Shoe, rules: Rules) -> None:
        path = self.shoes_dir / f"{shoe.id}.json"
        path.write_bytes(sign_and_encode(shoe_commitment_payload(
            shoe_id=shoe.id, commitment=shoe.commitment, game=rules.game,
            rules_digest=rules_digest(rules), decks=shoe.decks, mode=COLLECT_MODE,
            created_at=rfc3339_now()), self.key))


#: the money ``collect rounds`` commits its shoes for (its rounds are demo play)
COLLECT_MODE = "DEMO"

_SHARD_JOB: tuple[Path, Rules, SigningKey, type[FastWriter]] | None = None


def _make_shard(index: int) -> int:
    """Shard ``index``: ``SHARD`` rounds of whole shoes (the last closed early) under
    ``<dir>/shard-<index>``, written to a temporary name first so a half-made shard is never
    used."""
    assert _SHARD_JOB is not None, "set before the fork"
    base, rules, key, writer = _SHARD_JOB
    final, partial = base / f"shard-{index:04d}", base / f".shard-{index:04d}.partial"
    if final.is_dir():
        return 0
    collect_rounds(rules, SHARD, writer(partial, key), basic_strategy_action)
    partial.rename(final)
    return SHARD


def ensure_shards(base: Path, game: str, shards: int, processes: int,
                  committed: bool = False) -> SigningKey:
    """At least ``shards`` shards under ``base`` (made by forked processes), and the key;
    ``committed``: with their shoes' commitments."""
    global _SHARD_JOB  # noqa: PLW0603  (inherited by the forked processes)
    base.mkdir(parents=True, exist_ok=True)
    pem = base / KEY_PEM
    if pem.exists():
        private = serialization.load_pem_private_key(pem.read_bytes(), None)
        assert isinstance(private, Ed25519PrivateKey)
        key = SigningKey(private)
    else:
        key = SigningKey.generate()
        pem.write_bytes(key._private_pem())  # a test key of the benchmark's own
    (base / KEY_FILE).write_text(export_pem({key.key_id: key.public_key}))
    rules = game_rules(game)
    basic_strategy(rules)  # the analysis once, before the fork
    _SHARD_JOB = (base, rules, key, CommittingWriter if committed else FastWriter)
    todo = [i for i in range(shards) if not (base / f"shard-{i:04d}").is_dir()]
    if todo:
        start = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            made = sum(pool.imap_unordered(_make_shard, todo))
        print(f"# made {made:,} records in {len(todo)} shards in "
              f"{time.perf_counter() - start:.0f} s ({processes} processes)", flush=True)
    return key


def link_collection(base: Path, records: int, committed: bool = False,
                    rounds: bool = True) -> Path:
    """A collection of the first ``records // SHARD`` shards, hard-linked (made once); without
    ``rounds``, their shoes' files alone."""
    out = base / f"collection-{records}{'' if rounds else '-shoes'}"
    if out.is_dir():
        return out
    partial = base / f".{out.name}.partial"
    subs = (*((ROUNDS_SUBDIR,) if rounds else ()), REVEALS_SUBDIR, RULES_SUBDIR,
            *((SHOES_SUBDIR,) if committed else ()))
    for sub in subs:
        (partial / sub).mkdir(parents=True, exist_ok=True)
        for i in range(records // SHARD):
            for entry in os.scandir(base / f"shard-{i:04d}" / sub):
                target = partial / sub / entry.name
                if not target.exists():
                    os.link(entry.path, target)
    partial.rename(out)
    return out


def _proc(pid: int, name: str, field: str) -> int:
    """A number from ``/proc/<pid>/<name>`` (``status`` in kB, ``io`` in bytes); 0 if gone."""
    try:
        with open(f"/proc/{pid}/{name}") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith(field)), 0)
    except OSError:
        return 0


def peak_kb(code: str, *args: str, trace: float = 0) -> tuple[list[str], float]:
    """Run ``code`` in a fresh interpreter; its output's words and its wall seconds. With
    ``trace``, every ``trace`` seconds a line: the time, the bytes it has read so far (its
    progress: pass 1 reads every file, pass 2 every round again) and its RSS and peak RSS, to see
    a long run's memory stay flat while it goes."""
    start = time.perf_counter()
    with subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                          text=True) as child:
        while trace:
            try:
                child.wait(trace)
                break
            except subprocess.TimeoutExpired:
                print(f"#   {time.perf_counter() - start:6.0f} s  read "
                      f"{_proc(child.pid, 'io', 'rchar:') / 2**20:8,.0f} MB  RSS "
                      f"{_proc(child.pid, 'status', 'VmRSS:') / 1024:5.0f} MB  peak "
                      f"{_proc(child.pid, 'status', 'VmHWM:') / 1024:5.0f} MB", flush=True)
        out = child.communicate()[0]
    if child.returncode:
        raise SystemExit(f"the audit's process failed ({child.returncode})")
    return out.split(), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 100_000, 300_000, 1_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/fairshoe-audit-memory"))
    parser.add_argument("--game", default="double-exposure", choices=GAME_IDS)
    parser.add_argument("--committed", action="store_true",
                        help="every shoe committed (shoes/), as collect rounds commits it")
    parser.add_argument("--no-rounds", action="store_true",
                        help="audit the shoes' files alone (reveals, commitments), no rounds")
    parser.add_argument("--processes", type=int, default=2,
                        help="processes making the shards")
    parser.add_argument("--make", type=int, default=0, metavar="RECORDS",
                        help="make the shards of this many records (at least the largest size)")
    parser.add_argument("--code", type=Path, default=None, metavar="TREE",
                        help="audit with the rng_service and game_math of another source tree "
                             "(e.g. an export of main: git archive main rng_service game_math)")
    parser.add_argument("--trace", type=float, default=0, metavar="SECONDS",
                        help="print the audit's progress and RSS every SECONDS")
    args = parser.parse_args()
    if args.code is not None:
        os.environ["BENCH_CODE"] = str(args.code.absolute())
    if any(size % SHARD for size in args.sizes):
        parser.error(f"--sizes must be multiples of {SHARD}")
    base = args.dir / (f"{args.game}-committed" if args.committed else args.game)
    ensure_shards(base, args.game, max(args.make, *args.sizes) // SHARD, args.processes,
                  args.committed)
    rows = []
    for size in args.sizes:
        collection = link_collection(base, size, args.committed, not args.no_rounds)
        for workers in args.workers:
            bare = int(peak_kb(BARE)[0][0])
            out, wall = peak_kb(AUDITED, "audit", "verify", "--keys", str(base / KEY_FILE),
                                "--quiet", "--workers", str(workers), str(collection),
                                trace=args.trace)
            status, own, kids = (int(word) for word in out)
            rows.append([f"{size:,}", str(workers), "PASS" if status == 0 else "FAIL",
                         f"{bare / 1024:.0f}", f"{own / 1024:.0f}",
                         f"{(own - bare) / 1024:.0f}", f"{kids / 1024:.0f}",
                         f"{wall:.0f}", f"{size / wall:,.0f}",
                         f"{os.getloadavg()[0]:.2f}"])
            print_table(COLUMNS, rows[-1:])  # as it goes: the large sizes take a while
            sys.stdout.flush()
    print(f"# audit verify peak RSS, {args.game}"
          f"{', committed' if args.committed else ''}"
          f"{', shoes alone (no rounds)' if args.no_rounds else ''}, "
          f"Python {sys.version.split()[0]}, code {args.code or 'this tree'}; MB")
    print_table(COLUMNS, rows)


COLUMNS = ("records", "workers", "verdict", "bare MB", "audit MB", "audit - bare",
           "worker MB", "wall s", "rec/s", "load")

if __name__ == "__main__":
    main()
