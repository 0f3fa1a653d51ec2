"""Shuffle and DRBG speed: the certified path against the standard library, in one run.

    .venv/bin/python bench/bench_rng.py [--quick]

Rows (microseconds per call are the best of several repeats, so background load inflates them
less):
- certified, fresh DRBG per shoe: ``shoe_cards(new_server_seed(), b"", decks)``, the full shuffle
  of a shoe from scratch (OS seed, instantiate, shuffle), as a cut-card shoe or an audit needs it;
- certified, shuffle only: ``DrbgRandom.shuffle`` on an already instantiated DRBG;
- ``random.shuffle`` (Mersenne Twister, not cryptographic) and ``random.SystemRandom().shuffle``;
- per-round shoe: ``LazyShoe(new_server_seed(), b"", decks)`` and its first 12 cards read one at
  a time, as a round deals them (fresh seed and DRBG, shuffled only as far as dealt): the cost of
  the randomness of one round in a game that reshuffles after every round;
- Shoe lifecycle: the same through ``Shoe.new`` (id, commitment, health check), ``start_round``,
  12 cards read from ``shoe.cards``, ``take`` and ``end_round``, as ``records.play_round`` does.
Ratios are against ``random.shuffle`` of the whole shoe: above 1 means faster than it. Then the
DRBG's costs (instantiate, one request of 128 or 640 bytes: the block size trade-off in
``rng_service.rng.sampling``; the same through the pure-Python reference core), its
throughput in MB/s and one HMAC-SHA256 in each implementation
considered.
"""

from __future__ import annotations

import argparse
import hmac
import os
import random
import sys
import timeit
from collections.abc import Callable

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC

from game_math.cards import ordered_shoe
from rng_service.rng.drbg import MAX_BYTES_PER_REQUEST, HmacDrbg
from rng_service.rng.sampling import BLOCK_BYTES, DrbgRandom
from rng_service.rng.shoe import LazyShoe, Shoe, new_server_seed, shoe_cards, shoe_drbg

#: cards a round reads from its shoe in the per-round rows (a one-hand round deals about 5 to 8,
#: a multi-hand round 15 to 20)
ROUND_CARDS = 12


