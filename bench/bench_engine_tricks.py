"""What the engine's two speed tricks are worth, beside a round's own cost in the same run.

    .venv/bin/python bench/bench_engine_tricks.py [--rounds 5000] [--repeat 5]

* ``events/round`` and ``round µs``: a one-hand round through the engine (bench_engine's player),
  the yardstick;
* ``event µs quick / plain``: constructing a ``CardDealt`` with the slot-filling ``__init__`` that
  ``game_math.events._quick_init`` makes, and with the ``__init__`` that ``dataclass(frozen=True)``
  makes for the same fields; ``saved/round`` is their difference times the events of a round, as a
  share of the round;
* ``state µs splice / dump``: ``Round.to_bytes`` (the rules' canonical JSON, made once per rules
  object, spliced into the sorted document) and the same bytes made by dumping the whole document
  with the rules as a dict; ``saved/transition`` is their difference, once per stored transition.

Each figure is the best of ``--repeat`` runs. The two tricks stay while ``saved`` is worth it.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench_engine import choose
from tables import print_table

from game_math.cards import Card, ordered_shoe
from game_math.events import CardDealt
from game_math.games import game_rules
from game_math.round import HandBet, Round
from game_math.rules import GAME_IDS

COLUMNS = ("game", "events/round", "round µs", "event µs quick", "plain", "saved/round",
           "state µs splice", "dump", "saved/transition")


@dataclass(frozen=True, slots=True)
class PlainCardDealt:
    """``CardDealt``'s fields with the ``__init__`` dataclasses generates (the comparison)."""

    hand: int
    card: Card | None
    face_up: bool


def best_per_call(repeat: int, number: int, run: Callable[[], object]) -> float:
    """Best of ``repeat`` timings of ``number`` calls, in µs per call."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(number):
            run()
        best = min(best, time.perf_counter() - started)
    return best / number * 1e6


def measure(game: str, rounds: int, repeat: int) -> list[str]:
    rules = game_rules(game)
    rng = random.Random(2026)
    shoes = []
    for _ in range(200):
        shoe = ordered_shoe(rules.decks)
        rng.shuffle(shoe)
        shoes.append(shoe)
    hands = [HandBet(rules.level().min_bet)]
    events = 0
    index = iter(range(10**12))

    def play() -> None:
        nonlocal events
        rnd = Round(rules, shoes[next(index) % len(shoes)], hands)
        while not rnd.finished:
            rnd.act(choose(rnd))
        events += len(rnd.events)

    round_us = best_per_call(repeat, rounds, play)
    per_round = events / (rounds * repeat)
    quick = best_per_call(repeat, 100_000, lambda: CardDealt(1, 7, True))
    plain = best_per_call(repeat, 100_000, lambda: PlainCardDealt(1, 7, True))

    rnd = Round(rules, shoes[0], hands)
    rnd.act(choose(rnd))
    rules_dict = json.loads(rules.canonical_json)
    dump = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode

    def whole() -> bytes:
        doc = json.loads(rnd.to_bytes())  # the same members, the rules as a dict
        doc["rules"] = rules_dict
        return dump(doc).encode()

    assert whole() == rnd.to_bytes()
    doc = json.loads(rnd.to_bytes())
    doc["rules"] = rules_dict
    splice_us = best_per_call(repeat, 5_000, rnd.to_bytes)
    dump_us = best_per_call(repeat, 5_000, lambda: dump(doc).encode())
    saved_event, saved_state = (plain - quick) * per_round, dump_us - splice_us
    return [game, f"{per_round:.1f}", f"{round_us:.1f}", f"{quick:.3f}", f"{plain:.3f}",
            f"{saved_event:.1f} µs ({saved_event / round_us:.0%})", f"{splice_us:.1f}",
            f"{dump_us:.1f}", f"{saved_state:.1f} µs ({saved_state / round_us:.0%} of a round)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print_table(COLUMNS, [measure(game, args.rounds, args.repeat) for game in GAME_IDS])


if __name__ == "__main__":
    main()
