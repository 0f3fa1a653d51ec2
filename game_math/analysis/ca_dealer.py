"""The dealer's final-total probabilities, exact over the remaining shoe, for many shoes at once.

The dealer's play is fixed, so what it ends on depends only on the cards it holds and the cards
left in the shoe. Write ``F(D, r)`` for the outcome distribution of a dealer holding the cards
``D`` when the cards ``r`` (everything else seen: the player's hand, split cards) are also out of a
shoe of counts ``n``. With ``k = |D|`` cards held and ``N`` cards in the full shoe,

    F(D, r) = sum_v (n[v] - r[v] - D[v]) / (N - |r| - k) * (F(D + v, r), or the outcome D + v
              stands on)

This is the standard recursion over the multisets of cards drawn. It runs *backward*, from the
largest dealer hands to the smallest, over the distinct non-standing dealer hands reachable from
the starts (the up card, or both cards in double exposure): every start that can reach a hand
shares its value, so one pass answers all starts. Each ``F(D, r)`` is a vector over a block of
removal rows ``r`` (one per player-hand composition). The plan (which hands, which draws, which
sums of counts) is built here with array operations, a level at a time (the plan the
dictionary-based build before it made: tests/engine/test_dealer_plan.py keeps that build as the
reference); the arithmetic over the rows runs in C (``_dealer_pass.c``), which makes the very
operations, in the very order, of the numpy pass it replaced (kept as the reference in
tests/engine/test_dealer_pass.py): the figures are the same to the last bit, about ten times
sooner. The weighted sums the analysis keeps of each block run in C too, in numpy einsum's order.

The first draw after a single up card differs by how a dealer blackjack is treated
(``FirstDraw``); it is the last level of the pass.

Outcome columns: dealer 17, 18, 19, 20, 21 (not blackjack), bust, blackjack.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import cache

import numpy as np
import numpy.typing as npt

from game_math.analysis import _dealer_pass
from game_math.analysis.ca_hands import ACE, NV, TEN, Comp, best_total

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

BUST = 5
BLACKJACK = 6
NCAT = 7
#: outcome columns carried through the pass: dealer 17 .. 21. Busting is what is left of the
#: probability mass (1, or P(no blackjack) below a peeked single card), found at the end; no
#: blackjack can come from a later draw.
NDRAWN = 5


class FirstDraw(Enum):
    """How the dealer's first draw after a single up card treats a blackjack."""

    PEEKED = "peeked"  # hole card with peek: blackjack already excluded; probabilities are joint
    # with "no dealer blackjack" (they sum to P(no blackjack))
    COUNTED = "counted"  # no hole card (or no peek): blackjack is an outcome (last column)
    NONE = "none"  # the start has two cards: no blackjack can come from a draw


def _stands_on(total: int, soft: bool, hits_soft_17: bool) -> bool:
    return total > 17 or (total == 17 and not (soft and hits_soft_17))


def _category_of(total: int) -> int:
    return BUST if total > 21 else total - 17


def _stands(comp: Comp, hits_soft_17: bool) -> bool:
    return _stands_on(*best_total(comp), hits_soft_17)


def _category(comp: Comp) -> int:
    return _category_of(best_total(comp)[0])




@dataclass(frozen=True)
class _Level:
    """The dealer hands of one size, ordered by how many draws keep them going (most first).

    Move ``j`` of every hand with more than ``j`` live draws forms the ``j``-th run of the
    ``child``/``factor`` arrays, and those hands are a prefix of the level (``runs[j]``
    long): each run adds into a slice, with no scatter.
    """

    cards: int  # |D|
    peeked: IntArray  # (size,) per hand, the excluded (peeked) blackjack card's value, or -1
    ncat: int  # outcome columns of this level (the single-card starts add blackjack)
    child: IntArray  # (P,) index in the next larger level of D + v, per live draw
    factor: IntArray  # (P,) the solver's ``terms`` row of n[v] - r[v] - D[v], per live draw
    runs: tuple[int, ...]
    # (size * ncat,): per hand and outcome, the row of the solver's ``terms`` holding the sum
    # of (n[v] - r[v] - D[v]) over the draws v that stand on that outcome
    terminal: IntArray
    size: int
    out_start: IntArray  # the starts read off this level ..
    out_index: IntArray  # .. at these indices


