"""Expected-value passes over the hand trees: optimal (composition-dependent) and fixed strategies.

All passes walk a tree from its longest hands to its shortest (a hit adds one card, so every child
is done before its parent) and work on whole levels at once. Arrays are hand-major,
(hands, starts): a level is a slice and its children's values are whole gathered rows.
The value of drawing a card is ``sum_v p_live[v] * value[child(v)] + bust_value``: the busting
cards do not depend on the strategy, so their part is computed once per tree.

``outcome_weights`` runs a fixed strategy the other way (the adjoint of ``fixed_values``): from
the probability of holding each first hand it finds how often every hand stands and every draw
busts, which is all the outcome frequencies need.

The passes run in C (``_tree_pass.c``): in numpy each level of each pass was a dozen calls over
small arrays. The C passes make numpy's floating-point operations in numpy's order, so every
figure is the one the numpy passes gave (tests/engine/test_tree_pass.py keeps them as the
reference and compares bit for bit).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from game_math.analysis import _tree_pass
from game_math.analysis.ca_core import (
    BoolArray,
    FloatArray,
    IntArray,
    Tree,
    TreeArrays,
)
from game_math.legality import double_allowed
from game_math.rules import Rules

Sel = slice | IntArray


@dataclass
class TreeValues:
    """Values of one tree against every start (joint with no dealer BJ where peeked).

    Hand-major, (Hm, U), as returned by ``optimal_values``.
    """

    multi: FloatArray  # hit/stand value (any hand of 3+ cards, or when nothing else)
    hit: FloatArray  # value of hitting, then playing on
    double: FloatArray  # value of doubling (two-card hands; -inf where not allowed)
    first: FloatArray  # best of stand / hit / double (no split) for two-card hands

    def by_start(self) -> TreeValues:
        """The same values start-major, (U, Hm) (transposed views)."""
        return TreeValues(self.multi.T, self.hit.T, self.double.T, self.first.T)


def double_mask(rules: Rules, tree: Tree, after_split: bool) -> BoolArray:
    """Which hands may double: two cards, and the rule allows their total and softness."""
    allowed = _double_table(rules, after_split)
    out: BoolArray = (tree.ncards == 2) & allowed[tree.soft.astype(np.int64), tree.total]
    return out


@lru_cache(maxsize=64)
def _double_table(rules: Rules, after_split: bool) -> BoolArray:
    """(2, 22): may a hand of this softness and total double (two cards)."""
    table = np.array([[double_allowed(rules, t, soft, after_split) for t in range(22)]
                      for soft in (False, True)])
    table.flags.writeable = False  # shared by every caller
    return table


def level_bounds(tree: Tree) -> IntArray:
    """(L, 2): each level's [start, stop), most cards first, as the C passes take them."""
    return np.array([(s.start, s.stop) for s in tree.levels], dtype=np.int64).reshape(-1, 2)


def draw_value(tree: Tree, arr: TreeArrays, sel: Sel, values: FloatArray) -> FloatArray:
    """(len(sel), U): value of drawing one card to each selected hand, then ``values``."""
    rows = np.arange(len(tree.mem))[sel] if isinstance(sel, slice) else sel
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    out = np.empty((len(rows), arr.stand.shape[1]))
    _tree_pass.draw(rows, tree.child, arr.p_live, arr.bust_value,
                    np.ascontiguousarray(values), out)
    return out


def double_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> FloatArray:
    """Value of doubling each hand of ``tree`` per start; -inf where the rules forbid it."""
    out = np.full(arr.stand.shape, -np.inf)
    sel = np.flatnonzero(double_mask(rules, tree, after_split))
    if len(sel):
        out[sel] = 2.0 * draw_value(tree, arr, sel, arr.stand)
    return out


def optimal_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> TreeValues:
    """Composition-dependent optimum: each hand takes the best action for its exact cards.

    Level by level, most cards first: a hand's hit value is ``draw_value`` of its children's
    hit/stand values; its hit/stand value the larger of hitting and standing (standing at 21).
    """
    multi = np.empty(arr.stand.shape)
    hit = np.empty(arr.stand.shape)
    _tree_pass.optimal(level_bounds(tree), tree.child, arr.p_live, arr.bust_value,
                       np.ascontiguousarray(arr.stand), tree.total, multi, hit)
    dbl = double_values(rules, tree, arr, after_split)
    first = np.where((tree.total >= 21)[:, None], arr.stand, np.maximum(multi, dbl))
    return TreeValues(multi, hit, dbl, first)


def fixed_values(tree: Tree, arr: TreeArrays, *, hit_dec: BoolArray, dbl_dec: BoolArray,
                 doubles: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
    """Values of a fixed strategy; decisions (Hm, U). Returns (multi, first): ``first`` applies
    the double decisions to two-card hands. ``doubles``: the values of doubling where allowed,
    if already known (``optimal_values``): they do not depend on the strategy."""
    multi = np.empty(arr.stand.shape)
    _tree_pass.fixed(level_bounds(tree), tree.child, arr.p_live, arr.bust_value,
                     np.ascontiguousarray(arr.stand), tree.total,
                     np.ascontiguousarray(hit_dec), multi)
    first = multi.copy()
    dsel = np.flatnonzero(dbl_dec.any(axis=1))
    if len(dsel):
        d = 2.0 * draw_value(tree, arr, dsel, arr.stand) if doubles is None else doubles[dsel]
        first[dsel] = np.where(dbl_dec[dsel], d, multi[dsel])
    return multi, first


def outcome_weights(tree: Tree, arr: TreeArrays, first: FloatArray, *, hit_dec: BoolArray,
                    dbl_dec: BoolArray) -> tuple[FloatArray, FloatArray]:
    """Where a fixed strategy's hands end, from ``first`` (Hm, U), the weight of holding each
    hand as a first hand (two-card hands, or the hands a split seeds).

    Returns (stand, bust), each (Hm, U): the weight with which each hand stands, and with which
    it draws (hits or doubles) a card, whose busting part is ``-bust_value``. A double draws
    one card and stands on it. This is the adjoint of ``fixed_values``: the sum of ``stand *
    v_stand + bust * bust_value`` is the sum of ``first * first-hand value``, for any stand
    values ``v_stand``. Level by level, fewest cards first: a hand is held with its own first
    weight plus its parents' hitting weights times the odds of drawing it.
    """
    stand = np.empty(first.shape)
    bust = np.empty(first.shape)
    _tree_pass.outcome(level_bounds(tree), tree.parent, arr.p_live, tree.ncards, tree.total,
                       np.ascontiguousarray(hit_dec), np.ascontiguousarray(dbl_dec),
                       np.ascontiguousarray(first, dtype=np.float64), stand, bust)
    return stand, bust
