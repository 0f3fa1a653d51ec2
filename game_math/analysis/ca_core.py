"""The combinatorial analyser's engine: exact values of every hand against every dealer start.

Vocabulary
----------
* *start*: what the player sees of the dealer before acting: one up card, or both cards in double
  exposure. A start is weighted by its probability from the shoe.
* *tree*: a family of player hands sharing one extra removal. The *base* tree holds every hand of
  two or more cards; the *split tree* of pair value P holds every hand containing P, played from the
  shoe with one more P removed (the other card of the pair). ``extra`` is that removal.
* *row*: a removal (hand + extra) for which the dealer pass computes what the trees need of it:
  the value of standing for each hand on that row, and (for the outcome frequencies) the chance
  that the dealer ties it (``number_quantities``).

Per-hand arrays are hand-major, (hands, starts), so a recursion step gathers whole rows.

Values are expected net results per unit bet, *joint with "no dealer blackjack"* when the dealer
has peeked (``U(X) = E[payoff * 1{no BJ} | X]``). Player draws are then plain draws from the
unseen cards (the hole card is one of them, exchangeable with the rest), every recursion stays
linear, and ``U / P(no BJ | X)`` is the conditional value a player at the table sees. The best
action at X is the same under either form, as ``P(no BJ | X)`` does not depend on the action.

Splits (the documented approximation of ``main_game``): every post-split hand is played from the
shoe with the start and both pair cards removed (and, after k resplits, k more pair cards:
``exact_resplit``), by a strategy that depends on that hand's own cards only (never on the cards
of its sibling hands). With no resplit this is the exact value of that strategy (``2 * value of
one hand``, by exchangeability). With resplits the number of hands comes from an exact count of
pair cards drawn (``split_counts``), and a hand's second card is conditioned not to be the pair
card while a resplit is still possible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from math import factorial, prod

import numpy as np
import numpy.typing as npt

from game_math.analysis import _tree_pass
from game_math.analysis.ca_dealer import (
    BLACKJACK,
    BUST,
    NCAT,
    FirstDraw,
    dealer_quantities,
    dealer_solver,
)
from game_math.analysis.ca_hands import (
    ACE,
    NV,
    TEN,
    Comp,
    HandSpace,
    add,
    best_total,
)
from game_math.rules import BlackjackVsBlackjack, DealerCards, Rules, TieRule

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: outcome classes of the hit-frequency vectors
WIN, PUSH, LOSE, BUSTED = 0, 1, 2, 3
NOUT = 4


def dealer_mode(rules: Rules) -> FirstDraw:
    """How the dealer's second card enters the analysis under ``rules``."""
    if rules.dealer.cards is DealerCards.BOTH_EXPOSED:
        return FirstDraw.NONE
    if rules.dealer.cards is DealerCards.HOLE_CARD and rules.dealer.peek:
        return FirstDraw.PEEKED
    # no hole card, or a hole card that is not peeked: a dealer blackjack comes out only after
    # the player's play and takes doubles and splits as well
    return FirstDraw.COUNTED


def blackjack_card(start: Comp) -> int:
    """The value completing a dealer blackjack under a one-card start, or -1."""
    if sum(start) != 1:
        return -1
    if start[ACE]:
        return TEN
    return ACE if start[TEN] else -1


def is_blackjack(comp: Comp) -> bool:
    """Whether the composition ``comp`` is an ace and a ten-value card."""
    return sum(comp) == 2 and comp[ACE] == 1 and comp[TEN] == 1


def stand_payoffs(rules: Rules) -> FloatArray:
    """(22, 7): the net result of standing on each total (below 17 all alike) per dealer outcome."""
    tie = 0.0 if rules.payouts.ties is TieRule.PUSH else -1.0
    pay = np.zeros((22, NCAT))
    for total in range(22):
        for cat in range(5):
            dealer = 17 + cat
            pay[total, cat] = 1.0 if total > dealer else (tie if total == dealer else -1.0)
        pay[total, BUST] = 1.0
        pay[total, BLACKJACK] = -1.0
    return pay


def stand_outcomes(rules: Rules) -> FloatArray:
    """(22, 7, 4): the outcome class (win, push, lose, bust) of standing per dealer outcome."""
    pay = stand_payoffs(rules)
    out = np.zeros((22, NCAT, NOUT))
    out[..., WIN] = pay > 0
    out[..., PUSH] = pay == 0
    out[..., LOSE] = pay < 0
    return out


def blackjack_results(rules: Rules) -> tuple[float, float]:
    """Net result of a player blackjack against a dealer blackjack, and against anything else."""
    pays = float(rules.payouts.blackjack.profit)
    vs = rules.payouts.blackjack_vs_blackjack
    both = {BlackjackVsBlackjack.PUSH: 0.0, BlackjackVsBlackjack.PLAYER_WINS: pays,
            BlackjackVsBlackjack.DEALER_WINS: -1.0}[vs]
    return both, pays


