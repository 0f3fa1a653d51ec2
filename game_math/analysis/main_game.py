"""The main game, exactly: returns, basic and composition-dependent strategy, frequencies, advice.

Everything here is driven by the ``Rules`` object alone, so any TOML combination is analysed the
same way as the four built-in games.

Method (a combinatorial analyser in the tradition of Griffin, Farmer and MGP)
----------------------------------------------------------------------------
* Dealer: exact final-total probabilities over the remaining shoe for every player-hand composition
  (``ca_dealer``): the recursion over the multisets of cards the dealer draws, run backward once
  over the distinct dealer hands every start can reach, for all compositions at once. With a
  peeked hole card the probabilities are joint with "no dealer blackjack"; with no hole card (or
  no peek) the dealer blackjack is an outcome that takes doubled and split bets too; with both
  cards exposed the dealer's two cards are the start and a dealer blackjack ends the round before
  any play.
* Player: the value of standing, hitting, doubling and splitting for every composition of cards,
  drawn exactly from the shoe without the player's cards and the dealer's visible card(s).
* Composition-dependent strategy (CD): every hand takes the best action for its exact cards.
* Basic strategy (TD, total-dependent): one hit/stand decision per (hard or soft total, strategy
  column), one double decision per (total, column) for two-card hands where doubling is allowed,
  one split decision per (pair value, column). The column is the dealer's up card, or in double
  exposure the dealer's two-card total and softness ("H12", "S17"). A decision is the action with
  the larger value summed over all compositions of that total, each weighted by its probability
  of being the player's first cards given the column (hit/stand: all compositions of two or more
  cards; double: two-card compositions; a hand that hits plays on by the same table). Totals are
  decided in an order where every hit leads to an already decided total (hard 21..11, soft
  21..12, hard 10..4), so the search is one pass. Resplitting follows the split decision.
* Splits, the one approximation (``SPLIT_METHOD``; its size is measured): each post-split hand
  is valued as played from the shoe less the dealer's card(s), both pair cards and, after k
  resplits, k more pair cards, by a strategy that depends on its own cards and that known removal
  only (CD: the best such play, one rule for every split hand, "CDP1"; basic: the table). The
  number of hands is counted exactly from the pair cards left, resplitting whenever splitting is
  the chosen play and the rules allow it; while a resplit is possible a hand's second card is
  conditioned not to be a pair card. Left out: a split hand never uses the cards its sibling
  hands drew.
* Doubling for less (``double.for_less``) never beats doubling in full when doubling is right:
  the value of doubling for a fraction f of the bet is ``(1 + f) * D`` with D the value of one card
  then stand, linear in f, so the best stake is full (when ``2D`` beats hitting, ``D > 0``) or no
  double at all. The analysis therefore treats a double as a full double.
* Insurance is never part of the strategy; its value per unit of insurance stake is reported.

All values are per unit of the initial bet; a return (RTP) is ``1 + expected net result``.

Published figures (``reconcile``; the tests pin these findings): snap's 99.80 % is not what its
rules give as read (split once: basic 99.763 %, CD 99.777 %); allowing resplits gives it (to three
hands 99.803 %, to four 99.808 %, basic). Multi-hand's 99.48 % is not its rules as read (basic
99.386 %, CD 99.390 %); doubling on any two cards, soft included, gives 99.483 %, and a dealer
blackjack taking only the original bet (as with a peeked hole card) 99.498 %.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from game_math.analysis.ca_core import (
    BUSTED,
    LOSE,
    PUSH,
    VALUE_NAMES,
    WIN,
    BoolArray,
    FloatArray,
    Starts,
    blackjack_card,
    blackjack_results,
    dealer_key_name,
    exposed_starts,
    is_blackjack,
    no_blackjack,
    up_card_starts,
)
from game_math.analysis.ca_dealer import BUST, FirstDraw, dealer_outcomes, dealer_solver
from game_math.analysis.ca_eval import draw_value
from game_math.analysis.ca_game import BasicTables, Evaluation, GameModel, cell_of
from game_math.analysis.ca_hands import (
    ACE,
    NV,
    TEN,
    Comp,
    add,
    best_total,
    composition,
    hand_space,
    shoe_counts,
)
from game_math.analysis.ca_strategy import (
    BasicStrategy,
    Cell,
    StrategyTable,
    basic_strategy,
    strategy_table,
)
from game_math.cards import Card
from game_math.legality import double_allowed
from game_math.round import ActionKind
from game_math.rules import DealerCards, DoubleOn, Rules

SPLIT_METHOD = (
    "Splits: every post-split hand is valued as played from the shoe less the dealer's card(s), "
    "both pair cards and, after k resplits, k more pair cards, by the best play for its own cards "
    "(basic: by the table); the number of hands is counted exactly from the pair cards left. A "
    "split hand never uses its sibling hands' cards. Measured: exact without resplits for that "
    "play (split aces: equal to brute force); against exact play where the second hand knows the "
    "first hand's cards, 0.015 % of a split for 8-8 v T with two decks (0.048 % single deck) and "
    "0.0003 points of snap's return over all its splits; within 0.0004 points of the Wizard of "
    "Odds' Appendix 9 game returns (1 to 8 decks). Valuing resplit hands without the extra pair "
    "cards removed (exact_resplit=False) is off by 0.001 to 0.002 points (0.02 in double "
    "exposure, where tens are split)."
)


@dataclass(frozen=True)
class HitFrequencies:
    """Outcome frequencies under basic strategy.

    ``win``/``push``/``lose``/``bust`` count final hands (each hand of a split counts, a double
    is one hand) as a share of all final hands (``hands_per_round`` of them per initial hand);
    ``bust`` is the part of ``lose`` where the player busted. ``player_blackjack`` is per initial
    hand. ``dealer_bust`` is P(the dealer busts | column) when the dealer plays the hand out.
    """

    win: float
    push: float
    lose: float
    bust: float
    player_blackjack: float
    hands_per_round: float
    dealer_bust: Mapping[str, float]


@dataclass(frozen=True)
class CompositionException:
    """A two-card hand whose best play by its exact cards differs from basic strategy."""

    player: str  # e.g. "T6"
    dealer: str  # up card, or the dealer's two cards in double exposure
    basic: ActionKind
    best: ActionKind
    gain: float  # EV gained per unit bet by the composition play (conditional, as in ``Cell``)


@dataclass(frozen=True)
class MainGameAnalysis:
    """The main game's exact analysis under one rule set: returns, strategy, frequencies."""
    game: str
    basic_ev: float  # expected net result per unit initial bet under basic strategy
    composition_ev: float  # ... under composition-dependent strategy
    strategy: StrategyTable
    basic: BasicStrategy  # the same strategy as fast lookups (for the simulator and advice)
    frequencies: HitFrequencies
    insurance_ev: Mapping[str, float]  # per unit insurance stake, by up card (ace only)
    exceptions: tuple[CompositionException, ...]
    split_method: str

    @property
    def basic_rtp(self) -> float:
        """Return to player under basic strategy (1 + expected net result)."""
        return 1.0 + self.basic_ev

    @property
    def composition_rtp(self) -> float:
        """Return to player under composition-dependent strategy."""
        return 1.0 + self.composition_ev

    @property
    def basic_house_edge(self) -> float:
        """The house edge under basic strategy."""
        return -self.basic_ev

    @property
    def composition_house_edge(self) -> float:
        """The house edge under composition-dependent strategy."""
        return -self.composition_ev


