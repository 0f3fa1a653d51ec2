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

``--farmer DIR`` also times Eric Farmer's C++ analyser (https://github.com/possibly-wrong/blackjack,
GPL: not part of this repository) beside ours, interleaved: each round runs our cold analysis in
a fresh process, then his in a fresh process, for every game his rules can express (hole card
with peek, ties push: snap and double-deck), ``--repeat`` rounds; it prints the best and the
median of each column (the machine is shared: the medians over many rounds are the steadier
comparison) and the load average before and after. DIR holds his
``src/`` files blackjack.cpp, blackjack.h, dealer_s17.hpp and dealer_h17.hpp; the driver below
(our code) is compiled against them with ``g++ -O2`` and times his whole analysis (shoe, rules,
strategy, ``BJPlayer`` and ``getValue``) with the composition-dependent strategy he computes:

    git -C /path/to/blackjack archive HEAD src | tar -x -C /tmp   # puts them in /tmp/src
    .venv/bin/python bench/bench_analysis.py --farmer /tmp/src --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from game_math.analysis import main_game
from game_math.games import game_rules
from game_math.rules import (
    GAME_IDS,
    BlackjackVsBlackjack,
    DealerCards,
    DoubleOn,
    Rules,
    TieRule,
)

#: our timing driver for Farmer's analyser: DECKS H17 ANY NINE SOFT DAS RESPLIT RSA PAYOFF;
#: prints the analysis's wall seconds, CPU seconds and return (composition-dependent, in %)
FARMER_DRIVER = r"""
#include "blackjack.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
class Quiet : public BJProgress { public: void indicate(int) {} };
int main(int argc, char** argv) {
  if (argc != 10) return 2;
  auto a = [&](int i) { return atoi(argv[i]) != 0; };
  auto wall = std::chrono::steady_clock::now();
  std::clock_t cpu = std::clock();
  BJShoe shoe(atoi(argv[1]));
  // hitSoft17, doubleAnyTotal, double9, doubleSoft, doubleAfterHit, doubleAfterSplit,
  // resplit, resplitAces, lateSurrender, bjPayoff
  BJRules rules(a(2), a(3), a(4), a(5), false, a(6), a(7), a(8), false, atof(argv[9]));
  BJStrategy strategy(true, true);
  Quiet progress;
  BJPlayer* player = new BJPlayer(shoe, rules, strategy, progress);  // too big for the stack
  double ev = player->getValue();
  printf("%.6f %.6f %.6f\n",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count(),
         double(std::clock() - cpu) / CLOCKS_PER_SEC, 100 + 100 * ev);
  delete player;
}
"""


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


def farmer_args(rules: Rules) -> list[str] | None:
    """The driver's arguments for ``rules``, or None where his analyser cannot express them."""
    d, dbl, sp, pay = rules.dealer, rules.double, rules.split, rules.payouts
    if (d.cards is not DealerCards.HOLE_CARD or not d.peek or pay.ties is not TieRule.PUSH
            or pay.blackjack_vs_blackjack is not BlackjackVsBlackjack.PUSH
            or sp.max_hands not in (2, 4) or not sp.split_aces_one_card):
        return None
    flags = (d.hits_soft_17, dbl.on is DoubleOn.ANY, dbl.on is not DoubleOn.TEN_OR_ELEVEN,
             dbl.soft, dbl.after_split, sp.max_hands == 4, sp.resplit_aces)
    return [str(rules.decks), *("1" if f else "0" for f in flags),
            repr(float(pay.blackjack.profit))]


def build_farmer(src: Path, out: Path) -> Path:
    """Compiles the driver against Farmer's sources in ``src`` (copied into ``out``)."""
    for name in ("blackjack.cpp", "blackjack.h", "dealer_s17.hpp", "dealer_h17.hpp"):
        shutil.copy(src / name, out / name)
    (out / "drv.cpp").write_text(FARMER_DRIVER)
    subprocess.run(["g++", "-O2", "-o", "drv", "drv.cpp", "blackjack.cpp"], cwd=out, check=True)
    return out / "drv"


def compare_farmer(src: Path, games: list[str], repeat: int) -> None:
    """Ours (cold, fresh process) and Farmer's, alternately, ``repeat`` rounds; best and median
    of each."""
    wanted = {g: farmer_args(game_rules(g)) for g in games}
    skipped = [g for g, a in wanted.items() if a is None]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    ours: dict[str, list[dict[str, float]]] = {}
    his: dict[str, list[list[float]]] = {}
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        drv = build_farmer(src, Path(tmp))
        for _ in range(max(repeat, 1)):
            for game, args in wanted.items():
                if args is None:
                    continue
                ours.setdefault(game, []).append(json.loads(subprocess.run(
                    [sys.executable, __file__, "--child", game], check=True,
                    capture_output=True, text=True, env=env).stdout))
                his.setdefault(game, []).append([float(x) for x in subprocess.run(
                    [str(drv), *args], check=True, capture_output=True,
                    text=True).stdout.split()])
    print(f"\nbeside Farmer's analyser, interleaved, {max(repeat, 1)} rounds (ours: cold, fresh "
          f"process); load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"{'game':<14}{'':<7}{'ours s':>8}{'cpu s':>8}{'his s':>8}{'cpu s':>8}{'ratio':>7}"
          f"{'cpu ratio':>10}{'our CD %':>10}{'his CD %':>10}")
    for game, runs in ours.items():
        for name, pick in (("best", min), ("median", statistics.median)):
            wall = pick(r["cold_wall"] for r in runs)
            cpu = pick(r["cold_cpu"] for r in runs)
            h_wall = pick(h[0] for h in his[game])
            h_cpu = pick(h[1] for h in his[game])
            print(f"{game:<14}{name:<7}{wall:>8.3f}{cpu:>8.3f}{h_wall:>8.3f}{h_cpu:>8.3f}"
                  f"{wall / h_wall:>7.2f}{cpu / h_cpu:>10.2f}"
                  f"{100 * runs[0]['composition']:>10.4f}{his[game][0][2]:>10.4f}")
    if skipped:
        print(f"(not expressible in his rules: {', '.join(skipped)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAME_IDS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--exact", action="store_true")
    parser.add_argument("--splits", action="store_true")
    parser.add_argument("--farmer", type=Path, metavar="DIR",
                        help="time Farmer's analyser from these sources beside ours")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    if args.farmer:
        compare_farmer(args.farmer, args.games, args.repeat)
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
