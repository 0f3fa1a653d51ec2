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
sums of counts) is built here in Python; the arithmetic over the rows runs in C
(``_dealer_pass.c``), which makes the very operations, in the very order, of the numpy pass it
replaced (kept as the reference in tests/game_math/test_dealer_pass.py): the figures are the same
to the last bit, about ten times sooner.

The first draw after a single up card differs by how a dealer blackjack is treated
(``FirstDraw``); it is the last level of the pass.

Outcome columns: dealer 17, 18, 19, 20, 21 (not blackjack), bust, blackjack.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache

import numpy as np
import numpy.typing as npt

from game_math.analysis import _dealer_pass
from game_math.analysis.ca_hands import ACE, NV, TEN, Comp, add, best_total, hard_total

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

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


def _blackjack_card(start: Comp) -> int:
    """The value that gives a one-card start a blackjack, or -1."""
    if sum(start) != 1:
        return -1
    if start[ACE]:
        return TEN
    return ACE if start[TEN] else -1


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


@cache
def _draws_of(hand: Comp, hits_soft_17: bool) -> tuple[tuple[int, Comp, bool, int], ...]:
    """Per card value v: (v, hand + v, whether the dealer stands on it, its outcome column).
    Cached: the search for reachable hands and every mode's plan ask for the same hands'
    draws. The totals follow from the hand's hard total (summing each new hand again was
    most of the plan's cost)."""
    hard = hard_total(hand)
    out = []
    for v in range(NV):
        drawn_hard = hard + v + 1
        soft = (hand[ACE] > 0 or v == ACE) and drawn_hard <= 11  # an ace counted as 11
        total = drawn_hard + 10 if soft else drawn_hard
        out.append((v, add(hand, v), _stands_on(total, soft, hits_soft_17),
                    _category_of(total)))
    return tuple(out)


def _first_hands(starts: tuple[Comp, ...], hits_soft_17: bool) -> set[Comp]:
    """The non-standing hands of two or more cards the starts begin the recursion from."""
    out: set[Comp] = set()
    for start in starts:
        if sum(start) >= 2:
            if not _stands(start, hits_soft_17):
                out.add(start)
            continue
        bj = _blackjack_card(start)
        out.update(hand for v, hand, stands, _ in _draws_of(start, hits_soft_17)
                   if v != bj and not stands)
    return out


def _reachable(starts: tuple[Comp, ...], hits_soft_17: bool) -> dict[int, list[Comp]]:
    """The non-standing dealer hands of two or more cards the starts reach, by size (each
    size's list unordered: ``_build`` sorts it)."""
    seen = _first_hands(starts, hits_soft_17)
    todo = list(seen)
    while todo:
        hand = todo.pop()
        for _, drawn, stands, _ in _draws_of(hand, hits_soft_17):
            if not stands and drawn not in seen:
                seen.add(drawn)
                todo.append(drawn)
    by_size: dict[int, list[Comp]] = {}
    for hand in seen:
        by_size.setdefault(sum(hand), []).append(hand)
    return by_size


@dataclass(frozen=True)
class _Common:
    """The part of a plan that every first-draw mode shares: the constant starts and the
    levels of two or more cards (no blackjack is decided there), with the ``terms`` rows they
    numbered. Only the single-card level, built last, depends on the mode."""

    constant: tuple[tuple[int, int], ...]
    levels: tuple[_Level, ...]
    index: dict[Comp, int]  # each two-card hand's position in its level: the single-card
    # level's children
    terms: dict[tuple[int, int], int]  # copied by each mode before it numbers more


@cache
def _common(starts: tuple[Comp, ...], hits_soft_17: bool) -> _Common:
    constant = tuple((u, _category(s)) for u, s in enumerate(starts)
                     if sum(s) >= 2 and _stands(s, hits_soft_17))
    by_size = _reachable(starts, hits_soft_17)
    levels: list[_Level] = []
    index: dict[Comp, int] = {}
    terms: dict[tuple[int, int], int] = {(ZERO_ROW, 0): 0}
    for size in sorted(by_size, reverse=True):
        hands = sorted(by_size[size])
        members = set(hands)
        outs = [(u, s) for u, s in enumerate(starts) if sum(s) == size and s in members]
        # the mode only matters for a single card (a blackjack card): NONE stands for any
        level, index = _level(hands, size, index, terms, hits_soft_17=hits_soft_17,
                              first=FirstDraw.NONE, outs=outs)
        levels.append(level)
    return _Common(constant, tuple(levels), index, terms)


def _build(starts: tuple[Comp, ...], hits_soft_17: bool, first: FirstDraw) -> DealerSolver:
    common = _common(starts, hits_soft_17)
    terms = dict(common.terms)
    levels = list(common.levels)
    ones = [(u, s) for u, s in enumerate(starts) if sum(s) == 1]
    if ones:
        hands = sorted({s for _, s in ones})
        level, _ = _level(hands, 1, common.index, terms, hits_soft_17=hits_soft_17,
                          first=first, outs=ones)
        levels.append(level)
    return DealerSolver(starts, tuple(levels), common.constant,
                        np.array([src for src, _ in terms], dtype=np.int64),
                        np.array([held for _, held in terms], dtype=np.float64),
                        _flatten(levels))


#: rows of the per-block source table: n - r by value, suffix sums from value k, zero
SUFFIX = NV
ZERO_ROW = 2 * NV


