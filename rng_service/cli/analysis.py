"""`fairshoe par` and `fairshoe simulate`: the exact analysis as a report, and its simulation.

The simulation is the independent check of the analysis: the engine, the certified shuffle and the
analyser's basic strategy, played for N rounds (``rng_service.lab.simulator``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from game_math.rules import GAME_IDS
from rng_service.cli import help_values
from rng_service.cli.game import add_rules_option, load_rules
from rng_service.cli.main import CommandError

if TYPE_CHECKING:
    from rng_service.lab.simulator import Simulation

# The analysis (numpy), the charts (matplotlib) and the certified shuffle (cryptography) load
# inside the handlers: parsing the command line must not pay for them.


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``par`` and ``simulate`` to the command line."""
    par = subparsers.add_parser(
        "par", help="write a game's PAR sheet (Markdown, JSON, PNG charts)",
        description="Exact returns, reconciliation with the published figure, hit frequencies, "
                    "side-bet tables and the strategy table of a game.")
    par.add_argument("game", nargs="?", help=f"one of {', '.join(GAME_IDS)}")
    add_rules_option(par)
    par.add_argument("--json", action="store_true", help="print the sheet as JSON on stdout")
    par.add_argument("--out", metavar="DIR", help="write GAME.md, GAME.json and PNG charts here")
    par.set_defaults(func=_par)

    sim = subparsers.add_parser(
        "simulate", help="play N rounds of basic strategy through the engine (95 %% interval)",
        description="Plays the real engine with the certified shuffle and the analyser's basic "
                    "strategy over worker processes and reports the return per initial bet.")
    sim.add_argument("game", nargs="?", help=f"one of {', '.join(GAME_IDS)}")
    add_rules_option(sim)
    sim.add_argument("--rounds", type=int, required=True, metavar="N", help="rounds to play")
    sim.add_argument("--workers", type=int, metavar="W", help="processes (default: CPU count)")
    sim.add_argument("--seed-hex", metavar="HEX",
                     help=f"master seed (at least {help_values.SEED_BYTES} bytes) for a "
                          "reproducible run; by default every shoe is seeded from the OS")
    sim.add_argument("--json", action="store_true", help="print the result as JSON")
    sim.add_argument("--no-progress", action="store_true",
                     help="no progress bar on stderr (there is none when stderr is not a "
                          "terminal)")
    sim.set_defaults(func=_simulate)


# ----- par -----------------------------------------------------------------------------------


def _par(args: argparse.Namespace) -> int:
    from rng_service.lab.par_report import build_report, write_report

    rules = load_rules(args.game, args.rules)
    report = build_report(rules)
    if args.out is not None:
        try:
            paths = write_report(report, args.out)
        except OSError as exc:
            raise CommandError(f"cannot write to {args.out}: {exc.strerror}") from None
        if not args.json:
            for path in paths:
                print(path)
    if args.json:
        json.dump(report.data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.out is None:
        sys.stdout.write(report.markdown)
    return 0


# ----- simulate ------------------------------------------------------------------------------


def _master_seed(text: str | None) -> bytes | None:
    from rng_service.rng.shoe import SEED_BYTES

    if text is None:
        return None
    try:
        seed = bytes.fromhex(text)
    except ValueError:
        raise CommandError("--seed-hex: not hexadecimal") from None
    if len(seed) < SEED_BYTES:
        raise CommandError(f"--seed-hex: {len(seed)} bytes; at least {SEED_BYTES} are required")
    return seed


def _simulate(args: argparse.Namespace) -> int:
    from game_math.analysis.main_game import analyse_main_game
    from rng_service.core.pools import WorkerDied
    from rng_service.lab.simulator import simulate
    from rng_service.rng.selftest import SelfTestFailed

    rules = load_rules(args.game, args.rules)
    if args.rounds < 2:
        raise CommandError("--rounds: at least 2")
    if args.workers is not None and args.workers < 1:
        raise CommandError("--workers: at least 1")
    seed = _master_seed(args.seed_hex)
    # a bar redraws itself with carriage returns: in a log or a pipe each redraw is noise
    progress = not args.no_progress and sys.stderr.isatty()
    try:
        result = simulate(rules, args.rounds, workers=args.workers, master_seed=seed,
                          progress=progress)
    except (ValueError, SelfTestFailed, WorkerDied) as exc:
        raise CommandError(str(exc)) from None
    analysed = analyse_main_game(rules).basic_rtp  # cached: simulate analysed these rules
    doc = simulation_dict(result, analysed, rules.digest())
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(_simulation_text(doc))
    return 0


def simulation_dict(sim: Simulation, analysed: float, digest: str) -> dict[str, Any]:
    """The ``simulate --json`` document: the estimate, its interval and the analysed return."""
    e = sim.estimate
    return {
        "game": e.game,
        "rules_digest": digest,
        "rounds": e.rounds,
        "shoes": e.shoes,
        "void_rounds": e.void,
        "bet": e.bet,
        "workers": sim.workers,
        "seeded": sim.seeded,
        "return": e.rtp,
        "half_width": e.half_width,
        "interval": [e.low, e.high],
        "sd_per_round": e.sd_round,
        "method": e.method,
        "seconds": sim.seconds,
        "rounds_per_second": sim.rounds_per_second,
        "analysis": {"basic": analysed, "inside_interval": e.contains(analysed)},
    }


def _pct(x: float, places: int = 4) -> str:
    return f"{100 * x:.{places}f} %"


def _simulation_text(d: dict[str, Any]) -> str:
    low, high = d["interval"]
    verdict = "inside" if d["analysis"]["inside_interval"] else "OUTSIDE"
    seeding = "seeded (reproducible)" if d["seeded"] else "every shoe seeded from the OS"
    return "\n".join([
        f"game:      {d['game']} (rules {d['rules_digest'][:16]})",
        f"rounds:    {d['rounds']:,} in {d['shoes']:,} shoes ({d['void_rounds']} void), "
        f"bet {d['bet']} minor units, {seeding}",
        f"return:    {_pct(d['return'])} ± {_pct(d['half_width'])} "
        f"(95 %: {_pct(low)} .. {_pct(high)}); sd per round {d['sd_per_round']:.4f} bets",
        f"analysis:  basic strategy {_pct(d['analysis']['basic'])}: {verdict} the interval",
        f"speed:     {d['rounds_per_second']:,.0f} rounds/s on {d['workers']} worker(s), "
        f"{d['seconds']:.1f} s",
        f"method:    {d['method']}",
        "",
    ])
