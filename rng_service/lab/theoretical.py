"""The built-in games' theoretical figures, computed once per rules digest and shipped.

``fairshoe serve`` publishes each game's theoretical return and standard deviation per wager as
gauges. Computing them (the exact analysis of the main game and its side bets, and a fixed-seed
simulation for the main wager's standard deviation) costs 10–20 s of CPU, the same at every
start: a restart after a crash, or a replica added under load, would spend it competing with
live play. So the figures ship with the package in ``theoretical.json``, keyed by each game's
rules digest; a game whose rules no longer match its shipped digest is computed as before.

Regenerate the file after a change to a built-in game's rules (a test fails until it is)::

    .venv/bin/python -m rng_service.lab.theoretical --write
"""

from __future__ import annotations

import argparse
import json
import math
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

__all__ = ["FORMAT", "SHIPPED", "STDDEV_ROUNDS", "Figures", "compute", "figures"]

FORMAT: Final = "fairshoe.theoretical/v1"
SHIPPED: Final = Path(__file__).with_name("theoretical.json")

#: rounds of the fixed-seed simulation that estimates the main wager's standard deviation (about
#: 1 % precision; 0.4-1.3 s per game on the development machine)
STDDEV_ROUNDS: Final = 10_000
_STDDEV_SEED: Final = b"fairshoe metrics: main-game standard deviation, fixed seed".ljust(48, b".")

#: ``{wager: (return, standard deviation)}``: the main wager and each side bet
Figures = dict[str, tuple[float, float]]


def compute(game: str) -> Figures:
    """The figures of built-in ``game``, computed (seconds of CPU)."""
    # the analysis and the simulator load numpy and the analyser: only when computing
    from game_math.analysis.main_game import analyse_main_game  # noqa: PLC0415
    from game_math.analysis.sidebets import side_bet_tables  # noqa: PLC0415
    from game_math.games import game_rules  # noqa: PLC0415
    from rng_service.lab.simulator import simulate  # noqa: PLC0415

    rules = game_rules(game)
    sd = simulate(rules, STDDEV_ROUNDS, workers=1, master_seed=_STDDEV_SEED).estimate.sd_round
    out = {"main": (analyse_main_game(rules).basic_rtp, sd)}
    for name, table in side_bet_tables(rules).items():
        out[name] = (float(table.expected_return), math.sqrt(float(table.variance)))
    return out


def figures(game: str) -> tuple[Figures, Literal["shipped", "computed"]]:
    """The figures of built-in ``game`` and where they came from: the shipped file when its
    entry was made from the game's current rules (same digest), else computed now."""
    from game_math.games import game_rules  # noqa: PLC0415

    entry = _shipped(SHIPPED).get(game)
    if (entry is not None and entry.get("rules_digest") == game_rules(game).digest()
            and entry.get("stddev_rounds") == STDDEV_ROUNDS):
        return {w: (float(r), float(s)) for w, (r, s) in entry["figures"].items()}, "shipped"
    return compute(game), "computed"


@cache
def _shipped(path: Path) -> dict[str, Any]:
    """The shipped entries by game; empty if the file is absent or not of this format (the
    figures are then computed: a damaged file must not keep a server from starting)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return {}
    games = doc.get("games")
    return games if isinstance(games, dict) else {}


def document(games: list[str]) -> dict[str, Any]:
    """The shipped file's content for ``games``, computed now."""
    from game_math.games import game_rules  # noqa: PLC0415

    return {"format": FORMAT, "games": {
        game: {"rules_digest": game_rules(game).digest(), "stddev_rounds": STDDEV_ROUNDS,
               "figures": {w: list(v) for w, v in compute(game).items()}}
        for game in games}}


def main(argv: list[str] | None = None) -> int:
    from game_math.rules import GAME_IDS  # noqa: PLC0415

    parser = argparse.ArgumentParser(description="Compute the built-in games' theoretical "
                                     "figures and print them, or write the shipped file.")
    parser.add_argument("--write", action="store_true", help=f"write {SHIPPED.name}")
    args = parser.parse_args(argv)
    text = json.dumps(document(list(GAME_IDS)), indent=1, sort_keys=True) + "\n"
    if args.write:
        SHIPPED.write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
