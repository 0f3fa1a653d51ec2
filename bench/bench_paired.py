"""Two source trees' engine and simulator, measured in lockstep: a before/after that load spares.

On a machine that others load, two benchmark runs a minute apart see different machines: CPU
time per round moved by ±30 % between runs of the same code here (load average 12 on 2 cores).
This runs two worker processes, one importing ``game_math``/``rng_service`` from ``--before``
(e.g. a worktree of main), one from ``--after`` (default: this tree), and hands them the same
batch in turn, one at a time, the order alternating: each batch's CPU time is measured in its
worker (``time.process_time``), and each pair of batches, a second or so apart, gives one ratio.
It prints, per game, the median CPU rate of each tree and the median of the pair ratios
(``after/before``, above 1: faster), with the lowest and highest ratio.

Workloads: ``engine`` is ``bench/bench_engine.py``'s one-hand round (pre-shuffled shoes, its
total-based strategy through ``legal_actions``); ``sim`` is a ``fairshoe simulate`` worker's
chunk (``rng_service.lab.simulator.play_chunk``: OS-seeded certified shoes, basic strategy);
``replay`` (``--kinds replay``) is the audit's replay step as ``bench/bench_audit.py`` times it
(``replay_all``: each round record's round dealt from its recomputed shoe and its recorded
actions replayed through the engine), on round records collected once by this process (OS-seeded
shoes, basic strategy, signed) and read by both workers, ``--rounds`` records a batch;
``audit`` (``--kinds audit``) is ``audit_paths`` over a collection of ``--rounds`` rounds
collected once by this process (as ``bench/bench_audit.py`` collects them), end to end with one
worker, the whole collection a batch (the warm-up too); ``collect`` (``--kinds collect``) is
``collect rounds``'s work with one worker, in process
(``collect_in_workers`` into a ``LoggedRecordWriter``, signed files, the log and its sync: all
the process's CPU, its threads and system time included), each batch a new collection kept
until the bench ends.

    .venv/bin/python bench/bench_paired.py --before ../main-tree [--pairs 9] [--rounds 4000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from game_math.autoplay import basic_strategy_action
from game_math.games import game_rules
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import decode_envelope
from rng_service.records.schema import REVEALS_SUBDIR, ROUNDS_SUBDIR, RecordWriter, collect_rounds
from rng_service.rng.shoe import shoe_cards

HERE = Path(__file__).resolve().parent
WORKER = """
import sys, time
sys.path.insert(0, {bench!r})
from bench_engine import bench
from game_math.autoplay import basic_strategy
from game_math.games import game_rules
from rng_service.lab.simulator import Chunk, Player, play_chunk
players = {{}}
records = {{}}
scratch = None
for line in sys.stdin:
    kind, game, rounds = line.split()
    if kind == "collect":
        import shutil, tempfile
        from pathlib import Path
        from game_math.autoplay import basic_strategy_action
        from rng_service.crypto.keys import KeyStore, key_validity
        from rng_service.records.collect_workers import collect_in_workers
        from rng_service.records.logged import LoggedRecordWriter
        if scratch is None:
            scratch = Path(tempfile.mkdtemp(prefix="bench-paired-collect-"))
            store = KeyStore(scratch / "keys")
            valid_from = key_validity(store.create())["valid_from"]
            key = store.load_signing_key()
        rules = game_rules(game)
        basic_strategy(rules)
        out = Path(tempfile.mkdtemp(dir=scratch))  # kept to the end: see bench_collect.py
        started = time.process_time()
        writer = LoggedRecordWriter(out, key, valid_from=valid_from)
        collect_in_workers(rules, int(rounds), writer, basic_strategy_action, workers=1)
        writer.finish()
        print(time.process_time() - started, flush=True)
    elif kind == "engine":
        _, rate, _ = bench(game, 1, int(rounds))
        print(int(rounds) / rate, flush=True)
    elif kind == "replay":
        import json, os
        from bench_audit import replay_all
        if game not in records:
            with open(os.path.join(os.environ["BENCH_PAIRED_RECORDS"], game + ".json")) as f:
                doc = json.load(f)
            records[game] = (doc["payloads"], doc["shoes"])
        payloads, shoes = records[game]
        batch = (payloads * (int(rounds) // len(payloads) + 1))[:int(rounds)]
        started = time.process_time()
        replay_all(batch, shoes)
        print(time.process_time() - started, flush=True)
    elif kind == "audit":
        import os
        from pathlib import Path
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from rng_service.audit.verifier import audit_paths
        from rng_service.crypto.keys import key_id
        root = Path(os.environ["BENCH_PAIRED_RECORDS"]) / ("audit-" + game)
        public = Ed25519PublicKey.from_public_bytes((root / "key.raw").read_bytes())
        started = time.process_time()
        report = audit_paths([root / "collection"], {{key_id(public): public}})
        used = time.process_time() - started
        assert report.passed, "the collection passes its audit"
        print(used, flush=True)
    else:
        rules = game_rules(game)
        player = players.get(game) or players.setdefault(game, Player(rules, basic_strategy(rules)))
        started = time.process_time()
        play_chunk(player, Chunk(0, int(rounds), None))
        print(time.process_time() - started, flush=True)
if scratch is not None:
    shutil.rmtree(scratch)
"""


class Tree:
    """A worker process importing the code of one source tree."""

    def __init__(self, root: Path, records: str = "") -> None:
        env = {**os.environ, "PYTHONPATH": str(root), "BENCH_PAIRED_RECORDS": records}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER.format(bench=str(HERE))], env=env, cwd="/",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, kind: str, game: str, rounds: int) -> float:
        """CPU seconds of one batch."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{kind} {game} {rounds}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def collect_records(games: list[str], count: int, out: Path) -> None:
    """``count`` round records of each game, as ``bench_audit.py`` collects them, written to
    ``out/<game>.json`` with the cards of their shoes (recomputed from the revealed seeds)."""
    def payloads(folder: Path) -> list[dict[str, Any]]:
        return [decode_envelope(p.read_bytes())["payload"] for p in sorted(folder.iterdir())]

    for game in games:
        with tempfile.TemporaryDirectory() as tmp:
            collect_rounds(game_rules(game), count, RecordWriter(Path(tmp), SigningKey.generate()),
                           basic_strategy_action)
            rounds = payloads(Path(tmp) / ROUNDS_SUBDIR)
            reveals = payloads(Path(tmp) / REVEALS_SUBDIR)
        shoes = {r["shoe_id"]: shoe_cards(bytes.fromhex(r["seed"]), bytes.fromhex(r["client_seed"]),
                                          r["decks"])
                 for r in reveals}
        (out / f"{game}.json").write_text(json.dumps({"payloads": rounds, "shoes": shoes}))


def collect_audited(games: list[str], count: int, out: Path) -> None:
    """``count`` rounds of each game collected as ``bench_audit.py`` collects them, into
    ``out/audit-<game>/collection``, the signing key's public key beside it (``key.raw``)."""
    for game in games:
        root = out / f"audit-{game}"
        root.mkdir()
        key = SigningKey.generate()
        collect_rounds(game_rules(game), count, RecordWriter(root / "collection", key),
                       basic_strategy_action)
        (root / "key.raw").write_bytes(key.public_key.public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree measured as before")
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=4_000, help="rounds per batch")
    parser.add_argument("--games", default="snap,double-deck,double-exposure,multi-hand")
    parser.add_argument("--kinds", default="engine,sim", help="engine, sim, replay, collect, audit")
    args = parser.parse_args()
    records = tempfile.TemporaryDirectory()
    if "replay" in args.kinds.split(","):
        collect_records(args.games.split(","), min(args.rounds, 1000), Path(records.name))
    if "audit" in args.kinds.split(","):  # a batch is the whole collection, --rounds rounds
        collect_audited(args.games.split(","), args.rounds, Path(records.name))
    before = Tree(args.before.resolve(), records.name)
    after = Tree(args.after.resolve(), records.name)
    try:
        print(f"{'workload':<8} {'game':<16} {'before/cpu-s':>12} {'after/cpu-s':>12} "
              f"{'after/before':>12} {'low':>6} {'high':>6}")
        for kind in args.kinds.split(","):
            for game in args.games.split(","):
                for tree in (before, after):  # warm-up: imports, analysis, caches
                    tree.run(kind, game, args.rounds // 4)
                b_cpu, a_cpu, ratios = [], [], []
                for i in range(args.pairs):
                    first, second = (before, after) if i % 2 == 0 else (after, before)
                    times = {id(first): first.run(kind, game, args.rounds)}
                    times[id(second)] = second.run(kind, game, args.rounds)
                    b, a = times[id(before)], times[id(after)]
                    b_cpu.append(b)
                    a_cpu.append(a)
                    ratios.append(b / a)
                print(f"{kind:<8} {game:<16} {args.rounds / statistics.median(b_cpu):>12,.0f} "
                      f"{args.rounds / statistics.median(a_cpu):>12,.0f} "
                      f"{statistics.median(ratios):>11.2f}x {min(ratios):>5.2f}x "
                      f"{max(ratios):>5.2f}x", flush=True)
    finally:
        before.close()
        after.close()
        records.cleanup()


if __name__ == "__main__":
    main()
