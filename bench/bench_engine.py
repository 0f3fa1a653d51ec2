"""Rounds per second through the engine, per game, on one core.

Each round: validate bets, deal from a pre-shuffled shoe, take the insurance decision when
offered (decline), play a simple total-based strategy (split 8s and aces, double 10 and 11 when
allowed, hit below 17), play the dealer and settle. Shoes are shuffled before timing starts so
only the engine is measured. ``rounds/s`` is per wall second; ``cpu rounds/s`` per second of this
process's CPU time, what one core gives whatever else the machine runs (on a loaded machine the
wall rate measures the other load). Target (issue 21): at least 25,000 one-hand rounds/s on one
core (issue 2's was 20,000); ``vs target`` is the CPU rate's.

    .venv/bin/python bench/bench_engine.py [--rounds N]
"""

from __future__ import annotations

import argparse
import random
import time

from game_math.cards import RANK_OF, ordered_shoe
from game_math.games import game_rules
from game_math.round import Action, ActionKind, HandBet, Round
from game_math.rules import GAME_IDS, Rules

DECLINE = Action(ActionKind.INSURANCE, 0)
NO_EVEN_MONEY = Action(ActionKind.EVEN_MONEY, accept=False)
HIT, STAND = Action(ActionKind.HIT), Action(ActionKind.STAND)
DOUBLE, SPLIT = Action(ActionKind.DOUBLE), Action(ActionKind.SPLIT)
TARGET = 25_000


def choose(rnd: Round) -> Action:
    legal = {la.action for la in rnd.legal_actions()}
    if "insurance" in legal:
        return DECLINE
    if "even_money" in legal:
        return NO_EVEN_MONEY
    hand = rnd.hand(rnd.turn.hand or 0)
    if "split" in legal and RANK_OF[hand.cards[0]] in (1, 8):
        return SPLIT
    if "double" in legal and hand.total in (10, 11):
        return DOUBLE
    return HIT if hand.total < 17 and "hit" in legal else STAND


def play(rules: Rules, shoe: list[int], hands: list[HandBet]) -> int:
    rnd = Round(rules, shoe, hands)
    while not rnd.finished:
        rnd.act(choose(rnd))
    return rnd.total_returned - rnd.total_staked


def bench(game: str, n_hands: int, rounds: int) -> tuple[float, float, int]:
    rules = game_rules(game)
    rng = random.Random(2026)
    shoes = []
    for _ in range(min(rounds, 2000)):
        shoe = ordered_shoe(rules.decks)
        rng.shuffle(shoe)
        shoes.append(shoe)
    bet = rules.level().min_bet * rules.hands.multi_hand_min_multiple
    hands = [HandBet(bet)] * n_hands
    net = 0
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(rounds):
        net += play(rules, shoes[i % len(shoes)], hands)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return rounds / elapsed, rounds / cpu, net


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'game':<16} {'hands':>5} {'rounds/s':>10} {'cpu rounds/s':>12} {'cpu us/round':>12} "
          f"{'vs target':>9}")
    for game in GAME_IDS:
        rules = game_rules(game)
        for n in sorted({min(rules.hands.counts), max(rules.hands.counts)}):
            rate, cpu_rate, _ = bench(game, n, args.rounds)
            print(f"{game:<16} {n:>5} {rate:>10,.0f} {cpu_rate:>12,.0f} {1e6 / cpu_rate:>12.1f} "
                  f"{cpu_rate / TARGET:>8.2f}x")


if __name__ == "__main__":
    main()
