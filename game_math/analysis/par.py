"""The PAR sheet of a game: everything the exact analysis says about one rule set, as data.

``par_sheet(rules)`` gathers the main-game analysis (returns under basic and composition-dependent
strategy, frequencies, insurance, strategy table, composition exceptions), the reconciliation with
the published return, and the side-bet tables; ``ParSheet.to_dict()`` is the JSON document
(``fairshoe.par/v1``) that ``fairshoe par`` prints and from which its Markdown is written.

Numbers in the document:

* Side-bet figures are exact fractions: ``{"fraction": "n/d", "decimal": "0.958…"}``.
* Main-game figures come from the analyser as IEEE doubles. Returns are given in the same shape,
  the fraction being ``Fraction(value).limit_denominator(10**12)`` of the double (within about
  1e-16 of it: a faithful rendering of the double, not an exact rational result); the JSON says
  so under ``method``. Frequencies and action values are plain JSON numbers.
* A return is the amount returned per unit of initial bet, stake included (RTP); the house edge
  is one minus it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from game_math.analysis.main_game import (
    PUBLISHED_TOLERANCE,
    Cell,
    MainGameAnalysis,
    Reading,
    Reconciliation,
    StrategyTable,
    analyse_main_game,
    reconcile,
)
from game_math.analysis.sidebets import SideBetTable, decimal, exact, side_bet_tables
from game_math.games import PUBLISHED_SIDE_BET_RETURNS, game_rules
from game_math.round import ActionKind
from game_math.rules import GAME_IDS, Rules

FORMAT: Final = "fairshoe.par/v1"
#: denominators of the fractions standing for the analyser's doubles
FLOAT_DENOMINATOR_LIMIT: Final = 10**12

METHOD_NUMBERS: Final = (
    "Side-bet figures are exact fractions from combinatorics over the shoe. Main-game figures are "
    "IEEE doubles from the exact combinatorial analyser; each return is written as "
    "Fraction(double).limit_denominator(10**12) ('n/d') with its decimal to 12 places."
)
METHOD_MAIN: Final = (
    "Combinatorial analysis over every composition of player and dealer cards from the full "
    "shoe (off the top): basic strategy is total-dependent (one decision per total and dealer "
    "column, chosen by the summed value of that total's hands), composition-dependent strategy "
    "plays each hand by its exact cards. Insurance is never taken; a double is for the full bet."
)
METHOD_SIDE_BETS: Final = (
    "Every deal of the judged cards counted by exact combinatorics (fractions), each deal judged "
    "by the engine's own side-bet functions."
)

#: one-letter codes of a strategy cell, as strategy charts print them
ACTION_CODES: Final[Mapping[ActionKind, str]] = {
    ActionKind.STAND: "S", ActionKind.HIT: "H", ActionKind.DOUBLE: "D", ActionKind.SPLIT: "P",
}


def cell_code(cell: Cell) -> str:
    """"S", "H", "P", or a double with its fallback: "Dh" (else hit), "Ds" (else stand)."""
    code = ACTION_CODES[cell.action]
    if cell.action is ActionKind.DOUBLE and cell.otherwise is not None:
        code += ACTION_CODES[cell.otherwise].lower()
    return code


def float_exact(value: float) -> dict[str, str]:
    """A double as ``{"fraction", "decimal"}``: see the module docstring."""
    frac = Fraction(value).limit_denominator(FLOAT_DENOMINATOR_LIMIT)
    return {"fraction": f"{frac.numerator}/{frac.denominator}", "decimal": decimal(frac)}


@dataclass(frozen=True)
class SideBetPar:
    """A side bet's exact table and, for a built-in bet, its published return."""
    table: SideBetTable
    #: the operator's published return, when the bet is exactly the built-in game's bet
    published: Fraction | None


@dataclass(frozen=True)
class ParSheet:
    """A game's PAR sheet: rules, main-game analysis, reconciliation and side bets."""
    rules: Rules
    analysis: MainGameAnalysis
    reconciliation: Reconciliation
    side_bets: tuple[SideBetPar, ...]

    @property
    def published(self) -> Fraction | None:
        """The operator's published main-game return, if any."""
        return self.rules.published_return

    def to_dict(self) -> dict[str, Any]:
        """The sheet as its JSON document (``FORMAT``)."""
        a = self.analysis
        return {
            "format": FORMAT,
            "game": self.rules.game,
            "name": self.rules.name,
            "rules_digest": self.rules.digest(),
            "return": {"basic": float_exact(a.basic_rtp),
                       "composition": float_exact(a.composition_rtp)},
            "house_edge": {"basic": float_exact(a.basic_house_edge),
                           "composition": float_exact(a.composition_house_edge)},
            "published": None if self.published is None else exact(self.published),
            "reconciliation": _reconciliation_dict(self.reconciliation, self.published),
            "side_bets": {s.table.name: exact(s.table.expected_return) for s in self.side_bets},
            "side_bet_tables": {s.table.name: _side_bet_dict(s) for s in self.side_bets},
            "frequencies": _frequencies_dict(a),
            "insurance_ev": dict(a.insurance_ev),
            "strategy": strategy_dict(a.strategy),
            "composition_exceptions": [
                {"player": e.player, "dealer": e.dealer, "basic": str(e.basic),
                 "best": str(e.best), "gain": e.gain}
                for e in a.exceptions
            ],
            "method": {
                "numbers": METHOD_NUMBERS,
                "main_game": METHOD_MAIN,
                "split": a.split_method,
                "side_bets": METHOD_SIDE_BETS,
                "published_tolerance_points": 100 * PUBLISHED_TOLERANCE,
            },
            "rules": self.rules.to_dict(),
        }


