"""Encoding plus signing real round records, per game: issue 3's target and where the time goes.

    .venv/bin/python bench/bench_signing.py [--records 200] [--repeat 5] [--games snap ...]

For each game, ``--records`` rounds are collected on the production path (``collect_rounds``:
OS-seeded shoes, random bets, the basic-strategy player taking some insurance, the engine,
``round_payload``) into a temporary directory, and their payloads read back. Each column is the
mean over those records of one operation, in µs, best of ``--repeat`` passes (best-of, so noise
from other processes inflates nothing):

* ``sign+encode``: :func:`sign_and_encode`, what the record writer runs (target: under 100 µs);
* ``two-pass``: ``encode_envelope(sign_payload(...))``, the writer's former path, which encodes
  the payload once to sign it and again inside the envelope;
* ``old format``: the two-pass path over the same record with its rules embedded (the format
  before records named their rules by digest only);
* ``canonical``: :func:`canonical_encode` of the payload alone; ``rfc8785``: ``rfc8785.dumps``
  of it, the reference encoder the fast path is tested against; ``Ed25519``: signing the
  message alone; ``verify``: :func:`verify_envelope` (re-encode and check).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cryptography
import rfc8785
from tables import print_table

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from game_math.rules import GAME_IDS
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import (
    canonical_encode,
    decode_envelope,
    encode_envelope,
    sign_and_encode,
    sign_payload,
    signing_message,
    verify_envelope,
)
from rng_service.records.schema import ROUNDS_SUBDIR, RecordWriter, collect_rounds

TARGET_US = 100.0
COLUMNS = ("game", "records", "JCS bytes", "sign+encode", "two-pass", "old format", "canonical",
           "rfc8785", "Ed25519", "verify")

Payload = dict[str, Any]


def real_records(game: str, count: int, key: SigningKey) -> list[Payload]:
    """``count`` records of ``game`` as ``collect rounds`` writes them, read back."""
    rules = game_rules(game)
    basic_strategy(rules)  # the player's analysis, outside every timing
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        collect_rounds(rules, count, RecordWriter(out, key), basic_strategy_action)
        return [decode_envelope(p.read_bytes())["payload"]
                for p in sorted((out / ROUNDS_SUBDIR).iterdir())]


def per_record_us(payloads: list[Payload], op: Callable[[Payload], object], repeat: int) -> float:
    def run() -> None:
        for p in payloads:
            op(p)

    return min(timeit.repeat(run, number=1, repeat=repeat)) / len(payloads) * 1e6


def bench_game(game: str, count: int, repeat: int, key: SigningKey) -> tuple[list[str], float]:
    payloads = real_records(game, count, key)
    for p in payloads:  # the same bytes both ways, or the comparison means nothing
        assert sign_and_encode(p, key) == rfc8785.dumps(sign_payload(p, key))
    rules = game_rules(game).to_dict()
    old_format = [{**p, "rules": rules} for p in payloads]
    trusted = {key.key_id: key.public_key}
    messages = {id(p): signing_message(p) for p in payloads}
    envelopes = {id(p): sign_payload(p, key) for p in payloads}
    size = statistics.median(len(canonical_encode(p)) for p in payloads)

    def two_pass(p: Payload) -> object:
        return encode_envelope(sign_payload(p, key))

    us = {
        "sign+encode": per_record_us(payloads, lambda p: sign_and_encode(p, key), repeat),
        "two-pass": per_record_us(payloads, two_pass, repeat),
        "old format": per_record_us(old_format, two_pass, repeat),
        "canonical": per_record_us(payloads, canonical_encode, repeat),
        "rfc8785": per_record_us(payloads, rfc8785.dumps, repeat),
        "Ed25519": per_record_us(payloads, lambda p: key.sign(messages[id(p)]), repeat),
        "verify": per_record_us(payloads, lambda p: verify_envelope(envelopes[id(p)], trusted),
                                repeat),
    }
    row = [game, str(len(payloads)), f"{size:,.0f}", *(f"{us[c]:.1f}" for c in COLUMNS[3:])]
    return row, us["sign+encode"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200, help="records per game")
    parser.add_argument("--repeat", type=int, default=5, help="passes; the best is reported")
    parser.add_argument("--games", nargs="+", default=list(GAME_IDS), choices=GAME_IDS)
    args = parser.parse_args()
    key = SigningKey.generate()
    print(f"# Python {platform.python_version()} on {platform.machine()}, cryptography "
          f"{cryptography.__version__}, rfc8785 {rfc8785.__version__}; µs per record, mean over "
          f"the records, best of {args.repeat}; JCS bytes: median payload size")
    results = [bench_game(g, args.records, args.repeat, key) for g in args.games]
    print_table(COLUMNS, [row for row, _ in results])
    worst = max(us for _, us in results)
    verdict = "met" if worst < TARGET_US else "MISSED"
    print(f"target: encode+sign a round record under {TARGET_US:.0f} µs: {verdict} "
          f"(slowest game's mean {worst:.1f} µs)")


if __name__ == "__main__":
    main()
