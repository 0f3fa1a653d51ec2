"""Wall time and peak memory of the exact side-bet analysis, per bet and deck count.

"cold" includes the one-off enumeration of face deals for the bet's kind (the cache is cleared
first); "warm" is a further table for another deck count or paytable, which only re-weighs the
cached outcome classes. Target (issue 4): well under 1 s per bet and deck count.

    .venv/bin/python bench/bench_sidebets.py [--decks 1 2 4 6 8]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from game_math.analysis.sidebets import decimal, outcome_classes, side_bet_table
from game_math.games import game_rules
from game_math.rules import SideBet

BETS = (("snap", "snap"), ("multi-hand", "perfect_pairs"), ("multi-hand", "twenty_one_plus_three"))


def timed_table(bet: SideBet, decks: int) -> tuple[float, str]:
    start = time.perf_counter()
    table = side_bet_table(bet, decks)
    return time.perf_counter() - start, decimal(table.expected_return * 100, 4)


def cold_peak_kib(bet: SideBet, decks: int) -> float:
    """Peak traced memory of a cold table (measured apart: tracing slows the timed runs)."""
    outcome_classes.cache_clear()
    tracemalloc.start()
    side_bet_table(bet, decks)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decks", type=int, nargs="+", default=[1, 2, 4, 6, 8])
    args = parser.parse_args()
    print(f"{'bet':<24}{'decks':>6}{'cold ms':>10}{'warm ms':>10}{'peak KiB':>10}{'return %':>12}")
    for game, name in BETS:
        bet = game_rules(game).side_bet(name)
        assert bet is not None
        for decks in args.decks:
            outcome_classes.cache_clear()
            cold, ret = timed_table(bet, decks)
            warm, _ = timed_table(bet, decks)
            peak = cold_peak_kib(bet, decks)
            row = f"{cold * 1e3:>10.1f}{warm * 1e3:>10.2f}{peak:>10.1f}{ret:>12}"
            print(f"{name:<24}{decks:>6}{row}")


if __name__ == "__main__":
    main()