def _term(values: list[int], held: int, terms: dict[tuple[int, int], int]) -> int:
    """The ``terms`` row of the sum over ``values`` of (n[v] - r[v]) less ``held``.

    A dealer hand reaches one outcome by one card value, except busting, which every value
    from some k up does (hard totals only): a single row or a suffix sum."""
    if not values:
        return 0
    if len(values) == 1:
        src = values[0]
    else:
        assert values == list(range(values[0], NV)), "standing draws neither one value nor a suffix"
        src = SUFFIX + values[0]
    return terms.setdefault((src, held), len(terms))


def _level(hands: list[Comp], size: int, child_index: dict[Comp, int],
           terms: dict[tuple[int, int], int], *, hits_soft_17: bool, first: FirstDraw,
           outs: list[tuple[int, Comp]]) -> tuple[_Level, dict[Comp, int]]:
    ncat = NCAT if size == 1 else NDRAWN
    moves, terminal = _draws(hands, child_index, hits_soft_17, first, ncat)
    order = sorted(hands, key=lambda h: -len(moves[h]))
    child: list[int] = []
    factor: list[int] = []
    runs: list[int] = []
    for j in range(NV):
        run = [h for h in order if len(moves[h]) > j]
        if not run:
            break
        runs.append(len(run))
        for h in run:
            c, v = moves[h][j]
            child.append(c)
            factor.append(_term([v], h[v], terms))
    index = {h: i for i, h in enumerate(order)}
    cells = [_term(terminal[h][c], sum(h[v] for v in terminal[h][c]), terms)
             for h in order for c in range(ncat)]
    level = _Level(
        cards=size, ncat=ncat, child=np.array(child, dtype=np.int64),
        factor=np.array(factor, dtype=np.int64), runs=tuple(runs),
        peeked=np.array([_blackjack_card(h) if first is FirstDraw.PEEKED else -1 for h in order],
                        dtype=np.int64),
        terminal=np.array(cells, dtype=np.int64), size=len(order),
        out_start=np.array([u for u, _ in outs], dtype=np.int64),
        out_index=np.array([index[s] for _, s in outs], dtype=np.int64),
    )
    return level, index


def _draws(hands: list[Comp], child_index: dict[Comp, int], hits_soft_17: bool,
           first: FirstDraw, ncat: int,
           ) -> tuple[dict[Comp, list[tuple[int, int]]], dict[Comp, list[list[int]]]]:
    """Each hand's live draws (child index, value) and, per outcome, the values of the draws
    that stand on it."""
    moves: dict[Comp, list[tuple[int, int]]] = {}
    terminal: dict[Comp, list[list[int]]] = {}
    for hand in hands:
        moves[hand] = []
        term = terminal[hand] = [[] for _ in range(ncat)]
        bj = _blackjack_card(hand)
        for v, drawn, stands, category in _draws_of(hand, hits_soft_17):
            if v == bj:
                if first is FirstDraw.COUNTED:
                    term[BLACKJACK].append(v)
                continue  # otherwise the excluded (peeked) dealer blackjack
            if stands:
                if category != BUST:
                    term[category].append(v)
            else:
                moves[hand].append((child_index[drawn], v))
    return moves, terminal


#: removal rows per block: one level's arrays of a block stay in the core's cache
BLOCK_ROWS = 128


def dealer_outcomes(solver: DealerSolver, shoe: Comp, removed: IntArray) -> FloatArray:
    """(U, M, 7): outcome probabilities of the dealer from each start for each removal row.

    ``shoe`` is the full shoe; ``removed`` (M, 10) the cards out besides the start's own. Rows
    whose counts cannot occur give finite but meaningless numbers; callers weight them by zero.
    """
    out = np.empty((len(solver.starts), removed.shape[0], NCAT))

    def keep(block: slice, values: FloatArray) -> None:
        out[:, block] = values.transpose(0, 2, 1)

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

    def keep(block: slice, values: FloatArray) -> None:
        lo, hi = bounds[block.start // BLOCK_ROWS], bounds[block.start // BLOCK_ROWS + 1]
        by_row = values.transpose(2, 1, 0)[wanted[lo:hi, 0] - block.start]  # (n, 7, U)
        np.einsum("nc,ncu->nu", weights[lo:hi], by_row, out=out[lo:hi])

    _solve(solver, shoe, removed, keep)
    return out


def _solve(solver: DealerSolver, shoe: Comp, removed: IntArray,
           keep: Callable[[slice, FloatArray], None]) -> None:
    """Runs the pass block by block; ``keep`` gets each block's (U, 7, rows) probabilities."""
    m_rows = removed.shape[0]
    cap = min(m_rows, BLOCK_ROWS)
    # made once: fresh arrays per block would each cost their pages' first-touch faults. The
    # pass writes each start's columns on its level; the others keep these values
    out = np.zeros((len(solver.starts), NCAT, cap))
    for u, cat in solver.constant:
        out[u, cat] = 1.0
    work = np.empty(solver.work_size(cap))
    full = np.array(shoe, dtype=np.float64)
    rows = np.ascontiguousarray(removed, dtype=np.int64)
    plan = solver.kernel
    for i in range(0, m_rows, BLOCK_ROWS):
        block = slice(i, i + BLOCK_ROWS)
        _dealer_pass.block(plan.levels, plan.runs, plan.child, plan.factor, plan.terminal,
                           plan.peeked, plan.out_start, plan.out_index, solver.term_source,
                           solver.term_held, full, rows[block], out, cap, work)
        keep(block, out[:, :, :min(BLOCK_ROWS, m_rows - i)])
