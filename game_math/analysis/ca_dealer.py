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
removal rows ``r`` (one per player-hand composition), so the work is whole-array products.

The first draw after a single up card differs by how a dealer blackjack is treated
(``FirstDraw``); it is the last level of the pass.

Outcome columns: dealer 17, 18, 19, 20, 21 (not blackjack), bust, blackjack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt
from scipy import sparse

from game_math.analysis.ca_hands import ACE, NV, TEN, Comp, add, best_total

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BUST = 5
BLACKJACK = 6
NCAT = 7
#: outcome columns below a single-card start: no blackjack can come from a later draw
NDRAWN = 6


class FirstDraw(Enum):
    """How the dealer's first draw after a single up card treats a blackjack."""

    PEEKED = "peeked"  # hole card with peek: blackjack already excluded; probabilities are joint
    # with "no dealer blackjack" (they sum to P(no blackjack))
    COUNTED = "counted"  # no hole card (or no peek): blackjack is an outcome (last column)
    NONE = "none"  # the start has two cards: no blackjack can come from a draw


def _stands(comp: Comp, hits_soft_17: bool) -> bool:
    total, soft = best_total(comp)
    return total > 17 or (total == 17 and not (soft and hits_soft_17))


def _category(comp: Comp) -> int:
    total, _ = best_total(comp)
    return BUST if total > 21 else total - 17


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
    ``child``/``value``/``held`` arrays, and those hands are a prefix of the level (``runs[j]``
    long): each run adds into a slice, with no scatter.
    """

    cards: int  # |D|
    ncat: int  # outcome columns of this level (the single-card starts add blackjack)
    child: IntArray  # (P,) index in the next larger level of D + v, per live draw
    value: IntArray  # (P,) v
    held: FloatArray  # (P,) D[v]: the cards of value v the dealer already holds
    runs: tuple[int, ...]
    # (size * ncat, 11): the standing draws, sum_v onehot * (n[v] - r[v] - D[v]) as one product
    # with the rows [n - r; 1] (sparse: a threaded BLAS gains nothing on these and can thrash)
    terminal: sparse.csr_matrix
    size: int
    outputs: tuple[tuple[int, int], ...]  # (start, index in this level) read off here


@dataclass(frozen=True)
class DealerSolver:
    """The backward pass's plan for a tuple of starts, one rule set and one first-draw mode."""

    starts: tuple[Comp, ...]
    levels: tuple[_Level, ...]  # largest hands first
    constant: tuple[tuple[int, int], ...]  # (start, outcome) for starts that stand at once


_SOLVERS: dict[tuple[tuple[Comp, ...], bool, FirstDraw], DealerSolver] = {}


def dealer_solver(starts: Sequence[Comp], hits_soft_17: bool, first: FirstDraw) -> DealerSolver:
    """The plan for ``starts`` (cached: it depends on the rules and starts only, not the shoe)."""
    key = (tuple(starts), hits_soft_17, first)
    solver = _SOLVERS.get(key)
    if solver is None:
        solver = _SOLVERS[key] = _build(key[0], hits_soft_17, first)
    return solver


def _first_hands(starts: tuple[Comp, ...], hits_soft_17: bool) -> set[Comp]:
    """The non-standing hands of two or more cards the starts begin the recursion from."""
    out: set[Comp] = set()
    for start in starts:
        if sum(start) >= 2:
            if not _stands(start, hits_soft_17):
                out.add(start)
            continue
        for v in range(NV):
            hand = add(start, v)
            if v != _blackjack_card(start) and not _stands(hand, hits_soft_17):
                out.add(hand)
    return out


def _reachable(starts: tuple[Comp, ...], hits_soft_17: bool) -> dict[int, list[Comp]]:
    by_size: dict[int, list[Comp]] = {}
    seen: set[Comp] = set()
    frontier = _first_hands(starts, hits_soft_17)
    while frontier:
        nxt: set[Comp] = set()
        for hand in sorted(frontier):
            if hand in seen:
                continue
            seen.add(hand)
            by_size.setdefault(sum(hand), []).append(hand)
            nxt.update(h for h in (add(hand, v) for v in range(NV))
                       if not _stands(h, hits_soft_17))
        frontier = nxt
    return by_size


def _build(starts: tuple[Comp, ...], hits_soft_17: bool, first: FirstDraw) -> DealerSolver:
    constant = tuple((u, _category(s)) for u, s in enumerate(starts)
                     if sum(s) >= 2 and _stands(s, hits_soft_17))
    by_size = _reachable(starts, hits_soft_17)
    levels: list[_Level] = []
    index: dict[Comp, int] = {}
    for size in sorted(by_size, reverse=True):
        hands = sorted(by_size[size])
        outs = [(u, s) for u, s in enumerate(starts) if sum(s) == size and s in set(hands)]
        level, index = _level(hands, size, index, hits_soft_17=hits_soft_17, first=first,
                              outs=outs)
        levels.append(level)
    ones = [(u, s) for u, s in enumerate(starts) if sum(s) == 1]
    if ones:
        hands = sorted({s for _, s in ones})
        level, _ = _level(hands, 1, index, hits_soft_17=hits_soft_17, first=first, outs=ones)
        levels.append(level)
    return DealerSolver(starts, tuple(levels), constant)


