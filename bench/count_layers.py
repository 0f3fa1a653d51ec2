"""The counted child of ``bench_served_gap.py --count``: one layer of the served path played in
process (or ``evaluate``: ``EvaluateHand`` through the interceptor chain), with every random byte
of the process from one seeded generator, so that each layer plays the very same rounds.

    python bench/count_layers.py LAYER COUNT

``LAYER`` is one of ``bench_served_gap.LAYERS`` (COUNT rounds, after 8 rounds of warm-up) or
``evaluate`` (COUNT calls); prints ``COUNTED N`` (transitions or calls). Runs one at a time: the
seeded generator names the temporary directory too.
"""
# ruff: noqa: E402 - the seeding below must come before any import that binds os.urandom

from __future__ import annotations

import os
import random

_SEEDED = random.Random(int(os.environ.get("BENCH_SEED", "7")))
os.urandom = _SEEDED.randbytes  # uuid, the DRBG's entropy, the seed vault's nonces
random._urandom = _SEEDED.randbytes  # type: ignore[attr-defined]  # secrets, SystemRandom

import argparse
import shutil
import tempfile
from pathlib import Path

EVALUATE = "evaluate"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("layer")
    parser.add_argument("count", type=int)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-count-layers-"))
    os.environ["FAIRSHOE_DATA_DIR"] = str(root / "in-process")  # before the service's imports
    import bench_served_gap as gap  # noqa: PLC0415

    try:
        with gap.logging_to(root / "in-process.log"):
            layers = gap.Layers(root / "in-process")
            try:
                layers.play(gap.USE_CASE if args.layer == EVALUATE else args.layer, 8)
                if args.layer == EVALUATE:
                    _bare, chained = gap.evaluate_calls(layers.interceptor, ["AS", "TD"])
                    for _ in range(args.count):
                        chained()
                    done = args.count
                else:
                    _cpu, done = layers.play(args.layer, args.count)
            finally:
                layers.close()
        print(f"COUNTED {done}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
