"""The dealer's final-total probabilities, exact over the remaining shoe, for many shoes at once.

The dealer's play from a start (the up card, or both cards in double exposure) is a fixed tree of
draws. Its states are the *multisets* of cards drawn so far: the probability of reaching a state is
the same for every order of the same cards, and the chance of drawing value v next from a shoe of
counts n (N cards) after drawing the multiset s (m cards) is ``(n[v] - s[v]) / (N - m)``. This is
the standard recursion with memoisation on the removed-cards state; here the memo is the level-by-
level table of states, built once per start and rule, and each state's probability is a vector over
many shoes (one per player-hand composition), so a whole analysis costs one pass per start.

Outcome columns: dealer 17, 18, 19, 20, 21 (not blackjack), bust, blackjack.
"""

from __future__ import annotations

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


class FirstDraw(Enum):
    """How the dealer's first draw after a single up card treats a blackjack."""

    PEEKED = "peeked"  # hole card with peek: blackjack already excluded; probabilities are joint
    # with "no dealer blackjack" (they sum to P(no blackjack))
    COUNTED = "counted"  # no hole card (or no peek): blackjack is an outcome (last column)
    NONE = "none"  # the start has two cards: no blackjack can come from a draw


@dataclass(frozen=True)
class _Level:
    drawn: IntArray  # (S, 10): cards drawn by each state of this level
    #: per value: (states that go on, their index in the next level)
    moves: tuple[tuple[IntArray, IntArray], ...]
    # sparse (not BLAS: threaded BLAS on these many mid-sized products thrashes a busy machine)
    terminal: sparse.csr_matrix  # (10 * NCAT, S): one-hot of the outcome reached by each draw
    terminal_drawn: sparse.csr_matrix  # (NCAT, S): sum over values of one-hot * cards drawn


@dataclass(frozen=True)
class DealerTree:
    start: Comp
    levels: tuple[_Level, ...]
    terminal_start: int  # outcome column when the start itself stands (two-card start), else -1


def _category(comp: Comp, blackjack: bool) -> int:
    total, _ = best_total(comp)
    if blackjack:
        return BLACKJACK
    if total > 21:
        return BUST
    return total - 17


def _stands(comp: Comp, hits_soft_17: bool) -> bool:
    total, soft = best_total(comp)
    return total > 17 or (total == 17 and not (soft and hits_soft_17))


_TREES: dict[tuple[Comp, bool, FirstDraw], DealerTree] = {}


def dealer_tree(start: Comp, hits_soft_17: bool, first: FirstDraw) -> DealerTree:
    if _blackjack_card(start) < 0:
        first = FirstDraw.NONE  # no draw makes a blackjack: one tree serves every mode
    key = (start, hits_soft_17, first)
    tree = _TREES.get(key)
    if tree is None:
        tree = _TREES[key] = _build_tree(start, hits_soft_17, first)
    return tree


def _blackjack_card(start: Comp) -> int:
    """The value that gives a one-card start a blackjack, or -1."""
    if sum(start) != 1:
        return -1
    if start[ACE]:
        return TEN
    return ACE if start[TEN] else -1


