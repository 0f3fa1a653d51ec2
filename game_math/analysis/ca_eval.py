"""Expected-value passes over the hand trees: optimal (composition-dependent) and fixed strategies.

All passes walk a tree from its longest hands to its shortest (a hit adds one card, so every child
is done before its parent) and work on whole levels at once. Arrays are hand-major,
(hands, starts): a level is a slice and its children's values are whole gathered rows.
The value of drawing a card is ``sum_v p_live[v] * value[child(v)] + bust_value``: the busting
cards do not depend on the strategy, so their part is computed once per tree.

``outcome_weights`` runs a fixed strategy the other way (the adjoint of ``fixed_values``): from
the probability of holding each first hand it finds how often every hand stands and every draw
busts, which is all the outcome frequencies need.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

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


def draw_value(tree: Tree, arr: TreeArrays, sel: Sel, values: FloatArray) -> FloatArray:
    """(len(sel), U): value of drawing one card to each selected hand, then ``values``."""
    kids = np.maximum(tree.child[sel], 0)
    out: FloatArray = np.einsum("nvu,nvu->nu", arr.p_live[sel], values[kids])
    out += arr.bust_value[sel]
    return out


def double_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> FloatArray:
    """Value of doubling each hand of ``tree`` per start; -inf where the rules forbid it."""
    out = np.full(arr.stand.shape, -np.inf)
    sel = np.flatnonzero(double_mask(rules, tree, after_split))
    if len(sel):
        out[sel] = 2.0 * draw_value(tree, arr, sel, arr.stand)
    return out


def optimal_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> TreeValues:
    """Composition-dependent optimum: each hand takes the best action for its exact cards."""
    multi = np.zeros(arr.stand.shape)
    hit = np.zeros(arr.stand.shape)
    for sel in tree.levels:
        h = draw_value(tree, arr, sel, multi)
        hit[sel] = h
        s = arr.stand[sel]
        multi[sel] = np.where((tree.total[sel] >= 21)[:, None], s, np.maximum(s, h))
    dbl = double_values(rules, tree, arr, after_split)
    first = np.where((tree.total >= 21)[:, None], arr.stand, np.maximum(multi, dbl))
    return TreeValues(multi, hit, dbl, first)


def fixed_values(tree: Tree, arr: TreeArrays, *, hit_dec: BoolArray, dbl_dec: BoolArray,
                 doubles: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
    """Values of a fixed strategy; decisions (Hm, U). Returns (multi, first): ``first`` applies
    the double decisions to two-card hands. ``doubles``: the values of doubling where allowed,
    if already known (``optimal_values``): they do not depend on the strategy."""
    multi = np.zeros(arr.stand.shape)
    for sel in tree.levels:
        h = draw_value(tree, arr, sel, multi)
        go = hit_dec[sel] & (tree.total[sel] < 21)[:, None]
        multi[sel] = np.where(go, h, arr.stand[sel])
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
    values ``v_stand``.
    """
    m = len(tree.mem)
    held = first * ~dbl_dec  # the weight of reaching each hand and playing on
    # drawing weights with a zero row at m, where a hand's missing parents point
    hits = np.zeros((m + 1, first.shape[1]))
    doubled = np.zeros((m + 1, first.shape[1]))
    doubled[:m] = first * dbl_dec
    stand = np.zeros(first.shape)
    bust = doubled[:m].copy()
    parent = np.where(tree.parent >= 0, tree.parent, m)
    for sel in reversed(tree.levels):  # fewest cards first: parents before their children
        par = parent[sel]
        odds = arr.p_live[np.minimum(par, m - 1), np.arange(par.shape[1])]  # (n, 10, U)
        held[sel] += np.einsum("nvu,nvu->nu", hits[par], odds)
        if tree.ncards[sel.start] == 3:  # a double's one card
            stand[sel] += np.einsum("nvu,nvu->nu", doubled[par], odds)
        go = hit_dec[sel] & (tree.total[sel] < 21)[:, None]
        hits[sel] = held[sel] * go
        bust[sel] += hits[sel]
        stand[sel] += held[sel] - hits[sel]
    return stand, bust