def best_seconds(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best per-call time over ``repeat`` batches of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def lazy_round(decks: int) -> None:
    shoe = LazyShoe(new_server_seed(), b"", decks)
    for position in range(ROUND_CARDS):
        shoe[position]  # as game_math.round.Round reads its shoe


def shoe_round(decks: int) -> None:
    # As rng_service.records.schema.play_round uses a shoe:
    # Round reads shoe.cards, then take + end_round.
    shoe = Shoe.new(decks)
    shoe.start_round()
    cards = shoe.cards
    for position in range(ROUND_CARDS):
        cards[position]
    shoe.take(ROUND_CARDS)
    shoe.end_round()


def shuffle_rows(decks: int, number: int, repeat: int) -> list[tuple[str, float]]:
    cards = ordered_shoe(decks)
    source = DrbgRandom(HmacDrbg(os.urandom(32), os.urandom(16), b"fairshoe/bench"))
    system = random.SystemRandom()
    cases: list[tuple[str, Callable[[], object]]] = [
        ("certified, fresh DRBG per shoe", lambda: shoe_cards(new_server_seed(), b"", decks)),
        ("certified, shuffle only", lambda: source.shuffle(cards)),
        ("random.shuffle", lambda: random.shuffle(cards)),
        ("SystemRandom().shuffle", lambda: system.shuffle(cards)),
        (f"per-round shoe, first {ROUND_CARDS} cards dealt lazily (fresh seed + DRBG)",
         lambda: lazy_round(decks)),
        (f"Shoe lifecycle: Shoe.new, {ROUND_CARDS} cards read, take, end_round",
         lambda: shoe_round(decks)),
    ]
    return [(name, best_seconds(fn, number, repeat)) for name, fn in cases]


def print_shuffles(decks: int, rows: list[tuple[str, float]]) -> None:
    baseline = dict(rows)["random.shuffle"]
    width = max(len(name) for name, _ in rows)
    print(f"\n{decks}-deck shoe ({52 * decks} cards)")
    print(f"  {'path':<{width}} {'us/call':>8} {'calls/s':>9} {'vs random.shuffle':>18}")
    for name, seconds in rows:
        print(
            f"  {name:<{width}} {seconds * 1e6:>8.1f} {1 / seconds:>9,.0f} "
            f"{baseline / seconds:>17.2f}x"
        )


def drbg_rows(number: int) -> list[tuple[str, float]]:
    def fresh() -> HmacDrbg:
        return shoe_drbg(new_server_seed(), b"", 6)

    def fresh_reference() -> HmacDrbg:
        seed = new_server_seed()
        return HmacDrbg(seed[:32], seed[32:], b"fairshoe/shoe/v2\0" + bytes(36), reference=True)

    ready, reference = fresh(), fresh_reference()
    return [
        ("new seed + instantiate (shoe_drbg)", best_seconds(fresh, number, 5)),
        (f"generate({BLOCK_BYTES}) (the block in use)", best_seconds(
            lambda: ready.generate(BLOCK_BYTES), number, 5)),
        ("generate(640) (the former block)", best_seconds(lambda: ready.generate(640), number, 5)),
        ("reference core: new seed + instantiate", best_seconds(fresh_reference, number, 5)),
        (f"reference core: generate({BLOCK_BYTES})", best_seconds(
            lambda: reference.generate(BLOCK_BYTES), number, 5)),
    ]


def drbg_throughput(total_mb: int) -> float:
    drbg = HmacDrbg(os.urandom(32), os.urandom(16))
    requests = max(1, total_mb * 2**20 // MAX_BYTES_PER_REQUEST)
    seconds = best_seconds(lambda: drbg.generate(MAX_BYTES_PER_REQUEST), requests, 3)
    return MAX_BYTES_PER_REQUEST / seconds / 1e6


def hmac_rows(number: int) -> list[tuple[str, float]]:
    key, value = os.urandom(32), os.urandom(32)
    sha256 = hashes.SHA256()
    keyed = HMAC(key, sha256)
    stdlib_keyed = hmac.new(key, digestmod="sha256")

    def crypto_copy() -> bytes:
        mac = keyed.copy()
        mac.update(value)
        return mac.finalize()

    def crypto_new() -> bytes:
        mac = HMAC(key, sha256)
        mac.update(value)
        return mac.finalize()

    def stdlib_copy() -> bytes:
        mac = stdlib_keyed.copy()
        mac.update(value)
        return mac.digest()

    cases: list[tuple[str, Callable[[], object]]] = [
        ("cryptography, keyed copy (reference core)", crypto_copy),
        ("cryptography, new key", crypto_new),
        ("stdlib hmac.digest", lambda: hmac.digest(key, value, "sha256")),
        ("stdlib hmac, keyed copy", stdlib_copy),
    ]
    return [(name, best_seconds(fn, number, 5)) for name, fn in cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    args = parser.parse_args()
    number, repeat = (200, 3) if args.quick else (2000, 9)
    print(f"Python {sys.version.split()[0]}; best of {repeat} x {number} shuffles per row")
    for decks in (2, 6):
        print_shuffles(decks, shuffle_rows(decks, number, repeat))
    print("\nHMAC_DRBG(SHA-256) costs")
    for name, seconds in drbg_rows(2_000 if args.quick else 20_000):
        print(f"  {name:<40} {seconds * 1e6:>6.1f} us")
    mb = 2 if args.quick else 16
    print(f"\nHMAC_DRBG(SHA-256) output, 64 KiB requests: {drbg_throughput(mb):.1f} MB/s")
    print("\nOne HMAC-SHA256 of 32 bytes")
    for name, seconds in hmac_rows(20_000 if args.quick else 200_000):
        print(f"  {name:<42} {seconds * 1e9:>8.0f} ns")


if __name__ == "__main__":
    main()
