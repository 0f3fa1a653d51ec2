"""The dealer pass in C (``game_math/analysis/_dealer_pass.c``) against the numpy pass it replaced.

The analysis's figures are pinned to the last bit (tests/test_pinned_json.py, docs/par), and
their last bits are set by the order of every product and sum of the dealer pass. The numpy pass
below is the one the analyser ran until the C kernel replaced it, kept verbatim as the reference:
the kernel must give the same doubles, bit for bit, for every start, rule set, first-draw mode,
shoe and removal row, including rows no shoe can hold (whose numbers callers weight by zero).
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import numpy as np
import numpy.typing as npt
import pytest

from game_math.analysis import _dealer_pass
from game_math.analysis.ca_core import (
    dealer_table,
    exposed_starts,
    number_quantities,
    stand_payoffs,
    up_card_starts,
)
from game_math.analysis.ca_dealer import (
    BLACKJACK,
    BLOCK_ROWS,
    BUST,
    NCAT,
    NDRAWN,
    SUFFIX,
    ZERO_ROW,
    DealerSolver,
    FirstDraw,
    _Level,
    dealer_outcomes,
    dealer_quantities,
    dealer_solver,
)
from game_math.analysis.ca_game import GameModel
from game_math.analysis.ca_hands import NV, shoe_counts
from game_math.analysis.main_game import game_starts
from game_math.games import game_rules
from game_math.rules import GAME_IDS

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# ----- the reference: the numpy pass as the analyser ran it before the C kernel ----------------


def reference_outcomes(solver: DealerSolver, shoe: tuple[int, ...],
                       removed: IntArray) -> FloatArray:
    """``dealer_outcomes`` by the numpy pass."""
    out = np.empty((len(solver.starts), removed.shape[0], NCAT))

    def keep(block: slice, values: FloatArray) -> None:
        out[:, block] = values.transpose(0, 2, 1)

    _solve(solver, shoe, removed, keep)
    return out


def reference_quantities(solver: DealerSolver, shoe: tuple[int, ...], removed: IntArray,
                         pay: FloatArray, wanted: IntArray) -> FloatArray:
    """``dealer_quantities`` by the numpy pass (its ``keep`` is the same in both)."""
    out = np.empty((wanted.shape[0], len(solver.starts)))
    bounds = np.searchsorted(wanted[:, 0], np.arange(0, removed.shape[0] + BLOCK_ROWS,
                                                     BLOCK_ROWS))
    weights = np.concatenate([pay, np.eye(NCAT)[:NDRAWN]])[wanted[:, 1]]

    def keep(block: slice, values: FloatArray) -> None:
        lo, hi = bounds[block.start // BLOCK_ROWS], bounds[block.start // BLOCK_ROWS + 1]
        by_row = values.transpose(2, 1, 0)[wanted[lo:hi, 0] - block.start]
        np.einsum("nc,ncu->nu", weights[lo:hi], by_row, out=out[lo:hi])

    _solve(solver, shoe, removed, keep)
    return out


def _solve(solver: DealerSolver, shoe: tuple[int, ...], removed: IntArray,
           keep: Callable[[slice, FloatArray], None]) -> None:
    m_rows = removed.shape[0]
    work = _Work(solver, min(m_rows, BLOCK_ROWS), len(solver.starts))
    for u, cat in solver.constant:
        work.out[u, cat] = 1.0
    full = np.array(shoe, dtype=np.float64)
    for i in range(0, m_rows, BLOCK_ROWS):
        block = slice(i, i + BLOCK_ROWS)
        rows = removed[block]
        _block(solver, work, full, rows)
        keep(block, work.out[:, :, :len(rows)])


class _Work:
    def __init__(self, solver: DealerSolver, rows: int, starts: int) -> None:
        most_draws = max((len(lv.child) for lv in solver.levels), default=0)
        cells = solver.most_cells * rows
        self.levels = (np.empty(cells), np.empty(cells))
        self.draws = np.empty(most_draws * NDRAWN * rows)
        self.factor = np.empty(most_draws * rows)
        self.source = np.zeros((ZERO_ROW + 1) * rows)
        self.terms = np.empty(len(solver.term_source) * rows)
        self.scaled = np.empty(len(solver.term_source) * rows)
        self.out = np.zeros((starts, NCAT, rows))


def _view(buf: FloatArray, *shape: int) -> FloatArray:
    return buf[:prod(shape)].reshape(shape)


def _block(solver: DealerSolver, work: _Work, shoe: FloatArray, removed: IntArray) -> None:
    m_rows = removed.shape[0]
    source = _view(work.source, ZERO_ROW + 1, m_rows)
    left = source[:NV]
    np.subtract(shoe[:, None], removed.T, out=left)
    np.cumsum(left[::-1], axis=0, out=source[SUFFIX:ZERO_ROW][::-1])
    source[ZERO_ROW] = 0.0
    terms = _view(work.terms, len(solver.term_source), m_rows)
    np.take(source, solver.term_source, axis=0, out=terms, mode="clip")
    terms -= solver.term_held[:, None]
    unseen = shoe.sum() - removed.sum(axis=1)
    z = np.zeros((0, NDRAWN, m_rows))
    inv_child = np.ones(m_rows)
    for n, level in enumerate(solver.levels):
        inv = 1.0 / np.maximum(unseen - level.cards, 1.0)
        new = _view(work.levels[n % 2], level.size * level.ncat, m_rows)
        np.take(terms, level.terminal, axis=0, out=new, mode="clip")
        new = new.reshape(level.size, level.ncat, m_rows)
        if len(level.child):
            scaled = _view(work.scaled, len(solver.term_source), m_rows)
            np.multiply(terms, inv_child, out=scaled)
            factor = _view(work.factor, len(level.child), m_rows)
            np.take(scaled, level.factor, axis=0, out=factor, mode="clip")
            draws = _view(work.draws, len(level.child), NDRAWN, m_rows)
            np.take(z, level.child, axis=0, out=draws, mode="clip")
            draws *= factor[:, None, :]
            start = 0
            for run in level.runs:
                new[:run, :NDRAWN] += draws[start:start + run]
                start += run
        if len(level.out_index):
            _outputs(level, new, inv, left, work.out[:, :, :m_rows])
        z, inv_child = new, inv


def _outputs(level: _Level, new: FloatArray, inv: FloatArray, left: FloatArray,
             out: FloatArray) -> None:
    values = new[level.out_index] * inv
    rest = values.sum(axis=1)
    mass = np.ones(rest.shape)
    peeked = level.peeked[level.out_index]
    if (peeked >= 0).any():
        some = np.flatnonzero(peeked >= 0)
        mass[some] -= left[peeked[some]] * inv
    out[level.out_start, :NDRAWN] = values[:, :NDRAWN]
    out[level.out_start, BUST] = mass - rest
    if level.ncat > BLACKJACK:
        out[level.out_start, BLACKJACK] = values[:, BLACKJACK]


# ----- the comparison ----------------------------------------------------------------------------


def removal_rows(decks: int, count: int, seed: int) -> IntArray:
    """``count`` removal rows: none removed, a full shoe's worth of one value, rows a player's
    hands could leave (up to 11 cards), and rows no shoe holds (more of a value than it has)."""
    rng = np.random.default_rng(seed)
    shoe = np.array(shoe_counts(decks))
    rows = np.zeros((count, NV), dtype=np.int64)
    for i in range(2, count):
        cards = rng.integers(1, 12)
        np.add.at(rows[i], rng.choice(NV, size=cards, p=shoe / shoe.sum()), 1)
    rows[1, 3] = shoe[3]
    rows[-1] = shoe + 1  # every count negative
    rows[-2, 0] = shoe[0] + 3
    return rows


def same_bits(a: FloatArray, b: FloatArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


CASES = [
    *((decks, "up", mode, h17) for decks in (1, 2, 6, 8)
      for mode in (FirstDraw.PEEKED, FirstDraw.COUNTED) for h17 in (False, True)),
    *((decks, "exposed", FirstDraw.NONE, h17) for decks in (1, 6) for h17 in (False, True)),
]


@pytest.mark.parametrize(("decks", "starts", "mode", "h17"), CASES)
def test_the_kernel_gives_the_numpy_pass_bit_for_bit(decks: int, starts: str, mode: FirstDraw,
                                                     h17: bool) -> None:
    shoe = shoe_counts(decks)
    comps = (up_card_starts if starts == "up" else exposed_starts)(shoe).comps
    solver = dealer_solver(comps, h17, mode)
    # a count of rows that is not a multiple of the block (a short last block), and one row
    for rows in (removal_rows(decks, BLOCK_ROWS + 45, seed=decks), removal_rows(decks, 3, 7)[:1]):
        got = dealer_outcomes(solver, shoe, rows)
        want = reference_outcomes(solver, shoe, rows)
        assert same_bits(got, want)
        assert np.isfinite(got).all()


@pytest.mark.parametrize(("decks", "starts", "mode", "h17"), CASES)
def test_the_kept_quantities_are_einsums_bit_for_bit(decks: int, starts: str, mode: FirstDraw,
                                                      h17: bool) -> None:
    """The weighted sums kept per block (``_dealer_pass.quantities``) against numpy's einsum,
    on rows no shoe holds as well (negative counts: signed zeros and negative odds), for stand
    payoffs whose ties push and whose ties lose, every column, rows wanted several times."""
    shoe = shoe_counts(decks)
    comps = (up_card_starts if starts == "up" else exposed_starts)(shoe).comps
    solver = dealer_solver(comps, h17, mode)
    rows = removal_rows(decks, 2 * BLOCK_ROWS + 45, seed=decks + 100)
    rng = np.random.default_rng(decks)
    wanted = np.stack([rng.integers(0, len(rows), 900), rng.integers(0, 11, 900)], axis=1)
    wanted = wanted[np.argsort(wanted[:, 0], kind="stable")]
    for game in ("snap", "double-exposure"):  # ties push, ties lose
        pay = stand_payoffs(game_rules(game))[16:22]
        got = dealer_quantities(solver, shoe, rows, pay, wanted)
        assert same_bits(got, reference_quantities(solver, shoe, rows, pay, wanted))


@pytest.mark.parametrize("game", GAME_IDS)
def test_each_games_dealer_table_is_the_numpy_passs(game: str) -> None:
    """The quantities the analysis reads, on the rows and columns the game's analysis asks for."""
    rules = game_rules(game)
    shoe = shoe_counts(rules.decks)
    model = GameModel(rules, shoe, game_starts(rules, shoe))
    trees = [model.base, *(t for p in model.splits.values() for t in p.trees)]
    wanted = number_quantities(trees, [model.base])
    solver = dealer_solver(model.starts.comps, rules.dealer.hits_soft_17, model.mode)
    pay = stand_payoffs(rules)[16:22]
    want = reference_quantities(solver, shoe, model.rows, pay, wanted)
    assert same_bits(dealer_quantities(solver, shoe, model.rows, pay, wanted), want)
    assert same_bits(dealer_table(shoe, model.starts, model.rows, rules, mode=model.mode,
                                  wanted=wanted), want)


