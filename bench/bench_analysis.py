"""Wall time, CPU time and peak memory of each game's full main-game analysis (both strategies).

Each game runs in a fresh process: "cold" includes building the hand space and the dealer
pass's plan (cached per process) and the first touch of the analysis's memory; "warm" repeats
the analysis with those caches kept (the result cache is cleared). Peak memory is the traced
Python/numpy allocation of a cold run, measured in a separate run because tracing slows the timed
ones; "rss" is the process's peak resident size.
Target (issue 4): within 3x a good C++ analyser (about 0.05-0.3 s per game), under 1 GB.
BLAS runs one thread (OPENBLAS_NUM_THREADS=1) so the figures are single-core; the analysis
itself hardly depends on that setting (its hot loops use no BLAS).

    .venv/bin/python bench/bench_analysis.py [--games snap multi-hand] [--repeat 3] [--exact]
                                             [--splits]

``--repeat N`` runs each game in N fresh processes and keeps each column's best (the machine is
shared: the best is the least disturbed). ``--exact`` also prints each game's net results
(basic, composition-dependent) to full float precision, for checking that a change to the
analyser left them alone. ``--splits`` also prints the split method's measured sizes: one-tree
resplits against the default exact-for-strategy resplits, per game.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

from game_math.analysis import main_game
from game_math.games import game_rules
from game_math.rules import GAME_IDS


def measure(game: str) -> dict[str, float]:
    """Runs in a child process: cold and warm times, peak memory, the two returns."""
    rules = game_rules(game)
    wall, cpu = time.perf_counter(), time.process_time()
    result = main_game.analyse_main_game(rules)
    cold_wall, cold_cpu = time.perf_counter() - wall, time.process_time() - cpu
    main_game._analyse.cache_clear()
    wall, cpu = time.perf_counter(), time.process_time()
    main_game.analyse_main_game(rules)
    warm_wall, warm_cpu = time.perf_counter() - wall, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    main_game._analyse.cache_clear()
    tracemalloc.start()
    main_game.analyse_main_game(rules)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "basic": result.basic_rtp, "composition": result.composition_rtp,
        "basic_ev": result.basic_ev, "composition_ev": result.composition_ev,
        "cold_wall": cold_wall, "cold_cpu": cold_cpu, "warm_wall": warm_wall,
        "warm_cpu": warm_cpu, "peak_mib": peak / 2**20, "rss_mib": rss,
    }


def split_sizes(game: str) -> tuple[float, float]:
    rules = game_rules(game)
    exact = main_game.analyse_main_game(rules)
    rough = main_game.analyse_main_game(rules, exact_resplit=False)
    return (100 * (rough.basic_ev - exact.basic_ev),
            100 * (rough.composition_ev - exact.composition_ev))


def run(game: str, repeat: int) -> dict[str, float]:
    """The child's measures over ``repeat`` fresh processes, each column at its best."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # single-core figures
    runs = [json.loads(subprocess.run([sys.executable, __file__, "--child", game], check=True,
                                      capture_output=True, text=True, env=env).stdout)
            for _ in range(repeat)]
    return {k: min(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAME_IDS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--exact", action="store_true")
    parser.add_argument("--splits", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    print(f"{'game':<17}{'basic %':>10}{'CD %':>10}{'cold s':>8}{'cpu s':>8}"
          f"{'warm s':>8}{'cpu s':>8}{'peak MiB':>10}{'rss MiB':>9}")
    exact: list[str] = []
    for game in args.games:
        m = run(game, max(args.repeat, 1))
        print(f"{game:<17}{100 * m['basic']:>10.4f}{100 * m['composition']:>10.4f}"
              f"{m['cold_wall']:>8.2f}{m['cold_cpu']:>8.2f}{m['warm_wall']:>8.2f}"
              f"{m['warm_cpu']:>8.2f}{m['peak_mib']:>10.0f}{m['rss_mib']:>9.0f}")
        exact.append(f"{game:<17}{m['basic_ev']!r:>24}{m['composition_ev']!r:>24}")
    if args.exact:
        print(f"\n{'net result':<17}{'basic':>24}{'composition-dependent':>24}")
        print("\n".join(exact))
    if args.splits:
        print("\none-tree resplits minus exact-for-strategy resplits (percentage points)")
        for game in args.games:
            basic, comp = split_sizes(game)
            print(f"{game:<17}{basic:>+10.5f}{comp:>+10.5f}")


if __name__ == "__main__":
    main()
