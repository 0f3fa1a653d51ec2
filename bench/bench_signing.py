"""Ed25519 and canonical-encoding throughput for signed round records.

    .venv/bin/python bench/bench_signing.py [--repeat 5] [--number 2000]

Prints one table. Each figure is the best of ``--repeat`` timings of ``--number`` calls (best-of, so
noise from other processes inflates nothing). The payload is shaped like a finished round record:
40 cards, 10 actions, 8 wagers, nested shoe/hand objects. Target (issue 3): encoding plus signing a
round record in under 100 µs.
"""

from __future__ import annotations

import argparse
import json
import platform
import timeit
from collections.abc import Callable
from typing import Any

import cryptography
import rfc8785

from game_math.cards import CODE_OF
from rng_service.keys import SigningKey
from rng_service.signing import (
    canonical_encode,
    decode_envelope,
    encode_envelope,
    sign_payload,
    signing_message,
    verify_envelope,
)

TARGET_US = 100.0


def round_record() -> dict[str, Any]:
    cards = [CODE_OF[(i * 17) % 52] for i in range(40)]
    return {
        "schema": "fairshoe.round/v1",
        "round_id": "r-01HZX3J6Q4W8C2P0K7M5N9B1T",
        "game": {"id": "classic-6d", "rules_sha256": "3f" * 32},
        "shoe": {
            "id": "s-01HZX3J5V7A2B4C6D8E0F1G3H",
            "decks": 6,
            "commitment": "9c" * 32,
            "client_seed": "player-supplied text",
            "positions": {"first": 120, "last": 159},
        },
        "cards": cards,
        "actions": [
            {
                "seat": i % 4,
                "hand": i % 2,
                "action": ("hit", "stand", "double", "split")[i % 4],
                "card": cards[i],
                "at": 1_717_000_000_000 + 350 * i,
            }
            for i in range(10)
        ],
        "wagers": [
            {
                "seat": i,
                "hand": 0,
                "kind": "main" if i < 5 else "perfect_pairs",
                "currency": "EUR",
                "amount": 2_500 + 100 * i,
                "payout": (5_000 if i % 2 else 0),
                "outcome": {
                    "result": ("win", "lose", "push")[i % 3],
                    "total": 17 + i % 5,
                    "blackjack": i == 3,
                },
            }
            for i in range(8)
        ],
        "dealer": {"cards": cards[:3], "total": 19, "bust": False},
        "started_at": "2024-05-29T16:26:40.000Z",
        "finished_at": "2024-05-29T16:26:43.500Z",
        "service_version": "0.1.0",
    }


def best_us(call: Callable[[], object], number: int, repeat: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=5, help="timings; the best is reported")
    args = parser.parse_args()

    key = SigningKey.generate()
    trusted = {key.key_id: key.public_key}
    payload = round_record()
    assert canonical_encode(payload) == rfc8785.dumps(payload)  # same bytes, or nothing to compare
    message = signing_message(payload)
    signature = key.sign(message)
    envelope = sign_payload(payload, key)
    data = encode_envelope(envelope)

    def fast_sign() -> object:
        return sign_payload(payload, key)

    def rfc8785_sign() -> object:
        return key.sign(b"fairshoe.signed/v1\n" + rfc8785.dumps(payload))

    rows: list[tuple[str, Callable[[], object]]] = [
        ("Ed25519 sign (raw, record-sized message)", lambda: key.sign(message)),
        (
            "Ed25519 verify (raw, record-sized message)",
            lambda: key.public_key.verify(signature, message),
        ),
        ("encode: rfc8785.dumps", lambda: rfc8785.dumps(payload)),
        (
            "encode: json.dumps(sort_keys, compact) only",
            lambda: json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode(),
        ),
        ("encode: canonical_encode (checks + json)", lambda: canonical_encode(payload)),
        ("encode+sign: sign_payload (production)", fast_sign),
        ("encode+sign: rfc8785.dumps + sign", rfc8785_sign),
        ("verify_envelope (re-encode + verify)", lambda: verify_envelope(envelope, trusted)),
        (
            "decode_envelope + verify_envelope",
            lambda: verify_envelope(decode_envelope(data), trusted),
        ),
    ]
    print(
        f"Python {platform.python_version()}, cryptography {cryptography.__version__}, "
        f"rfc8785 {rfc8785.__version__}; payload {len(canonical_encode(payload))} bytes JCS, "
        f"best of {args.repeat} x {args.number}"
    )
    print(f"{'operation':48} {'µs/op':>9} {'ops/s':>10}")
    results = {}
    for name, call in rows:
        us = best_us(call, args.number, args.repeat)
        results[name] = us
        print(f"{name:48} {us:9.1f} {1e6 / us:10,.0f}")
    production = results["encode+sign: sign_payload (production)"]
    verdict = "met" if production < TARGET_US else "MISSED"
    print(
        f"target: encode+sign under {TARGET_US:.0f} µs per record: {verdict} ({production:.1f} µs)"
    )


if __name__ == "__main__":
    main()
