"""Command-line start-up: whole `fairshoe` processes against a bare interpreter, in one run.

    .venv/bin/python bench/bench_cli.py [--repeat 9] [--game snap]

Every figure is the wall time of a whole process, as a user waits for it: the ``fairshoe``
console script beside this interpreter, started, run and exited. ``python -c pass`` runs in the
same rounds. Commands are interleaved (one of each per round) so that load from other processes
falls on all of them alike. The table gives the median and the minimum wall time of ``--repeat``
rounds and the minimum CPU time (user + system, which load hardly inflates); ``above bare`` and
the verdicts use the minimum wall times, the runs least disturbed by other processes (the header
shows the load average: on a busy machine the medians drift up, the minimums much less).

``par GAME --json`` is judged against the analysis it prints: ``build_report`` timed inside a
fresh process (imports excluded, caches cold), measured in the same rounds.

Targets: ``--help`` and ``rules show GAME`` under 0.15 s above the bare interpreter; ``replay`` of
one round under 0.3 s in all; ``par GAME --json`` within twice its analysis time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tables import print_table

FAIRSHOE = str(Path(sys.executable).with_name("fairshoe"))
# byte code is cached as in any user's environment (pip writes it for an installed package): with
# PYTHONDONTWRITEBYTECODE set, every run would compile the project's modules from source again
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ROUND = {"game": "snap", "hands": [{"bet": 1000}],
         "shoe": ["8S", "6H", "8D", "TC", "3D", "9S", "KD", "5C"], "actions": ["stand"]}
# the analysis alone, in a fresh process: imports first, then the clock
ANALYSIS = """
import sys, time
from game_math.games import game_rules
from rng_service.lab.par_report import build_report
rules = game_rules(sys.argv[1])
t0 = time.perf_counter()
build_report(rules)
print(time.perf_counter() - t0)
"""
COLUMNS = ("command", "median s", "min s", "cpu s", "above bare", "target", "verdict")


@dataclass(frozen=True)
class Case:
    label: str
    argv: list[str]
    limit: str  # "above": above the bare interpreter; "total": in all; "analysis": vs analysis
    seconds: float = 0.0  # the limit; for "analysis", the factor


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float  # user + system


def run(argv: Sequence[str]) -> Run:
    """Wall and CPU seconds of ``argv``, from start to exit; it must succeed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, list(argv))
    return Run(elapsed, usage.ru_utime + usage.ru_stime)


def analysis_seconds(game: str) -> float:
    out = subprocess.run([sys.executable, "-c", ANALYSIS, game], check=True,
                         capture_output=True, text=True, env=ENV).stdout
    return float(out)


def cases(game: str, script: Path) -> list[Case]:
    return [
        Case("python -c pass", [sys.executable, "-c", "pass"], "bare"),
        Case("fairshoe --help", [FAIRSHOE, "--help"], "above", 0.15),
        Case(f"fairshoe rules show {game}", [FAIRSHOE, "rules", "show", game], "above", 0.15),
        Case("fairshoe replay ROUND", [FAIRSHOE, "replay", str(script)], "total", 0.3),
        Case(f"fairshoe par {game} --json", [FAIRSHOE, "par", game, "--json"], "analysis", 2.0),
    ]


def measure(runs: list[Case], game: str, repeat: int) -> tuple[dict[str, list[Run]], list[float]]:
    """Per case label, its runs; and the analysis times, all from the same rounds."""
    times: dict[str, list[Run]] = {case.label: [] for case in runs}
    analysis: list[float] = []
    for _ in range(repeat):
        for case in runs:
            times[case.label].append(run(case.argv))
        analysis.append(analysis_seconds(game))
    return times, analysis


def judge(case: Case, best: float, bare: float, analysis: float) -> tuple[str, str]:
    """(target, verdict) of a case's minimum wall time."""
    if case.limit == "above":
        return f"< {case.seconds:.2f} s above bare", _verdict(best - bare < case.seconds)
    if case.limit == "total":
        return f"< {case.seconds:.2f} s", _verdict(best < case.seconds)
    if case.limit == "analysis":
        limit = case.seconds * analysis
        return f"< {case.seconds:g} x analysis = {limit:.2f} s", _verdict(best < limit)
    return "", ""


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds of every command")
    parser.add_argument("--game", default="snap")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "round.json"
        script.write_text(json.dumps(ROUND), encoding="utf-8")
        runs = cases(args.game, script)
        for case in runs:  # warm the page cache and write byte code before timing
            run(case.argv)
        times, analysis = measure(runs, args.game, args.repeat)
    bare = min(r.wall for r in times[runs[0].label])
    analysed = min(analysis)
    rows = [[f"analysis ({args.game}, in-process)", f"{statistics.median(analysis):.3f}",
             f"{analysed:.3f}", "", "", "", ""]]
    for case in runs:
        walls = [r.wall for r in times[case.label]]
        target, verdict = judge(case, min(walls), bare, analysed)
        above = "" if case.limit == "bare" else f"{min(walls) - bare:+.3f}"
        rows.append([case.label, f"{statistics.median(walls):.3f}", f"{min(walls):.3f}",
                     f"{min(r.cpu for r in times[case.label]):.3f}", above, target, verdict])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.repeat} rounds, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {load}; {FAIRSHOE}")
    print_table(COLUMNS, rows)


if __name__ == "__main__":
    main()