# ----- the shoe and the starts -------------------------------------------------------------------


@dataclass(frozen=True)
class Starts:
    """The dealer starts a player may face, their probabilities and strategy columns."""
    comps: tuple[Comp, ...]
    prob: FloatArray  # probability of each start from the shoe
    key: IntArray  # strategy-table column of each start
    key_names: tuple[str, ...]


VALUE_NAMES = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "T")
UP_ORDER = (1, 2, 3, 4, 5, 6, 7, 8, 9, 0)  # table columns 2..9, T, A


def up_card_starts(shoe: Comp) -> Starts:
    """One start per up-card value, weighted by its count in ``shoe``."""
    total = sum(shoe)
    comps = tuple(add((0,) * NV, v) for v in UP_ORDER)
    prob = np.array([shoe[v] / total for v in UP_ORDER])
    names = tuple(VALUE_NAMES[v] for v in UP_ORDER)
    return Starts(comps, prob, np.arange(NV, dtype=np.int64), names)


def dealer_key_name(comp: Comp) -> str:
    """The strategy column of a two-card dealer start: ``H`` or ``S`` and its total."""
    total, soft = best_total(comp)
    return f"{'S' if soft else 'H'}{total}"


def exposed_starts(shoe: Comp) -> Starts:
    """Every unordered two-card dealer hand; the key is its total and softness ("H16", "S17")."""
    total = sum(shoe)
    comps: list[Comp] = []
    probs: list[float] = []
    for a in range(NV):
        for b in range(a, NV):
            comp = add(add((0,) * NV, a), b)
            pairs = shoe[a] * (shoe[a] - 1) if a == b else 2 * shoe[a] * shoe[b]
            comps.append(comp)
            probs.append(pairs / (total * (total - 1)))
    names = sorted({dealer_key_name(c) for c in comps}, key=_key_order)
    index = {n: i for i, n in enumerate(names)}
    keys = np.array([index[dealer_key_name(c)] for c in comps], dtype=np.int64)
    return Starts(tuple(comps), np.array(probs), keys, tuple(names))


def _key_order(name: str) -> tuple[int, int]:
    return (name[0] == "S", int(name[1:]))


# ----- trees and rows --------------------------------------------------------------------------


@dataclass
class Tree:
    """A family of player hands sharing one extra removal (see the module docstring)."""
    extra: Comp
    mem: IntArray  # global hand indices, in the space order
    child: IntArray  # (Hm, 10) local child index, -1 when the child busts (or is not in the
    # tree: split aces that take one card stop at two cards)
    parent: IntArray  # (Hm, 10) local index of the hand less one card of that value, or -1
    levels: list[slice]  # the hands of each card count (contiguous), most cards first
    keys: IntArray  # (Hm,) removal key of hand + extra (``ROW_RADIX``)
    total: IntArray
    soft: BoolArray
    ncards: IntArray
    rows: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # number_rows
    stand_at: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # and
    tie_at: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # quantities

    def local(self, hand: int) -> int:
        """The tree's index of the space's hand ``hand`` (which must be in the tree)."""
        i = int(np.searchsorted(self.mem, hand))
        if i == len(self.mem) or self.mem[i] != hand:
            raise KeyError(hand)
        return i


#: removals as integers (five bits per value: no count in a hand plus extras reaches 32)
ROW_RADIX = np.array([32**i for i in range(NV)], dtype=np.int64)


def make_tree(space: HandSpace, extra: Comp, mask: BoolArray) -> Tree:
    """The tree of the hands in ``mask`` played with ``extra`` removed (rows: ``number_rows``)."""
    mem = np.flatnonzero(mask)
    loc = np.full(space.size, -1, dtype=np.int64)
    loc[mem] = np.arange(len(mem))
    gchild = space.child[mem]
    child = np.where(gchild >= 0, loc[np.maximum(gchild, 0)], -1)
    ncards = space.ncards[mem]
    # the space is ordered by card count, so each count's hands are one slice
    bounds = np.flatnonzero(np.diff(ncards, prepend=-1, append=-1))
    levels = [slice(int(a), int(b)) for a, b in pairwise(bounds)][::-1]
    # hand + extra's key: the hand's own key (the space's, the same radix) plus the extra's
    keys = space.keys[mem] + int(np.array(extra, dtype=np.int64) @ ROW_RADIX)
    parent = np.full(child.shape, -1, dtype=np.int64)
    hand, value = np.nonzero(child >= 0)
    parent[child[hand, value], value] = hand
    return Tree(extra, mem, child, parent, levels, keys, space.total[mem], space.soft[mem],
                ncards)


