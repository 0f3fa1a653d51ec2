"""One analysis run: a shoe, the dealer starts, the hand trees, and every value computed from them.

``GameModel`` is the shared machinery of the full-game analysis (every start, every initial hand)
and of the live advice (one start, one hand). It owns the split aggregation and the basic-strategy
(total-dependent) search; ``main_game`` turns its arrays into the public results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from game_math.analysis.ca_core import (
    NOUT,
    BoolArray,
    FloatArray,
    IntArray,
    Starts,
    Tree,
    TreeArrays,
    compute_dealer,
    dealer_mode,
    double_allowed,
    hand_weights,
    make_tree,
    row_counts,
    split_counts,
    stand_outcomes,
    stand_payoffs,
    stand_table,
    tree_arrays,
)
from game_math.analysis.ca_dealer import FirstDraw
from game_math.analysis.ca_eval import (
    TreeValues,
    double_mask,
    double_values,
    draw_value,
    fixed_values,
    optimal_values,
)
from game_math.analysis.ca_hands import ACE, NV, Comp, HandSpace, add, hand_space, shoe_counts
from game_math.rules import Rules

ZERO: Comp = (0,) * NV
#: decision-table cells: hard total t -> t, soft total t -> 22 + t
NCELL = 44


def cell_of(total: int, soft: bool) -> int:
    return total + (22 if soft else 0)


#: the order in which total-dependent decisions can be made: every hit leads to a cell done before
CELL_ORDER: tuple[tuple[int, bool], ...] = (
    tuple((t, False) for t in range(21, 10, -1))
    + tuple((t, True) for t in range(21, 11, -1))
    + tuple((t, False) for t in range(10, 3, -1))
)


@dataclass
class SplitPlan:
    pair: int
    max_hands: int
    trees: list[Tree]  # trees[j]: hands after j resplits (one tree unless exact_resplit)
    c_np: FloatArray  # (U, max_hands - 1): see ``split_counts``
    c_any: FloatArray
    p_one: list[FloatArray] = field(default_factory=list)  # per tree: (U, 10) second-card odds


@dataclass
class BasicTables:
    """Total-dependent decisions per strategy column (up card, or dealer total in DE)."""

    hit: BoolArray  # (K, 44): hit (else stand) for hands of that total, any number of cards
    double: BoolArray  # (K, 44): double a two-card hand of that total where doubling is allowed
    split: BoolArray  # (K, 10): split that pair


@dataclass
class Evaluation:
    """Everything one pass over the trees yields, per start (U) and base-tree hand (Hm)."""

    cd: TreeValues  # composition-dependent values of the base tree
    split_cd: dict[int, FloatArray]  # (U,) value of splitting each pair, CD play after
    tables: BasicTables | None = None
    basic_multi: FloatArray | None = None  # (U, Hm) basic-strategy hit/stand values
    basic_first: FloatArray | None = None  # (U, Hm) with the table's doubles
    split_basic: dict[int, FloatArray] = field(default_factory=dict)
    outcome_first: FloatArray | None = None  # (U, Hm, 4) outcome classes, splits applied


class GameModel:
    def __init__(self, rules: Rules, shoe: Comp, starts: Starts, *, exact_resplit: bool = True,
                 base_mask: BoolArray | None = None, pairs: tuple[int, ...] | None = None,
                 hands_now: int = 1) -> None:
        self.rules = rules
        self.shoe = shoe
        self.starts = starts
        self.mode = dealer_mode(rules)
        self.space: HandSpace = hand_space(shoe_counts(rules.decks))
        rows: dict[int, int] = {}
        mask = self.space.ncards >= 2 if base_mask is None else base_mask
        self.base = make_tree(self.space, ZERO, mask, rows)
        self.splits: dict[int, SplitPlan] = {}
        if rules.split.max_hands >= 2:
            for pair in range(NV) if pairs is None else pairs:
                self.splits[pair] = self._plan(pair, rows, exact_resplit, hands_now)
        self.rows = row_counts(list(rows))
        self.dealer = compute_dealer(shoe, starts, self.rows, rules.dealer.hits_soft_17,
                                     self.mode)
        self.stands = stand_table(self.dealer, stand_payoffs(rules))
        self.base_arr = self._arrays(self.base)

    def _plan(self, pair: int, rows: dict[int, int], exact: bool, hands_now: int) -> SplitPlan:
        split = self.rules.split
        limit = split.max_hands - (hands_now - 1)
        if pair == ACE and not split.resplit_aces:
            limit = 2
        limit = max(limit, 2)
        mask = self.space.counts[:, pair] >= 1
        depth = limit - 1 if exact else 1
        trees = [make_tree(self.space, add(ZERO, pair, 1 + j), mask, rows) for j in range(depth)]
        n_u = np.array(self.shoe, dtype=np.float64)[None, :] - np.array(self.starts.comps)
        c_np, c_any = split_counts(n_u[:, pair] - 2.0, n_u.sum(axis=1) - 2.0, limit)
        return SplitPlan(pair, limit, trees, c_np, c_any)

    def tree_arrays(self, tree: Tree) -> TreeArrays:
        return self._arrays(tree)

    def _arrays(self, tree: Tree) -> TreeArrays:
        return tree_arrays(tree, shoe=self.shoe, starts=self.starts, stands=self.stands,
                           space=self.space, mode=self.mode)

    def one_card_aces(self, plan: SplitPlan) -> bool:
        return plan.pair == ACE and self.rules.split.split_aces_one_card

    # ----- the pass over all trees -------------------------------------------------------------

    def evaluate(self, weights: FloatArray | None, outcomes: bool = False) -> Evaluation:
        """CD values, and with ``weights`` the basic strategy and its values (and outcomes).

        Split trees are visited one at a time and their arrays dropped after use, so memory
        holds the base tree and one split tree at once.
        """
        arr = self.base_arr
        ev = Evaluation(optimal_values(self.rules, self.base, arr, after_split=False), {})
        if weights is not None:
            ev.tables = self.basic_tables(weights)
            multi, first = self._fixed_arrays(self.base, arr, *self.decisions(
                ev.tables, self.base, after_split=False), outcomes=False)
            ev.basic_multi, ev.basic_first = multi[..., 0], first[..., 0]
        split_out: dict[int, FloatArray] = {}
        for pair, plan in self.splits.items():
            firsts_cd: list[FloatArray] = []
            firsts_b: list[FloatArray] = []
            first_out: FloatArray | None = None
            plan.p_one = []
            for j, tree in enumerate(plan.trees):
                tarr = self._arrays(tree)
                plan.p_one.append(tarr.p_one)
                firsts_cd.append(self._split_first_cd(plan, tree, tarr))
                if ev.tables is not None:
                    firsts_b.append(self._split_first_fixed(plan, tree, tarr, ev.tables, False))
                    if outcomes and j == 0:
                        # outcome frequencies take every post-split hand from the first tree
                        # (no extra pair cards removed): far inside their precision
                        first_out = self._split_first_fixed(plan, tree, tarr, ev.tables, True)
            ev.split_cd[pair] = self.split_total(plan, firsts_cd)
            if firsts_b:
                ev.split_basic[pair] = self.split_total(plan, [f[..., 0] for f in firsts_b])
            if first_out is not None:
                split_out[pair] = self.split_total(plan, [first_out])
        if ev.tables is not None and weights is not None:
            self._decide_splits(ev, weights)
            if outcomes:
                ev.outcome_first = self._outcomes(ev.tables, split_out)
        return ev

    def _split_first_cd(self, plan: SplitPlan, tree: Tree, arr: TreeArrays) -> FloatArray:
        if self.one_card_aces(plan):
            return arr.stand
        return optimal_values(self.rules, tree, arr, after_split=True).first

    def _split_first_fixed(self, plan: SplitPlan, tree: Tree, arr: TreeArrays,
                           tables: BasicTables, outcomes: bool) -> FloatArray:
        if self.one_card_aces(plan):
            never = np.zeros(arr.stand.shape, dtype=np.bool_)
            return self._fixed_arrays(tree, arr, never, never, outcomes)[1]
        hit, dbl = self.decisions(tables, tree, after_split=True)
        return self._fixed_arrays(tree, arr, hit, dbl, outcomes)[1]

    def _decide_splits(self, ev: Evaluation, weights: FloatArray) -> None:
        assert ev.tables is not None and ev.basic_first is not None
        group = self.group()
        for pair, value in ev.split_basic.items():
            i = self.pair_hand(pair)
            gain = group @ (weights[:, i] * (value - ev.basic_first[:, i]))
            ev.tables.split[:, pair] = gain > 0

    def _outcomes(self, tables: BasicTables, split_out: dict[int, FloatArray]) -> FloatArray:
        hit, dbl = self.decisions(tables, self.base, after_split=False)
        first = self._fixed_arrays(self.base, self.base_arr, hit, dbl, outcomes=True)[1]
        for pair, value in split_out.items():
            i = self.pair_hand(pair)
            chosen = tables.split[self.starts.key, pair][:, None]
            first[:, i] = np.where(chosen, value, first[:, i])
        return first

    def group(self) -> FloatArray:
        """(K, U): which strategy column each start belongs to."""
        group = np.zeros((len(self.starts.key_names), len(self.starts.comps)))
        group[self.starts.key, np.arange(len(self.starts.comps))] = 1.0
        return group

    def pair_hand(self, pair: int) -> int:
        return self.base.local[self.space.index[add(add(ZERO, pair), pair)]]

    # ----- split aggregation -------------------------------------------------------------------

    def split_hand_values(self, plan: SplitPlan, j: int, first: FloatArray,
                          ) -> tuple[FloatArray, FloatArray]:
        """(E_np, E_any) of a post-split hand after j resplits, from its two-card values.

        ``first`` (U, Hm[, k]) holds each two-card hand's value in the tree (no split option).
        """
        tree = plan.trees[j]
        one = tree.local[self.space.index[add(ZERO, plan.pair)]]
        p1 = plan.p_one[j]  # (U, 10)
        kids = tree.child[one]
        vals = first[:, kids]  # (U, 10[, k])
        while p1.ndim < vals.ndim:
            p1 = p1[..., None]
        e_any = (p1 * vals).sum(axis=1)
        pp = p1[:, plan.pair]
        e_np = (e_any - pp * vals[:, plan.pair]) / np.maximum(1.0 - pp, 1e-300)
        return e_np, e_any

    def split_total(self, plan: SplitPlan, firsts: list[FloatArray]) -> FloatArray:
        """Value of splitting (all hands), given each tree's two-card values."""
        total: FloatArray | None = None
        for j in range(plan.c_np.shape[1]):
            t = min(j, len(firsts) - 1)  # hands after j resplits use tree j when it exists
            e_np, e_any = self.split_hand_values(plan, t, firsts[t])
            c_np, c_any = plan.c_np[:, j], plan.c_any[:, j]
            while c_np.ndim < e_np.ndim:
                c_np, c_any = c_np[..., None], c_any[..., None]
            term = c_np * e_np + c_any * e_any
            total = term if total is None else total + term
        assert total is not None
        return total

    # ----- total-dependent (basic) strategy ----------------------------------------------------

    def basic_tables(self, weights: FloatArray) -> BasicTables:
        """Search the total-dependent decisions over the base tree (see ``main_game``)."""
        tree, arr = self.base, self.base_arr
        nkeys = len(self.starts.key_names)
        group = self.group()
        hit_tab = np.zeros((nkeys, NCELL), dtype=np.bool_)
        dbl_tab = np.zeros((nkeys, NCELL), dtype=np.bool_)
        multi = np.zeros(arr.stand.shape)
        dbl = double_values(self.rules, tree, arr, after_split=False)
        cells = tree.total + np.where(tree.soft, 22, 0)
        natural = (tree.ncards == 2) & (tree.total == 21)
        for total, soft in CELL_ORDER:
            sel = np.flatnonzero((cells == cell_of(total, soft)) & ~natural)
            if not len(sel):
                continue
            h = draw_value(tree, arr, sel, multi)
            s = arr.stand[:, sel]
            if total < 21:
                gain = group @ (weights[:, sel] * (h - s)).sum(axis=1)
                hit_tab[:, cell_of(total, soft)] = gain > 0
            go = hit_tab[self.starts.key, cell_of(total, soft)]
            multi[:, sel] = np.where(go[:, None], h, s)
            two = sel[tree.ncards[sel] == 2]
            if len(two) and double_allowed(self.rules, total, soft, after_split=False):
                gain = group @ (weights[:, two] * (dbl[:, two] - multi[:, two])).sum(axis=1)
                dbl_tab[:, cell_of(total, soft)] = gain > 0
        return BasicTables(hit_tab, dbl_tab, np.zeros((nkeys, NV), dtype=np.bool_))

    def decisions(self, tables: BasicTables, tree: Tree, after_split: bool,
                  ) -> tuple[BoolArray, BoolArray]:
        """Per-start hit and double decisions of the basic strategy for every hand of a tree."""
        cells = tree.total + np.where(tree.soft, 22, 0)
        keys = self.starts.key
        hit = tables.hit[keys][:, cells]
        dbl = tables.double[keys][:, cells] & double_mask(self.rules, tree, after_split)[None, :]
        return hit, dbl

    def _fixed_arrays(self, tree: Tree, arr: TreeArrays, hit: BoolArray, dbl: BoolArray,
                      outcomes: bool) -> tuple[FloatArray, FloatArray]:
        """Values under fixed decisions: money (trailing axis 1), or the outcome classes (4)."""
        if not outcomes:
            return fixed_values(tree, arr.p_live, arr.stand[..., None],
                                arr.bust_value[..., None], hit_dec=hit, dbl_dec=dbl,
                                dbl_factor=2.0)
        classes = stand_outcomes(self.rules)[np.minimum(tree.total, 21)]  # (Hm, 7, 4)
        stand = np.einsum("uhc,hck->uhk", self.dealer[:, tree.rows, :], classes)
        bust = np.zeros((*arr.bust_value.shape, NOUT))
        bust[..., 3] = -arr.bust_value  # P(bust and no dealer BJ)
        return fixed_values(tree, arr.p_live, stand, bust, hit_dec=hit, dbl_dec=dbl,
                            dbl_factor=1.0)

    def base_weights(self) -> FloatArray:
        """(U, Hm): P(start) * P(first cards of the player form each base-tree hand | start)."""
        w = hand_weights(self.shoe, self.starts, self.space.counts[self.base.mem])
        return w * self.starts.prob[:, None]


def peeked(model: GameModel) -> bool:
    return model.mode is FirstDraw.PEEKED


__all__ = ["NOUT", "BasicTables", "GameModel", "IntArray", "SplitPlan", "cell_of"]
