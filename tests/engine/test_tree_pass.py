"""The passes over the hand trees in C (``game_math/analysis/_tree_pass.c``) against the numpy
code they replaced.

The analysis's figures are pinned to the last bit (tests/test_pinned_json.py, docs/par), and
their last bits are set by the order of every product and sum of these passes. The numpy code
below is what the analyser ran until the C passes replaced it, kept verbatim as the reference:
the C passes must give the same doubles, bit for bit (signed zeros included), for every tree,
start, rule set and first-draw mode, including hands no shoe can hold (whose numbers callers
weight by zero).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from math import factorial, prod

import numpy as np
import numpy.typing as npt
import pytest

from game_math.analysis import _tree_pass, ca_game
from game_math.analysis.ca_core import (
    BUSTED,
    LOSE,
    NOUT,
    PUSH,
    WIN,
    Starts,
    Tree,
    TreeArrays,
    blackjack_card,
    exposed_starts,
    hand_weights,
    no_blackjack,
    up_card_starts,
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
from game_math.analysis.ca_game import GameModel
from game_math.analysis.ca_hands import NV, Comp, HandSpace, shoe_counts
from game_math.analysis.main_game import game_starts
from game_math.games import game_rules
from game_math.rules import GAME_IDS, DealerCards, Rules, TieRule

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Sel = slice | IntArray


# ----- the reference: the numpy code as the analyser ran it before the C passes ----------------


def ref_tree_arrays(tree: Tree, *, shoe: Comp, starts: Starts, dealer: FloatArray,
                    space: HandSpace, mode: FirstDraw, out: FloatArray | None = None,
                    ) -> TreeArrays:
    """``ca_core.tree_arrays`` in numpy."""
    n_u = np.array(shoe, dtype=np.float64)[None, :] - np.array(starts.comps, dtype=np.float64)
    removed = space.counts[tree.mem] + np.array(tree.extra)[None, :]  # (Hm, 10)
    left = n_u.sum(axis=1)[None, :] - removed.sum(axis=1)[:, None]  # (Hm, U)
    inv = 1.0 / np.maximum(left, 1.0)
    shape = (len(tree.mem), NV, len(starts.comps))
    p_live = np.empty(shape) if out is None else out[:prod(shape)].reshape(shape)
    busts = tree.child < 0  # (Hm, 10)
    np.subtract(n_u.T[None, :, :], removed.astype(np.float64)[:, :, None], out=p_live)
    if len({sum(c) for c in starts.comps}) == 1:  # one unseen count per hand, for every start
        p_live *= (~busts * inv[:, :1])[:, :, None]
    else:
        p_live *= inv[:, None, :]
        p_live[busts] = 0.0
    hard = tree.total - np.where(tree.soft, 10, 0)
    first_bust = np.clip(21 - hard, 0, NV)
    shoe_suffix = np.concatenate([np.cumsum(n_u[:, ::-1], axis=1)[:, ::-1],
                                  np.zeros((n_u.shape[0], 1))], axis=1)  # (U, 11)
    hand_suffix = np.concatenate([np.cumsum(removed[:, ::-1], axis=1)[:, ::-1],
                                  np.zeros((removed.shape[0], 1), dtype=np.int64)], axis=1)
    count = shoe_suffix[:, first_bust].T - hand_suffix[np.arange(len(first_bust)), first_bust,
                                                       None]
    bust_value: FloatArray = -np.maximum(count, 0.0) * inv
    if mode is FirstDraw.PEEKED:
        cards = np.array([blackjack_card(comp) for comp in starts.comps])
        peek = np.flatnonzero(cards >= 0)
        if len(peek):
            bust_value[:, peek] = _ref_peeked_bust(n_u[peek], removed, busts, left[:, peek].T,
                                                   cards[peek]).T
    stand = dealer[tree.stand_at]
    ones = np.flatnonzero(tree.ncards == 1)
    p_one = np.zeros((0, NV))
    if len(ones):
        one = ones[0]
        p_one = np.maximum(n_u - removed[one][None, :], 0.0) * inv[one][:, None]
    return TreeArrays(p_one, p_live, bust_value, stand)


def _ref_peeked_bust(n: FloatArray, removed: IntArray, busts: BoolArray, left: FloatArray,
                     b: IntArray) -> FloatArray:
    k = np.arange(len(b))
    avail = np.maximum(n[:, None, :] - removed[None, :, :], 0.0)  # (K, Hm, 10)
    bj = avail[k, :, b][:, :, None] - (np.arange(NV)[None, :] == b[:, None])[:, None, :]
    no_bj = 1.0 - np.maximum(bj, 0.0) / np.maximum(left - 1.0, 1.0)[:, :, None]
    p_bust = avail * busts[None, :, :] * (1.0 / np.maximum(left, 1.0))[:, :, None]
    out: FloatArray = -(p_bust * no_bj).sum(axis=2)
    return out


def ref_draw_value(tree: Tree, arr: TreeArrays, sel: Sel, values: FloatArray) -> FloatArray:
    """``ca_eval.draw_value`` in numpy."""
    kids = np.maximum(tree.child[sel], 0)
    out: FloatArray = np.einsum("nvu,nvu->nu", arr.p_live[sel], values[kids])
    out += arr.bust_value[sel]
    return out


def ref_optimal_values(rules: Rules, tree: Tree, arr: TreeArrays,
                       after_split: bool) -> TreeValues:
    """``ca_eval.optimal_values`` in numpy (with ``double_values``)."""
    multi = np.zeros(arr.stand.shape)
    hit = np.zeros(arr.stand.shape)
    for sel in tree.levels:
        h = ref_draw_value(tree, arr, sel, multi)
        hit[sel] = h
        s = arr.stand[sel]
        multi[sel] = np.where((tree.total[sel] >= 21)[:, None], s, np.maximum(s, h))
    dbl = np.full(arr.stand.shape, -np.inf)
    dsel = np.flatnonzero(double_mask(rules, tree, after_split))
    if len(dsel):
        dbl[dsel] = 2.0 * ref_draw_value(tree, arr, dsel, arr.stand)
    first = np.where((tree.total >= 21)[:, None], arr.stand, np.maximum(multi, dbl))
    return TreeValues(multi, hit, dbl, first)


def ref_fixed_values(tree: Tree, arr: TreeArrays, *, hit_dec: BoolArray, dbl_dec: BoolArray,
                     doubles: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
    """``ca_eval.fixed_values`` in numpy."""
    multi = np.zeros(arr.stand.shape)
    for sel in tree.levels:
        h = ref_draw_value(tree, arr, sel, multi)
        go = hit_dec[sel] & (tree.total[sel] < 21)[:, None]
        multi[sel] = np.where(go, h, arr.stand[sel])
    first = multi.copy()
    dsel = np.flatnonzero(dbl_dec.any(axis=1))
    if len(dsel):
        d = 2.0 * ref_draw_value(tree, arr, dsel, arr.stand) if doubles is None \
            else doubles[dsel]
        first[dsel] = np.where(dbl_dec[dsel], d, multi[dsel])
    return multi, first


def ref_outcome_weights(tree: Tree, arr: TreeArrays, first: FloatArray, *, hit_dec: BoolArray,
                        dbl_dec: BoolArray) -> tuple[FloatArray, FloatArray]:
    """``ca_eval.outcome_weights`` in numpy."""
    m = len(tree.mem)
    held = first * ~dbl_dec
    hits = np.zeros((m + 1, first.shape[1]))
    doubled = np.zeros((m + 1, first.shape[1]))
    doubled[:m] = first * dbl_dec
    stand = np.zeros(first.shape)
    bust = doubled[:m].copy()
    parent = np.where(tree.parent >= 0, tree.parent, m)
    for sel in reversed(tree.levels):
        par = parent[sel]
        odds = arr.p_live[np.minimum(par, m - 1), np.arange(par.shape[1])]  # (n, 10, U)
        held[sel] += np.einsum("nvu,nvu->nu", hits[par], odds)
        if tree.ncards[sel.start] == 3:
            stand[sel] += np.einsum("nvu,nvu->nu", doubled[par], odds)
        go = hit_dec[sel] & (tree.total[sel] < 21)[:, None]
        hits[sel] = held[sel] * go
        bust[sel] += hits[sel]
        stand[sel] += held[sel] - hits[sel]
    return stand, bust


# ----- the comparison ----------------------------------------------------------------------------


def same_bits(a: FloatArray, b: FloatArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and \
        np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def variant(game: str, decks: int | None = None, h17: bool | None = None,
            cards: DealerCards | None = None, peek: bool | None = None) -> Rules:
    base = game_rules(game)
    dealer = base.dealer
    if h17 is not None:
        dealer = replace(dealer, hits_soft_17=h17)
    if cards is not None:
        dealer = replace(dealer, cards=cards)
    if peek is not None:
        dealer = replace(dealer, peek=peek)
    return replace(base, decks=base.decks if decks is None else decks, dealer=dealer)


#: each game as published, and rule sets reaching every first-draw mode, deck count and
#: start shape (one up card, or two exposed cards: a different unseen count per start)
RULES = {
    **{game: game_rules(game) for game in GAME_IDS},
    "snap 1 deck H17": variant("snap", decks=1, h17=True),
    "snap 6 decks no peek": variant("snap", decks=6, peek=False),
    "snap 8 decks no hole card": variant("snap", decks=8, cards=DealerCards.NO_HOLE_CARD),
    "double-exposure 1 deck": variant("double-exposure", decks=1),
}


def model_of(name: str) -> GameModel:
    rules = RULES[name]
    shoe = shoe_counts(rules.decks)
    return GameModel(rules, shoe, game_starts(rules, shoe))


def trees(model: GameModel) -> Iterator[tuple[Tree, bool]]:
    yield model.base, False
    for plan in model.splits.values():
        for tree in plan.trees:
            yield tree, True


def random_play(model: GameModel, tree: Tree, after_split: bool,
                seed: int) -> tuple[BoolArray, BoolArray, FloatArray]:
    rng = np.random.default_rng(seed)
    shape = (len(tree.mem), len(model.starts.comps))
    hit = rng.random(shape) < 0.6
    dbl = (rng.random(shape) < 0.3) & double_mask(model.rules, tree, after_split)[:, None]
    # first-hand weights of both signs, and some exact zeros (their signs must survive)
    first = (rng.random(shape) - 0.2) * (tree.ncards <= 2)[:, None]
    return hit, dbl, first


@pytest.mark.parametrize("name", list(RULES))
def test_the_c_passes_give_the_numpy_passes_bit_for_bit(name: str) -> None:
    model = model_of(name)
    for i, (tree, after_split) in enumerate(trees(model)):
        want = ref_tree_arrays(tree, shoe=model.shoe, starts=model.starts, dealer=model.dealer,
                               space=model.space, mode=model.mode)
        arr = model.tree_arrays(tree)
        for field in ("p_one", "p_live", "bust_value", "stand"):
            assert same_bits(getattr(arr, field), getattr(want, field)), (name, i, field)
        values = optimal_values(model.rules, tree, arr, after_split)
        ref = ref_optimal_values(model.rules, tree, want, after_split)
        for field in ("multi", "hit", "double", "first"):
            assert same_bits(getattr(values, field), getattr(ref, field)), (name, i, field)
        hit, dbl, first = random_play(model, tree, after_split, seed=i)
        for doubles in (None, values.double):
            got = fixed_values(tree, arr, hit_dec=hit, dbl_dec=dbl, doubles=doubles)
            exp = ref_fixed_values(tree, want, hit_dec=hit, dbl_dec=dbl, doubles=doubles)
            assert all(same_bits(g, e) for g, e in zip(got, exp, strict=True)), (name, i)
        got = outcome_weights(tree, arr, first, hit_dec=hit, dbl_dec=dbl)
        exp = ref_outcome_weights(tree, want, first, hit_dec=hit, dbl_dec=dbl)
        assert all(same_bits(g, e) for g, e in zip(got, exp, strict=True)), (name, i)
        sel = np.arange(len(tree.mem))[::3]
        for values_in in (arr.stand, values.multi, values.multi.T.copy().T):
            assert same_bits(draw_value(tree, arr, sel, values_in),
                             ref_draw_value(tree, want, sel, values_in))
        assert same_bits(draw_value(tree, arr, slice(None), arr.stand),
                         ref_draw_value(tree, want, slice(None), arr.stand))


def ref_outcome_classes(model: GameModel, tree: Tree, arr: TreeArrays, stand: FloatArray,
                        bust: FloatArray) -> FloatArray:
    """``GameModel._outcome_classes`` as numpy computed it before ``_tree_pass.classes``."""
    mass = np.ones(stand.shape)
    if model.mode is FirstDraw.PEEKED:
        removed = model.space.counts[tree.mem] + np.array(tree.extra)[None, :]
        mass = no_blackjack(model.shoe, model.starts, removed, model.mode).T
    tie = np.zeros(stand.shape)
    if model.rules.payouts.ties is TieRule.PUSH:
        made = np.flatnonzero(tree.total >= 17)
        tie[made] = model.dealer[tree.tie_at[made]]
    held = (stand * mass).sum(axis=0)
    net = (stand * arr.stand).sum(axis=0)
    tied = (stand * tie).sum(axis=0)
    out = np.zeros((stand.shape[1], NOUT))
    out[:, WIN] = 0.5 * (held + net - tied)
    out[:, PUSH] = tied
    out[:, LOSE] = 0.5 * (held - net - tied)
    out[:, BUSTED] = -(bust * arr.bust_value).sum(axis=0)
    return out


@pytest.mark.parametrize("name", list(RULES))
def test_the_outcome_classes_are_numpys_bit_for_bit(name: str) -> None:
    """The sums behind the outcome frequencies (``_tree_pass.classes``) against numpy's, on the
    trees whose ties the analysis counts (the base tree and each pair's first split tree), with
    weights of both signs and exact zeros, as the fixed strategy's adjoint pass leaves them."""
    model = model_of(name)
    for i, tree in enumerate([model.base, *(p.trees[0] for p in model.splits.values())]):
        arr = model.tree_arrays(tree)
        hit, dbl, first = random_play(model, tree, tree is not model.base, seed=50 + i)
        stand, bust = outcome_weights(tree, arr, first, hit_dec=hit, dbl_dec=dbl)
        got = model._outcome_classes(tree, arr, stand, bust)
        assert same_bits(got, ref_outcome_classes(model, tree, arr, stand, bust)), (name, i)


def ref_hand_weights(shoe: Comp, starts: Starts, counts: IntArray) -> FloatArray:
    """``ca_core.hand_weights`` as numpy computed it before ``_tree_pass.weights``."""
    n_u = np.array(shoe, dtype=np.int64)[None, :] - np.array(starts.comps, dtype=np.int64)
    kmax = int(counts.max()) + 1
    ff = np.ones((n_u.shape[0], NV, kmax))
    for k in range(1, kmax):
        ff[:, :, k] = ff[:, :, k - 1] * np.maximum(n_u - (k - 1), 0)
    num = np.ones((n_u.shape[0], counts.shape[0]))
    for v in range(NV):
        num *= ff[:, v, counts[:, v]]
    ncards = counts.sum(axis=1)
    fact = np.array([float(factorial(k)) for k in range(int(ncards.max()) + 1)])
    multinom = fact[ncards]
    for v in range(NV):
        multinom /= fact[counts[:, v]]
    total = n_u.sum(axis=1)
    den = np.ones((n_u.shape[0], counts.shape[0]))
    for j in range(int(ncards.max())):
        den *= np.where(ncards[None, :] > j, (total[:, None] - j), 1)
    out: FloatArray = num * multinom[None, :] / den
    return out


@pytest.mark.parametrize("name", list(RULES))
def test_the_first_hand_weights_are_numpys_bit_for_bit(name: str) -> None:
    """The odds of each hand as the first cards (``_tree_pass.weights``) against numpy's, for
    every hand of the space (one card to the longest, more of a value than the shoe holds
    once the start is out included) against every start."""
    model = model_of(name)
    counts = model.space.counts
    assert same_bits(hand_weights(model.shoe, model.starts, counts),
                     ref_hand_weights(model.shoe, model.starts, counts))
    assert same_bits(model.base_weights(),
                     ref_hand_weights(model.shoe, model.starts, counts[model.base.mem])
                     * model.starts.prob[:, None])


@pytest.mark.parametrize("name", ["snap", "double-exposure"])
def test_every_figure_of_the_analysis_is_the_numpy_passes(name: str) -> None:
    """The whole evaluation (CD and basic strategy, splits, outcome frequencies) with the C
    passes against the same with the numpy passes swapped back in."""
    model = model_of(name)
    weights = model.base_weights()
    seed = weights * 0.5
    got = model.evaluate(weights, outcome_seed=seed)
    with pytest.MonkeyPatch.context() as mp:
        for fn, ref in (("optimal_values", ref_optimal_values), ("fixed_values",
                        ref_fixed_values), ("outcome_weights", ref_outcome_weights),
                        ("draw_value", ref_draw_value), ("tree_arrays", ref_tree_arrays)):
            mp.setattr(ca_game, fn, ref)
        want = model_of(name).evaluate(weights, outcome_seed=seed)
    for field in ("multi", "hit", "double", "first"):
        assert same_bits(getattr(got.cd, field), getattr(want.cd, field))
    for a, b in ((got.basic_multi, want.basic_multi), (got.basic_first, want.basic_first),
                 (got.outcome_play, want.outcome_play)):
        assert a is not None and b is not None and same_bits(a, b)
    assert got.tables is not None and want.tables is not None
    for table in ("hit", "double", "split"):
        assert (getattr(got.tables, table) == getattr(want.tables, table)).all()
    for pair in model.splits:
        assert same_bits(got.split_cd[pair], want.split_cd[pair])
        assert same_bits(got.split_basic[pair], want.split_basic[pair])


def test_arrays_that_do_not_fit_are_refused() -> None:
    """A wrong index or size is an error, never a read outside an array."""
    model = model_of("snap")
    tree, arr = model.base, model.base_arr
    bounds = np.array([[s.start, s.stop] for s in tree.levels], dtype=np.int64)
    multi, hit = np.empty(arr.stand.shape), np.empty(arr.stand.shape)

    def call(**change: object) -> None:
        args: dict[str, object] = {
            "bounds": bounds, "child": tree.child, "p_live": arr.p_live,
            "bust_value": arr.bust_value, "stand": arr.stand, "total": tree.total,
            "multi": multi, "hit": hit, **change}
        _tree_pass.optimal(*args.values())  # type: ignore[arg-type]

    call()  # as the analysis calls it
    bad_child = tree.child.copy()
    bad_child[5, 3] = len(tree.mem)
    bad_bounds = bounds.copy()
    bad_bounds[0, 1] = len(tree.mem) + 1
    for change in ({"child": bad_child}, {"bounds": bad_bounds}, {"hit": hit[:-1]},
                   {"p_live": arr.p_live[:-1]}, {"bounds": bounds.ravel()[:-1]}):
        with pytest.raises(ValueError, match="optimal:"):
            call(**change)
    with pytest.raises(TypeError, match="total must be a contiguous array of int64"):
        call(total=tree.total.astype(np.float64))
    with pytest.raises(ValueError, match="not C-contiguous"):
        call(multi=multi[:, ::2])
    with pytest.raises(TypeError, match="hit must be a contiguous writable array of float64"):
        call(hit=hit.astype(np.float32))
    with pytest.raises(ValueError, match="draw:"):
        _tree_pass.draw(np.array([len(tree.mem)]), tree.child, arr.p_live, arr.bust_value,
                        arr.stand, np.empty((1, arr.stand.shape[1])))


def test_starts_of_different_sizes_give_the_numpy_odds() -> None:
    """The draw odds' second branch, where the starts differ in their unseen counts (one start
    of one card, one of two), which no game has but the arrays allow."""
    shoe = shoe_counts(2)
    assert len({sum(c) for c in exposed_starts(shoe).comps}) == 1
    starts = up_card_starts(shoe)
    mixed = Starts(starts.comps[:1] + exposed_starts(shoe).comps[:1],
                   np.array([0.5, 0.5]), np.arange(2, dtype=np.int64), ("A", "B"))
    rules = variant("snap")
    model = GameModel(rules, shoe, mixed, pairs=())
    want = ref_tree_arrays(model.base, shoe=shoe, starts=mixed, dealer=model.dealer,
                           space=model.space, mode=model.mode)
    arr = model.base_arr
    assert same_bits(arr.p_live, want.p_live)
    assert same_bits(arr.bust_value, want.bust_value)
    assert prod(arr.p_live.shape) > 0