def _build_tree(start: Comp, hits_soft_17: bool, first: FirstDraw) -> DealerTree:
    if _stands(start, hits_soft_17):
        return DealerTree(start, (), _category(start, False))
    bj_card = _blackjack_card(start)
    levels: list[_Level] = []
    # a state: the cards drawn, and the hand's hard total and whether it holds an ace
    states: list[tuple[Comp, int, bool]] = [
        (tuple([0] * NV), sum((i + 1) * k for i, k in enumerate(start)), start[ACE] > 0)]
    depth = 0
    while states:
        nxt: dict[Comp, int] = {}
        nxt_states: list[tuple[Comp, int, bool]] = []
        moves: list[tuple[IntArray, IntArray]] = []
        terminal = np.zeros((NV, NCAT, len(states)))
        for v in range(NV):
            idx = np.full(len(states), -1, dtype=np.int64)
            onehot = terminal[v]
            for s, (got, hard, ace) in enumerate(states):
                if depth == 0 and v == bj_card:
                    if first is FirstDraw.COUNTED:
                        onehot[BLACKJACK, s] = 1.0
                    continue  # PEEKED: this branch is the excluded dealer blackjack
                hard2, ace2 = hard + v + 1, ace or v == ACE
                soft = ace2 and hard2 <= 11
                total = hard2 + 10 if soft else hard2
                if total > 17 or (total == 17 and not (soft and hits_soft_17)):
                    onehot[BUST if total > 21 else total - 17, s] = 1.0
                    continue
                new = add(got, v)
                index = nxt.get(new)
                if index is None:
                    index = nxt[new] = len(nxt)
                    nxt_states.append((new, hard2, ace2))
                idx[s] = index
            live = np.flatnonzero(idx >= 0)
            moves.append((live, idx[live]))
        drawn: IntArray = np.array([got for got, _, _ in states], dtype=np.int64)
        weighted: FloatArray = np.einsum("vcs,sv->cs", terminal, drawn.astype(np.float64))
        levels.append(_Level(
            drawn, tuple(moves), sparse.csr_matrix(terminal.reshape(NV * NCAT, len(states))),
            sparse.csr_matrix(weighted),
        ))
        states = nxt_states
        depth += 1
    return DealerTree(start, tuple(levels), -1)


#: rows per block: the per-level state arrays of a block stay in cache (measured 1.5x faster)
BLOCK_ROWS = 4096


def dealer_probabilities(tree: DealerTree, shoes: IntArray) -> FloatArray:
    """Outcome probabilities (M, 7) of the dealer from ``tree.start`` for each of M shoes.

    ``shoes`` (M, 10) are the counts left after the start's cards and everything else removed.
    Rows whose counts cannot occur may give meaningless numbers; callers weight them by zero.
    """
    m_rows = shoes.shape[0]
    if tree.terminal_start >= 0:
        out = np.zeros((m_rows, NCAT))
        out[:, tree.terminal_start] = 1.0
        return out
    blocks = [_block(tree, shoes[i:i + BLOCK_ROWS]) for i in range(0, m_rows, BLOCK_ROWS)]
    return np.concatenate(blocks) if blocks else np.zeros((0, NCAT))


def _block(tree: DealerTree, shoes: IntArray) -> FloatArray:
    m_rows = shoes.shape[0]
    out = np.zeros((NCAT, m_rows))
    n = np.ascontiguousarray(shoes.T, dtype=np.float64)  # (10, M)
    left = n.sum(axis=0)
    weight = np.ones((1, m_rows))
    for depth, level in enumerate(tree.levels):
        scaled = weight / np.maximum(left - depth, 1.0)
        # stopping draws only feed the outcome totals: sum them with two small products,
        # sum_v n[v] * (onehot_v @ scaled) - (sum_v onehot_v * drawn_v) @ scaled
        by_value = (level.terminal @ scaled).reshape(NV, NCAT, m_rows)
        out += np.einsum("vcm,vm->cm", by_value, n) - level.terminal_drawn @ scaled
        size = len(tree.levels[depth + 1].drawn) if depth + 1 < len(tree.levels) else 0
        new = np.zeros((size, m_rows))
        for v, (live, idx) in enumerate(level.moves):
            if not len(live):
                continue
            # the factor is (n[v] - drawn[v]): a state that drew more of a value than a shoe
            # holds already has weight zero there, so it needs no clipping
            step = scaled[live]
            step *= n[v]
            drawn = level.drawn[live, v]
            nz = np.flatnonzero(drawn)
            if len(nz):
                step[nz] -= drawn[nz, None] * scaled[live[nz]]
            new[idx] += step
        weight = new
    out_t: FloatArray = out.T.copy()
    return out_t