# ----- the full-game analysis ----------------------------------------------------------------


def analyse_main_game(rules: Rules, *, exact_resplit: bool = True) -> MainGameAnalysis:
    """The exact analysis of ``rules`` (cached: rules objects are immutable)."""
    return _analyse(rules, exact_resplit)


def main_game_return(rules: Rules) -> tuple[float, float]:
    """(basic RTP, composition-dependent RTP), e.g. (0.9948, 0.9950)."""
    a = analyse_main_game(rules)
    return a.basic_rtp, a.composition_rtp


def game_starts(rules: Rules, shoe: Comp) -> Starts:
    if rules.dealer.cards is DealerCards.BOTH_EXPOSED:
        return exposed_starts(shoe)
    return up_card_starts(shoe)


@lru_cache(maxsize=64)
def _analyse(rules: Rules, exact_resplit: bool) -> MainGameAnalysis:
    shoe = shoe_counts(rules.decks)
    model = GameModel(rules, shoe, game_starts(rules, shoe), exact_resplit=exact_resplit)
    weights = model.base_weights()
    two = np.flatnonzero(model.base.ncards == 2)
    dealer_bj = _dealer_blackjack(model)
    ev = model.evaluate(weights, outcome_seed=_play_weights(model, weights, dealer_bj, two))
    assert ev.tables is not None and ev.basic_first is not None
    first_cd = _with_splits(model, ev.cd.first, ev.split_cd, None)
    first_b = _with_splits(model, ev.basic_first, ev.split_basic, ev.tables)
    return MainGameAnalysis(
        game=rules.game,
        basic_ev=_initial_ev(model, weights, first_b, dealer_bj, two),
        composition_ev=_initial_ev(model, weights, first_cd, dealer_bj, two),
        strategy=strategy_table(model, weights, ev),
        basic=basic_strategy(model, ev.tables),
        frequencies=_frequencies(model, weights, ev, dealer_bj, two),
        insurance_ev=_insurance(model, weights, two),
        exceptions=_exceptions(model, ev, first_cd, first_b),
        split_method=SPLIT_METHOD,
    )


