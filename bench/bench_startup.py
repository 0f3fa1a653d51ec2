"""CPU a `fairshoe serve` start spends until every theoretical gauge is published, beside the
computation that shipping the figures saves, measured in the same run.

    .venv/bin/python bench/bench_startup.py [--starts 3]

* ``start``: a real `fairshoe serve` (embedded SQLite, metrics on) from exec until its log has a
  ``theoretical_return`` line for every built-in game; the server process's CPU seconds
  (``/proc/<pid>/stat``), its wall seconds and where its figures came from (best of ``--starts``,
  each on a fresh data directory: keys and database are created each time);
* ``compute``: ``rng_service.lab.theoretical.compute`` of every built-in game in this process, the
  CPU seconds a start spent on them before they shipped (the yardstick).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench_service import ENV, FAIRSHOE, START_TIMEOUT, Process, cpu_seconds
from tables import print_table

from game_math.rules import GAME_IDS
from rng_service.lab import theoretical


def one_start(data: Path) -> tuple[float, float, str]:
    """(CPU s, wall s, sources) of one start until every game's figures are published."""
    started = time.monotonic()
    env = {k: v for k, v in ENV.items() if not k.startswith("FAIRSHOE_")}
    env.update({"FAIRSHOE_DATA_DIR": str(data), "PYTHONUNBUFFERED": "1"})
    data.mkdir(parents=True, exist_ok=True)
    # one process: the figures' cost, not the per-process imports of `--processes N`
    server = Process([FAIRSHOE, "serve", "--address", "127.0.0.1:0", "--processes", "1",
                      # any free port: 0 would disable the metrics, and the figures with them
                      "--metrics-port", "any"], data / "server.log", env)
    try:
        deadline = started + START_TIMEOUT + 120
        while time.monotonic() < deadline:
            lines = [json.loads(line) for line in server.log.read_text().splitlines()
                     if '"theoretical_return"' in line]
            if len(lines) == len(GAME_IDS):
                cpu, wall = cpu_seconds(server.proc.pid), time.monotonic() - started
                return cpu, wall, ",".join(sorted({str(line.get("source")) for line in lines}))
            time.sleep(0.01)
        raise TimeoutError(f"not every theoretical_return line in {server.log}")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        starts = [one_start(Path(tmp) / f"start{i}") for i in range(args.starts)]
    cpu, wall, sources = min(starts)
    before = time.process_time()
    for game in GAME_IDS:
        theoretical.compute(game)
    computed = time.process_time() - before
    print_table(("what", "CPU s", "wall s", "figures", "vs compute"), [
        ["serve start", f"{cpu:.2f}", f"{wall:.2f}", sources, f"{cpu / computed:.2f}x"],
        ["compute all games", f"{computed:.2f}", "", "computed", "1.00x"],
    ])


if __name__ == "__main__":
    main()
