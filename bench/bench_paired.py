"""Two source trees' engine and simulator, measured in lockstep: a before/after that load spares.

On a machine that others load, two benchmark runs a minute apart see different machines: CPU
time per round moved by ±30 % between runs of the same code here (load average 12 on 2 cores).
This runs two worker processes, one importing ``game_math``/``rng_service`` from ``--before``
(e.g. a worktree of main), one from ``--after`` (default: this tree), and hands them the same
batch in turn, one at a time, the order alternating: each batch's CPU time is measured in its
worker (``time.process_time``), and each pair of batches, a second or so apart, gives one ratio.
It prints, per game, the median CPU rate of each tree and the median of the pair ratios
(``after/before``, above 1: faster), with the lowest and highest ratio.

Workloads: ``engine`` is ``bench/bench_engine.py``'s one-hand round (pre-shuffled shoes, its
total-based strategy through ``legal_actions``); ``sim`` is a ``fairshoe simulate`` worker's
chunk (``rng_service.lab.simulator.play_chunk``: OS-seeded certified shoes, basic strategy);
``collect`` is ``collect rounds``'s work with one worker, in process (``collect_in_workers`` into
a ``LoggedRecordWriter``, signed files, the log and its sync: all the process's CPU, its threads
and system time included), each batch a new collection kept until the bench ends.

    .venv/bin/python bench/bench_paired.py --before ../main-tree [--pairs 9] [--rounds 4000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = """
import sys, time
sys.path.insert(0, {bench!r})
from bench_engine import bench
from game_math.autoplay import basic_strategy
from game_math.games import game_rules
from rng_service.lab.simulator import Chunk, Player, play_chunk
players = {{}}
scratch = None
for line in sys.stdin:
    kind, game, rounds = line.split()
    if kind == "collect":
        import shutil, tempfile
        from pathlib import Path
        from game_math.autoplay import basic_strategy_action
        from rng_service.crypto.keys import KeyStore, key_validity
        from rng_service.records.collect_workers import collect_in_workers
        from rng_service.records.logged import LoggedRecordWriter
        if scratch is None:
            scratch = Path(tempfile.mkdtemp(prefix="bench-paired-collect-"))
            store = KeyStore(scratch / "keys")
            valid_from = key_validity(store.create())["valid_from"]
            key = store.load_signing_key()
        rules = game_rules(game)
        basic_strategy(rules)
        out = Path(tempfile.mkdtemp(dir=scratch))  # kept to the end: see bench_collect.py
        started = time.process_time()
        writer = LoggedRecordWriter(out, key, valid_from=valid_from)
        collect_in_workers(rules, int(rounds), writer, basic_strategy_action, workers=1)
        writer.finish()
        print(time.process_time() - started, flush=True)
    elif kind == "engine":
        _, rate, _ = bench(game, 1, int(rounds))
        print(int(rounds) / rate, flush=True)
    else:
        rules = game_rules(game)
        player = players.get(game) or players.setdefault(game, Player(rules, basic_strategy(rules)))
        started = time.process_time()
        play_chunk(player, Chunk(0, int(rounds), None))
        print(time.process_time() - started, flush=True)
if scratch is not None:
    shutil.rmtree(scratch)
"""


class Tree:
    """A worker process importing the code of one source tree."""

    def __init__(self, root: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER.format(bench=str(HERE))], env=env, cwd="/",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, kind: str, game: str, rounds: int) -> float:
        """CPU seconds of one batch."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{kind} {game} {rounds}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree measured as before")
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=4_000, help="rounds per batch")
    parser.add_argument("--games", default="snap,double-deck,double-exposure,multi-hand")
    parser.add_argument("--kinds", default="engine,sim", help="engine, sim, collect")
    args = parser.parse_args()
    before, after = Tree(args.before.resolve()), Tree(args.after.resolve())
    try:
        print(f"{'workload':<8} {'game':<16} {'before/cpu-s':>12} {'after/cpu-s':>12} "
              f"{'after/before':>12} {'low':>6} {'high':>6}")
        for kind in args.kinds.split(","):
            for game in args.games.split(","):
                for tree in (before, after):  # warm-up: imports, analysis, caches
                    tree.run(kind, game, args.rounds // 4)
                b_cpu, a_cpu, ratios = [], [], []
                for i in range(args.pairs):
                    first, second = (before, after) if i % 2 == 0 else (after, before)
                    times = {id(first): first.run(kind, game, args.rounds)}
                    times[id(second)] = second.run(kind, game, args.rounds)
                    b, a = times[id(before)], times[id(after)]
                    b_cpu.append(b)
                    a_cpu.append(a)
                    ratios.append(b / a)
                print(f"{kind:<8} {game:<16} {args.rounds / statistics.median(b_cpu):>12,.0f} "
                      f"{args.rounds / statistics.median(a_cpu):>12,.0f} "
                      f"{statistics.median(ratios):>11.2f}x {min(ratios):>5.2f}x "
                      f"{max(ratios):>5.2f}x", flush=True)
    finally:
        before.close()
        after.close()


if __name__ == "__main__":
    main()
