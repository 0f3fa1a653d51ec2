"""WAL frames per round transition on SQLite, by the B-tree each frame's page belongs to: what a
COMMIT writes (and the kernel's ``pwrite64`` and ``fdatasync`` cost), which callgrind's counts of
user-space instructions do not see.

    .venv/bin/python bench/bench_wal_frames.py [--rounds 100] [--warm 100]

Plays ``bench_transition.py``'s rounds (one thread, ``synchronous=FULL``) with every random byte
from one seeded generator (as ``count_play.py``: two versions of the code play the same rounds),
``--warm`` rounds first so the tables are past their first pages, then empties the WAL, holds
a reader on the database file (so no checkpoint resets the WAL) and plays ``--rounds`` more.
Every frame of the WAL then belongs to one of those transactions; its page number is mapped to
its table or index with SQLite's ``dbstat`` (page 1 is ``sqlite_schema``'s: the header,
rewritten as the file grows).
A count, not a time: the load does not move it.
"""
# ruff: noqa: E402 - the seeding below must come before any import that binds os.urandom

from __future__ import annotations

import os
import random

_SEEDED = random.Random(int(os.environ.get("BENCH_SEED", "7")))
os.urandom = _SEEDED.randbytes  # uuid, the DRBG's entropy, the seed vault's nonces
random._urandom = _SEEDED.randbytes  # type: ignore[attr-defined]  # secrets, SystemRandom

import argparse
import collections
import contextlib
import shutil
import sqlite3
import struct
import tempfile
from pathlib import Path

import bench_transition as bt
from tables import print_table

from rng_service.core.logs import configure_logging
from rng_service.storage import open_storage

_WAL_HEADER, _FRAME_HEADER = 32, 24


def frames(wal: Path) -> tuple[list[int], int]:
    """The page number of every frame in ``wal``, and how many frames end a transaction."""
    data = wal.read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    pages, commits, at = [], 0, _WAL_HEADER
    while at + _FRAME_HEADER + page_size <= len(data):
        page, size_after = struct.unpack(">II", data[at : at + 8])
        pages.append(page)
        commits += size_after != 0  # a commit frame records the database's size
        at += _FRAME_HEADER + page_size
    return pages, commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds counted (default 100)")
    parser.add_argument("--warm", type=int, default=100, help="rounds before (default 100)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-wal-"))
    path = root / "fairshoe.db"
    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            configure_logging("INFO")
            storage = open_storage(str(path))
            hold = sqlite3.connect(path, isolation_level=None)
            try:
                service, players = bt.funded_service(storage)
                counter = bt.Statements()
                bt.play(service, players, args.warm, counter)
                # an empty WAL, then a reader on the database file alone (a snapshot of no WAL
                # frame): no checkpoint may copy a frame over a page it reads, so none resets the
                # WAL while it stays open, and every frame written meanwhile is still there
                busy, _, _ = hold.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                assert busy == 0, "the WAL could not be emptied"
                hold.execute("BEGIN")
                hold.execute("SELECT count(*) FROM sqlite_schema").fetchone()
                tallies = bt.play(service, players, args.rounds, counter)
                pages, commits = frames(path.with_name(path.name + "-wal"))
            finally:
                hold.close()
                storage.close()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            names = dict(conn.execute("SELECT pageno, name FROM dbstat"))
        calls = sum(t.calls for t in tallies.values())
        by_tree = collections.Counter(names.get(page, "(freed)") for page in pages)
        print(f"{args.rounds} rounds after {args.warm}: {calls} transitions, {commits} commits, "
              f"{len(pages)} frames, {len(pages) / calls:.2f} a transition")
        print_table(("B-tree", "frames a transition"),
                    [[tree, f"{n / calls:.2f}"] for tree, n in by_tree.most_common()])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
