"""Simulator rounds per second per game, 1 and 2 worker processes, and where a round's time goes.

Each round as ``fairshoe simulate`` plays it: a fresh OS seed per shoe, the certified shuffle
(lazily, as far as a one-round shoe is dealt), the engine, the analyser's basic strategy. Columns:

* ``1 worker``, ``2 workers``: rounds/s of ``simulate`` (wall time, pool start included; the
  strategy is analysed before timing starts);
* ``cpu 1w``: rounds per CPU second of the single-worker run (its process's own CPU time): what
  one core delivers, whatever else the machine runs;
* ``cpu 2w``: rounds per CPU second of the two-worker run (the parent's and both workers' CPU
  time together), so ``2 x cpu 2w`` is what two cores deliver to this run alone: the figure the
  target is judged by on a loaded machine, where wall rates say more about the other load;
* ``cores``: CPU seconds of the two-worker run per wall second: near 2 on an idle machine, and
  below 1 on one where others hold the cores (a split that left one worker idle would show
  here, with ``cpu 2w`` unchanged);
* ``play us``: CPU time of one round through the engine and the strategy, on shoes shuffled
  beforehand;
* ``shoe us``: the rest of a single-worker round: seed, DRBG, shuffle (of the first cards of a
  one-round shoe; a cut-card shoe's whole shuffle shared by its rounds), tallying
  (``1e6 / cpu 1w - play``).

Target (issue 4, issue 21): at least 40,000 rounds/s using both cores: ``vs target`` is
``2 x cpu 2w / 40,000``, and ``wall vs target`` the two-worker wall rate against it.
``--profile GAME`` prints the cProfile of one worker's rounds instead, to show whether the engine
or the simulator dominates.

    .venv/bin/python bench/bench_simulator.py [--rounds N] [--profile GAME]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import time

from game_math.autoplay import basic_strategy
from game_math.games import game_rules
from game_math.rules import GAME_IDS
from rng_service.lab.simulator import Chunk, Player, play_chunk, simulate
from rng_service.rng.shoe import new_server_seed, shoe_cards

TARGET = 40_000


def play_us(game: str, rounds: int) -> float:
    """Microseconds per round of engine and strategy alone (shoes made before timing)."""
    rules = game_rules(game)
    player = Player(rules, basic_strategy(rules))
    shoes = [shoe_cards(new_server_seed(), b"", rules.decks) for _ in range(500)]
    started = time.process_time()  # CPU time, as ``cpu 1w`` (``shoe us`` is their difference)
    for i in range(rounds):
        player.play_round(shoes[i % len(shoes)], 0)
    return 1e6 * (time.process_time() - started) / rounds


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children waited for (a pool's workers)."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def rate(game: str, rounds: int, workers: int) -> tuple[float, float, float]:
    """Wall rounds/s, rounds per CPU second (all processes) and cores used (CPU s per wall s)."""
    cpu = _cpu_seconds()
    sim = simulate(game_rules(game), rounds, workers=workers)
    used = _cpu_seconds() - cpu
    return sim.rounds_per_second, sim.estimate.rounds / used, used / sim.seconds


def profile(game: str, rounds: int) -> None:
    rules = game_rules(game)
    player = Player(rules, basic_strategy(rules))
    prof = cProfile.Profile()
    prof.runcall(play_chunk, player, Chunk(0, rounds, None))
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200_000, help="rounds per measurement")
    parser.add_argument("--profile", metavar="GAME", choices=GAME_IDS)
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, args.rounds // 4)
        return
    print(f"{'game':<16} {'1 worker':>10} {'2 workers':>10} {'cpu 1w':>8} {'cpu 2w':>8} "
          f"{'cores':>5} {'play us':>8} {'shoe us':>8} {'vs target':>9} {'wall vs target':>14}")
    for game in GAME_IDS:
        basic_strategy(game_rules(game))  # analysis outside the timings
        one, cpu_one, _ = rate(game, args.rounds // 2, 1)
        two, cpu_two, cores = rate(game, args.rounds, 2)
        play = play_us(game, min(args.rounds // 4, 50_000))
        print(f"{game:<16} {one:>10,.0f} {two:>10,.0f} {cpu_one:>8,.0f} {cpu_two:>8,.0f} "
              f"{cores:>5.2f} {play:>8.1f} {1e6 / cpu_one - play:>8.1f} "
              f"{2 * cpu_two / TARGET:>8.2f}x {two / TARGET:>13.2f}x")

if __name__ == "__main__":
    main()
