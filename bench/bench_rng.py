"""Shuffle and DRBG speed: the certified path against the standard library, in one run.

    .venv/bin/python bench/bench_rng.py [--quick]

Rows (microseconds per shuffle are the best of several repeats, so background load inflates them
less):
- certified, fresh DRBG per shoe: ``shoe_cards(new_server_seed(), b"", decks)``, exactly what
  production does per shoe (OS seed, instantiate, shuffle);
- certified, shuffle only: ``DrbgRandom.shuffle`` on an already instantiated DRBG;
- ``random.shuffle`` (Mersenne Twister, not cryptographic) and ``random.SystemRandom().shuffle``.
Ratios are against ``random.shuffle``: above 1 means faster than it. Then DRBG throughput in MB/s
and the cost of one HMAC-SHA256 with each implementation considered.
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
from rng_service.drbg import MAX_BYTES_PER_REQUEST, HmacDrbg
from rng_service.sampling import DrbgRandom
from rng_service.shoe import new_server_seed, shoe_cards


def best_seconds(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best per-call time over ``repeat`` batches of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def shuffle_rows(decks: int, number: int, repeat: int) -> list[tuple[str, float]]:
    cards = ordered_shoe(decks)
    source = DrbgRandom(HmacDrbg(os.urandom(32), os.urandom(16), b"fairshoe/bench"))
    system = random.SystemRandom()
    cases: list[tuple[str, Callable[[], object]]] = [
        ("certified, fresh DRBG per shoe", lambda: shoe_cards(new_server_seed(), b"", decks)),
        ("certified, shuffle only", lambda: source.shuffle(cards)),
        ("random.shuffle", lambda: random.shuffle(cards)),
        ("SystemRandom().shuffle", lambda: system.shuffle(cards)),
    ]
    return [(name, best_seconds(fn, number, repeat)) for name, fn in cases]


def print_shuffles(decks: int, rows: list[tuple[str, float]]) -> None:
    baseline = dict(rows)["random.shuffle"]
    print(f"\n{decks}-deck shoe ({52 * decks} cards)")
    print(f"  {'path':<32} {'us/shuffle':>10} {'shuffles/s':>11} {'vs random.shuffle':>18}")
    for name, seconds in rows:
        print(
            f"  {name:<32} {seconds * 1e6:>10.1f} {1 / seconds:>11,.0f} "
            f"{baseline / seconds:>17.2f}x"
        )


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
        ("cryptography, keyed copy (used)", crypto_copy),
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
    mb = 2 if args.quick else 16
    print(f"\nHMAC_DRBG(SHA-256) output, 64 KiB requests: {drbg_throughput(mb):.1f} MB/s")
    print("\nOne HMAC-SHA256 of 32 bytes")
    for name, seconds in hmac_rows(20_000 if args.quick else 200_000):
        print(f"  {name:<32} {seconds * 1e9:>8.0f} ns")


if __name__ == "__main__":
    main()