def test_the_dealers_odds_are_probabilities() -> None:
    """A check of the kernel on its own: from a full one-deck shoe each start's outcomes are
    probabilities summing to 1 (a peeked start: to P(no blackjack), blackjack column 0)."""
    shoe = shoe_counts(1)
    comps = up_card_starts(shoe).comps
    for mode in (FirstDraw.PEEKED, FirstDraw.COUNTED):
        got = dealer_outcomes(dealer_solver(comps, False, mode), shoe,
                              np.zeros((1, NV), dtype=np.int64))[:, 0]
        assert (got >= 0).all()
        for u, comp in enumerate(comps):
            bj = 9 if comp[0] else 0 if comp[9] else -1
            no_bj = 1.0 - (shoe[bj] / 51 if bj >= 0 and mode is FirstDraw.PEEKED else 0.0)
            assert got[u].sum() == pytest.approx(no_bj, abs=1e-15)
            if mode is FirstDraw.PEEKED:
                assert got[u, BLACKJACK] == 0.0
            elif bj >= 0:
                assert got[u, BLACKJACK] == pytest.approx(shoe[bj] / 51, abs=1e-15)


def test_a_plan_that_does_not_fit_its_arrays_is_refused() -> None:
    """A wrong index in the plan is an error, never a read outside an array."""
    shoe = shoe_counts(2)
    solver = dealer_solver(up_card_starts(shoe).comps, False, FirstDraw.PEEKED)
    plan = solver.kernel
    full = np.array(shoe, dtype=np.float64)
    rows = np.zeros((4, NV), dtype=np.int64)
    out = np.zeros((len(solver.starts), NCAT, 4))
    work = np.empty(solver.work_size(4))

    def call(**change: object) -> None:
        args: dict[str, object] = {
            "levels": plan.levels, "runs": plan.runs, "child": plan.child,
            "factor": plan.factor, "terminal": plan.terminal, "peeked": plan.peeked,
            "out_start": plan.out_start, "out_index": plan.out_index,
            "term_source": solver.term_source, "term_held": solver.term_held, "shoe": full,
            "removed": rows, "out": out, "cap": 4, "work": work, **change}
        _dealer_pass.block(*args.values())  # type: ignore[arg-type]

    call()  # the plan as built works
    bad_child = plan.child.copy()
    bad_child[-1] = 10**6
    bad_factor = plan.factor.copy()
    bad_factor[0] = -1
    for change in ({"child": bad_child}, {"factor": bad_factor},
                   {"work": work[:-1]}, {"cap": 3}, {"out": out[:-1]}, {"shoe": full[:9]},
                   {"runs": plan.runs[:-1]}):
        with pytest.raises(ValueError, match="block:"):
            call(**change)
    with pytest.raises(TypeError, match="removed must be a contiguous array of int64"):
        call(removed=rows.astype(np.float64))
    with pytest.raises(ValueError, match="not C-contiguous"):
        call(out=out[:, :, :2])
