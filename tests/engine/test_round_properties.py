"""Property tests of the round engine, in every game: random shoes, random bets within the limits,
random legal action sequences (with random amounts), a random save/restore point.

Checked on every round: it always ends; the cards dealt are exactly the shoe from ``start`` in
order (no position twice); every wager is settled and the totals add up; each wager's return is
the one its hand's cards, the dealer's cards and the rules imply; the dealer draws by his rule
and not at all when no live hand remains; a round restored from bytes at any step continues
identically; every action outside ``legal_actions`` (and every illegal amount) is refused without
changing a byte.

Choices within a round come from a seeded ``random.Random`` (fast); the seed is part of the
hypothesis example, so a failure reproduces.
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from math import lcm

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from game_math.cards import RANK_OF, VALUE_OF, Card, hand_total, ordered_shoe
from game_math.errors import IllegalAction
from game_math.games import DOUBLE_DECK, DOUBLE_EXPOSURE, MULTI_HAND, SNAP, game_rules
from game_math.round import ACTIONS, DEALER, Action, Hand, HandBet, LegalAction, Round
from game_math.rules import (
    BlackjackVsBlackjack,
    DealerCards,
    DoubleOn,
    Rules,
    ShufflePolicy,
    StakeLevel,
    TieRule,
    rules_from_dict,
)
from game_math.sidebets import side_bet_result

GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
MAX_STEPS = 200
WEIGHT = {"split": 4, "double": 2}
#: examples per game; raise it for a longer hunt (FAIRSHOE_PROPERTY_EXAMPLES=5000)
EXAMPLES = int(os.environ.get("FAIRSHOE_PROPERTY_EXAMPLES", "150"))


@dataclass(frozen=True)
class Scenario:
    rules: Rules
    shoe: list[Card]
    start: int
    level: str
    bets: list[HandBet]
    round_side_bets: dict[str, int]
    balance: int | None
    seed: int

    def __repr__(self) -> str:  # the rules are the game's; the shoe follows from the seed
        return (f"Scenario({self.rules.game}, shoe={len(self.shoe)} cards, start={self.start}, "
                f"level={self.level}, bets={self.bets}, side_bets={self.round_side_bets}, "
                f"balance={self.balance}, seed={self.seed})")


def _stakes(lo: int, hi: int, step: int) -> st.SearchStrategy[int]:
    first = -(-lo // step)
    return st.integers(first, hi // step).map(lambda k: k * step)


def _shoe(rules: Rules, kind: str, rng: random.Random) -> list[Card]:
    full = ordered_shoe(rules.decks)
    if kind == "few_ranks":
        # few ranks make pairs, resplits, blackjacks and side-bet wins common
        # aces and tens often: blackjacks, split and resplit aces, insurance, even money
        ranks = set(rng.sample(range(1, 14), rng.randint(1, 2)))
        ranks |= {r for r in (1, rng.randint(10, 13)) if rng.random() < 0.6}
        pool = [c for c in full if RANK_OF[c] in ranks]
        full = (pool * (1 + 120 // len(pool)))[:160]
    rng.shuffle(full)
    if kind == "short":  # a game fault somewhere in the round
        return full[: rng.randint(0, 16)]
    return full


@st.composite
def scenarios(draw: st.DrawFn, rules: Rules) -> Scenario:
    seed = draw(st.integers(0, 2**63))
    rng = random.Random(seed)
    kind = draw(st.sampled_from(["full", "full", "few_ranks", "few_ranks", "short"]))
    shoe = _shoe(rules, kind, rng)
    cut_card = kind == "full" and rules.shuffle.policy is ShufflePolicy.CUT_CARD
    start = draw(st.integers(0, len(shoe) // 2)) if cut_card else 0
    lvl: StakeLevel = draw(st.sampled_from(rules.levels))
    n = draw(st.sampled_from(rules.hands.counts))
    chip = min(lvl.chips) if lvl.chips else 1
    step = lcm(rules.bet_multiple, chip)
    low = lvl.min_bet * (rules.hands.multi_hand_min_multiple if n > 1 else 1)
    bets = []
    for _ in range(n):
        bet = draw(_stakes(low, lvl.max_bet, step))
        sides = {
            sb.name: draw(_stakes(lvl.side_bet_min, lvl.side_bet_max, chip))
            for sb in rules.side_bets if sb.scope == "hand" and draw(st.booleans())
        }
        bets.append(HandBet(bet, sides))
    round_sides = {
        sb.name: draw(_stakes(lvl.side_bet_min, lvl.side_bet_max, chip))
        for sb in rules.side_bets
        if sb.scope == "round" and n == max(rules.hands.counts) and draw(st.booleans())
    }
    opening = sum(b.bet + sum(b.side_bets.values()) for b in bets) + sum(round_sides.values())
    spare = draw(st.none() | st.integers(0, 4 * opening))
    balance = None if spare is None else opening + spare
    return Scenario(rules, shoe, start, lvl.name, bets, round_sides, balance, seed)


def start_round(s: Scenario) -> Round:
    return Round(s.rules, s.shoe, s.bets, s.round_side_bets, start=s.start, level=s.level,
                 balance=s.balance)


# ----- choosing actions ----------------------------------------------------------------------


def choose(rng: random.Random, legal: list[LegalAction]) -> Action:
    # splits and doubles lead to the rarer states: favour them
    la = rng.choices(legal, [WEIGHT.get(x.action, 1) for x in legal])[0]
    if la.action == "even_money":
        return Action("even_money", accept=rng.random() < 0.5)
    if la.action in ("double", "insurance"):
        if la.any_amount:
            amount = rng.choice([la.min_stake, la.max_stake, rng.randint(la.min_stake,
                                                                          la.max_stake)])
        else:
            amount = rng.choice(la.amounts)
        if la.action == "double" and amount == la.max_stake and rng.random() < 0.3:
            return Action("double")  # no amount: double in full
        return Action(la.action, amount)
    return Action(la.action)


def illegal_actions(rnd: Round, legal: list[LegalAction]) -> Iterator[Action]:
    """Actions ``rnd`` must refuse now: kinds it does not list, amounts outside what it lists."""
    kinds = {la.action for la in legal}
    for kind in (*ACTIONS, "surrender"):
        if kind not in kinds:
            yield Action(kind, accept=True if kind == "even_money" else None)
    for la in legal:
        if la.action == "even_money":
            yield Action("even_money")  # neither yes nor no
        if la.action in ("double", "insurance"):
            yield Action(la.action, la.max_stake + 1)
            yield Action(la.action, -1)
            if la.min_stake > 0:
                yield Action(la.action, la.min_stake - 1)
            if not la.any_amount:
                yield from (Action(la.action, a) for a in range(1, la.max_stake)
                            if a not in la.amounts and a in (1, la.max_stake - 1))
        if la.action == "split":
            yield Action("split", la.max_stake + 1)


def assert_all_refused(rnd: Round, legal: list[LegalAction]) -> None:
    before = rnd.to_bytes()
    events = len(rnd.events)
    for action in illegal_actions(rnd, legal):
        try:
            rnd.act(action)
        except IllegalAction:
            pass
        else:
            raise AssertionError(f"{action} was accepted; legal: {legal}")
        assert rnd.to_bytes() == before, action
        assert len(rnd.events) == events, action


Offer = dict[str, tuple[int, int, bool, tuple[int, ...], str | None]]


def offered(legal: list[LegalAction]) -> Offer:
    return {la.action: (la.min_stake, la.max_stake, la.any_amount, la.amounts, la.alert)
            for la in legal}


def expected_offer(rnd: Round) -> Offer:
    """What the rules offer now, worked out from the rules, the hand and the funds alone."""
    rules, hand = rnd.rules, rnd.hand(rnd.turn.hand or 0)
    avail = rnd.available
    if rnd.turn.decision == "even_money":
        assert rules.insurance.even_money and hand.natural
        return {"even_money": (0, 0, False, (), None)}
    if rnd.turn.decision == "insurance":
        assert rules.insurance.offered and RANK_OF[rnd.dealer[0]] == 1
        assert not hand.natural or rules.insurance.to_blackjack
        top = int(hand.bet * rules.insurance.fraction)
        if rules.insurance.partial:
            top = top if avail is None else min(top, avail)
            return {"insurance": (0, top, True, (), None)}
        top = top if avail is None or avail >= top else 0
        return {"insurance": (0, top, False, (0, top) if top else (0,), None)}
    return expected_play(rules, hand, avail, sum(h.seat == hand.seat for h in rnd.hands))


def expected_play(rules: Rules, hand: Hand, avail: int | None, seat_hands: int) -> Offer:
    assert hand.total < 21 or (hand.split_aces and hand.total == 12), "21 stands by itself"
    locked = hand.split_aces and rules.split.split_aces_one_card
    hard = not hand.soft and bool(rules.alerts)
    out: Offer = {"stand": (0, 0, False, (), "stand_hard_under_12"
                            if hard and hand.total < 12 else None)}
    if not locked:
        out["hit"] = (0, 0, False, (), "hit_hard_17_20" if hard and 17 <= hand.total <= 20
                      else None)
    two = len(hand.cards) == 2
    rule = rules.double
    totals = {DoubleOn.ANY: range(2, 22), DoubleOn.NINE_TO_ELEVEN: range(9, 12),
              DoubleOn.TEN_OR_ELEVEN: range(10, 12)}[rule.on]
    if (two and not locked and (rule.after_split or not hand.from_split)
            and (rule.soft or not hand.soft) and hand.total in totals):
        low = 1 if rule.for_less else hand.bet
        high = hand.bet if avail is None else min(hand.bet, avail)
        if high >= low:
            out["double"] = (low, high, rule.for_less, (high,), None)
    pair = two and VALUE_OF[hand.cards[0]] == VALUE_OF[hand.cards[1]]
    if (pair and seat_hands < rules.split.max_hands
            and (rules.split.resplit_aces or not hand.split_aces)
            and (avail is None or avail >= hand.bet)):
        out["split"] = (hand.bet, hand.bet, False, (hand.bet,), None)
    return out


def play_out(s: Scenario) -> Round:
    rng = random.Random(s.seed ^ 0x5EED)
    rnd = start_round(s)
    cut = rng.randint(0, 6)
    twin: Round | None = None
    last_order = 0
    for step in range(MAX_STEPS):
        if step == cut or (rnd.finished and twin is None):
            twin = Round.from_bytes(rnd.to_bytes(), rnd.shoe)
            assert twin.to_bytes() == rnd.to_bytes() and twin.summary() == rnd.summary()
        if rnd.finished:
            break
        legal = rnd.legal_actions()
        assert legal, "an unfinished round must accept something"
        assert rnd.turn.hand == legal[0].hand
        in_play = rnd.hand_in_play
        assert (in_play.id if in_play else None) == (rnd.turn.hand if rnd.phase == "play" else None)
        # the running totals, mid-round as at its end, are the sums over the wagers
        assert rnd.total_staked == sum(w.staked for w in rnd.wagers)
        assert rnd.total_returned == sum(w.returned or 0 for w in rnd.wagers)
        if rnd.available is not None:
            assert rnd.available >= 0
        assert offered(legal) == expected_offer(rnd)
        if rnd.phase == "play":
            order = [h.id for h in rnd.hands].index(rnd.turn.hand)
            assert order >= last_order and all(h.done for h in rnd.hands[:order])
            last_order = order
        assert_all_refused(rnd, legal)
        action = choose(rng, legal)
        rnd.act(action)
        if twin is not None:
            twin.act(action)
            assert twin.events == rnd.events
    assert rnd.finished, f"round still awaiting after {MAX_STEPS} actions"
    assert rnd.phase in ("finished", "void") and rnd.hand_in_play is None
    assert twin is not None and twin.summary() == rnd.summary()
    assert twin.to_bytes() == rnd.to_bytes()
    for action in (Action("hit"), Action("stand"), Action("insurance", 0)):
        with pytest.raises(IllegalAction):
            rnd.act(action)
    return rnd


# ----- what a finished round must satisfy ----------------------------------------------------


def check_cards(s: Scenario, rnd: Round) -> None:
    dealt = [e.card for e in rnd.events if e.kind == "card"]
    assert rnd.start == s.start and s.start <= rnd.position <= len(s.shoe)
    assert dealt == s.shoe[s.start: rnd.position]
    for h in rnd.hands:
        assert h.seat < len(s.bets)
    per_seat = [sum(1 for h in rnd.hands if h.seat == seat) for seat in range(len(s.bets))]
    assert max(per_seat) <= s.rules.split.max_hands


def check_money(s: Scenario, rnd: Round) -> None:
    assert all(isinstance(w.returned, int) and w.returned >= 0 for w in rnd.wagers)
    assert rnd.total_staked == sum(w.staked for w in rnd.wagers)
    assert rnd.total_returned == sum(w.returned or 0 for w in rnd.wagers)
    opening = sum(b.bet + sum(b.side_bets.values()) for b in s.bets)
    opening += sum(s.round_side_bets.values())
    assert sum(w.staked for w in rnd.wagers if w.kind not in ("split", "double", "insurance")) \
        == opening
    if s.balance is not None:
        assert rnd.available == s.balance - rnd.total_staked + rnd.total_returned >= 0
    if rnd.phase == "void":
        assert all(w.returned == w.staked and w.outcome == "void" for w in rnd.wagers)


def initial_cards(rnd: Round) -> tuple[dict[int, list[Card]], Card]:
    cards: dict[int, list[Card]] = {}
    up: Card | None = None
    for e in rnd.events:
        if e.kind != "card" or e.card is None:
            continue
        if e.hand == DEALER:
            up = e.card if up is None else up
        elif e.hand is not None:
            cards.setdefault(e.hand, []).append(e.card)
    assert up is not None
    return cards, up


def check_side_bets(s: Scenario, rnd: Round) -> None:
    cards, up = initial_cards(rnd)
    for w in rnd.wagers:
        bet = s.rules.side_bet(w.kind)
        if bet is None:
            continue
        if bet.scope == "round":
            judged = [c for seat in range(len(s.bets)) for c in cards[seat][:2]] + [up]
        elif bet.kind == "perfect_pairs":
            judged = cards[w.hand or 0][:2]
        else:
            judged = [*cards[w.hand or 0][:2], up]
        line, returns = side_bet_result(bet, judged)
        assert w.line == line and w.returned == w.staked * returns


def _dealer_done(rules: Rules, cards: list[Card]) -> bool:
    total, soft = hand_total(cards)
    return total > 17 or (total == 17 and not (soft and rules.dealer.hits_soft_17))


def check_dealer(rules: Rules, rnd: Round, live: list[Hand], dealer_bj: bool) -> None:
    dealer = rnd.dealer
    if dealer_bj:
        assert len(dealer) == 2
    elif live:
        assert len(dealer) >= 2 and _dealer_done(rules, dealer)
        assert not any(_dealer_done(rules, dealer[:k]) for k in range(2, len(dealer)))
    else:
        assert len(dealer) <= 2, "the dealer drew with no live wager left"


def expected_main(rules: Rules, h: Hand, dealer_total: int, dealer_bj: bool) -> tuple[str, int]:
    """(hand outcome, main wager return) that the cards imply."""
    bet = h.bet
    bj_pays = bet + int(bet * rules.payouts.blackjack.profit)
    if h.hard > 21:
        return "bust", 0
    if dealer_bj:
        if not h.natural:
            return "lose", 0
        rule = rules.payouts.blackjack_vs_blackjack
        if rule is BlackjackVsBlackjack.PUSH:
            return "push", bet
        return ("blackjack", bj_pays) if rule is BlackjackVsBlackjack.PLAYER_WINS else ("lose", 0)
    if h.natural:
        return "blackjack", bj_pays
    if dealer_total > 21 or h.total > dealer_total:
        return "win", 2 * bet
    if h.total < dealer_total or rules.payouts.ties is TieRule.DEALER_WINS:
        return "lose", 0
    return "push", bet


def check_settlement(s: Scenario, rnd: Round) -> None:
    rules = rnd.rules
    dealer_total = hand_total(rnd.dealer)[0]
    dealer_bj = len(rnd.dealer) == 2 and dealer_total == 21
    up_ace = RANK_OF[rnd.dealer[0]] == 1
    live = []
    for h in rnd.hands:
        assert h.natural == (not h.from_split and len(h.cards) == 2 and h.total == 21)
        main = rnd.wagers[h.main_wager]
        assert main.staked == s.bets[h.seat].bet == h.bet
        if h.split_aces and rules.split.split_aces_one_card:
            assert len(h.cards) == 2
        if h.outcome == "even_money":
            assert rules.insurance.even_money and h.natural and up_ace
            assert main.returned == 2 * h.bet
            continue
        outcome, returned = expected_main(rules, h, dealer_total, dealer_bj)
        assert (h.outcome, main.returned) == (outcome, returned), (h.to_dict(), rnd.dealer)
        if h.double_wager is not None:
            dw = rnd.wagers[h.double_wager]
            assert len(h.cards) == 3 and 0 < dw.staked <= h.bet
            assert rules.double.for_less or dw.staked == h.bet
            factor = {"win": 2, "push": 1}.get(outcome, 0)
            assert dw.returned == factor * dw.staked
        if outcome in ("win", "lose", "push") and not dealer_bj:
            live.append(h)
    for w in rnd.wagers:
        if w.kind == "insurance":
            assert rules.insurance.offered and up_ace
            top = rnd.hand(w.hand or 0).bet * rules.insurance.fraction
            assert 0 < w.staked <= top and (rules.insurance.partial or w.staked == top)
            assert w.returned == (w.staked * rules.insurance.pays.returns if dealer_bj else 0)
        if w.kind == "split":
            assert w.staked == rnd.hand(w.hand or 0).bet
    check_dealer(rules, rnd, live, dealer_bj)
    check_side_bets(s, rnd)
    check_decisions(rnd, dealer_bj)


def check_decisions(rnd: Round, dealer_bj: bool) -> None:
    """Who was asked about insurance, and whether play happened at all."""
    rules = rnd.rules
    asked = [(e.hand, e.action) for e in rnd.events
             if e.kind == "decision" and e.action in ("insurance", "even_money")]
    # with both dealer cards face up, the dealer's blackjack is known: nothing is insured
    exposed = rules.dealer.cards is DealerCards.BOTH_EXPOSED
    expected = []
    if rules.insurance.offered and RANK_OF[rnd.dealer[0]] == 1 and not exposed:
        for seat in range(len(rnd.hand_bets)):
            natural = rnd.hand(seat).natural
            if natural and rules.insurance.even_money:
                expected.append((seat, "even_money"))
            elif not natural or rules.insurance.to_blackjack:
                expected.append((seat, "insurance"))
    assert asked == expected
    played = [e for e in rnd.events if e.kind == "decision" and e.action in ("hit", "stand",
                                                                             "double", "split")]
    seen_first = rules.dealer.cards is DealerCards.BOTH_EXPOSED or (
        rules.dealer.cards is DealerCards.HOLE_CARD and rules.dealer.peek)
    if dealer_bj and seen_first:
        assert not played, "a dealer blackjack seen before play ends the round"


def check_dealer_cards_visibility(rnd: Round) -> None:
    faces = [e.face_up for e in rnd.events if e.kind == "card" and e.hand == DEALER]
    hole = rnd.rules.dealer.cards is DealerCards.HOLE_CARD
    if len(faces) >= 2:
        assert faces[1] is (not hole)
        assert all(faces[2:])


def check_round(s: Scenario) -> None:
    rnd = play_out(s)
    check_cards(s, rnd)
    check_money(s, rnd)
    check_dealer_cards_visibility(rnd)
    if rnd.phase == "finished":
        check_settlement(s, rnd)
    # the same inputs and actions give the same events
    again = start_round(s)
    for action in rnd.actions:
        again.act(action)
    assert again.events == rnd.events
    if s.balance is not None:  # dealt without the balance, then funded: the same round
        funded = Round(s.rules, s.shoe, s.bets, s.round_side_bets, start=s.start, level=s.level)
        funded.fund(s.balance)
        dealt_with = start_round(s)
        for action in rnd.actions:
            assert funded.legal_actions() == dealt_with.legal_actions()
            funded.act(action)
            dealt_with.act(action)
        assert funded.events == rnd.events and funded.to_bytes() == rnd.to_bytes()


@pytest.mark.parametrize("game", GAMES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_rounds_end_deal_each_card_once_balance_and_replay(
    game: str, data: st.DataObject
) -> None:
    check_round(data.draw(scenarios(game_rules(game))))


@st.composite
def custom_rules(draw: st.DrawFn) -> Rules:
    """A game's document with every playing knob redrawn: combinations no built-in game has."""
    doc = copy.deepcopy(draw(st.sampled_from([SNAP, DOUBLE_DECK, DOUBLE_EXPOSURE, MULTI_HAND])))
    pick = draw
    doc.update(
        game="custom",
        decks=pick(st.integers(1, 8)),
        dealer={"cards": pick(st.sampled_from([str(c) for c in DealerCards])),
                "peek": pick(st.booleans()), "hits_soft_17": pick(st.booleans())},
        payouts={"blackjack": pick(st.sampled_from(["3:2", "6:5", "1:1", "2:1"])),
                 "ties": pick(st.sampled_from([str(t) for t in TieRule])),
                 "blackjack_vs_blackjack": pick(st.sampled_from(
                     [str(b) for b in BlackjackVsBlackjack]))},
        double={"on": pick(st.sampled_from(["any", "9-11", "10-11"])), "soft": pick(st.booleans()),
                "after_split": pick(st.booleans()), "for_less": pick(st.booleans())},
        split={"max_hands": pick(st.integers(1, 4)), "resplit_aces": pick(st.booleans()),
               "split_aces_one_card": pick(st.booleans())},
        insurance={"offered": pick(st.booleans()), "partial": pick(st.booleans()),
                   "even_money": pick(st.booleans()), "to_blackjack": pick(st.booleans())},
    )
    return rules_from_dict(doc)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_rounds_under_custom_rule_combinations(data: st.DataObject) -> None:
    check_round(data.draw(scenarios(data.draw(custom_rules()))))
