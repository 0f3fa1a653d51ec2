"""`fairshoe rng-test`: NIST SP 800-22 over DRBG output plus shuffle uniformity, as evidence.

The bitstream comes from a freshly OS-seeded HMAC_DRBG (``rng_service.rng.drbg.os_seeded_output``,
the generator ``fairshoe collect raw`` reads) and the shuffles from ``rng_service.rng.shoe`` with a
fresh OS seed per shoe: nothing is re-implemented for the test. ``--seed`` replaces the OS entropy
by a stream derived from the given seed so a run can be repeated exactly; evidence runs omit it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator, MutableSequence, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, BinaryIO

from rng_service.cli.main import CommandError

if TYPE_CHECKING:
    from rng_service.lab.stats import shuffle_tests

# numpy, scipy (the battery) and cryptography (the DRBG) load inside the handlers: parsing the
# command line must not pay for them.

PERSONALIZATION = b"fairshoe/rng-test/v1"
FULL = {"sequences": 100, "bits": 1_000_000, "shuffles": 1_000_000}
QUICK = {"sequences": 10, "bits": 1_000_000, "shuffles": 20_000}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rng-test`` to the command line."""
    parser = subparsers.add_parser(
        "rng-test",
        help="NIST SP 800-22 battery over DRBG output and shuffle uniformity tests",
        description="Run the NIST SP 800-22 rev1a battery (all 15 tests, proportion and "
        "uniformity criteria) over a freshly OS-seeded HMAC_DRBG, and chi-square tests of the "
        "production shuffle. Exit status 1 if any of them fails.",
    )
    parser.add_argument("--sequences", type=int, metavar="M",
                        help=f"number of sequences (default {FULL['sequences']})")
    parser.add_argument("--bits", type=int, metavar="N",
                        help=f"bits per sequence (default {FULL['bits']}, the minimum)")
    parser.add_argument("--shuffles", type=int, metavar="K",
                        help=f"shuffles per shuffle test, 0 to skip (default {FULL['shuffles']})")
    parser.add_argument("--quick", action="store_true",
                        help=f"small run: {QUICK['sequences']} sequences, {QUICK['shuffles']} "
                        "shuffles (uniformity needs 55 sequences and is not evaluated)")
    parser.add_argument("--json", action="store_true", help="print machine-readable results")
    parser.add_argument("--write-bits", metavar="FILE",
                        help="also write the tested bitstream as raw bytes (dieharder -g 201 -f)")
    parser.add_argument("--seed", metavar="HEX",
                        help="derive all entropy from this seed to repeat a run exactly")
    parser.set_defaults(func=run)


def _resolve(args: argparse.Namespace) -> tuple[int, int, int]:
    from rng_service.lab.stats.sp800_22 import BATTERY_MIN_BITS

    base = QUICK if args.quick else FULL
    sequences = args.sequences if args.sequences is not None else base["sequences"]
    bits = args.bits if args.bits is not None else base["bits"]
    shuffles = args.shuffles if args.shuffles is not None else base["shuffles"]
    if sequences < 1:
        raise CommandError("--sequences must be at least 1")
    if bits < BATTERY_MIN_BITS:
        raise CommandError(f"--bits must be at least {BATTERY_MIN_BITS}: the standard's "
                           "parameters for several tests assume n >= 10^6")
    if shuffles < 0:
        raise CommandError("--shuffles must not be negative")
    return sequences, bits, shuffles


def _parse_seed(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        seed = bytes.fromhex(text)
    except ValueError:
        raise CommandError("--seed must be hexadecimal") from None
    if len(seed) < 32:
        raise CommandError("--seed must have at least 32 bytes (64 hex digits)")
    return seed


def _derived_entropy(seed: bytes, purpose: bytes) -> Callable[[int], bytes]:
    """A deterministic stand-in for os.urandom: SHA-256 in counter mode over seed and purpose."""
    counter = 0

    def draw(n: int) -> bytes:
        nonlocal counter
        out = b""
        while len(out) < n:
            out += hashlib.sha256(b"%s\0%s\0%d" % (purpose, seed, counter)).digest()
            counter += 1
        return out[:n]

    return draw


def _bitstream(n_bytes: int, seed: bytes | None) -> Iterator[bytes]:
    from rng_service.rng.drbg import os_seeded_output

    if seed is None:
        return os_seeded_output(n_bytes, PERSONALIZATION)
    return os_seeded_output(n_bytes, PERSONALIZATION,
                            entropy_source=_derived_entropy(seed, b"battery"))


def _tee(chunks: Iterator[bytes], sink: BinaryIO | None) -> Iterator[bytes]:
    for chunk in chunks:
        if sink is not None:
            sink.write(chunk)
        yield chunk


def _shuffle_sources(seed: bytes | None) -> tuple[shuffle_tests.Deal, shuffle_tests.Shuffler]:
    from rng_service.lab.stats import shuffle_tests
    from rng_service.rng.sampling import DrbgRandom
    from rng_service.rng.shoe import SEED_BYTES, shoe_cards, shoe_drbg

    if seed is None:
        return shuffle_tests.production_deal, shuffle_tests.production_shuffle
    shoe_seeds = _derived_entropy(seed, b"shoes")

    def deal(decks: int) -> Sequence[int]:
        return shoe_cards(shoe_seeds(SEED_BYTES), b"", decks)

    def shuffle(items: MutableSequence[int]) -> None:
        DrbgRandom(shoe_drbg(shoe_seeds(SEED_BYTES), b"", 1)).shuffle(items)

    return deal, shuffle


def _open_sink(path: str | None, stack: ExitStack) -> BinaryIO | None:
    if path is None:
        return None
    try:
        return stack.enter_context(open(path, "wb"))  # closed by the stack
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    """The ``rng-test`` command: exit status 0 if every test passed, 1 otherwise."""
    from tqdm import tqdm

    from rng_service.lab.stats import battery, report, shuffle_tests

    sequences, bits, shuffles = _resolve(args)
    seed = _parse_seed(args.seed)
    started = time.perf_counter()
    with ExitStack() as stack:
        sink = _open_sink(args.write_bits, stack)
        chunks = _tee(_bitstream((sequences * bits + 7) // 8, seed), sink)
        with tqdm(total=sequences, desc="SP 800-22", unit="seq", file=sys.stderr,
                  disable=None) as bar:
            result = battery.run_battery(battery.split_sequences(chunks, bits, sequences), bits,
                                         on_sequence=lambda: bar.update(1),
                                         clock=time.perf_counter)
        for _ in chunks:  # the tail of a final partial byte, so the file holds every tested bit
            pass
    shuffle_results: list[shuffle_tests.ShuffleTestResult] = []
    if shuffles:
        deal, shuffle = _shuffle_sources(seed)
        with tqdm(total=3 * shuffles, desc="shuffles", unit="shuffle", file=sys.stderr,
                  disable=None, miniters=1000) as bar:
            shuffle_results = shuffle_tests.run_shuffle_tests(
                shuffles, deal, shuffle, on_shuffle=lambda: bar.update(1))
    parameters = {"sequences": sequences, "bits": bits, "shuffles": shuffles,
                  "seeded": seed is not None,
                  "elapsed_seconds": round(time.perf_counter() - started, 3)}
    passed = result.passed and all(r.passed for r in shuffle_results)
    if args.json:
        print(json.dumps(report.full_json(result, shuffle_results, parameters), indent=2))
    else:
        print(report.battery_table(result))
        if shuffle_results:
            print()
            print(report.shuffle_table(shuffle_results))
        print()
        print(f"elapsed {parameters['elapsed_seconds']} s; "
              f"verdict: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1