@dataclass(frozen=True)
class DealerSolver:
    """The backward pass's plan for a tuple of starts, one rule set and one first-draw mode."""

    starts: tuple[Comp, ...]
    levels: tuple[_Level, ...]  # largest hands first
    constant: tuple[tuple[int, int], ...]  # (start, outcome) for starts that stand at once
    # the standing draws' sums, each a row of [n - r (10 rows); its suffix sums over values
    # k..T (10 rows); 0] less a constant (the cards of those values the dealer holds)
    term_source: IntArray
    term_held: FloatArray
    kernel: KernelPlan  # the levels as the C pass reads them

    @property
    def most_cells(self) -> int:
        """The largest level's hands x outcome columns."""
        return max((lv.size * lv.ncat for lv in self.levels), default=0)

    def work_size(self, rows: int) -> int:
        """The C pass's scratch doubles for ``rows`` rows (as ``_dealer_pass.c`` counts them):
        the source table, the terms plain and scaled, three row vectors and two levels, each
        ``rows`` rounded up to a multiple of 2 (the kernel's vector width)."""
        padded = -(-rows // 2) * 2
        return (ZERO_ROW + 1 + 2 * len(self.term_source) + 3 + 2 * self.most_cells) * padded


@dataclass(frozen=True)
class KernelPlan:
    """The levels flattened into arrays for ``_dealer_pass.block``: one row of ``levels`` per
    level (``LEVEL_COLUMNS``), each holding offsets into the concatenated per-level arrays."""

    levels: IntArray  # (L, 10)
    runs: IntArray
    child: IntArray
    factor: IntArray
    terminal: IntArray
    peeked: IntArray
    out_start: IntArray
    out_index: IntArray


#: the columns of ``KernelPlan.levels`` (the C file's ``L_*``)
LEVEL_COLUMNS = ("cards", "size", "ncat", "nruns", "run0", "move0", "term0", "hand0", "out0",
                 "nout")


def _flatten(levels: Sequence[_Level]) -> KernelPlan:
    table = []
    offsets = [0] * 5  # runs, moves, terminal cells, hands, outputs
    for lv in levels:
        table.append([lv.cards, lv.size, lv.ncat, len(lv.runs), offsets[0], offsets[1],
                      offsets[2], offsets[3], offsets[4], len(lv.out_start)])
        for k, n in enumerate((len(lv.runs), len(lv.child), len(lv.terminal), lv.size,
                               len(lv.out_start))):
            offsets[k] += n

    def cat(arrays: list[IntArray]) -> IntArray:
        return np.ascontiguousarray(np.concatenate([np.zeros(0, dtype=np.int64), *arrays]),
                                    dtype=np.int64)

    return KernelPlan(
        levels=np.array(table, dtype=np.int64).reshape(len(levels), len(LEVEL_COLUMNS)),
        runs=cat([np.array(lv.runs, dtype=np.int64) for lv in levels]),
        child=cat([lv.child for lv in levels]), factor=cat([lv.factor for lv in levels]),
        terminal=cat([lv.terminal for lv in levels]), peeked=cat([lv.peeked for lv in levels]),
        out_start=cat([lv.out_start for lv in levels]),
        out_index=cat([lv.out_index for lv in levels]))


_SOLVERS: dict[tuple[tuple[Comp, ...], bool, FirstDraw], DealerSolver] = {}


def dealer_solver(starts: Sequence[Comp], hits_soft_17: bool, first: FirstDraw) -> DealerSolver:
    """The plan for ``starts`` (cached: it depends on the rules and starts only, not the shoe)."""
    key = (tuple(starts), hits_soft_17, first)
    solver = _SOLVERS.get(key)
    if solver is None:
        solver = _SOLVERS[key] = _build(key[0], hits_soft_17, first)
    return solver


#: rows of the per-block source table: n - r by value, suffix sums from value k, zero
SUFFIX = NV
ZERO_ROW = 2 * NV

#: a dealer hand as one integer, five bits per value (no hand holds 32 cards of a value)
_RADIX = np.array([32**v for v in range(NV)], dtype=np.int64)
_VALUES = np.arange(1, NV + 1, dtype=np.int64)
#: a ``terms`` row before numbering: source row * _HELD + the cards held (fewer than 32)
_HELD = 32
_ZERO_TERM = ZERO_ROW * _HELD


def _decode(keys: IntArray) -> IntArray:
    """(n, 10): the value counts of the hands ``keys``."""
    out: IntArray = (keys[:, None] // _RADIX[None, :]) % 32
    return out


def _distinct(keys: IntArray) -> IntArray:
    """The distinct ``keys``, sorted (``np.unique`` without its indices imports ``numpy.ma``
    on first use, which costs a cold analysis more than this whole plan)."""
    keys = np.sort(keys)
    out: IntArray = keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys
    return out


def _tuple_order(counts: IntArray) -> IntArray:
    """The order that sorts the hands ``counts`` as their tuples compare."""
    out: IntArray = np.lexsort(counts.T[::-1])
    return out


@dataclass(frozen=True)
class _Draws:
    """Every value's draw to each of a set of hands, (n, 10) arrays."""

    keys: IntArray  # the key of hand + v
    stands: BoolArray  # whether the dealer stands on hand + v
    category: IntArray  # the outcome column of that total (BUST above 21; meaningless below 17)


def _draws(counts: IntArray, hits_soft_17: bool) -> _Draws:
    """The draws to the hands ``counts`` ((n, 10)), all at once: the totals follow from each
    hand's hard total, an ace counting 11 while the hard total is 11 or less."""
    hard = counts @ _VALUES
    drawn = hard[:, None] + _VALUES[None, :]
    ace = (counts[:, ACE] > 0)[:, None] | (np.arange(NV) == ACE)[None, :]
    soft = ace & (drawn <= 11)
    total = drawn + 10 * soft
    stands = (total > 17) | ((total == 17) & ~(soft & hits_soft_17))
    category = np.where(total > 21, BUST, total - 17)
    return _Draws((counts @ _RADIX)[:, None] + _RADIX[None, :], stands, category)


def _blackjack_cards(counts: IntArray) -> IntArray:
    """Per hand, the value that gives it a blackjack (one-card hands only), or -1."""
    one = counts.sum(axis=1) == 1
    out: IntArray = np.where(one & (counts[:, ACE] == 1), TEN,
                             np.where(one & (counts[:, TEN] == 1), ACE, -1))
    return out


def _reachable(starts: tuple[Comp, ...], hits_soft_17: bool) -> dict[int, IntArray]:
    """The keys of the non-standing dealer hands of two or more cards the starts reach, by size:
    the starts' non-standing first hands (a start of two or more cards itself, a one-card
    start's draws other than its blackjack card), then every non-standing draw to a hand
    reached, a size at a time (each draw adds one card)."""
    firsts: dict[int, list[IntArray]] = {}
    for start in starts:
        if sum(start) >= 2 and not _stands(start, hits_soft_17):
            key = np.array([np.array(start, dtype=np.int64) @ _RADIX])
            firsts.setdefault(sum(start), []).append(key)
    ones = np.array([s for s in starts if sum(s) == 1], dtype=np.int64).reshape(-1, NV)
    if len(ones):
        d = _draws(ones, hits_soft_17)
        live = ~d.stands & (np.arange(NV)[None, :] != _blackjack_cards(ones)[:, None])
        firsts.setdefault(2, []).append(d.keys[live])
    by_size: dict[int, IntArray] = {}
    size = min(firsts, default=0)
    drawn = np.zeros(0, dtype=np.int64)
    while len(drawn) or any(k >= size for k in firsts):
        keys = _distinct(np.concatenate([drawn, *firsts.get(size, [])]))
        if len(keys):
            by_size[size] = keys
            d = _draws(_decode(keys), hits_soft_17)
            drawn = d.keys[~d.stands]
        else:
            drawn = keys
        size += 1
    return by_size


@dataclass(frozen=True)
class _Lookup:
    """A level's positions by hand key."""

    keys: IntArray  # sorted
    position: IntArray

    @staticmethod
    def of(level_keys: IntArray) -> _Lookup:
        order = np.argsort(level_keys)
        return _Lookup(level_keys[order], order)

    def __call__(self, keys: IntArray) -> IntArray:
        at = np.searchsorted(self.keys, keys)
        if len(keys) and (at.max() >= len(self.keys) or (self.keys[at] != keys).any()):
            raise KeyError("a draw leads to a hand outside the next level")
        out: IntArray = self.position[at]
        return out


@dataclass(frozen=True)
class _Common:
    """The part of a plan that every first-draw mode shares: the constant starts and the
    levels of two or more cards (no blackjack is decided there), their ``terms`` rows not yet
    numbered (``_HELD``). Only the single-card level, built last, depends on the mode."""

    constant: tuple[tuple[int, int], ...]
    levels: tuple[_Level, ...]
    index: _Lookup  # the two-card level's positions: the single-card level's children


@cache
def _common(starts: tuple[Comp, ...], hits_soft_17: bool) -> _Common:
    constant = tuple((u, _category(s)) for u, s in enumerate(starts)
                     if sum(s) >= 2 and _stands(s, hits_soft_17))
    by_size = _reachable(starts, hits_soft_17)
    start_keys = [int(np.array(s, dtype=np.int64) @ _RADIX) for s in starts]
    levels: list[_Level] = []
    index = _Lookup.of(np.zeros(0, dtype=np.int64))
    for size in sorted(by_size, reverse=True):
        counts = _decode(by_size[size])
        counts = counts[_tuple_order(counts)]
        members = set(by_size[size].tolist())
        outs = [(u, k) for u, (s, k) in enumerate(zip(starts, start_keys, strict=True))
                if sum(s) == size and k in members]
        # the mode only matters for a single card (a blackjack card): NONE stands for any
        level, index = _level(counts, size, index, hits_soft_17=hits_soft_17,
                              first=FirstDraw.NONE, outs=outs)
        levels.append(level)
    return _Common(constant, tuple(levels), index)


def _build(starts: tuple[Comp, ...], hits_soft_17: bool, first: FirstDraw) -> DealerSolver:
    common = _common(starts, hits_soft_17)
    levels = list(common.levels)
    ones = [(u, int(np.array(s, dtype=np.int64) @ _RADIX)) for u, s in enumerate(starts)
            if sum(s) == 1]
    if ones:
        counts = _decode(_distinct(np.array([k for _, k in ones], dtype=np.int64)))
        counts = counts[_tuple_order(counts)]
        level, _ = _level(counts, 1, common.index, hits_soft_17=hits_soft_17, first=first,
                          outs=ones)
        levels.append(level)
    # number the terms rows: each is (source row, cards held), numbered in code order (the
    # kernel computes each row on its own, so the numbering changes no bit)
    codes, ids = np.unique(np.concatenate(
        [np.array([_ZERO_TERM], dtype=np.int64)]
        + [x for lv in levels for x in (lv.factor, lv.terminal)]), return_inverse=True)
    at = 1
    numbered = []
    for lv in levels:
        factor = ids[at:at + len(lv.factor)]
        at += len(lv.factor)
        terminal = ids[at:at + len(lv.terminal)]
        at += len(lv.terminal)
        numbered.append(replace(lv, factor=factor, terminal=terminal))
    return DealerSolver(starts, tuple(numbered), common.constant, codes // _HELD,
                        (codes % _HELD).astype(np.float64), _flatten(numbered))


def _level(counts: IntArray, size: int, child_index: _Lookup, *, hits_soft_17: bool,
           first: FirstDraw, outs: list[tuple[int, int]]) -> tuple[_Level, _Lookup]:
    """One level from its hands ``counts`` (sorted as tuples), its ``factor`` and ``terminal``
    as unnumbered terms codes (``_build`` numbers them). A hand's live draws are its draws
    that neither stand nor complete a blackjack, in value order; the hands go in order of
    their live draws, most first (stably), so that each run of draws is a prefix."""
    ncat = NCAT if size == 1 else NDRAWN
    d = _draws(counts, hits_soft_17)
    bj = _blackjack_cards(counts)
    is_bj = np.arange(NV)[None, :] == bj[:, None]
    live = ~d.stands & ~is_bj
    order = np.argsort(-live.sum(axis=1), kind="stable")
    counts, live, is_bj = counts[order], live[order], is_bj[order]
    d = _Draws(d.keys[order], d.stands[order], d.category[order])
    bj = bj[order]
    nmoves = live.sum(axis=1)
    runs = tuple(int(x) for x in (nmoves[None, :] > np.arange(NV)[:, None]).sum(axis=1) if x)
    # move j of every hand with more than j moves, run by run: sorted by (j, hand)
    hand, value = np.nonzero(live)
    rank = (np.cumsum(live, axis=1) - 1)[hand, value]
    by_run = np.lexsort((hand, rank))
    hand, value = hand[by_run], value[by_run]
    # per hand and outcome: the one value whose draw stands on that outcome, if any (a
    # dealer hand reaches an outcome of 17 .. 21 by at most one value; busting is what is
    # left of the mass, no terms row)
    terminal = np.full((len(counts), ncat), _ZERO_TERM, dtype=np.int64)
    h, v = np.nonzero(d.stands & ~is_bj & (d.category != BUST))
    cat = d.category[h, v]
    if len(_distinct(h * NCAT + cat)) != len(h):
        raise AssertionError("two draws of one hand stand on the same outcome")
    terminal[h, cat] = v * _HELD + counts[h, v]
    if first is FirstDraw.COUNTED:
        h = np.flatnonzero(bj >= 0)
        terminal[h, BLACKJACK] = bj[h] * _HELD + counts[h, bj[h]]
    index = _Lookup.of(counts @ _RADIX)
    level = _Level(
        cards=size, ncat=ncat, child=child_index(d.keys[hand, value]),
        factor=value * _HELD + counts[hand, value], runs=runs,
        peeked=bj if first is FirstDraw.PEEKED else np.full(len(counts), -1, dtype=np.int64),
        terminal=terminal.reshape(-1), size=len(counts),
        out_start=np.array([u for u, _ in outs], dtype=np.int64),
        out_index=index(np.array([k for _, k in outs], dtype=np.int64)),
    )
    return level, index


#: removal rows per block: one level's arrays of a block stay in the core's cache
BLOCK_ROWS = 128


def dealer_outcomes(solver: DealerSolver, shoe: Comp, removed: IntArray) -> FloatArray:
    """(U, M, 7): outcome probabilities of the dealer from each start for each removal row.

    ``shoe`` is the full shoe; ``removed`` (M, 10) the cards out besides the start's own. Rows
    whose counts cannot occur give finite but meaningless numbers; callers weight them by zero.
    """
    out = np.empty((len(solver.starts), removed.shape[0], NCAT))

    def keep(block: slice, values: FloatArray) -> None:
        out[:, block] = values.transpose(1, 0, 2)

    _solve(solver, shoe, removed, keep)
    return out


def dealer_quantities(solver: DealerSolver, shoe: Comp, removed: IntArray, pay: FloatArray,
                      wanted: IntArray) -> FloatArray:
    """(Q, U): the ``wanted`` (Q, 2) (row, column) quantities, sorted by row, for every start.

    Column k < K is the value of standing on a total whose net results per dealer outcome are
    ``pay[k]`` ((K, 7)); column K + c is P(the dealer ends on 17 + c). Only what is wanted is
    kept: a table of every column for every row would be several times larger.
    """
    out = np.empty((wanted.shape[0], len(solver.starts)))
    bounds = np.searchsorted(wanted[:, 0], np.arange(0, removed.shape[0] + BLOCK_ROWS,
                                                     BLOCK_ROWS))
    # each column as weights on the seven outcomes: the stand payoffs, then one-hots
    weights = np.concatenate([pay, np.eye(NCAT)[:NDRAWN]])[wanted[:, 1]]  # (Q, 7)
    # each quantity's row within its block
    rows = np.ascontiguousarray(wanted[:, 0] % BLOCK_ROWS, dtype=np.int64)

    def keep(block: slice, values: FloatArray) -> None:
        lo, hi = bounds[block.start // BLOCK_ROWS], bounds[block.start // BLOCK_ROWS + 1]
        # in C: einsum("nc,ncu->nu") of the weights and each wanted row's (7, U) outcomes,
        # its sums in its order (_dealer_pass.c)
        _dealer_pass.quantities(values, rows[lo:hi], weights[lo:hi], out[lo:hi])

    _solve(solver, shoe, removed, keep)
    return out


def _solve(solver: DealerSolver, shoe: Comp, removed: IntArray,
           keep: Callable[[slice, FloatArray], None]) -> None:
    """Runs the pass block by block; ``keep`` gets each block's (rows, U, 7) probabilities."""
    m_rows = removed.shape[0]
    cap = min(m_rows, BLOCK_ROWS)
    # made once: fresh arrays per block would each cost their pages' first-touch faults. The
    # pass writes each start's columns on its level; the others keep these values
    out = np.zeros((cap, len(solver.starts), NCAT))
    for u, cat in solver.constant:
        out[:, u, cat] = 1.0
    work = np.empty(solver.work_size(cap))
    full = np.array(shoe, dtype=np.float64)
    rows = np.ascontiguousarray(removed, dtype=np.int64)
    plan = solver.kernel
    for i in range(0, m_rows, BLOCK_ROWS):
        block = slice(i, i + BLOCK_ROWS)
        _dealer_pass.block(plan.levels, plan.runs, plan.child, plan.factor, plan.terminal,
                           plan.peeked, plan.out_start, plan.out_index, solver.term_source,
                           solver.term_held, full, rows[block], out, cap, work)
        keep(block, out[:min(BLOCK_ROWS, m_rows - i)])
