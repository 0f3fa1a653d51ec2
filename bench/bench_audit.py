"""Offline audit throughput: round records verified per second, and where the time goes.

    .venv/bin/python bench/bench_audit.py [--rounds 400] [--repeat 3] [--games snap ...]

For each game, ``--rounds`` rounds are collected on the production path (OS-seeded shoes, the
engine, the basic-strategy player, Ed25519 signing) into a temporary directory. Then, measured in
the same run, the two yardsticks (issue 21: the signature is the audit's floor):

* ``verify µs``: a bare Ed25519 verification of each record's signed message (the key's
  ``verify`` alone, the message built beforehand);
* ``parse µs``: a bare JSON parse of each record's file (``orjson.loads``, no check at all);

and the audit:

* ``audit rec/s``: ``audit_paths`` over the directory, end to end (walk, read, decode, signature,
  reveal and commitment, shuffle recomputation, replay, comparison, the log), round records per
  second; ``vs verify``: that rate over the bare verification rate (issue 21's goal: at least
  0.60);
* ``sigs/rd``: the signed files the audit verifies per round (the round record, and its shoe's
  reveal and commitment shared among the shoe's rounds: 3 for a game that reshuffles every
  round), so the audit's floor is that many verifications; ``vs floor``: the audit's rate over
  the floor's; ``rest/verify``: the audit's time per record less its signatures, over one bare
  verification (every step but the signatures together; the goal: at most 0.67); ``own/verify``:
  that less the engine's part, the replay and the rebuilt record's comparison (``replay`` +
  ``outcome`` below), over one verification: the audit's own work (reading, decoding, the shoe,
  the checks, the orchestration), which the audit can cut without a faster engine (the engine's
  part alone is 0.6-1.1 verifications: docs/performance.md, "the audit's per-record CPU");
* the per-record cost of each step, in µs: decoding the file's JSON (``decode``), the signature
  check with the payload's canonical bytes (``signature``), the commitment check (``commit``),
  recomputing the shoe from its seed (``shuffle``: the whole shoe once per record, the worst
  case; the audit shares one recomputation among the rounds of a cut-card shoe), the shoe of a
  one-round shoe as the audit recomputes it, shuffled only as far as the round reads it
  (``lazy``: a ``LazyShoe`` read to the round's end; ``-`` for a game whose shoes deal several
  rounds), the replay through the engine
  (``replay``: the deal and every recorded action) and the record rebuilt from it and compared
  (``outcome``);
* ``sign µs``: encoding and signing one of these records as the writer does,
  ``sign_and_encode`` (issue 3's target: under 100 µs; bench_signing.py breaks it down).

Then the audit by shoe across processes (``audit verify --workers N``): ``--workers-rounds``
rounds of ``--workers-game`` audited end to end with 1 and with 2 workers, the runs interleaved,
and the ratio of 2 workers' rate to 1 worker's (issue 21's goal: at least 1.7 on two free cores),
beside its yardstick measured in the same run: the ratio a bare CPU-bound loop reaches split
the same way, which is what the machine's other load leaves a second process (2.0 when a core
is free, near 1.0 when other processes keep both busy), and the load average.

Each figure is the best of ``--repeat`` runs. Those of the table are timed in CPU seconds of
this process (``time.process_time``: every step runs in it, on one core, reading files the
collection just wrote), so other processes on a loaded machine inflate them little; the
yardsticks are timed alike. The workers' rates are wall time (a second process is what they
measure). The strategy analysis that the player needs is done before any timing.
"""

from __future__ import annotations

import argparse
import base64
import math
import multiprocessing
import os
import platform
import resource
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson
from tables import print_table

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.cards import Card
from game_math.games import game_rules
from game_math.round import Round
from game_math.rules import GAME_IDS
from rng_service.audit.failures import Doc
from rng_service.audit.round_checks import check_outcome, deal, replay_actions
from rng_service.audit.verifier import AuditOptions, RulesIndex, audit_paths
from rng_service.core.cpus import available_cores
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import (
    decode_envelope,
    sign_and_encode,
    signing_message,
    verify_envelope,
)
from rng_service.records.schema import (
    RECORD_SCHEMA,
    REVEALS_SUBDIR,
    ROUNDS_SUBDIR,
    SHOES_SUBDIR,
    RecordWriter,
    collect_rounds,
)
from rng_service.rng.shoe import LazyShoe, seed_commitment, shoe_cards

