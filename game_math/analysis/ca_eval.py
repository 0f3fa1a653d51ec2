"""Expected-value passes over the hand trees: optimal (composition-dependent) and fixed strategies.

All passes walk a tree from its longest hands to its shortest (a hit adds one card, so every child
is done before its parent) and work on whole levels at once: arrays are (starts, hands[, k]).
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


def _child_values(tree: Tree, arr: TreeArrays, sel: IntArray, values: FloatArray) -> FloatArray:
    ch = tree.child[sel]
    return np.where(ch[None] >= 0, values[:, np.maximum(ch, 0)], arr.bust[:, sel])


def double_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> FloatArray:
    out = np.full(arr.stand.shape, -np.inf)
    sel = np.flatnonzero(double_mask(rules, tree, after_split))
    if len(sel):
        cv = _child_values(tree, arr, sel, arr.stand)
        out[:, sel] = 2.0 * (arr.p[:, sel] * cv).sum(axis=-1)
    return out


def optimal_values(rules: Rules, tree: Tree, arr: TreeArrays, after_split: bool) -> TreeValues:
    """Composition-dependent optimum: each hand takes the best action for its exact cards."""
    multi = np.zeros(arr.stand.shape)
    hit = np.zeros(arr.stand.shape)
    for sel in tree.levels:
        h = (arr.p[:, sel] * _child_values(tree, arr, sel, multi)).sum(axis=-1)
        hit[:, sel] = h
        s = arr.stand[:, sel]
        multi[:, sel] = np.where(tree.total[sel] >= 21, s, np.maximum(s, h))
    dbl = double_values(rules, tree, arr, after_split)
    first = np.where(tree.total >= 21, arr.stand, np.maximum(multi, dbl))
    return TreeValues(multi, hit, dbl, first)


def fixed_values(tree: Tree, p: FloatArray, stand: FloatArray, bust: FloatArray,
                 hit_dec: BoolArray, dbl_dec: BoolArray, dbl_factor: float,
                 ) -> tuple[FloatArray, FloatArray]:
    """Values of a fixed strategy, with a trailing axis k (1 for money, 4 for outcome classes).

    ``stand`` (U, Hm, k), ``bust`` (U, Hm, 10, k), decisions (U, Hm). Returns (multi, first):
    ``first`` applies the double decisions to two-card hands.
    """
    multi = np.zeros(stand.shape)
    for sel in tree.levels:
        ch = tree.child[sel]
        cv = np.where((ch >= 0)[None, :, :, None], multi[:, np.maximum(ch, 0)], bust[:, sel])
        h = (p[:, sel, :, None] * cv).sum(axis=2)
        go = hit_dec[:, sel] & (tree.total[sel] < 21)[None, :]
        multi[:, sel] = np.where(go[..., None], h, stand[:, sel])
    first = multi.copy()
    sel = np.flatnonzero(dbl_dec.any(axis=0))
    if len(sel):
        ch = tree.child[sel]
        cv = np.where((ch >= 0)[None, :, :, None], stand[:, np.maximum(ch, 0)], bust[:, sel])
        d = dbl_factor * (p[:, sel, :, None] * cv).sum(axis=2)
        first[:, sel] = np.where(dbl_dec[:, sel, None], d, multi[:, sel])
    return multi, first
