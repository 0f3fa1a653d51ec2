"""Strategy tables: the basic (total-dependent) strategy as a table with the EV of every action,
and as a fast decision function for the simulator and the engine's advice.

Columns are the dealer's up card (2..9, T, A) or, in double exposure, the dealer's two-card total
and softness ("H4".."H20", "S12".."S20"; the dealer blackjack "S21" ends the round and has no
column). A cell's EVs average the cell's two-card hands (pairs excluded from the hard and soft
rows when other two-card hands exist; all hands of the total when none has two cards), each
weighted by its probability, and are conditioned on no dealer blackjack where the dealer peeked.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from game_math.analysis.ca_core import (
    VALUE_NAMES,
    FloatArray,
    dealer_key_name,
    is_blackjack,
    no_blackjack,
)
from game_math.analysis.ca_eval import draw_value
from game_math.analysis.ca_game import BasicTables, Evaluation, GameModel, cell_of
from game_math.analysis.ca_hands import composition, value_index
from game_math.cards import VALUE_OF, Card, hand_total
from game_math.legality import double_allowed
from game_math.round import ActionKind
from game_math.rules import DealerCards


@dataclass(frozen=True)
class Cell:
    """One strategy-table cell: the action, what to do when it is not allowed, each action's EV."""

    action: ActionKind
    otherwise: ActionKind | None  # for double or split: the play when that is not allowed
    ev: Mapping[ActionKind, float]  # per unit of the initial bet


@dataclass(frozen=True)
class StrategyTable:
    """Basic strategy: rows by hand, one cell per column (see the module docstring)."""

    columns: tuple[str, ...]
    hard: Mapping[int, tuple[Cell, ...]]  # totals 4..21
    soft: Mapping[int, tuple[Cell, ...]]  # totals 12..21
    pairs: Mapping[str, tuple[Cell, ...]]  # pair values "2".."9", "T", "A"


PAIR_ORDER = (1, 2, 3, 4, 5, 6, 7, 8, 9, 0)  # rows 2..9, T, A


@dataclass(frozen=True)
class BasicStrategy:
    """The basic strategy as plain lookups: what the analysis's basic return assumes.

    ``hit[col][cell]``, ``double[col][cell]`` with cell = total (+22 when soft), ``split[col][v]``
    with v the value index (0 ace .. 9 ten). Insurance and even money are never taken; a split is
    resplit whenever allowed; a double is always for the full bet.
    """

    exposed: bool
    columns: tuple[str, ...]
    hit: tuple[tuple[bool, ...], ...]
    double: tuple[tuple[bool, ...], ...]
    split: tuple[tuple[bool, ...], ...]

    def column(self, dealer_cards: Sequence[Card]) -> int:
        """The column of the dealer's visible cards (up card, or both cards when exposed)."""
        if self.exposed:
            return self.columns.index(dealer_key_name(composition(dealer_cards)))
        return self.columns.index(VALUE_NAMES[value_index(dealer_cards[0])])

    def action(self, player_cards: Sequence[Card], dealer_cards: Sequence[Card],
               legal: Collection[str]) -> ActionKind:
        """The basic-strategy action among the ``legal`` ones (as the engine names them)."""
        col = self.column(dealer_cards)
        total, soft = hand_total(player_cards)
        pair_split = len(player_cards) == 2 and self.split[col][VALUE_OF[player_cards[0]] - 1]
        if ActionKind.SPLIT in legal and pair_split:
            return ActionKind.SPLIT
        cell = total + (22 if soft else 0)
        if total < 21 and ActionKind.DOUBLE in legal and self.double[col][cell]:
            return ActionKind.DOUBLE
        if total < 21 and ActionKind.HIT in legal and self.hit[col][cell]:
            return ActionKind.HIT
        return ActionKind.STAND


def basic_strategy(model: GameModel, tables: BasicTables) -> BasicStrategy:
    """The lookup tables of ``tables`` for the columns in which the player acts."""
    cols = _columns(model)
    return BasicStrategy(
        exposed=model.rules.dealer.cards is DealerCards.BOTH_EXPOSED,
        columns=tuple(model.starts.key_names[k] for k in cols),
        hit=tuple(tuple(bool(x) for x in tables.hit[k]) for k in cols),
        double=tuple(tuple(bool(x) for x in tables.double[k]) for k in cols),
        split=tuple(tuple(bool(x) for x in tables.split[k]) for k in cols),
    )


