"""The offline audit's instructions per record, counted, not timed: what two versions of the
orchestration can be compared by on a machine whose load makes CPU times move by ±15 %.

    .venv/bin/python bench/bench_audit_count.py [--rounds 300] [--games snap double-exposure]
        [--workers 1 2] [--trees . OTHER_TREE ...] [--committed]

For each game, two collections are made as ``bench_audit.py`` makes its own
(:func:`rng_service.records.schema.collect_rounds`: OS-seeded shoes, the engine, the
basic-strategy player, Ed25519 signing; no log, no commitments), of ``--rounds`` and of 20
rounds; with ``--committed``, by ``fairshoe collect rounds`` itself (its log and a signed shoe
commitment per shoe under ``shoes/`` too). Each is audited by the command itself, ``fairshoe
audit verify --workers N`` (its every line written to /dev/null), under ``valgrind
--tool=cachegrind --cache-sim=no``, which counts the user-space instructions executed by the
audit's process and by each worker process it forks. The
difference between the two collections, divided by the rounds between them, is the count per
round record, so the start-up (imports, the fork) cancels out:

* ``total``: every process's instructions per record;
* ``own process``: those of the audit's own process (with workers, the serial share that more
  workers do not spread: the walk, the sorting, the scratch store, the results taken);
* ``workers``: those of the worker processes.

``--trees`` counts each tree given (a checkout of the project: its ``rng_service`` and
``game_math`` imported from there, compiled extensions included) on the very same collections,
so two versions are compared in one run.

The yardstick, counted the same way in the same run: one bare Ed25519 verification of a record's
signed message (the key's ``verify`` of a 1 KB message, 2,000 of them less 200, in a child of its
own), so ``/verify`` is each count in verifications. Instruction counts do not say what the
kernel does (reading files, pipes), nor how the workers overlap: ``bench_audit.py`` times that.
About a minute per game and worker count on an idle core (valgrind runs Python some 50 times
slower).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tables import print_table

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from game_math.rules import GAME_IDS
from rng_service.crypto.keys import SigningKey, export_pem
from rng_service.records.schema import RecordWriter, collect_rounds

SHORT = 20  # rounds of the collection whose count is subtracted (start-up, warm-up)
COLUMNS = ("tree", "game", "workers", "total a record", "/verify", "own process", "/verify",
           "workers", "/verify")

#: the yardstick's child: ``n`` bare verifications of one signed 1 KB message
VERIFY = """
import sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
key = Ed25519PrivateKey.generate()
message = bytes(range(256)) * 4
signature = key.sign(message)
public = key.public_key()
for _ in range(int(sys.argv[1])):
    public.verify(signature, message)
"""


#: the audit command, run from a tree given as PYTHONPATH
AUDIT = "import sys; from rng_service.cli.main import main; main(sys.argv[1:])"


def counted(argv: list[str], tmp: Path, tree: Path | None = None) -> tuple[int, int]:
    """(instructions of the process started, of it and every process it forked) of ``argv``
    under cachegrind, importing the project from ``tree`` if given. The process started is the
    one whose parent is this one (process ids may wrap around, so the smallest is not it)."""
    for old in [*tmp.glob("cg.*"), *tmp.glob("vg.*")]:
        old.unlink()
    env = dict(os.environ, PYTHONPATH=str(tree)) if tree is not None else None
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                           f"--cachegrind-out-file={tmp}/cg.%p", f"--log-file={tmp}/vg.%p",
                           *argv], check=False, env=env, cwd=tree, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    if done.returncode not in (0, 1):  # 1: the audit failed, which a count does not mind
        raise SystemExit(f"{argv} exited {done.returncode}:\n{done.stderr.decode()[-2000:]}")
    counts: dict[int, int] = {}
    for out in tmp.glob("cg.*"):
        found = re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE)
        if found is not None:
            counts[int(out.name.split(".")[1])] = int(found.group(1))
    started = [pid for pid in counts
               if f"Parent PID: {os.getpid()}\n" in (tmp / f"vg.{pid}").read_text()]
    if len(started) != 1:
        raise SystemExit(f"nothing counted for {argv}")
    return counts[started[0]], sum(counts.values())


def audited(tree: Path, workers: int, keys: Path, collection: Path) -> tuple[int, int]:
    """:func:`counted` of ``audit verify --workers N`` of ``collection`` by ``tree``'s code."""
    return counted([sys.executable, "-c", AUDIT, "audit", "verify", "--keys", str(keys),
                    "--workers", str(workers), str(collection)], collection.parent,
                   tree.resolve())


def collected(game: str, rounds: int, tmp: Path) -> tuple[Path, Path]:
    """A collection of ``rounds`` made by ``fairshoe collect rounds`` (log, commitments), and
    the file of the keys that signed it."""
    store, out, keys = tmp / f"{game}-store", tmp / f"{game}-{rounds}", tmp / f"{game}.jwks.json"
    for argv in (["collect", "rounds", "--game", game, "--rounds", str(rounds), "--out", str(out),
                  "--key-store", str(store)],
                 ["keys", "export", "--dir", str(store), "--out", str(keys)]):
        # the command in a process of its own, as an auditor runs it (the CLI is no import
        # of a bench's: tests/core/test_public_faces.py)
        subprocess.run([sys.executable, "-c", AUDIT, *argv], check=True,
                       stdout=subprocess.DEVNULL)
    return out, keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--games", nargs="+", default=["snap", "double-exposure"],
                        choices=GAME_IDS)
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(".")],
                        help="checkouts of the project to count, on the same collections")
    parser.add_argument("--committed", action="store_true",
                        help="collections made by `fairshoe collect rounds` (log, commitments)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fairshoe-count-") as name:
        tmp = Path(name)
        script = tmp / "verify.py"
        script.write_text(VERIFY)
        many = counted([sys.executable, str(script), "2000"], tmp)[1]
        few = counted([sys.executable, str(script), "200"], tmp)[1]
        verify = (many - few) / 1800
        print(f"# instructions counted by cachegrind; a bare Ed25519 verification: "
              f"{verify:,.0f}")
        rows = []
        for game in args.games:
            if args.committed:
                for rounds in (args.rounds, SHORT):
                    keys = collected(game, rounds, tmp)[1]
            else:
                rules = game_rules(game)
                basic_strategy(rules)
                key = SigningKey.generate()
                keys = tmp / "trusted.pem"
                keys.write_text(export_pem({key.key_id: key.public_key}))
                for rounds in (args.rounds, SHORT):
                    collect_rounds(rules, rounds, RecordWriter(tmp / f"{game}-{rounds}", key),
                                   basic_strategy_action)
            for tree in args.trees:
                for workers in args.workers:
                    own, total = audited(tree, workers, keys, tmp / f"{game}-{args.rounds}")
                    own_few, total_few = audited(tree, workers, keys, tmp / f"{game}-{SHORT}")
                    n = args.rounds - SHORT
                    own_n, total_n = (own - own_few) / n, (total - total_few) / n
                    rows.append([str(tree), game, str(workers), f"{total_n:,.0f}",
                                 f"{total_n / verify:.2f}", f"{own_n:,.0f}",
                                 f"{own_n / verify:.2f}", f"{total_n - own_n:,.0f}",
                                 f"{(total_n - own_n) / verify:.2f}"])
        print_table(COLUMNS, rows)


if __name__ == "__main__":
    main()
