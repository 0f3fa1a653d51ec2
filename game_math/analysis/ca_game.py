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
    split_counts,
    stand_outcomes,
    stand_payoffs,
    tree_arrays,
)
from game_math.analysis.ca_dealer import FirstDraw
from game_math.analysis.ca_eval import TreeValues, double_values, fixed_values, optimal_values
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
    arrays: list[TreeArrays] = field(default_factory=list)
    c_np: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    c_any: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))


@dataclass
class BasicTables:
    """Total-dependent decisions per strategy column (up card, or dealer total in DE)."""

    hit: BoolArray  # (K, 44): hit (else stand) for hands of that total, any number of cards
    double: BoolArray  # (K, 44): double a two-card hand of that total where doubling is allowed
    split: BoolArray  # (K, 10): split that pair


class GameModel:
    def __init__(self, rules: Rules, shoe: Comp, starts: Starts, *, exact_resplit: bool = False,
                 base_mask: BoolArray | None = None, pairs: tuple[int, ...] | None = None,
                 hands_now: int = 1) -> None:
        self.rules = rules
        self.shoe = shoe
        self.starts = starts
        self.mode = dealer_mode(rules)
        self.space: HandSpace = hand_space(shoe_counts(rules.decks))
        self.pay = stand_payoffs(rules)
        rows: dict[Comp, int] = {}
        mask = self.space.ncards >= 2 if base_mask is None else base_mask
        self.base = make_tree(self.space, ZERO, mask, rows)
        self.splits: dict[int, SplitPlan] = {}
        if rules.split.max_hands >= 2:
            for pair in range(NV) if pairs is None else pairs:
                self.splits[pair] = self._plan(pair, rows, exact_resplit, hands_now)
        self.rows = list(rows)
        self.dealer = compute_dealer(shoe, starts, self.rows, rules.dealer.hits_soft_17,
                                     self.mode)
        self.base_arr = self._arrays(self.base)
        for plan in self.splits.values():
            plan.arrays = [self._arrays(t) for t in plan.trees]
            n_u = np.array(shoe, dtype=np.float64)[None, :] - np.array(starts.comps)
            plan.c_np, plan.c_any = split_counts(n_u[:, pair_of(plan)] - 2.0,
                                                 n_u.sum(axis=1) - 2.0, plan.max_hands)

    def _plan(self, pair: int, rows: dict[Comp, int], exact: bool, hands_now: int) -> SplitPlan:
        split = self.rules.split
        limit = split.max_hands - (hands_now - 1)
        if pair == ACE and not split.resplit_aces:
            limit = 2
        limit = max(limit, 2)
        mask = self.space.counts[:, pair] >= 1
        depth = limit - 1 if exact else 1
        trees = [make_tree(self.space, add(ZERO, pair, 1 + j), mask, rows) for j in range(depth)]
        return SplitPlan(pair, limit, trees)

    def _arrays(self, tree: Tree) -> TreeArrays:
        return tree_arrays(tree, self.shoe, self.starts, self.dealer, self.space, self.pay,
                           self.mode)

    # ----- split aggregation -------------------------------------------------------------------

    def split_hand_values(self, plan: SplitPlan, j: int, first: FloatArray,
                          ) -> tuple[FloatArray, FloatArray]:
        """(E_np, E_any) of a post-split hand after j resplits, from its two-card values.

        ``first`` (U, Hm[, k]) holds each two-card hand's value in the tree (no split option).
        """
        tree, arr = plan.trees[j], plan.arrays[j]
        one = tree.local[self.space.index[add(ZERO, plan.pair)]]
        p1 = arr.p[:, one, :]  # (U, 10)
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
            e_np, e_any = self.split_hand_values(plan, min(j, len(plan.trees) - 1),
                                                 firsts[min(j, len(firsts) - 1)])
            c_np, c_any = plan.c_np[:, j], plan.c_any[:, j]
            while c_np.ndim < e_np.ndim:
                c_np, c_any = c_np[..., None], c_any[..., None]
            term = c_np * e_np + c_any * e_any
            total = term if total is None else total + term
        assert total is not None
        return total

    def one_card_aces(self, plan: SplitPlan) -> bool:
        return plan.pair == ACE and self.rules.split.split_aces_one_card

    # ----- composition-dependent optimum -------------------------------------------------------

    def optimal(self) -> tuple[TreeValues, dict[int, FloatArray]]:
        """Best values of the base tree and the value of splitting each pair, per start."""
        base = optimal_values(self.rules, self.base, self.base_arr, after_split=False)
        split: dict[int, FloatArray] = {}
        for pair, plan in self.splits.items():
            firsts = []
            for tree, arr in zip(plan.trees, plan.arrays, strict=True):
                if self.one_card_aces(plan):
                    firsts.append(arr.stand)
                else:
                    firsts.append(optimal_values(self.rules, tree, arr, after_split=True).first)
            split[pair] = self.split_total(plan, firsts)
        return base, split

    # ----- total-dependent (basic) strategy ----------------------------------------------------

    def basic_tables(self, weights: FloatArray) -> BasicTables:
        """Search the total-dependent decisions over the base tree (see ``main_game``)."""
        tree, arr = self.base, self.base_arr
        nkeys = len(self.starts.key_names)
        group = np.zeros((nkeys, len(self.starts.comps)))
        group[self.starts.key, np.arange(len(self.starts.comps))] = 1.0
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
            ch = tree.child[sel]
            cv = np.where(ch[None] >= 0, multi[:, np.maximum(ch, 0)], arr.bust[:, sel])
            h = (arr.p[:, sel] * cv).sum(axis=-1)
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
        allowed = np.array([
            n == 2 and double_allowed(self.rules, int(t), bool(s), after_split)
            for t, s, n in zip(tree.total, tree.soft, tree.ncards, strict=True)
        ], dtype=np.bool_)
        dbl = tables.double[keys][:, cells] & allowed[None, :]
        return hit, dbl

    def fixed(self, tables: BasicTables, outcomes: bool,
              ) -> tuple[FloatArray, FloatArray, dict[int, FloatArray]]:
        """Values under the basic strategy: base (multi, first) and splitting, per start.

        With ``outcomes`` the trailing axis holds the probabilities of win, push, lose and bust
        (a double counts as one hand); otherwise it is the money value (length 1).
        """
        base_m, base_f = self._fixed_tree(tables, self.base, self.base_arr, False, outcomes)
        split: dict[int, FloatArray] = {}
        for pair, plan in self.splits.items():
            firsts = []
            for tree, arr in zip(plan.trees, plan.arrays, strict=True):
                if self.one_card_aces(plan):
                    never = np.zeros(arr.stand.shape, dtype=np.bool_)
                    firsts.append(self._fixed_arrays(tree, arr, never, never, outcomes)[1])
                else:
                    firsts.append(self._fixed_tree(tables, tree, arr, True, outcomes)[1])
            split[pair] = self.split_total(plan, firsts)
        return base_m, base_f, split

    def _fixed_tree(self, tables: BasicTables, tree: Tree, arr: TreeArrays, after_split: bool,
                    outcomes: bool) -> tuple[FloatArray, FloatArray]:
        hit, dbl = self.decisions(tables, tree, after_split)
        return self._fixed_arrays(tree, arr, hit, dbl, outcomes)

    def _fixed_arrays(self, tree: Tree, arr: TreeArrays, hit: BoolArray, dbl: BoolArray,
                      outcomes: bool) -> tuple[FloatArray, FloatArray]:
        if not outcomes:
            return fixed_values(tree, arr.p, arr.stand[..., None], arr.bust[..., None],
                                hit, dbl, 2.0)
        classes = stand_outcomes(self.rules)[np.minimum(tree.total, 21)]  # (Hm, 7, 4)
        stand = np.einsum("uhc,hck->uhk", arr.probs, classes)
        bust = np.zeros((*arr.bust.shape, NOUT))
        bust[..., 3] = -arr.bust  # P(no dealer BJ) joint, or 1
        return fixed_values(tree, arr.p, stand, bust, hit, dbl, 1.0)

    def base_weights(self) -> FloatArray:
        """(U, Hm): P(start) * P(first cards of the player form each base-tree hand | start)."""
        w = hand_weights(self.shoe, self.starts, self.space.counts[self.base.mem])
        return w * self.starts.prob[:, None]


def pair_of(plan: SplitPlan) -> int:
    return plan.pair


def peeked(model: GameModel) -> bool:
    return model.mode is FirstDraw.PEEKED


__all__ = ["NOUT", "BasicTables", "GameModel", "IntArray", "SplitPlan", "cell_of"]
