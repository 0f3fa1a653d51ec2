"""The counted child of ``bench_transition_count.py``: ``bench_transition.py``'s play with every
random byte of the process from one seeded generator, so that two versions of the code play the
very same rounds, card for card.

    python bench/count_play.py ROUNDS [--floor CALLS] [--database URL]

Warms up (8 rounds), then plays ROUNDS rounds (or, with ``--floor``, runs that many durable-floor
transactions of ``bench_transition.py``) and prints ``COUNTED transitions T statements S``.
"""
# ruff: noqa: E402 - the seeding below must come before any import that binds os.urandom

from __future__ import annotations

import os
import random

_SEEDED = random.Random(int(os.environ.get("BENCH_SEED", "7")))
os.urandom = _SEEDED.randbytes  # uuid, the DRBG's entropy, the seed vault's nonces
random._urandom = _SEEDED.randbytes  # type: ignore[attr-defined]  # secrets, SystemRandom

import argparse
import contextlib
import shutil
import tempfile
from pathlib import Path

import bench_transition as bt

from rng_service.core.logs import configure_logging
from rng_service.storage import open_storage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rounds", type=int)
    parser.add_argument("--floor", type=int, default=0)
    parser.add_argument("--database", default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-count-"))
    path = args.database or str(root / "fairshoe.db")
    counter = bt.Statements()
    try:
        with counter.attach(), open(os.devnull, "w") as devnull:
            with contextlib.redirect_stderr(devnull):
                configure_logging("INFO")
            storage = open_storage(path)
            try:
                service, players = bt.funded_service(storage)
                bt.play(service, players, 8, counter)
                tallies = bt.play(service, players, 0 if args.floor else args.rounds, counter)
            finally:
                storage.close()
        if args.floor:
            tally = bt.durable_floor(Path(path), args.floor)
            print(f"COUNTED transitions {tally.calls} statements {tally.statements}")
        else:
            print(f"COUNTED transitions {sum(t.calls for t in tallies.values())} "
                  f"statements {counter.count}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
