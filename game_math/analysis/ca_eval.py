"""Expected-value passes over the hand trees: optimal (composition-dependent) and fixed strategies.

All passes walk a tree from its longest hands to its shortest (a hit adds one card, so every child
is done before its parent) and work on whole levels at once: arrays are (starts, hands[, k]).
The value of drawing a card is ``sum_v p_live[v] * value[child(v)] + bust_value``: the busting
cards do not depend on the strategy, so their part is computed once per tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from game_math.analysis.ca_core import (
    BoolArray,
    FloatArray,
    IntArray,
    Tree,
    TreeArrays,
    double_allowed,
)
from game_math.rules import Rules


@dataclass
class TreeValues:
    """Values of one tree against every start (joint with no dealer BJ where peeked)."""

    multi: FloatArray  # (U, Hm) hit/stand value (any hand of 3+ cards, or when nothing else)
    hit: FloatArray  # (U, Hm) value of hitting, then playing on
    double: FloatArray  # (U, Hm) value of doubling (two-card hands; -inf where not allowed)
    first: FloatArray  # (U, Hm) best of stand / hit / double (no split) for two-card hands


def double_mask(rules: Rules, tree: Tree, after_split: bool) -> BoolArray:
    return np.array([
        n == 2 and double_allowed(rules, int(t), bool(s), after_split)
        for t, s, n in zip(tree.total, tree.soft, tree.ncards, strict=True)
    ], dtype=np.bool_)


def draw_value(tree: Tree, arr: TreeArrays, sel: IntArray, values: FloatArray) -> FloatArray:
    """(U, len(sel)): value of drawing one card to each selected hand, then ``values``."""
    kids = np.maximum(tree.child[sel], 0)
    out: FloatArray = np.einsum("unv,unv->un", arr.p_live[:, sel], values[:, kids])
    return out + arr.bust_value[:, sel]


def double_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> FloatArray:
    out = np.full(arr.stand.shape, -np.inf)
    sel = np.flatnonzero(double_mask(rules, tree, after_split))
    if len(sel):
        out[:, sel] = 2.0 * draw_value(tree, arr, sel, arr.stand)
    return out


def optimal_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> TreeValues:
    """Composition-dependent optimum: each hand takes the best action for its exact cards."""
    multi = np.zeros(arr.stand.shape)
    hit = np.zeros(arr.stand.shape)
    for sel in tree.levels:
        h = draw_value(tree, arr, sel, multi)
        hit[:, sel] = h
        s = arr.stand[:, sel]
        multi[:, sel] = np.where(tree.total[sel] >= 21, s, np.maximum(s, h))
    dbl = double_values(rules, tree, arr, after_split)
    first = np.where(tree.total >= 21, arr.stand, np.maximum(multi, dbl))
    return TreeValues(multi, hit, dbl, first)


def fixed_values(tree: Tree, p_live: FloatArray, stand: FloatArray, bust: FloatArray, *,
                 hit_dec: BoolArray, dbl_dec: BoolArray, dbl_factor: float,
                 ) -> tuple[FloatArray, FloatArray]:
    """Values of a fixed strategy, with a trailing axis k (1 for money, 4 for outcome classes).

    ``stand`` (U, Hm, k); ``bust`` (U, Hm, k) the part of a draw that busts; decisions (U, Hm).
    Returns (multi, first): ``first`` applies the double decisions to two-card hands.
    """
    multi = np.zeros(stand.shape)
    for sel in tree.levels:
        kids = np.maximum(tree.child[sel], 0)
        h = np.einsum("unv,unvk->unk", p_live[:, sel], multi[:, kids]) + bust[:, sel]
        go = hit_dec[:, sel] & (tree.total[sel] < 21)[None, :]
        multi[:, sel] = np.where(go[..., None], h, stand[:, sel])
    first = multi.copy()
    sel = np.flatnonzero(dbl_dec.any(axis=0))
    if len(sel):
        kids = np.maximum(tree.child[sel], 0)
        d = np.einsum("unv,unvk->unk", p_live[:, sel], stand[:, kids]) + bust[:, sel]
        first[:, sel] = np.where(dbl_dec[:, sel, None], dbl_factor * d, multi[:, sel])
    return multi, first
