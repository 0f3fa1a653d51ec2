"""One analysis run: a shoe, the dealer starts, the hand trees, and every value computed from them.

``GameModel`` is the shared machinery of the full-game analysis (every start, every initial hand)
and of the live advice (one start, one hand). It owns the split aggregation and the basic-strategy
(total-dependent) search; ``main_game`` turns its arrays into the public results.

Inside, per-hand arrays are hand-major, (hands, starts) (see ``ca_eval``); what ``Evaluation``
hands out is start-major, (starts, hands), as transposed views.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from game_math.analysis import _tree_pass
from game_math.analysis.ca_core import (
    BUSTED,
    LOSE,
    NOUT,
    PUSH,
    WIN,
    BoolArray,
    FloatArray,
    IntArray,
    Starts,
    Tree,
    TreeArrays,
    blackjack_card,
    dealer_mode,
    dealer_table,
    hand_weights,
    make_tree,
    number_quantities,
    number_rows,
    split_counts,
    tree_arrays,
)
from game_math.analysis.ca_dealer import FirstDraw
from game_math.analysis.ca_eval import (
    TreeValues,
    double_mask,
    draw_value,
    fixed_values,
    optimal_values,
    outcome_weights,
)
from game_math.analysis.ca_hands import ACE, NV, Comp, HandSpace, add, hand_space, shoe_counts
from game_math.legality import double_allowed
from game_math.rules import Rules, TieRule

ZERO: Comp = (0,) * NV
#: decision-table cells: hard total t -> t, soft total t -> 22 + t
NCELL = 44


def cell_of(total: int, soft: bool) -> int:
    """The strategy-table cell of a total: the total, plus 22 when soft."""
    return total + (22 if soft else 0)


#: the order in which total-dependent decisions can be made: every hit leads to a cell done before
CELL_ORDER: tuple[tuple[int, bool], ...] = (
    tuple((t, False) for t in range(21, 10, -1))
    + tuple((t, True) for t in range(21, 11, -1))
    + tuple((t, False) for t in range(10, 3, -1))
)


@dataclass
class SplitPlan:
    """How one pair is split: its trees and the expected hand counts (``split_counts``)."""
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

    cd: TreeValues  # composition-dependent values of the base tree, (U, Hm)
    split_cd: dict[int, FloatArray]  # (U,) value of splitting each pair, CD play after
    tables: BasicTables | None = None
    basic_multi: FloatArray | None = None  # (U, Hm) basic-strategy hit/stand values
    basic_first: FloatArray | None = None  # (U, Hm) with the table's doubles
    split_basic: dict[int, FloatArray] = field(default_factory=dict)
    #: (4,) sum over starts and two-card hands of the seed weights times the outcome classes
    #: (win, push, lose, bust) of playing the hand by the basic strategy, splits applied
    outcome_play: FloatArray | None = None


class GameModel:
    """The hand space, trees and dealer table of one rule set and shoe, ready to evaluate."""
    def __init__(self, rules: Rules, shoe: Comp, starts: Starts, *, exact_resplit: bool = True,
                 base_mask: BoolArray | None = None, pairs: tuple[int, ...] | None = None,
                 hands_now: int = 1) -> None:
        self.rules = rules
        self.shoe = shoe
        self.starts = starts
        self.mode = dealer_mode(rules)
        self.space: HandSpace = hand_space(shoe_counts(rules.decks))
        mask = self.space.ncards >= 2 if base_mask is None else base_mask
        self.base = make_tree(self.space, ZERO, mask)
        self.splits: dict[int, SplitPlan] = {}
        if rules.split.max_hands >= 2:
            for pair in range(NV) if pairs is None else pairs:
                self.splits[pair] = self._plan(pair, exact_resplit, hands_now)
        trees = [self.base, *(t for p in self.splits.values() for t in p.trees)]
        self.rows = number_rows(trees)
        ties = [self.base, *(p.trees[0] for p in self.splits.values())] \
            if rules.payouts.ties is TieRule.PUSH else []
        wanted = number_quantities(trees, ties)
        # (Q, U): every hand's stand value (and chance of a tie, for the outcome frequencies)
        self.dealer = dealer_table(shoe, starts, self.rows, rules, mode=self.mode,
                                   wanted=wanted)
        self.base_arr = self._arrays(self.base)

    def _plan(self, pair: int, exact: bool, hands_now: int) -> SplitPlan:
        split = self.rules.split
        limit = split.max_hands - (hands_now - 1)
        if pair == ACE and not split.resplit_aces:
            limit = 2
        limit = max(limit, 2)
        mask = self.space.counts[:, pair] >= 1
        if pair == ACE and split.split_aces_one_card:
            mask &= self.space.ncards <= 2  # a split ace takes one card: no hand goes further
        depth = limit - 1 if exact else 1
        trees = [make_tree(self.space, add(ZERO, pair, 1 + j), mask) for j in range(depth)]
        n_u = np.array(self.shoe, dtype=np.float64)[None, :] - np.array(self.starts.comps)
        c_np, c_any = split_counts(n_u[:, pair] - 2.0, n_u.sum(axis=1) - 2.0, limit)
        return SplitPlan(pair, limit, trees, c_np, c_any)

    def tree_arrays(self, tree: Tree) -> TreeArrays:
        """The per-start arrays of ``tree`` (``ca_core.tree_arrays``)."""
        return self._arrays(tree)

    def _arrays(self, tree: Tree, out: FloatArray | None = None) -> TreeArrays:
        return tree_arrays(tree, shoe=self.shoe, starts=self.starts, dealer=self.dealer,
                           space=self.space, mode=self.mode, out=out)

    def one_card_aces(self, plan: SplitPlan) -> bool:
        """Whether ``plan`` splits aces that take one card each."""
        return plan.pair == ACE and self.rules.split.split_aces_one_card

    # ----- the pass over all trees -------------------------------------------------------------

    def evaluate(self, weights: FloatArray | None,
                 outcome_seed: FloatArray | None = None) -> Evaluation:
        """CD values, and with ``weights`` (U, Hm) the basic strategy and its values; with
        ``outcome_seed`` (U, Hm) too, ``outcome_play`` for those first-hand weights.

        Split trees are visited one at a time and their arrays dropped after use, so memory
        holds the base tree and one split tree at once.
        """
        arr = self.base_arr
        cd = optimal_values(self.rules, self.base, arr, after_split=False)
        ev = Evaluation(cd.by_start(), {})
        if weights is not None:
            ev.tables = self.basic_tables(np.ascontiguousarray(weights.T), cd.double)
            hit, dbl = self.decisions(ev.tables, self.base, after_split=False)
            multi, first = fixed_values(self.base, arr, hit_dec=hit, dbl_dec=dbl,
                                        doubles=cd.double)
            ev.basic_multi, ev.basic_first = multi.T, first.T
        split_out: dict[int, FloatArray] = {}
        # one split tree's draw odds at a time, in one buffer
        most = max((len(t.mem) for plan in self.splits.values() for t in plan.trees), default=0)
        buffer = np.empty(most * NV * len(self.starts.comps))
        for pair, plan in self.splits.items():
            firsts_cd: list[FloatArray] = []
            firsts_b: list[FloatArray] = []
            plan.p_one = []
            for j, tree in enumerate(plan.trees):
                tarr = self._arrays(tree, buffer)
                plan.p_one.append(tarr.p_one)
                values = self._split_cd(plan, tree, tarr)
                firsts_cd.append(tarr.stand if values is None else values.first)
                if ev.tables is not None:
                    hit, dbl = self._split_decisions(plan, tree, ev.tables)
                    firsts_b.append(fixed_values(
                        tree, tarr, hit_dec=hit, dbl_dec=dbl,
                        doubles=None if values is None else values.double)[1])
                    if outcome_seed is not None and j == 0:
                        # outcome frequencies take every post-split hand from the first tree
                        # (no extra pair cards removed): far inside their precision
                        split_out[pair] = self._split_outcomes(plan, tarr, hit, dbl)
            ev.split_cd[pair] = self.split_total(plan, firsts_cd)
            if firsts_b:
                ev.split_basic[pair] = self.split_total(plan, firsts_b)
        if ev.tables is not None and weights is not None:
            self._decide_splits(ev, weights)
            if outcome_seed is not None:
                ev.outcome_play = self._outcomes(ev.tables, outcome_seed, split_out)
        return ev

    def _split_cd(self, plan: SplitPlan, tree: Tree, arr: TreeArrays) -> TreeValues | None:
        """CD values of a post-split hand (None for split aces that take one card: they
        stand)."""
        if self.one_card_aces(plan):
            return None
        return optimal_values(self.rules, tree, arr, after_split=True)

    def _split_decisions(self, plan: SplitPlan, tree: Tree, tables: BasicTables,
                         ) -> tuple[BoolArray, BoolArray]:
        if self.one_card_aces(plan):
            never = np.zeros((len(tree.mem), len(self.starts.comps)), dtype=np.bool_)
            return never, never
        return self.decisions(tables, tree, after_split=True)

    def _decide_splits(self, ev: Evaluation, weights: FloatArray) -> None:
        assert ev.tables is not None and ev.basic_first is not None
        group = self.group()
        for pair, value in ev.split_basic.items():
            i = self.pair_hand(pair)
            gain = group @ (weights[:, i] * (value - ev.basic_first[:, i]))
            ev.tables.split[:, pair] = gain > 0

    # ----- outcome frequencies -----------------------------------------------------------------

    def _split_outcomes(self, plan: SplitPlan, arr: TreeArrays, hit: BoolArray,
                        dbl: BoolArray) -> FloatArray:
        """(U, 4): the outcome classes of splitting, all hands, by the basic strategy (tree 0).

        The split's value is linear in its tree's two-card values (``split_total``): the
        coefficients seed ``outcome_weights``."""
        tree = plan.trees[0]
        kids, p1, pp = self._second_cards(plan, 0)
        c_np = plan.c_np.sum(axis=1)[:, None]
        c_any = plan.c_any.sum(axis=1)[:, None]
        not_pair = (p1 - pp[:, None] * (np.arange(NV) == plan.pair)[None, :]) \
            / np.maximum(1.0 - pp, 1e-300)[:, None]
        seed = np.zeros(arr.stand.shape)
        seed[kids] = (c_np * not_pair + c_any * p1).T
        stand, bust = outcome_weights(tree, arr, seed, hit_dec=hit, dbl_dec=dbl)
        return self._outcome_classes(tree, arr, stand, bust)

    def _outcomes(self, tables: BasicTables, seed: FloatArray,
                  split_out: dict[int, FloatArray]) -> FloatArray:
        total = np.zeros(NOUT)
        first = np.ascontiguousarray(seed.T)
        for pair, classes in split_out.items():
            i = self.pair_hand(pair)
            chosen = tables.split[self.starts.key, pair]
            total += (first[i] * chosen) @ classes
            first[i] *= ~chosen
        hit, dbl = self.decisions(tables, self.base, after_split=False)
        stand, bust = outcome_weights(self.base, self.base_arr, first, hit_dec=hit, dbl_dec=dbl)
        out: FloatArray = total + self._outcome_classes(self.base, self.base_arr, stand,
                                                        bust).sum(axis=0)
        return out

    def _outcome_classes(self, tree: Tree, arr: TreeArrays, stand: FloatArray,
                         bust: FloatArray) -> FloatArray:
        """(U, 4): outcome classes of hands standing / drawing with these weights (Hm, U).

        Standing wins W, pushes P and loses L with W + P + L the dealer's probability mass
        (1, or P(no blackjack) when peeked) and W - L (ties push) or W - P - L (ties lose) the
        value of standing, so W and L follow from the stand value and the chance of a tie."""
        removed = self.space.counts[tree.mem] + np.array(tree.extra)[None, :]
        n_u = np.array(self.shoe, dtype=np.float64)[None, :] \
            - np.array(self.starts.comps, dtype=np.float64)
        # the mass: P(no dealer blackjack) where the dealer peeked (``no_blackjack``), else 1
        cards = np.array([blackjack_card(c) if self.mode is FirstDraw.PEEKED else -1
                          for c in self.starts.comps], dtype=np.int64)
        tie_at = tree.tie_at if self.rules.payouts.ties is TieRule.PUSH \
            else np.full(len(tree.mem), -1, dtype=np.int64)
        sums = np.empty((4, stand.shape[1]))
        # in C (_tree_pass.c): the sums over hands of stand * mass, stand * arr.stand,
        # stand * P(the dealer ties it) and bust * arr.bust_value, numpy's doubles
        _tree_pass.classes(np.ascontiguousarray(stand), np.ascontiguousarray(bust),
                           np.ascontiguousarray(arr.stand), arr.bust_value, self.dealer,
                           np.ascontiguousarray(tie_at, dtype=np.int64), n_u, removed, cards,
                           sums)
        held, net, tied, busted = sums
        out = np.zeros((stand.shape[1], NOUT))
        out[:, WIN] = 0.5 * (held + net - tied)
        out[:, PUSH] = tied
        out[:, LOSE] = 0.5 * (held - net - tied)
        out[:, BUSTED] = -busted  # P(bust and no dealer BJ)
        return out

    def group(self) -> FloatArray:
        """(K, U): which strategy column each start belongs to."""
        group = np.zeros((len(self.starts.key_names), len(self.starts.comps)))
        group[self.starts.key, np.arange(len(self.starts.comps))] = 1.0
        return group

    def pair_hand(self, pair: int) -> int:
        """The base tree's index of the two-card pair of value index ``pair``."""
        return self.base.local(self.space.find(add(add(ZERO, pair), pair)))

    # ----- split aggregation -------------------------------------------------------------------

    def _second_cards(self, plan: SplitPlan, j: int) -> tuple[IntArray, FloatArray, FloatArray]:
        """Tree j's two-card hands by second card (10,), their odds (U, 10), the pair's (U,)."""
        tree = plan.trees[j]
        one = tree.local(self.space.find(add(ZERO, plan.pair)))
        p1 = plan.p_one[j]
        return tree.child[one], p1, p1[:, plan.pair]

    def split_hand_values(self, plan: SplitPlan, j: int, first: FloatArray,
                          ) -> tuple[FloatArray, FloatArray]:
        """(E_np, E_any), each (U,), of a post-split hand after j resplits, from its two-card
        values ``first`` (Hm, U) in tree j (no split option)."""
        kids, p1, pp = self._second_cards(plan, j)
        vals = first[kids].T  # (U, 10)
        e_any = (p1 * vals).sum(axis=1)
        e_np = (e_any - pp * vals[:, plan.pair]) / np.maximum(1.0 - pp, 1e-300)
        return e_np, e_any

    def split_total(self, plan: SplitPlan, firsts: list[FloatArray]) -> FloatArray:
        """(U,) value of splitting (all hands), given each tree's two-card values."""
        total: FloatArray | None = None
        for j in range(plan.c_np.shape[1]):
            t = min(j, len(firsts) - 1)  # hands after j resplits use tree j when it exists
            e_np, e_any = self.split_hand_values(plan, t, firsts[t])
            term = plan.c_np[:, j] * e_np + plan.c_any[:, j] * e_any
            total = term if total is None else total + term
        assert total is not None
        return total

    # ----- total-dependent (basic) strategy ----------------------------------------------------

    def basic_tables(self, weights: FloatArray, doubles: FloatArray) -> BasicTables:
        """Search the total-dependent decisions over the base tree (see ``main_game``);
        ``weights`` hand-major (Hm, U), ``doubles`` the values of doubling (``double_values``)."""
        tree, arr = self.base, self.base_arr
        nkeys = len(self.starts.key_names)
        group = self.group()
        hit_tab = np.zeros((nkeys, NCELL), dtype=np.bool_)
        dbl_tab = np.zeros((nkeys, NCELL), dtype=np.bool_)
        multi = np.zeros(arr.stand.shape)
        dbl = doubles
        cells = tree.total + np.where(tree.soft, 22, 0)
        natural = (tree.ncards == 2) & (tree.total == 21)
        for total, soft in CELL_ORDER:
            cell = cell_of(total, soft)
            sel = np.flatnonzero((cells == cell) & ~natural)
            if not len(sel):
                continue
            h = draw_value(tree, arr, sel, multi)
            s = arr.stand[sel]
            if total < 21:
                hit_tab[:, cell] = group @ (weights[sel] * (h - s)).T.sum(axis=1) > 0
            go = hit_tab[self.starts.key, cell]
            multi[sel] = np.where(go[None, :], h, s)
            two = sel[tree.ncards[sel] == 2]
            if len(two) and double_allowed(self.rules, total, soft, after_split=False):
                gain = group @ (weights[two] * (dbl[two] - multi[two])).T.sum(axis=1)
                dbl_tab[:, cell] = gain > 0
        return BasicTables(hit_tab, dbl_tab, np.zeros((nkeys, NV), dtype=np.bool_))

    def decisions(self, tables: BasicTables, tree: Tree, after_split: bool,
                  ) -> tuple[BoolArray, BoolArray]:
        """Hit and double decisions (Hm, U) of the basic strategy for every hand of a tree."""
        cells = tree.total + np.where(tree.soft, 22, 0)
        keys = self.starts.key
        hit = np.ascontiguousarray(tables.hit[:, cells].T[:, keys])
        dbl = tables.double[:, cells].T[:, keys] & double_mask(self.rules, tree,
                                                              after_split)[:, None]
        return hit, dbl

    def base_weights(self) -> FloatArray:
        """(U, Hm): P(start) * P(first cards of the player form each base-tree hand | start)."""
        w = hand_weights(self.shoe, self.starts, self.space.counts[self.base.mem])
        return w * self.starts.prob[:, None]


def peeked(model: GameModel) -> bool:
    return model.mode is FirstDraw.PEEKED


__all__ = ["BasicTables", "GameModel", "IntArray", "SplitPlan", "cell_of"]