COLUMNS = ("game", "records", "shoes", "sigs/rd", "verify µs", "parse µs", "audit rec/s",
           "vs verify", "vs floor", "rest/verify", "own/verify", "decode", "signature", "commit",
           "shuffle", "lazy", "replay", "outcome", "sign µs")
T = TypeVar("T")
STEPS = ("decode", "signature", "commit", "shuffle", "lazy", "replay",
           "outcome", "sign")


def best_of(repeat: int, run: Callable[[], object]) -> float:
    """The least CPU time of ``repeat`` runs (see the module docstring)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def best_of_fresh(repeat: int, setup: Callable[[], T], run: Callable[[T], object]) -> float:
    """best_of, each run on a fresh ``setup()`` made outside the clock."""
    best = float("inf")
    for _ in range(repeat):
        subject = setup()
        start = time.process_time()
        run(subject)
        best = min(best, time.process_time() - start)
    return best


def load_dir(path: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(path.iterdir())]


def replay_all(payloads: Sequence[dict[str, Any]], shoes: dict[str, list[Card]]) -> list[Round]:
    """Every round dealt and its actions replayed (the engine's part of the audit)."""
    index = RulesIndex()
    rounds = []
    for payload in payloads:
        doc = Doc(payload, "")
        rules = index.resolve(payload["rules_digest"], payload["game"])
        rnd = deal(doc, rules, shoes[payload["shoe"]["id"]])
        replay_actions(doc, rnd)
        rounds.append(rnd)
    return rounds


def outcome_all(payloads: Sequence[dict[str, Any]], rounds: Sequence[Round]) -> None:
    """Every record rebuilt from its replay and compared with the recorded one."""
    for payload, rnd in zip(payloads, rounds, strict=True):
        check_outcome(payload, Doc(payload, ""), rnd)


def bench_game(game: str, rounds: int, repeat: int) -> list[str]:
    rules = game_rules(game)
    basic_strategy(rules)  # the analysis, outside every timing
    key = SigningKey.generate()
    trusted = {key.key_id: key.public_key}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        collect_rounds(rules, rounds, RecordWriter(out, key), basic_strategy_action)
        records = load_dir(out / ROUNDS_SUBDIR)
        signed = sum(len(list((out / sub).iterdir()))  # no shoes/: collected without
                     for sub in (ROUNDS_SUBDIR, REVEALS_SUBDIR, SHOES_SUBDIR)  # commitments
                     if (out / sub).is_dir())
        reveals = [decode_envelope(b)["payload"] for b in load_dir(out / REVEALS_SUBDIR)]
        audit_s = best_of(repeat, lambda: audit_paths([out], trusted))
    envelopes = [decode_envelope(b) for b in records]
    payloads = [e["payload"] for e in envelopes]
    seeds = {r["shoe_id"]: (bytes.fromhex(r["seed"]), bytes.fromhex(r["client_seed"]), r["decks"])
             for r in reveals}
    shoes = {sid: shoe_cards(*inputs) for sid, inputs in seeds.items()}
    n = len(records)

    def per_record(run: Callable[[], object]) -> float:
        return best_of(repeat, run) / n * 1e6

    def shuffle_each() -> None:
        for p in payloads:
            shoe_cards(*seeds[p["shoe"]["id"]])

    # the yardsticks: each record's signed message verified bare, and its file parsed bare
    public_key = key.public_key
    messages = [(signing_message(p), base64.urlsafe_b64decode(e["signature"]["value"] + "=="))
                for p, e in zip(payloads, envelopes, strict=True)]
    verify_us = per_record(lambda: [public_key.verify(sig, msg) for msg, sig in messages])
    parse_us = per_record(lambda: [orjson.loads(b) for b in records])
    def shuffle_lazily() -> None:
        for p in payloads:
            LazyShoe(*seeds[p["shoe"]["id"]])[p["shoe"]["start"]:p["shoe"]["end"]]

    timings = {
        "decode": per_record(lambda: [decode_envelope(b) for b in records]),
        "signature": per_record(lambda: [verify_envelope(e, trusted, schema=RECORD_SCHEMA)
                                         for e in envelopes]),
        "commit": per_record(lambda: [seed_commitment(seeds[p["shoe"]["id"]][0])
                                      for p in payloads]),
        "shuffle": per_record(shuffle_each),
        "lazy": per_record(shuffle_lazily) if len(reveals) == n else float("nan"),
        "replay": per_record(lambda: replay_all(payloads, shoes)),
        # on rounds replayed afresh, outside the clock: check_outcome voids a void round's replay
        "outcome": best_of_fresh(repeat, lambda: replay_all(payloads, shoes),
                                 lambda rounds: outcome_all(payloads, rounds)) / n * 1e6,
        "sign": per_record(lambda: [sign_and_encode(p, key) for p in payloads]),
    }
    audit_us = audit_s / n * 1e6
    engine_us = timings["replay"] + timings["outcome"]  # the engine's part of the rest
    sigs = signed / n
    return [game, str(n), str(len(reveals)), f"{sigs:.2f}", f"{verify_us:.0f}", f"{parse_us:.0f}",
            f"{n / audit_s:,.0f}", f"{verify_us / audit_us:.2f}",
            f"{sigs * verify_us / audit_us:.2f}",
            f"{(audit_us - sigs * verify_us) / verify_us:.2f}",
            f"{(audit_us - sigs * verify_us - engine_us) / verify_us:.2f}",
            *("-" if math.isnan(timings[k]) else f"{timings[k]:.0f}" for k in STEPS)]


def _cpu() -> tuple[float, float]:
    """CPU seconds used so far by this process and by its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def _bare_split(workers: int, n: int = 3_000_000) -> float:
    """Seconds for a pure-Python loop of ``n`` steps split among ``workers`` forked processes:
    the yardstick of what a second process gains on this machine now."""
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_spin, [n // workers] * workers)
    return time.perf_counter() - start


def bench_workers(game: str, rounds: int, repeat: int) -> str:
    """The audit's rate with 1 and 2 workers on one collection and their ratio, beside the
    ratio a bare CPU-bound loop split the same way reaches in the same run."""
    rules = game_rules(game)
    basic_strategy(rules)
    key = SigningKey.generate()
    trusted = {key.key_id: key.public_key}
    best = {1: float("inf"), 2: float("inf")}
    bare = {1: float("inf"), 2: float("inf")}
    cpu = {1: (float("inf"), 0.0), 2: (float("inf"), 0.0)}  # (this process, its workers) s
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        collect_rounds(rules, rounds, RecordWriter(out, key), basic_strategy_action)
        for _ in range(repeat):
            for workers in (1, 2):  # interleaved: a change of load hits both alike
                start, used = time.perf_counter(), _cpu()
                report = audit_paths([out], trusted, options=AuditOptions(workers=workers))
                best[workers] = min(best[workers], time.perf_counter() - start)
                after = _cpu()
                this = (after[0] - used[0], after[1] - used[1])
                cpu[workers] = min(cpu[workers], this, key=sum)
                assert report.passed
                bare[workers] = min(bare[workers], _bare_split(workers))
    one, two = rounds / best[1], rounds / best[2]
    return (f"# audit by shoe, {game}, {rounds} rounds: 1 worker {one:,.0f} rec/s, 2 workers "
            f"{two:,.0f} rec/s: ratio {two / one:.2f} (goal >= 1.7); a bare loop split in 2 "
            f"processes: ratio {bare[1] / bare[2]:.2f} (what the machine gives a second "
            f"process now); CPU s 1 worker {sum(cpu[1]):.2f}, 2 workers {sum(cpu[2]):.2f} (this "
            f"process {cpu[2][0]:.2f}, workers {cpu[2][1]:.2f}); {available_cores()} cores "
            f"available, load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--games", nargs="+", default=list(GAME_IDS), choices=GAME_IDS)
    parser.add_argument("--workers-game", default="double-exposure", choices=GAME_IDS)
    parser.add_argument("--workers-rounds", type=int, default=2000,
                        help="rounds of the 1-vs-2-workers measurement (0: skip it)")
    args = parser.parse_args()
    print(f"# audit verification, Python {platform.python_version()} on {platform.machine()}; "
          "per-step columns in µs per record (shuffle: the whole shoe for every record); "
          f"load average {os.getloadavg()[0]:.2f}")
    print_table(COLUMNS, [bench_game(g, args.rounds, args.repeat) for g in args.games])
    if args.workers_rounds:
        print(bench_workers(args.workers_game, args.workers_rounds, args.repeat))


if __name__ == "__main__":
    main()