def _with_splits(model: GameModel, first: FloatArray, split: Mapping[int, FloatArray],
                 tables: BasicTables | None) -> FloatArray:
    """Two-card values with the split option: the best (CD) or the table's choice (basic)."""
    out = first.copy()
    for pair, value in split.items():
        i = model.pair_hand(pair)
        if tables is None:
            out[:, i] = np.maximum(out[:, i], value)
        else:
            out[:, i] = np.where(tables.split[model.starts.key, pair], value, out[:, i])
    return out


def _dealer_blackjack(model: GameModel) -> FloatArray:
    """(U, Hm): P(dealer blackjack | start, player's hand), for two-card hands."""
    counts = model.space.counts[model.base.mem]
    out = np.zeros((len(model.starts.comps), counts.shape[0]))
    for u, comp in enumerate(model.starts.comps):
        if model.mode is FirstDraw.NONE:
            out[u] = 1.0 if is_blackjack(comp) else 0.0
            continue
        b = blackjack_card(comp)
        if b >= 0:
            n = np.array(model.shoe) - np.array(comp)
            out[u] = np.maximum(n[b] - counts[:, b], 0) / (n.sum() - counts.sum(axis=1))
    return out


def _natural_mask(model: GameModel) -> BoolArray:
    """Base-tree hands that are blackjacks: two cards totalling 21."""
    out: BoolArray = (model.base.ncards == 2) & (model.base.total == 21)
    return out


def _initial_ev(model: GameModel, weights: FloatArray, first: FloatArray,
                dealer_bj: FloatArray, two: np.ndarray) -> float:
    both, pays = blackjack_results(model.rules)
    natural = _natural_mask(model)[two]
    bj = dealer_bj[:, two]
    play = first[:, two]
    if model.mode is FirstDraw.PEEKED:
        play = play - bj
    elif model.mode is FirstDraw.NONE:
        play = np.where(bj > 0, -1.0, play)
    ev = np.where(natural[None, :], bj * both + (1.0 - bj) * pays, play)
    return float((weights[:, two] * ev).sum())


# ----- strategy table ------------------------------------------------------------------------


# ----- frequencies, insurance, exceptions ----------------------------------------------------