def number_rows(trees: Sequence[Tree]) -> IntArray:
    """Numbers the distinct removals of ``trees`` (sets each tree's ``rows``); returns their
    (R, 10) value counts."""
    keys, index = np.unique(np.concatenate([t.keys for t in trees]), return_inverse=True)
    start = 0
    for t in trees:
        t.rows = index[start:start + len(t.keys)]
        start += len(t.keys)
    out: IntArray = (keys[:, None] // ROW_RADIX[None, :]) % 32
    return out


# ----- per-start arrays of one tree --------------------------------------------------------------


@dataclass
class TreeArrays:
    """Draw probabilities and stand values of one tree's hands against every start.

    Hand-major: a hand's numbers for all starts are contiguous, so the recursions gather whole
    rows (one per child hand) rather than scattered elements.
    """

    p_one: FloatArray  # (U, 10) the draw odds of the tree's one-card hand (split trees), or empty
    p_live: FloatArray  # (Hm, 10, U) the draw odds of each hand, zero where that card busts it
    bust_value: FloatArray  # (Hm, U) sum over busting cards of p * (-P(no dealer BJ)), or -p
    stand: FloatArray  # (Hm, U) net value of standing (joint with no dealer BJ when peeked)


def tree_arrays(tree: Tree, *, shoe: Comp, starts: Starts, dealer: FloatArray,
                space: HandSpace, mode: FirstDraw, out: FloatArray | None = None) -> TreeArrays:
    """The arrays of ``tree``; ``dealer`` (Q, U) the dealer quantities (``number_quantities``).
    ``out``: a buffer to hold ``p_live`` (a fresh array per tree costs its pages' first-touch
    faults)."""
    n_u = np.array(shoe, dtype=np.float64)[None, :] - np.array(starts.comps, dtype=np.float64)
    removed = space.counts[tree.mem] + np.array(tree.extra)[None, :]  # (Hm, 10)
    shape = (len(tree.mem), NV, len(starts.comps))
    p_live = np.empty(shape) if out is None else out[:prod(shape)].reshape(shape)
    bust_value = np.empty((len(tree.mem), len(starts.comps)))
    # per start, the card completing a blackjack the dealer has peeked for (-1: none)
    cards = np.array([blackjack_card(comp) if mode is FirstDraw.PEEKED else -1
                      for comp in starts.comps], dtype=np.int64)
    # in C (_tree_pass.c: numpy's operations in numpy's order, so the same doubles), per hand
    # with ``left`` its unseen cards: p_live = (n - removed) / left where the card keeps the hand
    # alive, else 0. No clipping at zero: a count goes negative only for a hand the shoe cannot
    # hold, whose own values nothing uses (its weight is zero, and a possible parent draws it
    # with a count of exactly zero). The busting draws are the values from some k up (hard
    # totals), or none: bust_value = -(their count) / left, the count a difference of suffix
    # sums (whole numbers, so exact; a hand's other missing children are values it holds every
    # card of, whose count left is zero). Against a start that peeked, each busting card's odds
    # are taken times P(no blackjack): after it, the blackjack card is one of left - 1 cards.
    _tree_pass.odds(n_u, removed, tree.child, _first_bust(tree), cards,
                    len({sum(c) for c in starts.comps}) == 1, p_live, bust_value)
    stand = dealer[tree.stand_at]
    ones = np.flatnonzero(tree.ncards == 1)
    p_one = np.zeros((0, NV))
    if len(ones):
        one = removed[ones[0]]
        inv = 1.0 / np.maximum(n_u.sum(axis=1) - one.sum(), 1.0)
        p_one = np.maximum(n_u - one[None, :], 0.0) * inv[:, None]
    return TreeArrays(p_one, p_live, bust_value, stand)


def _first_bust(tree: Tree) -> IntArray:
    """Per hand, the lowest value index whose card busts it (10 when none does): a hand's
    hard total is its best total less 10 when soft, and a card of index v adds v + 1."""
    hard = tree.total - np.where(tree.soft, 10, 0)
    first: IntArray = np.clip(21 - hard, 0, NV)
    return first


def no_blackjack(shoe: Comp, starts: Starts, removed: IntArray, mode: FirstDraw) -> FloatArray:
    """(U, R): P(no dealer blackjack | start, removal) where a peek makes it a condition, else 1."""
    out = np.ones((len(starts.comps), removed.shape[0]))
    if mode is not FirstDraw.PEEKED:
        return out
    n_u = np.array(shoe, dtype=np.float64)[None, :] - np.array(starts.comps, dtype=np.float64)
    left = n_u.sum(axis=1)[:, None] - removed.sum(axis=1)[None, :]
    for u, comp in enumerate(starts.comps):
        b = blackjack_card(comp)
        if b >= 0:
            out[u] = 1.0 - np.maximum(n_u[u, b] - removed[:, b], 0.0) / left[u]
    return out


def hand_weights(shoe: Comp, starts: Starts, counts: IntArray) -> FloatArray:
    """(U, H): probability that the player's first cards are each composition, given the start."""
    n_u = np.array(shoe, dtype=np.int64)[None, :] - np.array(starts.comps, dtype=np.int64)
    ncards = counts.sum(axis=1)
    fact = np.array([float(factorial(k)) for k in range(int(ncards.max(initial=0)) + 1)])
    out = np.empty((n_u.shape[0], counts.shape[0]))
    # in C (_tree_pass.c): per start and hand, the product of each value's falling factorial
    # (the ways to draw its cards of that value) times the multinomial coefficient (the orders
    # they come in), over the falling factorial of the unseen cards: numpy's operations in
    # numpy's order, as this function made them with arrays before
    _tree_pass.weights(np.ascontiguousarray(n_u), np.ascontiguousarray(counts, dtype=np.int64),
                       fact, out)
    return out


#: columns of the dealer quantities: standing on 16 (or less), 17, .., 21; P(dealer ends on
#: 17, .., 21)
STAND_COLUMNS = 6
NQUANTITY = STAND_COLUMNS + 5


def number_quantities(trees: Sequence[Tree], ties: Sequence[Tree]) -> IntArray:
    """Numbers the dealer quantities the trees need (sets their ``stand_at`` and, for the trees
    in ``ties``, ``tie_at``, -1 below 17): every hand's stand value, and P(the dealer ties it)
    for hands of 17 or more. Returns the (Q, 2) (row, column) pairs, sorted by row."""
    made = [np.flatnonzero(t.total >= 17) for t in ties]
    keys = [t.rows * NQUANTITY + np.clip(t.total, 16, 21) - 16 for t in trees]
    keys += [t.rows[m] * NQUANTITY + STAND_COLUMNS + t.total[m] - 17
             for t, m in zip(ties, made, strict=True)]
    unique, index = np.unique(np.concatenate(keys), return_inverse=True)
    start = 0
    for t in trees:
        t.stand_at = index[start:start + len(t.rows)]
        start += len(t.rows)
    for t, m in zip(ties, made, strict=True):
        t.tie_at = np.full(len(t.rows), -1, dtype=np.int64)
        t.tie_at[m] = index[start:start + len(m)]
        start += len(m)
    out: IntArray = np.stack([unique // NQUANTITY, unique % NQUANTITY], axis=1)
    return out


def dealer_table(shoe: Comp, starts: Starts, removed: IntArray, rules: Rules, *,
                 mode: FirstDraw, wanted: IntArray) -> FloatArray:
    """(Q, U): the ``wanted`` dealer quantities (see ``number_quantities``) for every start."""
    solver = dealer_solver(starts.comps, rules.dealer.hits_soft_17, mode)
    return dealer_quantities(solver, shoe, removed, stand_payoffs(rules)[16:22], wanted)


# ----- split counting --------------------------------------------------------------------------


def split_counts(pairs_left: FloatArray, cards_left: FloatArray, max_hands: int,
                 ) -> tuple[FloatArray, FloatArray]:
    """Expected numbers of split hands by how their second card came, per start.

    ``pairs_left`` / ``cards_left``: pair cards / cards unseen after the start and both pair
    cards. Returns ``(c_np, c_any)``, each (U, max_hands - 1): ``c_np[:, j]`` the expected number of
    hands that drew a non-pair second card while a resplit was possible, after j resplits;
    ``c_any[:, j]`` the hands that drew any second card once no resplit was left. Non-pair second
    cards drawn by earlier hands are taken out of the pair-card odds (``d``).
    """
    u = pairs_left.shape[0]
    c_np = np.zeros((u, max(max_hands - 1, 1)))
    c_any = np.zeros_like(c_np)

    def walk(pending: int, hands: int, j: int, d: int, prob: FloatArray) -> None:
        if pending == 0:
            return
        if hands >= max_hands:
            c_any[:, j] += prob * pending
            return
        q = np.maximum(pairs_left - j, 0.0) / np.maximum(cards_left - j - d, 1.0)
        c_np[:, j] += prob * (1.0 - q)
        walk(pending - 1, hands, j, d + 1, prob * (1.0 - q))
        walk(pending + 1, hands + 1, j + 1, d, prob * q)

    walk(2, 2, 0, 0, np.ones(u))
    return c_np, c_any
