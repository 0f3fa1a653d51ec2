"""The dealer pass's plan (``ca_dealer``), built with array operations, against the Python build
it replaced.

The plan fixes which dealer hands the pass visits, in which order, and which draws and sums of
counts each hand's row adds, in which order: every bit of the dealer table follows from it. The
Python build below is the one the analyser ran before (walking the reachable hands one at a time
through dictionaries), kept as the reference: the array build must give the same levels, hand
order, runs, children, peeked cards, outputs and terms rows (the rows' numbering may differ: the
kernel computes each row on its own), for up-card and two-card starts, odd sets of starts, every
first-draw mode, S17 and H17.
"""

from __future__ import annotations

import numpy as np
import pytest

from game_math.analysis.ca_core import exposed_starts, up_card_starts
from game_math.analysis.ca_dealer import (
    BLACKJACK,
    BUST,
    NCAT,
    NDRAWN,
    SUFFIX,
    ZERO_ROW,
    DealerSolver,
    FirstDraw,
    _build,
)
from game_math.analysis.ca_hands import ACE, NV, TEN, Comp, add, best_total, hard_total

# ----- the reference: the Python build as the analyser ran it before -----------------------------


def _stands_on(total: int, soft: bool, h17: bool) -> bool:
    return total > 17 or (total == 17 and not (soft and h17))


def _blackjack_card(start: Comp) -> int:
    if sum(start) != 1:
        return -1
    if start[ACE]:
        return TEN
    return ACE if start[TEN] else -1


def _draws_of(hand: Comp, h17: bool) -> list[tuple[int, Comp, bool, int]]:
    hard = hard_total(hand)
    out = []
    for v in range(NV):
        drawn_hard = hard + v + 1
        soft = (hand[ACE] > 0 or v == ACE) and drawn_hard <= 11
        total = drawn_hard + 10 if soft else drawn_hard
        out.append((v, add(hand, v), _stands_on(total, soft, h17),
                    BUST if total > 21 else total - 17))
    return out


def _reachable(starts: tuple[Comp, ...], h17: bool) -> dict[int, list[Comp]]:
    seen: set[Comp] = set()
    for start in starts:
        if sum(start) >= 2:
            if not _stands_on(*best_total(start), h17):
                seen.add(start)
            continue
        bj = _blackjack_card(start)
        seen.update(hand for v, hand, stands, _ in _draws_of(start, h17) if v != bj and not stands)
    todo = list(seen)
    while todo:
        for _, drawn, stands, _ in _draws_of(todo.pop(), h17):
            if not stands and drawn not in seen:
                seen.add(drawn)
                todo.append(drawn)
    by_size: dict[int, list[Comp]] = {}
    for hand in seen:
        by_size.setdefault(sum(hand), []).append(hand)
    return by_size


def _term(values: list[int], held: int) -> tuple[int, int]:
    if not values:
        return (ZERO_ROW, 0)
    if len(values) == 1:
        return (values[0], held)
    assert values == list(range(values[0], NV))
    return (SUFFIX + values[0], held)


Level = dict[str, object]


def _level(hands: list[Comp], size: int, child_index: dict[Comp, int], *, h17: bool,
           first: FirstDraw, outs: list[tuple[int, Comp]]) -> tuple[Level, dict[Comp, int]]:
    ncat = NCAT if size == 1 else NDRAWN
    moves: dict[Comp, list[tuple[int, int]]] = {}
    terminal: dict[Comp, list[list[int]]] = {}
    for hand in hands:
        moves[hand] = []
        term = terminal[hand] = [[] for _ in range(ncat)]
        bj = _blackjack_card(hand)
        for v, drawn, stands, category in _draws_of(hand, h17):
            if v == bj:
                if first is FirstDraw.COUNTED:
                    term[BLACKJACK].append(v)
                continue
            if stands:
                if category != BUST:
                    term[category].append(v)
            else:
                moves[hand].append((child_index[drawn], v))
    order = sorted(hands, key=lambda h: -len(moves[h]))
    child: list[int] = []
    factor: list[tuple[int, int]] = []
    runs: list[int] = []
    for j in range(NV):
        run = [h for h in order if len(moves[h]) > j]
        if not run:
            break
        runs.append(len(run))
        for h in run:
            c, v = moves[h][j]
            child.append(c)
            factor.append(_term([v], h[v]))
    index = {h: i for i, h in enumerate(order)}
    level: Level = {
        "cards": size, "ncat": ncat, "size": len(order), "runs": tuple(runs), "child": child,
        "factor": factor,
        "terminal": [_term(terminal[h][c], sum(h[v] for v in terminal[h][c]))
                     for h in order for c in range(ncat)],
        "peeked": [_blackjack_card(h) if first is FirstDraw.PEEKED else -1 for h in order],
        "out_start": [u for u, _ in outs], "out_index": [index[s] for _, s in outs],
    }
    return level, index