def _play_weights(model: GameModel, weights: FloatArray, dealer_bj: FloatArray,
                  two: np.ndarray) -> FloatArray:
    """(U, Hm): the weight of each two-card hand that is played out (not a player blackjack,
    and with no hole card to peek, not already lost to an exposed dealer blackjack)."""
    out = np.zeros(weights.shape)
    play = weights[:, two] * ~_natural_mask(model)[two][None, :]
    if model.mode is FirstDraw.NONE:
        play = np.where(dealer_bj[:, two] > 0, 0.0, play)
    out[:, two] = play
    return out


def _frequencies(model: GameModel, weights: FloatArray, ev: Evaluation,
                 dealer_bj: FloatArray, two: np.ndarray) -> HitFrequencies:
    assert ev.outcome_play is not None
    natural = _natural_mask(model)[two]
    w = weights[:, two]
    bj = dealer_bj[:, two]
    both, _ = blackjack_results(model.rules)
    totals = ev.outcome_play.copy()
    # a dealer blackjack against a played hand: lost (peeked: the values are joint with no
    # dealer blackjack, so that share is lost on top; exposed: the hand is not played)
    if model.mode is FirstDraw.PEEKED:
        totals[LOSE] += float((w * bj * ~natural[None, :]).sum())
    elif model.mode is FirstDraw.NONE:
        totals[LOSE] += float((w * (bj > 0) * ~natural[None, :]).sum())
    nat = w * natural[None, :]
    totals[WIN if both > 0 else PUSH if both == 0 else LOSE] += float((nat * bj).sum())
    totals[WIN] += float((nat * (1.0 - bj)).sum())
    hands = float(totals.sum())
    return HitFrequencies(
        win=float(totals[WIN] / hands), push=float(totals[PUSH] / hands),
        lose=float((totals[LOSE] + totals[BUSTED]) / hands), bust=float(totals[BUSTED] / hands),
        player_blackjack=float((weights[:, two] * natural[None, :]).sum()),
        hands_per_round=hands, dealer_bust=_dealer_bust(model),
    )


def _dealer_bust(model: GameModel) -> dict[str, float]:
    """P(dealer busts | column), the dealer playing out from the shoe less its visible cards."""
    out: dict[str, float] = {}
    weight: dict[str, float] = {}
    comps = model.starts.comps
    first = FirstDraw.NONE if sum(comps[0]) == 2 else FirstDraw.COUNTED
    solver = dealer_solver(comps, model.rules.dealer.hits_soft_17, first)
    busts = dealer_outcomes(solver, model.shoe, np.zeros((1, len(model.shoe)), dtype=np.int64))
    for u, comp in enumerate(comps):
        name = model.starts.key_names[model.starts.key[u]]
        if sum(comp) == 2 and is_blackjack(comp):
            continue  # a dealer blackjack ends the round: no column of its own
        bust = float(busts[u, 0, BUST])
        w = float(model.starts.prob[u])
        out[name] = out.get(name, 0.0) + w * bust
        weight[name] = weight.get(name, 0.0) + w
    return {k: out[k] / weight[k] for k in model.starts.key_names if weight.get(k, 0.0) > 0}


def _insurance(model: GameModel, weights: FloatArray, two: np.ndarray) -> dict[str, float]:
    ins = model.rules.insurance
    if not ins.offered or model.mode is FirstDraw.NONE:
        return {}
    u = model.starts.comps.index(add((0,) * NV, ACE))
    counts = model.space.counts[model.base.mem[two]]
    n = np.array(model.shoe) - np.array(model.starts.comps[u])
    p_ten = (n[TEN] - counts[:, TEN]) / (n.sum() - counts.sum(axis=1))
    offered = ins.to_blackjack | ~_natural_mask(model)[two]  # averaged over hands offered it
    w = weights[u, two] * offered
    ev = float((w * (float(ins.pays.returns) * p_ten - 1.0)).sum() / w.sum())
    return {"A": ev}