def _level(hands: list[Comp], size: int, child_index: dict[Comp, int], *, hits_soft_17: bool,
           first: FirstDraw, outs: list[tuple[int, Comp]]) -> tuple[_Level, dict[Comp, int]]:
    ncat = NCAT if size == 1 else NDRAWN
    moves, terminal = _draws(hands, child_index, hits_soft_17, first, ncat)
    order = sorted(hands, key=lambda h: -len(moves[h]))
    child: list[int] = []
    value: list[int] = []
    held: list[float] = []
    runs: list[int] = []
    for j in range(NV):
        run = [h for h in order if len(moves[h]) > j]
        if not run:
            break
        runs.append(len(run))
        for h in run:
            c, v = moves[h][j]
            child.append(c)
            value.append(v)
            held.append(float(h[v]))
    index = {h: i for i, h in enumerate(order)}
    stacked = np.concatenate([terminal[h] for h in order]) if order else np.zeros((0, NV + 1))
    level = _Level(
        cards=size, ncat=ncat, child=np.array(child, dtype=np.int64),
        value=np.array(value, dtype=np.int64), held=np.array(held), runs=tuple(runs),
        terminal=sparse.csr_matrix(stacked), size=len(order),
        outputs=tuple((u, index[s]) for u, s in outs),
    )
    return level, index


def _draws(hands: list[Comp], child_index: dict[Comp, int], hits_soft_17: bool,
           first: FirstDraw, ncat: int,
           ) -> tuple[dict[Comp, list[tuple[int, int]]], dict[Comp, FloatArray]]:
    """Each hand's live draws (child index, value) and its standing draws as rows of
    ``terminal``: outcome x [n - r; 1], the last column taking off the held ``D[v]``."""
    moves: dict[Comp, list[tuple[int, int]]] = {}
    terminal: dict[Comp, FloatArray] = {}
    for hand in hands:
        moves[hand] = []
        term = terminal[hand] = np.zeros((ncat, NV + 1))
        bj = _blackjack_card(hand)
        for v in range(NV):
            if v == bj:
                if first is FirstDraw.COUNTED:
                    term[BLACKJACK, v] += 1.0
                    term[BLACKJACK, NV] -= hand[v]
                continue  # otherwise the excluded (peeked) dealer blackjack
            drawn = add(hand, v)
            if _stands(drawn, hits_soft_17):
                term[_category(drawn), v] += 1.0
                term[_category(drawn), NV] -= hand[v]
            else:
                moves[hand].append((child_index[drawn], v))
    return moves, terminal


#: removal rows per block: one level's arrays of a block stay in the core's cache
BLOCK_ROWS = 192


def dealer_outcomes(solver: DealerSolver, shoe: Comp, removed: IntArray) -> FloatArray:
    """(U, M, 7): outcome probabilities of the dealer from each start for each removal row.

    ``shoe`` is the full shoe; ``removed`` (M, 10) the cards out besides the start's own. Rows
    whose counts cannot occur give finite but meaningless numbers; callers weight them by zero.
    """
    m_rows = removed.shape[0]
    out = np.zeros((len(solver.starts), m_rows, NCAT))
    for u, cat in solver.constant:
        out[u, :, cat] = 1.0
    for i in range(0, m_rows, BLOCK_ROWS):
        _block(solver, np.array(shoe, dtype=np.float64), removed[i:i + BLOCK_ROWS],
               out[:, i:i + BLOCK_ROWS])
    return out


def _block(solver: DealerSolver, shoe: FloatArray, removed: IntArray, out: FloatArray) -> None:
    m_rows = removed.shape[0]
    left = np.empty((NV + 1, m_rows))  # the unseen counts n - r, and a row of ones
    left[:NV] = shoe[:, None] - removed.T
    left[NV] = 1.0
    unseen = shoe.sum() - removed.sum(axis=1)
    # z holds the level's values times (N - |r| - k): the division is folded into the next
    # level's draw factors, so no pass over the whole level rescales it
    z = np.zeros((0, NDRAWN, m_rows))
    inv_child = np.ones(m_rows)
    for level in solver.levels:
        inv = 1.0 / np.maximum(unseen - level.cards, 1.0)
        new: FloatArray = (level.terminal @ left).reshape(level.size, level.ncat, m_rows)
        if len(level.child):
            factor = left[level.value]
            factor -= level.held[:, None]
            factor *= inv_child
            draws = z[level.child]
            draws *= factor[:, None, :]
            start = 0
            for run in level.runs:
                new[:run, :NDRAWN] += draws[start:start + run]
                start += run
        for u, i in level.outputs:
            out[u, :, :level.ncat] = (new[i] * inv).T
        z, inv_child = new, inv