def reference_plan(starts: tuple[Comp, ...], h17: bool, first: FirstDraw,
                   ) -> tuple[tuple[tuple[int, int], ...], list[Level]]:
    """(constant starts, levels) as the Python build made them, terms as (source, held)."""
    constant = tuple((u, best_total(s)[0] - 17 if best_total(s)[0] <= 21 else BUST)
                     for u, s in enumerate(starts)
                     if sum(s) >= 2 and _stands_on(*best_total(s), h17))
    by_size = _reachable(starts, h17)
    levels: list[Level] = []
    index: dict[Comp, int] = {}
    for size in sorted(by_size, reverse=True):
        hands = sorted(by_size[size])
        members = set(hands)
        outs = [(u, s) for u, s in enumerate(starts) if sum(s) == size and s in members]
        level, index = _level(hands, size, index, h17=h17, first=FirstDraw.NONE, outs=outs)
        levels.append(level)
    ones = [(u, s) for u, s in enumerate(starts) if sum(s) == 1]
    if ones:
        level, _ = _level(sorted({s for _, s in ones}), 1, index, h17=h17, first=first,
                          outs=ones)
        levels.append(level)
    return constant, levels


# ----- the comparison ----------------------------------------------------------------------------


def as_built(solver: DealerSolver) -> list[Level]:
    def terms(rows: np.ndarray) -> list[tuple[int, int]]:
        return [(int(solver.term_source[t]), int(solver.term_held[t])) for t in rows]

    return [{"cards": lv.cards, "ncat": lv.ncat, "size": lv.size, "runs": lv.runs,
             "child": lv.child.tolist(), "factor": terms(lv.factor),
             "terminal": terms(lv.terminal), "peeked": lv.peeked.tolist(),
             "out_start": lv.out_start.tolist(), "out_index": lv.out_index.tolist()}
            for lv in solver.levels]


def _one(v: int) -> Comp:
    return add((0,) * NV, v)


def _two(a: int, b: int) -> Comp:
    return add(_one(a), b)


STARTS = {
    **{f"up {d} decks": up_card_starts(tuple([4 * d] * 9 + [16 * d])).comps for d in (1, 8)},
    "exposed": exposed_starts(tuple([8] * 9 + [32])).comps,
    "three up cards": (_one(2), _one(5), _one(ACE)),
    "a ten alone": (_one(TEN),),
    "an ace alone": (_one(ACE),),
    "some two-card starts": (_two(1, 3), _two(ACE, 5), _two(TEN, TEN), _two(ACE, TEN),
                             _two(5, 6)),
}


@pytest.mark.parametrize("h17", [False, True])
@pytest.mark.parametrize("first", list(FirstDraw))
@pytest.mark.parametrize("name", list(STARTS))
def test_the_plan_is_the_python_builds(name: str, first: FirstDraw, h17: bool) -> None:
    starts = tuple(STARTS[name])
    solver = _build(starts, h17, first)
    constant, levels = reference_plan(starts, h17, first)
    assert solver.constant == constant
    assert as_built(solver) == levels
    # the kernel's flat arrays hold the same levels
    assert solver.kernel.child.tolist() == [c for lv in solver.levels for c in lv.child]
    assert len(solver.kernel.levels) == len(levels)