def _exceptions(model: GameModel, ev: Evaluation, first_cd: FloatArray, first_b: FloatArray,
                ) -> tuple[CompositionException, ...]:
    tree, arr, tables = model.base, model.base_arr, ev.tables
    assert tables is not None
    two = np.flatnonzero((tree.ncards == 2) & (tree.total < 21))
    no_bj = no_blackjack(model.shoe, model.starts, model.space.counts[tree.mem[two]], model.mode)
    # every start's and hand's gain at once (the same divisions); only the gains not at or
    # below the threshold are looked at one by one, start by start, in hand order
    gains = (first_cd[:, two] - first_b[:, two]) / no_bj
    out: list[CompositionException] = []
    for u, j in zip(*np.nonzero(~(gains <= 1e-12)), strict=True):
        i, start, gain = two[j], model.starts.comps[u], gains[u, j]
        comp = tuple(model.space.counts[tree.mem[i]].tolist())
        best = _best_action(ev.cd.hit[u, i], arr.stand[i, u], ev.cd.double[u, i],
                            _split_value(ev.split_cd, comp, u))
        basic = _basic_action(model, tables, int(model.starts.key[u]), comp)
        if basic is best:
            continue  # same first action, better play later: not a strategy difference
        out.append(CompositionException(_label(comp), _label(start), basic, best,
                                        float(gain)))
    return tuple(out)


def _split_value(split: Mapping[int, FloatArray], comp: Comp, u: int) -> float:
    if sum(comp) == 2 and max(comp) == 2:
        pair = comp.index(2)
        if pair in split:
            return float(split[pair][u])
    return -np.inf


def _best_action(hit: float, stand: float, dbl: float, split: float) -> ActionKind:
    options = {ActionKind.STAND: stand, ActionKind.HIT: hit, ActionKind.DOUBLE: dbl,
               ActionKind.SPLIT: split}
    return max(options, key=lambda a: options[a])


def _basic_action(model: GameModel, tables: BasicTables, key: int, comp: Comp) -> ActionKind:
    total, soft = best_total(comp)
    if sum(comp) == 2 and max(comp) == 2 and tables.split[key, comp.index(2)]:
        return ActionKind.SPLIT
    cid = cell_of(total, soft)
    if tables.double[key, cid] and double_allowed(model.rules, total, soft, after_split=False):
        return ActionKind.DOUBLE
    return ActionKind.HIT if tables.hit[key, cid] else ActionKind.STAND


def _label(comp: Comp) -> str:
    return "".join(VALUE_NAMES[v] * k for v, k in reversed(list(enumerate(comp))))


# ----- live advice ---------------------------------------------------------------------------


def action_values(
    rules: Rules,
    player_cards: Sequence[Card],
    dealer_cards: Sequence[Card],
    removed_cards: Iterable[Card] = (),
    *,
    can_hit: bool = True,
    can_double: bool = False,
    can_split: bool = False,
    hands_at_seat: int = 1,
) -> dict[ActionKind, float]:
    """Expected value, per unit of this hand's bet, of every legal action on the current hand.

    ``player_cards``: the hand's cards; ``dealer_cards``: the dealer's visible card(s) (one, or
    both in double exposure); ``removed_cards``: every other card seen since the shuffle (other
    hands, split siblings, earlier rounds of the shoe). The legality flags come from the engine;
    ``hands_at_seat`` is how many hands the seat has now (it bounds further resplits). Values are
    exact over the remaining cards, conditioned on everything seen (with a peeked hole card: on no
    dealer blackjack); the play after the action is the composition-dependent best; a split uses
    the method of ``SPLIT_METHOD``.
    """
    player = composition(player_cards)
    start = composition(dealer_cards)
    shoe = _shoe_less(rules.decks, removed_cards)
    total, _ = best_total(player)
    if total > 21:
        raise ValueError("the hand is bust: no action is left")
    starts = Starts((start,), np.ones(1), np.zeros(1, dtype=np.int64), (dealer_key_name(start),))
    pair = player.index(2) if can_split and sum(player) == 2 and max(player) == 2 else -1
    space = hand_space(shoe_counts(rules.decks))
    mask: BoolArray = np.all(space.counts >= np.array(player)[None, :], axis=1)
    model = GameModel(rules, shoe, starts, base_mask=mask, pairs=(pair,) if pair >= 0 else (),
                      hands_now=hands_at_seat)
    return _live_values(model, player, can_hit, can_double, pair)