def published_side_bet(rules: Rules, name: str) -> Fraction | None:
    """The published return of side bet ``name``, if ``rules`` carry that bet unchanged."""
    text = PUBLISHED_SIDE_BET_RETURNS.get((rules.game, name))
    if text is None or rules.game not in GAME_IDS:
        return None
    if game_rules(rules.game).side_bet(name) != rules.side_bet(name):
        return None  # a custom paytable: the operator's figure is not about it
    return Fraction(text)


def par_sheet(rules: Rules, *, analysis: MainGameAnalysis | None = None,
              reconciliation: Reconciliation | None = None) -> ParSheet:
    """The PAR sheet of ``rules`` (parts already computed may be passed in)."""
    tables = side_bet_tables(rules)
    return ParSheet(
        rules=rules,
        analysis=analysis if analysis is not None else analyse_main_game(rules),
        reconciliation=reconciliation if reconciliation is not None else reconcile(rules),
        side_bets=tuple(SideBetPar(t, published_side_bet(rules, name))
                        for name, t in tables.items()),
    )


# ----- pieces of the document ----------------------------------------------------------------


def _reading_dict(r: Reading, published: Fraction | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": r.name, "change": r.change,
        "basic": float_exact(r.basic_rtp), "composition": float_exact(r.composition_rtp),
    }
    if published is not None:
        out["distance_points"] = 100 * r.distance(float(published))
    return out


def _reconciliation_dict(rec: Reconciliation, published: Fraction | None) -> dict[str, Any]:
    return {
        "published": None if published is None else exact(published),
        "agrees": rec.agrees,
        "as_read": _reading_dict(rec.as_read, published),
        "matches": [r.name for r in rec.matches],
        "readings": [_reading_dict(r, published) for r in rec.readings],
        "explanation": rec.explanation,
    }


def _side_bet_dict(s: SideBetPar) -> dict[str, Any]:
    out = s.table.to_dict()
    out["published"] = None if s.published is None else exact(s.published)
    if s.published is not None:
        out["difference_points"] = exact(100 * (s.table.expected_return - s.published))
    return out


def _frequencies_dict(a: MainGameAnalysis) -> dict[str, Any]:
    f = a.frequencies
    return {
        "win": f.win, "push": f.push, "lose": f.lose, "bust": f.bust,
        "player_blackjack": f.player_blackjack, "hands_per_round": f.hands_per_round,
        "dealer_bust": dict(f.dealer_bust),
        "definitions": (
            "win/push/lose/bust: shares of final hands (each split hand counts) under basic "
            "strategy, bust being the part of lose where the player busted; player_blackjack: "
            "per initial hand; hands_per_round: final hands per initial hand; dealer_bust: "
            "P(dealer busts | strategy column) when the dealer plays out"
        ),
    }


def _cell_dict(cell: Cell) -> dict[str, Any]:
    return {
        "action": str(cell.action),
        "otherwise": None if cell.otherwise is None else str(cell.otherwise),
        "code": cell_code(cell),
        "ev": {str(k): v for k, v in cell.ev.items()},
    }


def strategy_dict(table: StrategyTable) -> dict[str, Any]:
    """The strategy table with rows keyed by total ("16") or pair value ("T")."""
    return {
        "columns": list(table.columns),
        "hard": {str(t): [_cell_dict(c) for c in row] for t, row in table.hard.items()},
        "soft": {str(t): [_cell_dict(c) for c in row] for t, row in table.soft.items()},
        "pairs": {p: [_cell_dict(c) for c in row] for p, row in table.pairs.items()},
        "codes": "S stand, H hit, D double (Dh: else hit, Ds: else stand), P split",
        "ev": "per unit of initial bet, averaged over the cell's two-card hands, conditioned on "
              "no dealer blackjack where the dealer peeked",
    }
