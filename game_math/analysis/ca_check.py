"""Independent checks of the split approximation, used by the tests and the benchmark.

``split_cdp`` evaluates a split without resplits *exactly* under "CDP" play: the first hand plays
the analyser's strategy (best for its own cards with the pair cards removed), the second hand then
plays best for its own cards *knowing every card of the first hand*. The analyser's value
(each hand ignores its sibling) is a lower bound of it; their difference is the size of the
approximation for that pair. It enumerates every way the first hand can end, so it is for
checking single pairs, not for whole games.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from game_math.analysis.ca_core import Starts, dealer_key_name, no_blackjack
from game_math.analysis.ca_eval import optimal_values
from game_math.analysis.ca_game import GameModel
from game_math.analysis.ca_hands import (
    ACE,
    NV,
    Comp,
    add,
    best_total,
    hand_space,
    shoe_counts,
)
from game_math.legality import double_allowed
from game_math.rules import Rules

ZERO: Comp = (0,) * NV


@dataclass(frozen=True)
class SplitCheck:
    """The analyser's value of a split against the exact one (``cdp``), per unit initial bet."""
    analyser: float  # the analyser's value of splitting (no resplit), per unit initial bet
    cdp: float  # the exact value when the second hand knows the first hand's cards

    @property
    def error(self) -> float:
        """How far the exact value lies above the analyser's."""
        return self.cdp - self.analyser


def _one_start(start: Comp) -> Starts:
    return Starts((start,), np.ones(1), np.zeros(1, dtype=np.int64), (dealer_key_name(start),))


def _model(rules: Rules, shoe: Comp, start: Comp, pair: int) -> GameModel:
    """A model of one start whose only split plan is ``pair``; its base tree (unused here) is
    cut down to the pair itself so that no dealer work is spent on it."""
    space = hand_space(shoe_counts(rules.decks))
    mask = np.zeros(space.size, dtype=np.bool_)
    mask[space.index[add(add(ZERO, pair), pair)]] = True
    return GameModel(rules, shoe, _one_start(start), pairs=(pair,), base_mask=mask)


def split_cdp(rules: Rules, pair: int, up: int) -> SplitCheck:
    """Split value of the pair of value index ``pair`` against up card ``up`` (value indices),
    conditioned on no dealer blackjack where the dealer peeks; resplits are not allowed."""
    rules = replace(rules, split=replace(rules.split, max_hands=2))
    shoe = shoe_counts(rules.decks)
    start = add(ZERO, up)
    model = _model(rules, shoe, start, pair)
    ours = float(model.evaluate(None).split_cd[pair][0])
    rest = 0.0
    for cards, prob in _first_hand_endings(model, pair).items():
        seen = tuple(s - c for s, c in zip(shoe, add(cards, pair, -1), strict=True))
        second = _model(rules, seen, start, pair)
        rest += prob * float(second.evaluate(None).split_cd[pair][0]) / 2.0
    pair_hand = np.array([add(add(ZERO, pair), pair)])
    norm = float(no_blackjack(shoe, model.starts, pair_hand, model.mode)[0, 0])
    return SplitCheck(ours / norm, (ours / 2.0 + rest) / norm)


def _first_hand_endings(model: GameModel, pair: int) -> dict[Comp, float]:
    """Every final composition of the first split hand under the analyser's play, with its
    probability (plain draws from the shoe less the up card and both pair cards)."""
    rules = model.rules
    tree = model.splits[pair].trees[0]
    arr = model.tree_arrays(tree)
    values = optimal_values(rules, tree, arr, after_split=True)
    both = add(add(ZERO, pair), pair)
    left = [s - a - b for s, a, b in zip(model.shoe, model.starts.comps[0], both, strict=True)]
    one_card = pair == ACE and rules.split.split_aces_one_card
    out: dict[Comp, float] = {}

    def draws(hand: Comp) -> list[tuple[int, float]]:
        avail = [left[v] - hand[v] + (1 if v == pair else 0) for v in range(NV)]
        total = sum(avail)
        return [(v, a / total) for v, a in enumerate(avail) if a > 0]

    def play(hand: Comp, prob: float) -> None:
        total, soft = best_total(hand)
        n = sum(hand)
        if total >= 21 or (one_card and n == 2):
            out[hand] = out.get(hand, 0.0) + prob
            return
        i = tree.local(model.space.index[hand])
        stand, hit = float(arr.stand[i, 0]), float(values.hit[i, 0])
        doubles = n == 2 and double_allowed(rules, total, soft, after_split=True) and \
            float(values.double[i, 0]) > max(stand, hit)
        if doubles:
            for v, p in draws(hand):
                drawn = add(hand, v)
                out[drawn] = out.get(drawn, 0.0) + prob * p
        elif n == 1 or hit > stand:
            for v, p in draws(hand):
                play(add(hand, v), prob * p)
        else:
            out[hand] = out.get(hand, 0.0) + prob

    play(add(ZERO, pair), 1.0)
    return out