def _live_values(model: GameModel, player: Comp, can_hit: bool, can_double: bool,
                 pair: int) -> dict[ActionKind, float]:
    tree, arr = model.base, model.base_arr
    i = tree.local(model.space.index[player])
    ev = model.evaluate(None)
    values = ev.cd
    norm = float(no_blackjack(model.shoe, model.starts, np.array([player]), model.mode)[0, 0])
    out = {ActionKind.STAND: float(arr.stand[i, 0])}
    if can_hit:
        out[ActionKind.HIT] = float(values.hit[0, i])
    if can_double:
        out[ActionKind.DOUBLE] = float(2.0 * draw_value(tree, arr, np.array([i]), arr.stand)[0, 0])
    if pair >= 0:
        out[ActionKind.SPLIT] = float(ev.split_cd[pair][0])
    return {a: v / norm for a, v in out.items()}


def best_action(values: Mapping[ActionKind, float]) -> ActionKind:
    """The action of highest value (the first listed among equals)."""
    return max(values, key=lambda a: values[a])


def _shoe_less(decks: int, removed: Iterable[Card]) -> Comp:
    shoe = list(shoe_counts(decks))
    for c in removed:
        v = composition([c]).index(1)
        shoe[v] -= 1
        if shoe[v] < 0:
            raise ValueError(f"more cards of value {VALUE_NAMES[v]} removed than the shoe holds")
    return tuple(shoe)


def insurance_value(rules: Rules, player_cards: Sequence[Card], up_card: Card,
                    removed_cards: Iterable[Card] = ()) -> float:
    """EV of insurance per unit of insurance stake for this hand (negative: never take it)."""
    shoe = list(_shoe_less(rules.decks, [*removed_cards, *player_cards, up_card]))
    return float(rules.insurance.pays.returns) * shoe[TEN] / sum(shoe) - 1.0


# ----- readings of the published figure ------------------------------------------------------

#: a published return and a computed one agree when within 0.02 percentage points
PUBLISHED_TOLERANCE = 0.0002


@dataclass(frozen=True)
class Reading:
    """The return under one reading of the rules, and what that reading changes."""

    name: str  # "as-read", or the changed knob: "obo", "double-any", "split-4", ..
    change: str
    rules: Rules
    basic_rtp: float
    composition_rtp: float

    def distance(self, published: float) -> float:
        """How far the nearer of the two strategies' returns is from ``published``."""
        return min(abs(self.basic_rtp - published), abs(self.composition_rtp - published))


@dataclass(frozen=True)
class Reconciliation:
    """The computed return set against the published one, with the readings tried."""
    published: float | None
    as_read: Reading
    readings: tuple[Reading, ...]  # every alternative, nearest to the published figure first
    matches: tuple[Reading, ...]  # alternatives within ``PUBLISHED_TOLERANCE`` of it
    explanation: str

    @property
    def agrees(self) -> bool:
        """True when nothing is published or the rules as read match it within tolerance."""
        return self.published is None or self.as_read.distance(self.published) <= \
            PUBLISHED_TOLERANCE


