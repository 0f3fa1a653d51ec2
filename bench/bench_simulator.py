"""Simulator rounds per second per game, 1 and 2 worker processes, and where a round's time goes.

Each round as ``fairshoe simulate`` plays it: a fresh OS seed per shoe, the certified shuffle
(lazily, as far as a one-round shoe is dealt), the engine, the analyser's basic strategy. Columns:

* ``1 worker``, ``2 workers``: rounds/s of ``simulate`` (wall time, pool start included; the
  strategy is analysed before timing starts);
* ``play us``: one round through the engine and the strategy, on shoes shuffled beforehand;
* ``shoe us``: the rest of a single-worker round: seed, DRBG, shuffle (of the first cards of a
  one-round shoe; a cut-card shoe's whole shuffle shared by its rounds), tallying
  (``1e6 / rate - play``).

Target (issue 4): at least 40,000 rounds/s using both cores. ``--profile GAME`` prints the
cProfile of one worker's rounds instead, to show whether the engine or the simulator dominates.

    .venv/bin/python bench/bench_simulator.py [--rounds N] [--profile GAME]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
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
    started = time.perf_counter()
    for i in range(rounds):
        player.play_round(shoes[i % len(shoes)], 0)
    return 1e6 * (time.perf_counter() - started) / rounds


def rate(game: str, rounds: int, workers: int) -> float:
    return simulate(game_rules(game), rounds, workers=workers).rounds_per_second


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
    print(f"{'game':<16} {'1 worker':>10} {'2 workers':>10} {'play us':>8} {'shoe us':>8} "
          f"{'vs target':>9}")
    for game in GAME_IDS:
        basic_strategy(game_rules(game))  # analysis outside the timings
        one = rate(game, args.rounds // 2, 1)
        two = rate(game, args.rounds, 2)
        play = play_us(game, min(args.rounds // 4, 50_000))
        print(f"{game:<16} {one:>10,.0f} {two:>10,.0f} {play:>8.1f} {1e6 / one - play:>8.1f} "
              f"{two / TARGET:>8.2f}x")


if __name__ == "__main__":
    main()
