"""Instructions and SQL statements per round transition, counted, not timed: what two versions of
the code can be compared by on a machine whose load makes CPU times move by ±15 %.

    .venv/bin/python bench/bench_transition_count.py [--rounds 110] [--database URL]

Runs ``bench_transition.py``'s play (``bench/count_play.py``: complete rounds of the four games
through ``RoundService``, one thread, SQLite with ``synchronous=FULL`` in a temporary directory
unless ``--database`` names a ``postgresql://`` server, where each run gets a fresh database)
under ``valgrind --tool=callgrind``, which counts the user-space instructions executed, with
every random byte of the process drawn from one seeded generator: two versions play the very
same rounds, card for card. Each count is taken twice, with ``--rounds`` and with 10 rounds,
and the difference divided by the transitions between them, so the start-up (imports, the
schema) cancels out. The yardstick, counted the same way in the same run: the durable floor of
``bench_transition.py`` (one transaction writing what a transition writes at the sizes stored,
plus one Ed25519 signature), ``/floor`` each transition's instructions in its units. The kernel's
work (a COMMIT's WAL writes and fsync) is not counted; on PostgreSQL the server's is not either,
the client's is. About 3 minutes on an idle core: valgrind runs the interpreter some 50 times
slower.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
from tables import print_table

SHORT = 10  # rounds of the run whose count is subtracted (start-up, warm-up)
COLUMNS = ("what", "count", "instructions a transition", "SQL statements a transition", "/floor")


def fresh_database(url: str) -> str:
    """A new database on ``url``'s server; its URL."""
    name = f"bench_count_{os.getpid()}_{random.randrange(10**9)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def counted(rounds: int, database: str | None, floor: int = 0) -> tuple[int, int, int]:
    """(instructions, transitions, statements) of one child under callgrind."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
           str(Path(__file__).with_name("count_play.py")), str(rounds), "--floor", str(floor)]
    if database is not None:
        cmd += ["--database", fresh_database(database)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent)
    collected = re.search(r"Collected : (\d+)", out.stderr)
    done = re.search(r"COUNTED transitions (\d+) statements (\d+)", out.stdout)
    if collected is None or done is None:
        raise SystemExit(f"the counted run failed:\n{out.stdout}\n{out.stderr[-2000:]}")
    return int(collected.group(1)), int(done.group(1)), int(done.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=110, help="rounds counted (default 110)")
    parser.add_argument("--database", default=None,
                        help="a postgresql:// URL whose server gets a fresh database per run")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed (Debian: apt-get install valgrind)")
    long, short = counted(args.rounds, args.database), counted(SHORT, args.database)
    calls = long[1] - short[1]
    per = (long[0] - short[0]) / calls
    statements = (long[2] - short[2]) / calls
    floors = [counted(0, None, floor=n) for n in (2 * args.rounds, 2 * SHORT)]
    floor_calls = floors[0][1] - floors[1][1]
    floor = (floors[0][0] - floors[1][0]) / floor_calls
    backend = "postgresql" if args.database else "sqlite"
    print(f"{args.rounds} rounds less {SHORT} on {backend}, one thread, under callgrind")
    print_table(COLUMNS, [
        ["transition", str(calls), f"{per / 1e6:.3f} M",
         f"{statements:.2f}" if backend == "sqlite" else "-", f"{per / floor:.1f}"],
        ["durable floor (SQLite)", str(floor_calls), f"{floor / 1e6:.3f} M",
         f"{(floors[0][2] - floors[1][2]) / floor_calls:.2f}", "1.0"],
    ])


if __name__ == "__main__":
    main()