def _columns(model: GameModel) -> list[int]:
    """Strategy columns in which the player acts (a dealer blackjack start has none)."""
    live = {int(model.starts.key[u]) for u, comp in enumerate(model.starts.comps)
            if not (sum(comp) == 2 and is_blackjack(comp))}
    return sorted(live)


def strategy_table(model: GameModel, weights: FloatArray, ev: Evaluation) -> StrategyTable:
    """The printed strategy: every two-card hand's basic action and values per column."""
    tables, multi = ev.tables, ev.basic_multi
    assert tables is not None and multi is not None
    tree, arr = model.base, model.base_arr
    values = {  # start-major (U, Hm), as ``weights``
        ActionKind.STAND: arr.stand.T,
        ActionKind.HIT: draw_value(tree, arr, slice(None), multi.T).T,
        ActionKind.DOUBLE: ev.cd.double,
    }
    counts = model.space.counts[tree.mem]
    no_bj = no_blackjack(model.shoe, model.starts, counts, model.mode)
    group = model.group()
    natural = (tree.ncards == 2) & (tree.total == 21)  # an ace and a ten: the blackjacks
    pair = (tree.ncards == 2) & (counts.max(axis=1) == 2)
    cols = _columns(model)

    def cells(sel: np.ndarray, total: int, soft: bool,
              extra: Mapping[ActionKind, FloatArray]) -> list[Cell]:
        """The row's cells in every column at once: sums over its hands per start, then per
        column (``extra``: values (U, len(sel)) of more actions)."""
        w = weights[:, sel]
        norm = group @ (w * no_bj[:, sel]).sum(axis=1)
        evs: dict[ActionKind, FloatArray] = {}
        for action, vals in {**{a: v[:, sel] for a, v in values.items()}, **extra}.items():
            if np.isfinite(vals).all():
                evs[action] = group @ (w * vals).sum(axis=1) / norm
        cid = cell_of(total, soft)
        # as Python values once per row (the same doubles), not numpy scalars per column
        by_action = {a: x.tolist() for a, x in evs.items()}
        hit, dbl = tables.hit[:, cid].tolist(), tables.double[:, cid].tolist()
        may_double = double_allowed(model.rules, total, soft, False)
        out = []
        for k in cols:
            ev_k = {a: x[k] for a, x in by_action.items()}
            hs = ActionKind.HIT if hit[k] and total < 21 else ActionKind.STAND
            if dbl[k] and may_double:
                out.append(Cell(ActionKind.DOUBLE, hs, ev_k))
            else:
                out.append(Cell(hs, None, ev_k))
        return out

    def row(total: int, soft: bool) -> tuple[Cell, ...]:
        same = (tree.total == total) & (tree.soft == soft) & ~natural
        sel = np.zeros(0, dtype=np.int64)
        for mask in (same & (tree.ncards == 2) & ~pair, same & (tree.ncards == 2), same):
            sel = np.flatnonzero(mask)
            if len(sel):
                break
        return tuple(cells(sel, total, soft, {}))

    pairs: dict[str, tuple[Cell, ...]] = {}
    for p in PAIR_ORDER:
        i = model.pair_hand(p)
        total = int(tree.total[i])
        soft = bool(tree.soft[i])
        extra: dict[ActionKind, FloatArray] = {}
        if p in ev.split_basic:
            extra[ActionKind.SPLIT] = ev.split_basic[p][:, None]
        row_cells = cells(np.array([i]), total, soft, extra)
        if p in ev.split_basic:
            row_cells = [Cell(ActionKind.SPLIT, c.action, c.ev) if tables.split[k, p] else c
                         for k, c in zip(cols, row_cells, strict=True)]
        pairs[VALUE_NAMES[p]] = tuple(row_cells)
    return StrategyTable(
        columns=tuple(model.starts.key_names[k] for k in cols),
        hard={t: row(t, False) for t in range(4, 22)},
        soft={t: row(t, True) for t in range(12, 22)},
        pairs=pairs,
    )
