"""Stacked shoes and scripted rounds for the rule tests.

A rule test names the cards each hand and the dealer receive; ``stack`` turns them into the order
the shoe must yield them for that game's dealing order, and ``play`` deals, applies a script and
checks that exactly the stacked cards were dealt (spare cards follow, so a dealer who draws when
the rules say he must not is caught rather than voided).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence

import pytest

from game_math.cards import card_code, ordered_shoe, parse_cards
from game_math.errors import BetError, IllegalAction
from game_math.games import game_rules
from game_math.round import DEALER, Action, HandBet, Round
from game_math.rules import GAME_IDS, DealerCards, Rules

#: cards after the stacked ones; dealing any of them fails ``play``'s exact-use check
SPARE = ("2C", "3C", "4C", "5C", "6C", "7C", "8C", "9C", "TC", "JC") * 2

Step = str | Action
LedgerRow = tuple[str, int | None, int, int | None]
Ledger = list[LedgerRow]


def rules_of(game: str | Rules) -> Rules:
    return game if isinstance(game, Rules) else game_rules(game)


def stack(
    game: str | Rules,
    hands: Sequence[Sequence[str]],
    dealer: Sequence[str],
    draws: Sequence[str] = (),
) -> list[str]:
    """The shoe for: each hand's first two cards, the dealer's cards in the order he gets them,
    and ``draws`` (player hits, doubles and split cards in play order) in between."""
    first = [h[0] for h in hands] + [dealer[0]] + [h[1] for h in hands]
    if rules_of(game).dealer.cards is DealerCards.NO_HOLE_CARD:
        return first + list(draws) + list(dealer[1:])
    return [*first, dealer[1], *draws, *dealer[2:]]


def as_action(step: Step) -> Action:
    return step if isinstance(step, Action) else Action(step)


def double(amount: int | None = None) -> Action:
    return Action("double", amount)


def insure(amount: int | None = None) -> Action:
    return Action("insurance", amount)


def even_money(accept: bool) -> Action:
    return Action("even_money", accept=accept)


def deal(
    game: str | Rules,
    shoe: Sequence[str],
    bets: Sequence[int | HandBet],
    side_bets: Mapping[str, int] | None = None,
    *,
    level: str | None = None,
    balance: int | None = None,
    spare: bool = True,
) -> Round:
    cards = parse_cards(shoe) + (parse_cards(SPARE) if spare else [])
    hand_bets = [b if isinstance(b, HandBet) else HandBet(b) for b in bets]
    return Round(rules_of(game), cards, hand_bets, side_bets, level=level, balance=balance)


def play(
    game: str | Rules,
    shoe: Sequence[str],
    bets: Sequence[int | HandBet],
    script: Iterable[Step] = (),
    side_bets: Mapping[str, int] | None = None,
    *,
    level: str | None = None,
    balance: int | None = None,
    finished: bool = True,
) -> Round:
    """Deals ``shoe``, applies ``script``; when ``finished``, checks the round is over having
    dealt exactly the stacked cards."""
    rnd = deal(game, shoe, bets, side_bets, level=level, balance=balance)
    for step in script:
        rnd.act(as_action(step))
    if finished:
        assert rnd.phase == "finished", rnd.turn
        assert rnd.position == len(shoe), "the round dealt other cards than the stacked ones"
    else:
        assert not rnd.finished
    return rnd


def ledger(rnd: Round) -> Ledger:
    """Every wager as (kind, hand, staked, returned)."""
    return [(w.kind, w.hand, w.staked, w.returned) for w in rnd.wagers]


def assert_settled(rnd: Round, expected: Sequence[LedgerRow]) -> None:
    """The wagers are exactly ``expected`` and the totals add up to the minor unit."""
    assert ledger(rnd) == expected
    assert rnd.total_staked == sum(w[2] for w in expected)
    assert rnd.total_returned == sum(w[3] or 0 for w in expected)


def legal(rnd: Round) -> list[str]:
    return [la.action for la in rnd.legal_actions()]


def legal_action(rnd: Round, kind: str) -> tuple[int, int, bool, tuple[int, ...]]:
    """(min_stake, max_stake, any_amount, amounts) of the legal action ``kind``."""
    for la in rnd.legal_actions():
        if la.action == kind:
            return la.min_stake, la.max_stake, la.any_amount, la.amounts
    raise AssertionError(f"{kind} is not legal now: {legal(rnd)}")


def assert_refused(rnd: Round, step: Step) -> str:
    """``step`` raises IllegalAction and leaves the round byte for byte as it was."""
    before, summary = rnd.to_bytes(), rnd.summary()
    events, wagers = list(rnd.events), ledger(rnd)
    with pytest.raises(IllegalAction) as info:
        rnd.act(as_action(step))
    assert rnd.to_bytes() == before
    assert rnd.summary() == summary
    assert rnd.events == events and ledger(rnd) == wagers
    return str(info.value)


def cards_dealt(rnd: Round) -> list[tuple[str | int, str, bool | None]]:
    """Card events as (receiver, code, face up): receiver is a hand id or "dealer"."""
    out: list[tuple[str | int, str, bool | None]] = []
    for e in rnd.events:
        if e.kind == "card":
            assert e.card is not None and e.hand is not None
            who: str | int = "dealer" if e.hand == DEALER else e.hand
            out.append((who, card_code(e.card), e.face_up))
    return out


def event_index(rnd: Round, kind: str, **fields: object) -> int:
    """Index of the first event of ``kind`` whose fields match."""
    for i, e in enumerate(rnd.events):
        if e.kind == kind and all(getattr(e, k) == v for k, v in fields.items()):
            return i
    raise AssertionError(f"no {kind} event with {fields}")


def random_play(seed: int) -> Iterator[Round]:
    """A round of a built-in game dealt from a shuffled shoe (``seed`` picks the game, hands,
    side bets, shoe and decisions) after each of its transitions: the deal, then each random
    legal decision (stakes and accept flags random too) until it ends. Every few seeds the shoe
    is cut short, so some rounds run out of cards and are void. The same object is yielded
    each time, changed in place: read it before the next."""
    rng = random.Random(seed)
    game = GAME_IDS[seed % len(GAME_IDS)]
    rules = game_rules(game)
    level = rules.level(None)
    count = rng.choice(rules.hands.counts)
    shoe = ordered_shoe(rules.decks)
    rng.shuffle(shoe)
    if seed % 7 == 3:
        shoe = shoe[:rng.randint(4, 9)]  # runs out mid-round: void
    bet = level.min_bet * rules.hands.multi_hand_min_multiple if count > 1 else level.min_bet
    hands, side = _random_bets(rng, rules, count, bet)
    try:
        rnd = Round(rules, shoe, hands, side)
    except BetError:  # a side bet this game or count refuses: none
        rnd = Round(rules, shoe, [HandBet(hb.bet) for hb in hands], {})
    yield rnd
    while not rnd.finished:
        la = rng.choice(rnd.legal_actions())
        amount = rng.choice(la.amounts) if la.amounts else (
            la.min_stake if la.any_amount else None)
        accept = rng.random() < 0.5 if la.action == "even_money" else None
        rnd.act(Action(la.action, amount, accept))
        yield rnd


def _random_bets(rng: random.Random, rules: Rules, count: int, bet: int
                 ) -> tuple[list[HandBet], dict[str, int]]:
    per_hand = sorted(sb.name for sb in rules.side_bets if sb.scope == "hand")
    per_round = sorted(sb.name for sb in rules.side_bets if sb.scope == "round")
    hands = [HandBet(bet * rng.choice((1, 2)),
                     {n: rules.level(None).side_bet_min for n in per_hand
                      if rng.random() < 0.5})
             for _ in range(count)]
    side = {n: rules.level(None).side_bet_min for n in per_round if rng.random() < 0.5}
    return hands, side