def alternative_rules(rules: Rules) -> list[tuple[str, str, Rules]]:
    """One-knob readings of ``rules`` under which a published figure may have been computed."""
    out: list[tuple[str, str, Rules]] = []
    d, dbl, sp = rules.dealer, rules.double, rules.split
    if d.cards is DealerCards.NO_HOLE_CARD or (d.cards is DealerCards.HOLE_CARD and not d.peek):
        out.append(("obo", "dealer blackjack takes only the original bet (peeked hole card)",
                    replace(rules, dealer=replace(d, cards=DealerCards.HOLE_CARD, peek=True))))
    if d.cards is DealerCards.HOLE_CARD and d.peek:
        out.append(("enhc", "no hole card: a dealer blackjack takes doubles and splits too",
                    replace(rules, dealer=replace(d, cards=DealerCards.NO_HOLE_CARD,
                                                  peek=False))))
    s17 = not d.hits_soft_17
    out.append(("h17" if s17 else "s17",
                "dealer hits soft 17" if s17 else "dealer stands on soft 17",
                replace(rules, dealer=replace(d, hits_soft_17=s17))))
    if dbl.on is not DoubleOn.ANY or not dbl.soft:
        out.append(("double-any", "double on any first two cards, soft hands included",
                    replace(rules, double=replace(dbl, on=DoubleOn.ANY, soft=True))))
    das = not dbl.after_split
    out.append(("das" if das else "no-das",
                "double after split allowed" if das else "no double after split",
                replace(rules, double=replace(dbl, after_split=das))))
    for hands in (2, 3, 4):
        if hands != sp.max_hands:
            out.append((f"split-{hands}", f"split to at most {hands} hands",
                        replace(rules, split=replace(sp, max_hands=hands))))
    if sp.max_hands > 2:
        rsa = not sp.resplit_aces
        out.append(("rsa" if rsa else "no-rsa",
                    "aces may be resplit" if rsa else "aces may not be resplit",
                    replace(rules, split=replace(sp, resplit_aces=rsa))))
    return out


def readings(rules: Rules, names: Iterable[str] | None = None) -> list[Reading]:
    """Returns under the alternative readings (all, or those named)."""
    wanted = None if names is None else set(names)
    out = []
    for name, change, alt in alternative_rules(rules):
        if wanted is None or name in wanted:
            basic, comp = main_game_return(alt)
            out.append(Reading(name, change, alt, basic, comp))
    return out


def reconcile(rules: Rules, names: Iterable[str] | None = None) -> Reconciliation:
    """The return as read against the published one, and which readings reproduce the latter.

    With no published figure only the as-read return is computed.
    """
    basic, comp = main_game_return(rules)
    as_read = Reading("as-read", "the rules as written", rules, basic, comp)
    if rules.published_return is None:
        return Reconciliation(None, as_read, (), (), "no published figure")
    published = float(rules.published_return)
    alts = sorted(readings(rules, names), key=lambda r: r.distance(published))
    matches = tuple(r for r in alts if r.distance(published) <= PUBLISHED_TOLERANCE)
    return Reconciliation(published, as_read, tuple(alts), matches,
                          _explain(published, as_read, matches))


def _explain(published: float, as_read: Reading, matches: Sequence[Reading]) -> str:
    def pct(x: float) -> str:
        return f"{100 * x:.3f} %"

    head = (f"published {pct(published)}; as read: basic {pct(as_read.basic_rtp)}, "
            f"composition-dependent {pct(as_read.composition_rtp)}")
    if as_read.distance(published) <= PUBLISHED_TOLERANCE:
        return head + " (within 0.02 points)"
    gap = 100 * (as_read.basic_rtp - published)
    if not matches:
        return head + f" ({gap:+.3f} points); no one-knob reading comes within 0.02 points"
    found = "; ".join(
        f"{r.change}: basic {pct(r.basic_rtp)}, composition-dependent {pct(r.composition_rtp)}"
        for r in matches
    )
    return head + f" ({gap:+.3f} points). Within 0.02 points of the published figure: {found}"


__all__ = [
    "PUBLISHED_TOLERANCE", "SPLIT_METHOD", "BasicStrategy", "Cell",
    "CompositionException", "HitFrequencies", "MainGameAnalysis", "Reading", "Reconciliation",
    "StrategyTable", "action_values", "alternative_rules", "analyse_main_game", "best_action",
    "insurance_value", "main_game_return", "readings", "reconcile",
]
