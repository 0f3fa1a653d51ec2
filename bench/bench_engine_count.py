"""Instructions per engine round and per audit replay, counted, not timed: two source trees
compared on a machine whose load moves CPU times by ±30 % between runs.

    .venv/bin/python bench/bench_engine_count.py --before ../main-tree [--after .] [--rounds 800]

Each workload runs under ``valgrind --tool=callgrind`` (user-space instructions executed) in a
child importing ``game_math``/``rng_service`` from the tree's root (``PYTHONPATH``), once with
``--rounds`` and once with a tenth of them; the difference over the rounds between them is the
count per round, the start-up (imports, loading the records) cancelling out. Both trees play the
very same rounds:

* ``engine``: ``bench/bench_engine.py``'s one-hand round (200 seeded shoes a game, its
  total-based strategy through ``legal_actions``), the four games in turn;
* ``replay``: the audit's replay step as ``bench/bench_audit.py`` times it (``replay_all``: each
  round dealt from its recomputed shoe, its recorded actions replayed), on round records of the
  four games collected once by this process (OS-seeded shoes, basic strategy, signed) and read by
  every child.

``after/before`` below 1 is fewer instructions. A few minutes on an idle core: valgrind runs the
interpreter some 50 times slower.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
SHOES = 200  # shuffled shoes per game of the engine workload, dealt in turn


def child(workload: str, rounds: int, records: str) -> None:
    """The counted run: ``rounds`` rounds of ``workload`` (imports before them)."""
    sys.path.insert(0, str(HERE))
    if workload == "engine":
        # the tree's engine, under PYTHONPATH; the shoes are as many whatever the rounds, so
        # that shuffling them cancels out with the rest of the start-up
        from bench_engine import play  # noqa: PLC0415

        from game_math.cards import ordered_shoe  # noqa: PLC0415
        from game_math.games import game_rules  # noqa: PLC0415
        from game_math.round import HandBet  # noqa: PLC0415

        for game in GAMES:
            rules = game_rules(game)
            rng = random.Random(2026)
            shoes = [ordered_shoe(rules.decks) for _ in range(SHOES)]
            for shoe in shoes:
                rng.shuffle(shoe)
            hands = [HandBet(rules.level().min_bet)]
            for i in range(rounds // len(GAMES)):
                play(rules, shoes[i % SHOES], hands)
        return
    from bench_audit import replay_all  # noqa: PLC0415

    doc = json.loads(Path(records).read_text())
    replay_all(doc["payloads"][:rounds], doc["shoes"])


def collect(count: int, out: Path) -> None:
    """``count`` round records, a quarter of each game, with their shoes' cards, into ``out``."""
    from bench_paired import collect_records  # noqa: PLC0415  (the parent's own tree)

    with tempfile.TemporaryDirectory() as tmp:
        collect_records(list(GAMES), -(-count // len(GAMES)), Path(tmp))
        payloads: list[object] = []
        shoes: dict[str, object] = {}
        docs = [json.loads((Path(tmp) / f"{game}.json").read_text()) for game in GAMES]
        for i in range(max(len(d["payloads"]) for d in docs)):  # the games interleaved
            payloads += [d["payloads"][i] for d in docs if i < len(d["payloads"])]
        for d in docs:
            shoes.update(d["shoes"])
    out.write_text(json.dumps({"payloads": payloads, "shoes": shoes}))


def counted(tree: Path, workload: str, rounds: int, records: Path) -> int:
    """Instructions of one child run under callgrind."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
           str(Path(__file__)), "--child", workload, "--rounds", str(rounds),
           "--records", str(records)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd="/", env=env)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise SystemExit(f"the counted run failed:\n{out.stdout}\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the tree counted as before")
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--rounds", type=int, default=800)
    parser.add_argument("--workloads", default="engine,replay")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--records", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rounds, args.records)
        return
    if args.before is None:
        raise SystemExit("--before TREE is needed")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed (Debian: apt-get install valgrind)")
    short = args.rounds // 10
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "records.json"
        collect(args.rounds, records)
        print(f"{'workload':<8} {'before/round':>13} {'after/round':>13} {'after/before':>12}")
        for workload in args.workloads.split(","):
            per = []
            for tree in (args.before.resolve(), args.after.resolve()):
                long = counted(tree, workload, args.rounds, records)
                per.append((long - counted(tree, workload, short, records))
                           / (args.rounds - short))
            print(f"{workload:<8} {per[0]:>13,.0f} {per[1]:>13,.0f} {per[1] / per[0]:>11.3f}x",
                  flush=True)


if __name__ == "__main__":
    main()
