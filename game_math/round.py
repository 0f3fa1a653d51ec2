"""One round of blackjack for any rule set: a deterministic state machine.

``Round(rules, shoe, bets)`` validates the bets, deals in the seed's order and settles what is
known at once (side bets, a dealer blackjack seen face up, ...). The player then acts through
``act``; ``turn`` and ``legal_actions`` say what is awaited. Every card, decision and settlement is
an ``Event`` (one frozen record type per kind: ``CardDealt``, ``DecisionMade``, ...). Same rules,
same cards, same actions give the same events: that is what lets an auditor replay a signed round,
and what ``to_bytes``/``from_bytes`` rely on (a round is stored as its inputs and its actions, and
restored by replaying them).

Money is integer minor units throughout. Validation guarantees every payout is whole.

A stacked round, replayed: snap's one hand of 10+8 stands on 18 against the dealer's 17:

>>> from game_math.cards import parse_cards
>>> from game_math.games import game_rules
>>> shoe = parse_cards(["TS", "7H", "8D", "TC"])  # hand, dealer up, hand, dealer hole
>>> rnd = Round(game_rules("snap"), shoe, [HandBet(1000)])
>>> rnd.turn
Turn(phase=<Phase.PLAY: 'play'>, hand=0, decision=<Decision.PLAY: 'play'>)
>>> [la.action.value for la in rnd.legal_actions()]  # snap doubles on any two cards
['hit', 'stand', 'double']
>>> for event in rnd.act(Action(ActionKind.STAND))[:3]:
...     print(event.to_dict())
{'kind': 'decision', 'hand': 0, 'action': 'stand'}
{'kind': 'reveal', 'hand': 'dealer', 'card': 'TC', 'face_up': True}
{'kind': 'settle', 'hand': 0, 'wager': 0, 'outcome': 'win', 'returned': 2000}
>>> rnd.phase, rnd.hands[0].outcome, rnd.total_returned
(<Phase.FINISHED: 'finished'>, <Outcome.WIN: 'win'>, 2000)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from game_math.actions import (
    ACTIONS,
    PLAY_ACTIONS,
    Action,
    ActionKind,
    HandBet,
    action_from_json,
)
from game_math.cards import RANK_OF, VALUE_OF, Card, card_codes, hand_total
from game_math.errors import IllegalAction, ShoeExhausted, quote
from game_math.events import (
    DEALER,
    AlertRaised,
    CardDealt,
    DealerPeeked,
    DecisionMade,
    Event,
    EventKind,
    HandSplit,
    HoleCardRevealed,
    RoundVoided,
    WagerSettled,
)
from game_math.legality import why_no_double, why_no_hit, why_no_split
from game_math.round_bets import check_balance, check_bets, initial_stake
from game_math.round_state import restore, state_bytes
from game_math.rules import (
    Alert,
    BlackjackVsBlackjack,
    DealerCards,
    Rules,
    SideBet,
    TieRule,
)
from game_math.sidebets import side_bet_result
from game_math.table import (
    DOUBLE_WAGER,
    INSURANCE_WAGER,
    MAIN,
    SPLIT_WAGER,
    Hand,
    Outcome,
    Wager,
)
from game_math.turns import (
    Decision,
    LegalAction,
    Phase,
    Turn,
    describe_stakes,
    stakes_metadata,
)

# The engine's vocabulary lives in modules of its own (actions, events, turns, table, round_state);
# everything public is re-exported here, so ``from game_math.round import ...`` names all of it.
__all__ = [
    "ACTIONS",
    "DEALER",
    "DOUBLE_WAGER",
    "INSURANCE_WAGER",
    "MAIN",
    "NOT_ENOUGH_BALANCE",
    "PLAY_ACTIONS",
    "SPLIT_WAGER",
    "Action",
    "ActionKind",
    "AlertRaised",
    "CardDealt",
    "DealerPeeked",
    "Decision",
    "DecisionMade",
    "Event",
    "EventKind",
    "Hand",
    "HandBet",
    "HandSplit",
    "HoleCardRevealed",
    "LegalAction",
    "Outcome",
    "Phase",
    "Round",
    "RoundVoided",
    "Turn",
    "Wager",
    "WagerSettled",
    "action_from_json",
]

# The hot paths read enum members through these module names: an attribute of an enum class is
# looked up through its metaclass (about 100 ns in Python 3.11, ten times a global read), and a
# round reads dozens of them.
_HIT, _STAND, _DOUBLE, _SPLIT = PLAY_ACTIONS
_INSURING, _PLAYING, _FINISHED = Phase.INSURANCE, Phase.PLAY, Phase.FINISHED
_PLAY_DECISION = Decision.PLAY
_HIT_HARD_17_TO_20, _STAND_HARD_UNDER_12 = Alert.HIT_HARD_17_TO_20, Alert.STAND_HARD_UNDER_12
_DECISION_OF = {ActionKind.INSURANCE: Decision.INSURANCE,
                ActionKind.EVEN_MONEY: Decision.EVEN_MONEY}
#: the main wager's outcome for a hand's outcome, where they differ
_WAGER_OUTCOME = {Outcome.BUST: Outcome.LOSE, Outcome.BLACKJACK: Outcome.WIN}
#: what a settled double stake returns per unit, by outcome
_DOUBLE_RETURN = {Outcome.WIN: 2, Outcome.PUSH: 1}
NOT_ENOUGH_BALANCE = "not enough balance"


_dealer_total = hand_total


class Round:
    """A round in progress or finished. See the module docstring."""

    def __init__(
        self,
        rules: Rules,
        shoe: Sequence[Card],
        hands: Sequence[HandBet],
        round_side_bets: Mapping[str, int] | None = None,
        *,
        start: int = 0,
        level: str | None = None,
        balance: int | None = None,
        void: str | None = None,
    ) -> None:
        """``void``: the bets are placed but no card is dealt, and the round is void at once
        with this reason (a fault before the deal, e.g. stakes nobody could confirm taken)."""
        self.rules = rules
        self.shoe = shoe
        self.shoe_size = self._end = len(shoe)  # _end: what a deal reads (a Sequence's len()
        # may be a Python call, e.g. a LazyShoe's); shoe_size is the stored state's
        self.start = start
        self.position = start
        self.level_name = level
        self.balance = balance
        self.hand_bets = tuple(hands)
        self.round_side_bets: dict[str, int] = dict(round_side_bets or {})
        self.actions: list[Action] = []
        self.events: list[Event] = []
        self.wagers: list[Wager] = []
        self.hands: list[Hand] = []  # in play order; split hands follow their parent
        self.dealer: list[Card] = []
        self.hole_revealed = False
        self.phase = Phase.PLAY
        #: True once the round is settled or void: no action is accepted (kept beside ``phase``
        #: by ``_finish`` and ``void``, the two places that end a round: it is read before every
        #: action, where a property's call cost more than the check)
        self.finished = False
        self.void_reason: str | None = None
        # the sums of the wagers' stakes and returns, kept as they are placed and settled
        # (``total_staked``, ``total_returned``): read at every round's end and, through
        # ``available``, at every offer of a double, split or insurance
        self._staked = 0
        self._returned = 0
        self._pending_credit = 0  # settled side-bet returns held back until round end
        self._insurance_queue: list[tuple[int, ActionKind]] = []  # (hand id, the decision)
        self._insurance_wagers: dict[int, int] = {}  # hand id -> wager id
        self._current = 0  # index into self.hands during play
        self._dealer_bj_possible = True
        self._lvl = check_bets(rules, level, self.hand_bets, self.round_side_bets, balance)
        self._start(void)

    # ----- the bets (checked in game_math/round_bets.py) ------------------------------------

    def fund(self, balance: int) -> None:
        """Track ``balance`` (the player's funds before this round's stakes) from now on, in a
        round dealt without one and not yet acted on: as if it had been dealt with it. Nothing
        dealt depends on the balance (only which stakes are affordable, worked out when asked),
        so a caller that deals once to learn the stake, and checks it against the balance itself,
        need not deal again. ``BetError`` as the constructor's check of a balance."""
        if self.balance is not None or self.actions:
            raise ValueError("only a round dealt without a balance and not yet acted on is funded")
        check_balance(balance, self.initial_stake)
        self.balance = balance

    @property
    def initial_stake(self) -> int:
        """The stake of the initial bets and side bets together."""
        return initial_stake(self.hand_bets, self.round_side_bets)

    # ----- small helpers ---------------------------------------------------------------------

    # Every card comes out of the shoe in one of the two ``_deal_`` methods below, which draw it
    # themselves (the next position, or ShoeExhausted past the end) rather than through a
    # helper of their own: a round deals 5-12 cards, and the call was a tenth of a deal.

    def _deal_to(self, hand: Hand) -> None:
        position = self.position
        if position >= self._end:
            raise ShoeExhausted(f"the shoe ran out of cards after {position} cards")
        self.position = position + 1
        card = self.shoe[position]
        hand.add(card)
        self.events.append(CardDealt(hand.id, card, True))

    def _deal_dealer(self, face_up: bool) -> None:
        position = self.position
        if position >= self._end:
            raise ShoeExhausted(f"the shoe ran out of cards after {position} cards")
        self.position = position + 1
        card = self.shoe[position]
        self.dealer.append(card)
        self.events.append(CardDealt(DEALER, card, face_up))

    def _wager(self, kind: str, hand: int | None, staked: int) -> Wager:
        w = Wager(len(self.wagers), kind, hand, staked)
        self.wagers.append(w)
        self._staked += staked
        return w

    def _settle(self, wager: Wager, outcome: Outcome, returned: int,
                line: str | None = None) -> None:
        # each wager is settled once (void, which returns every stake, recounts the total)
        wager.outcome = outcome
        wager.returned = returned
        wager.line = line
        self._returned += returned
        self.events.append(WagerSettled(wager.hand, wager.id, outcome, returned, line))

    def hand(self, hand_id: int) -> Hand:
        """The hand with id ``hand_id``; KeyError if there is none."""
        for h in self.hands:
            if h.id == hand_id:
                return h
        raise KeyError(hand_id)

    @property
    def up_card(self) -> Card:
        """The dealer's first card, dealt face up."""
        return self.dealer[0]

    @property
    def total_staked(self) -> int:
        """Everything staked on the round so far: the sum of its wagers' stakes."""
        return self._staked

    @property
    def total_returned(self) -> int:
        """Everything the settled wagers returned (stakes included): the sum of their returns."""
        return self._returned

    @property
    def available(self) -> int | None:
        """Funds the player can still stake this round, or None when no balance is tracked."""
        if self.balance is None:
            return None
        return self.balance - self._staked + self._returned - self._pending_credit

    @property
    def cards_used(self) -> range:
        """Shoe positions this round has dealt."""
        return range(self.start, self.position)

    # ----- the deal --------------------------------------------------------------------------

    def _start(self, void: str | None) -> None:
        if void is not None:
            self._place_bets()
            self.void(void)
            return
        try:
            self._deal_initial()
            self._after_deal()
        except ShoeExhausted as exc:
            self.void(str(exc))

    def _place_bets(self) -> None:
        """The wagers of the bets and the hands they are on, before any card."""
        side_bets = bool(self.round_side_bets)
        for seat, hb in enumerate(self.hand_bets):
            main = self._wager(MAIN, seat, hb.bet)
            self.hands.append(Hand(seat, seat, hb.bet, main.id))
            side_bets = side_bets or bool(hb.side_bets)
        if not side_bets:  # most rounds: nothing to build
            self._side_bet_wagers = []
            return
        self._side_bet_wagers = [
            (self._wager(name, h.id, stake), self.rules.side_bet(name))
            for h, hb in zip(self.hands, self.hand_bets, strict=True)
            for name, stake in hb.side_bets.items()
        ] + [
            (self._wager(name, None, stake), self.rules.side_bet(name))
            for name, stake in self.round_side_bets.items()
        ]

    def _deal_initial(self) -> None:
        self._place_bets()
        for h in self.hands:
            self._deal_to(h)
        self._deal_dealer(True)
        for h in self.hands:
            self._deal_to(h)
        cards = self.rules.dealer.cards
        if cards is not DealerCards.NO_HOLE_CARD:
            self._deal_dealer(cards is DealerCards.BOTH_EXPOSED)
        for h in self.hands:
            h.natural = h.total == 21
        up = self.dealer[0]
        self._dealer_bj_possible = VALUE_OF[up] in (1, 10)

    def _after_deal(self) -> None:
        if self._side_bet_wagers:
            self._settle_side_bets()
        rules = self.rules
        if rules.dealer.cards is DealerCards.BOTH_EXPOSED:
            self._dealer_bj_possible = False
            if self._dealer_blackjack():
                self._settle_dealer_blackjack()
                return
        # with both dealer cards face up there is nothing left to insure against
        if rules.insurance.offered and self._dealer_bj_possible and RANK_OF[self.up_card] == 1:
            self._queue_insurance()
        if self._insurance_queue:
            self.phase = Phase.INSURANCE
            return
        self._after_insurance()

    def _settle_side_bets(self) -> None:
        up = self.dealer[0]
        for wager, bet in self._side_bet_wagers:
            assert bet is not None  # validated
            cards = self._side_bet_cards(bet, wager.hand, up)
            line, returns = side_bet_result(bet, cards)
            # validated stakes are multiples of the paytable's denominators: this is exact
            returned = wager.staked * returns.numerator // returns.denominator
            if self.rules.side_bets_credited_at_round_end:
                self._pending_credit += returned
            self._settle(wager, Outcome.WIN if line else Outcome.LOSE, returned, line)

    def _side_bet_cards(self, bet: SideBet, hand_id: int | None, up: Card) -> list[Card]:
        if bet.scope == "round":
            return [c for h in self.hands for c in h.cards[:2]] + [up]
        hand = self.hand(hand_id if hand_id is not None else 0)
        if bet.kind == "perfect_pairs":
            return hand.cards[:2]
        return [*hand.cards[:2], up]

    def _dealer_blackjack(self) -> bool:
        return len(self.dealer) == 2 and _dealer_total(self.dealer)[0] == 21

    # ----- insurance and even money ----------------------------------------------------------

    def _queue_insurance(self) -> None:
        ins = self.rules.insurance
        for h in self.hands:
            if h.natural and ins.even_money:
                self._insurance_queue.append((h.id, ActionKind.EVEN_MONEY))
            elif not h.natural or ins.to_blackjack:
                self._insurance_queue.append((h.id, ActionKind.INSURANCE))

    def _insurance_max(self, hand: Hand) -> int:
        # the stake fraction of a validated bet is whole unless insurance is partial
        fraction = self.rules.insurance.fraction
        return hand.bet * fraction.numerator // fraction.denominator

    def _insurance_legal(self) -> list[LegalAction]:
        hand_id, decision = self._insurance_queue[0]
        hand = self.hand(hand_id)
        if decision is ActionKind.EVEN_MONEY:
            return [LegalAction(ActionKind.EVEN_MONEY, hand_id)]
        top = self._insurance_max(hand)
        avail = self.available
        if avail is not None:
            top = min(top, avail) if self.rules.insurance.partial else top * (avail >= top)
        if self.rules.insurance.partial:
            return [LegalAction(ActionKind.INSURANCE, hand_id, 0, top, True)]
        amounts = (0, top) if top else (0,)
        return [LegalAction(ActionKind.INSURANCE, hand_id, 0, top, False, amounts)]

    def _act_insurance(self, action: Action) -> None:
        hand_id, decision = self._insurance_queue[0]
        hand = self.hand(hand_id)
        if action.kind != decision:
            raise IllegalAction(f"hand {hand_id} must decide {decision} now, not {action.kind}",
                                metadata={"hand_id": hand_id, "action": action.kind,
                                          "decision": decision})
        if decision is ActionKind.EVEN_MONEY:
            if action.accept is None or action.amount is not None:
                raise IllegalAction("even_money takes accept: true or false, and no amount")
            self._record(action, hand_id)
            if action.accept:
                self._settle(self.wagers[hand.main_wager], Outcome.EVEN_MONEY, 2 * hand.bet)
                hand.outcome = Outcome.EVEN_MONEY
                hand.done = True
        else:
            if action.accept is not None:
                raise IllegalAction("insurance takes an amount (0 declines), not accept")
            amount = action.amount if action.amount is not None else self._insurance_max(hand)
            legal = self._insurance_legal()[0]
            ok = legal.min_stake <= amount <= legal.max_stake if legal.any_amount else (
                amount in legal.amounts)
            if not ok or isinstance(amount, bool):
                raise IllegalAction(f"insurance on hand {hand_id} must be {describe_stakes(legal)}",
                                    metadata=stakes_metadata(legal, amount))
            self._record(action, hand_id, amount)
            if amount:
                self._insurance_wagers[hand_id] = self._wager(INSURANCE_WAGER, hand_id, amount).id
        self._insurance_queue.pop(0)
        if not self._insurance_queue:
            self._after_insurance()

    def _after_insurance(self) -> None:
        rules = self.rules
        if rules.dealer.cards is DealerCards.HOLE_CARD and rules.dealer.peek:
            if self._dealer_bj_possible:
                has_bj = self._dealer_blackjack()
                self.events.append(DealerPeeked(has_bj))
                if has_bj:
                    self._settle_dealer_blackjack()
                    return
            self._dealer_bj_possible = False
        if not self._dealer_bj_possible:
            self._settle_insurance(False)
            self._pay_naturals()
        self.phase = Phase.PLAY
        self._current = 0
        self._advance()

    def _settle_insurance(self, dealer_bj: bool) -> None:
        if not self._insurance_wagers:
            return
        returns = self.rules.insurance.pays.returns
        for wid in self._insurance_wagers.values():
            w = self.wagers[wid]
            if w.returned is None:
                if dealer_bj:
                    paid = w.staked * returns.numerator // returns.denominator
                    self._settle(w, Outcome.WIN, paid)
                else:
                    self._settle(w, Outcome.LOSE, 0)

    def _pay_naturals(self) -> None:
        for h in self.hands:
            if h.natural and h.outcome is None:
                bj = self.rules.payouts.blackjack.returns
                self._settle_hand(h, Outcome.BLACKJACK, h.bet * bj.numerator // bj.denominator)

    def _settle_hand(self, hand: Hand, outcome: Outcome, main_returned: int) -> None:
        hand.outcome = outcome
        hand.done = True
        wager_outcome = _WAGER_OUTCOME.get(outcome, outcome)
        self._settle(self.wagers[hand.main_wager], wager_outcome, main_returned)
        if hand.double_wager is not None:
            dw = self.wagers[hand.double_wager]
            factor = _DOUBLE_RETURN.get(wager_outcome, 0)
            self._settle(dw, wager_outcome, dw.staked * factor)

    def _settle_dealer_blackjack(self) -> None:
        """Dealer blackjack: insurance wins, naturals per the rule, every other wager loses."""
        if self.rules.dealer.cards is DealerCards.HOLE_CARD:
            self._reveal()
        self._settle_insurance(True)
        rule = self.rules.payouts.blackjack_vs_blackjack
        bj = self.rules.payouts.blackjack.returns
        for h in self.hands:
            if h.outcome is not None:
                continue
            if h.natural and rule is BlackjackVsBlackjack.PUSH:
                self._settle_hand(h, Outcome.PUSH, h.bet)
            elif h.natural and rule is BlackjackVsBlackjack.PLAYER_WINS:
                self._settle_hand(h, Outcome.BLACKJACK, h.bet * bj.numerator // bj.denominator)
            else:
                self._settle_hand(h, Outcome.LOSE, 0)
        self._finish()

    # ----- play ------------------------------------------------------------------------------

    def _seat_hand_count(self, seat: int) -> int:
        return sum(1 for h in self.hands if h.seat == seat)

    def _needs_action(self, hand: Hand) -> bool:
        if hand.done:
            return False
        if hand.split_aces and self.rules.split.split_aces_one_card and len(hand.cards) == 2:
            # a split ace has had its one card: it acts again only to split a second ace
            return self._split_rule(hand) is None
        return hand.total < 21

    def _advance(self) -> None:
        """Moves play to the next hand awaiting a decision, dealing split hands their card."""
        while self._current < len(self.hands):
            hand = self.hands[self._current]
            if len(hand.cards) == 1:
                self._deal_to(hand)  # a split hand gets its second card when play reaches it
            if hand.outcome is None and hand.hard > 21:
                self._settle_hand(hand, Outcome.BUST, 0)
            if self._needs_action(hand):
                return
            hand.done = True
            self._current += 1
        self._dealer_turn()

    def _play_legal(self) -> list[LegalAction]:
        hand = self.hands[self._current]
        why_not, offer = self._why_not, self._offer  # bound once: this runs at every decision
        return [offer(hand, kind) for kind in PLAY_ACTIONS if why_not(hand, kind) is None]

    # Legality is decided in one place per action: ``_why_not`` says None (legal) or why not, and
    # both ``legal_actions`` and ``act`` ask it. The rules' part is ``game_math.legality``, which
    # the analysis shares; the engine adds only the balance.

    def _why_not(self, hand: Hand, kind: ActionKind) -> str | None:
        """None if the current ``hand`` may take play action ``kind`` now, else the reason."""
        if kind is _HIT:
            return why_no_hit(self.rules, split_aces=hand.split_aces)
        if kind is _DOUBLE:
            return self._why_no_double(hand)
        if kind is _SPLIT:
            return self._why_no_split(hand)
        return None  # standing is always allowed in play

    def _why_no_double(self, hand: Hand) -> str | None:
        reason = why_no_double(self.rules, total=hand.total, soft=hand.soft,
                               two_cards=len(hand.cards) == 2, from_split=hand.from_split,
                               split_aces=hand.split_aces)
        if reason is None:
            lo, hi = self._double_range(hand)
            return None if hi >= lo else NOT_ENOUGH_BALANCE
        return reason

    def _why_no_split(self, hand: Hand) -> str | None:
        reason = self._split_rule(hand)
        if reason is None and self.available is not None and self.available < hand.bet:
            return NOT_ENOUGH_BALANCE
        return reason

    def _split_rule(self, hand: Hand) -> str | None:
        cards = hand.cards
        pair = len(cards) == 2 and VALUE_OF[cards[0]] == VALUE_OF[cards[1]]
        # hands are counted only for a pair: the rule refuses anything else before counting
        hands = self._seat_hand_count(hand.seat) if pair else 0
        return why_no_split(self.rules, equal_values=pair, hands_from_bet=hands,
                            split_aces=hand.split_aces)

    def _double_range(self, hand: Hand) -> tuple[int, int]:
        """The least and most a double of ``hand`` may stake now (most < least: none)."""
        lo, hi = (1, hand.bet) if self.rules.double.for_less else (hand.bet, hand.bet)
        avail = self.available
        return lo, hi if avail is None else min(hi, avail)

    def _offer(self, hand: Hand, kind: ActionKind) -> LegalAction:
        """The legal action ``kind`` on ``hand`` with its stakes (``_why_not`` said it is legal)."""
        if kind is _DOUBLE:
            lo, hi = self._double_range(hand)
            return LegalAction(kind, hand.id, lo, hi, self.rules.double.for_less, (hi,))
        if kind is _SPLIT:
            return LegalAction(kind, hand.id, hand.bet, hand.bet, False, (hand.bet,))
        alert = self._alert(hand, kind) if self.rules.alerts else None  # most rules have none
        return LegalAction(kind, hand.id, 0, 0, False, (), alert)

    def _alert(self, hand: Hand, action: ActionKind) -> Alert | None:
        alerts = self.rules.alerts
        if not alerts or hand.soft:
            return None
        total = hand.total
        # the totals first: they rule most calls out without reading the enum or the rules
        if action is _HIT and 17 <= total <= 20 and _HIT_HARD_17_TO_20 in alerts:
            return _HIT_HARD_17_TO_20
        if action is _STAND and total < 12 and _STAND_HARD_UNDER_12 in alerts:
            return _STAND_HARD_UNDER_12
        return None

    def _act_play(self, action: Action) -> None:
        hand = self.hands[self._current]
        kind = action.kind
        if kind not in PLAY_ACTIONS:
            raise IllegalAction(f"{kind} is not offered now (allowed on hand {hand.id}: "
                                f"{self._allowed()})",
                                metadata={"hand_id": hand.id, "action": kind,
                                          "allowed": self._allowed()})
        reason = self._why_not(hand, kind)
        if reason is not None:
            raise IllegalAction(f"cannot {kind} hand {hand.id}: {reason} "
                                f"(allowed: {self._allowed()})",
                                metadata={"hand_id": hand.id, "action": kind, "why": reason,
                                          "allowed": self._allowed()})
        if kind is _HIT or kind is _STAND:
            # what _offer would list for them is only the alert: no LegalAction is built
            if action.amount is not None or action.accept is not None:
                raise IllegalAction(f"{kind} takes no amount and no accept")
            self._record(action, hand.id, alert=self._alert(hand, kind) if self.rules.alerts
                         else None)
            if kind is _HIT:
                self._deal_to(hand)
            else:
                hand.done = True
        elif kind is _DOUBLE:
            self._double(hand, action, self._offer(hand, kind))
        else:
            # a split stakes exactly the hand's bet; another amount would be misrecorded
            if action.amount is not None and action.amount != hand.bet:
                raise IllegalAction(f"split on hand {hand.id} stakes {hand.bet}, "
                                    f"got {action.amount}",
                                    metadata={"hand_id": hand.id, "action": kind,
                                              "amount_minor": action.amount,
                                              "stakes_minor": hand.bet})
            self._record(action, hand.id, hand.bet)
            self._split(hand)
        self._advance()

    def _allowed(self) -> str:
        return ", ".join(la.action for la in self._play_legal()) or "nothing"

    def _double(self, hand: Hand, action: Action, la: LegalAction) -> None:
        amount = la.max_stake if action.amount is None else action.amount
        if isinstance(amount, bool) or not la.min_stake <= amount <= la.max_stake or (
            not la.any_amount and amount not in la.amounts
        ):
            raise IllegalAction(f"double on hand {hand.id} must be {describe_stakes(la)}, "
                                f"got {amount}", metadata=stakes_metadata(la, amount))
        self._record(action, hand.id, amount)
        hand.double_wager = self._wager(DOUBLE_WAGER, hand.id, amount).id
        self._deal_to(hand)
        hand.done = True

    def _split(self, hand: Hand) -> None:
        card = hand.cards.pop()
        hand.hard -= VALUE_OF[card]
        hand.has_ace = RANK_OF[hand.cards[0]] == 1
        aces = RANK_OF[card] == 1
        new_id = self._next_hand_id()
        wager = self._wager(SPLIT_WAGER, new_id, hand.bet)
        new = Hand(new_id, hand.seat, hand.bet, wager.id)
        new.add(card)
        for h in (hand, new):
            h.from_split = True
            h.split_aces = aces
        self.hands.insert(self._current + 1, new)
        self.events.append(HandSplit(hand.id, new_id, hand.bet))
        self._deal_to(hand)

    def _next_hand_id(self) -> int:
        return max(h.id for h in self.hands) + 1

    # ----- the dealer ------------------------------------------------------------------------

    def _reveal(self) -> None:
        if not self.hole_revealed and self.rules.dealer.cards is DealerCards.HOLE_CARD:
            self.hole_revealed = True
            self.events.append(HoleCardRevealed(self.dealer[1]))

    def _dealer_turn(self) -> None:
        if len(self.dealer) == 1 and (
                any(h.outcome is None for h in self.hands)
                or any(self.wagers[w].returned is None for w in self._insurance_wagers.values())):
            self._deal_dealer(True)
        self._reveal()
        if self._dealer_bj_possible and self._dealer_blackjack():
            self._settle_dealer_blackjack()
            return
        self._settle_insurance(False)
        self._pay_naturals()
        live = [h for h in self.hands if h.outcome is None]
        if live:
            dealer_total = self._dealer_draws()
            for h in live:
                self._settle_against(h, dealer_total)
        self._finish()

    def _dealer_draws(self) -> int:
        """The dealer draws to the rules' stopping total; returns the total it stands on."""
        h17 = self.rules.dealer.hits_soft_17
        while True:
            total, soft = _dealer_total(self.dealer)
            if total > 17 or (total == 17 and not (soft and h17)):
                return total
            self._deal_dealer(True)

    def _settle_against(self, hand: Hand, dealer_total: int) -> None:
        total = hand.total
        if dealer_total > 21 or total > dealer_total:
            self._settle_hand(hand, Outcome.WIN, 2 * hand.bet)
        elif total < dealer_total or self.rules.payouts.ties is TieRule.DEALER_WINS:
            self._settle_hand(hand, Outcome.LOSE, 0)
        else:
            self._settle_hand(hand, Outcome.PUSH, hand.bet)

    def _finish(self) -> None:
        self.phase = _FINISHED
        self.finished = True
        self._pending_credit = 0
        for h in self.hands:
            h.done = True

    # ----- public API ------------------------------------------------------------------------

    @property
    def turn(self) -> Turn:
        """What the round awaits now."""
        if self.phase is _INSURING:
            hand_id, decision = self._insurance_queue[0]
            return Turn(_INSURING, hand_id, _DECISION_OF[decision])
        if self.phase is _PLAYING:
            return Turn(_PLAYING, self.hands[self._current].id, _PLAY_DECISION)
        return Turn(self.phase, None, None)

    @property
    def hand_in_play(self) -> Hand | None:
        """The hand whose play decision is awaited (``turn.hand`` in play, as its ``Hand``), or
        None outside play: what a player deciding on a hand reads, without a ``Turn`` made."""
        return self.hands[self._current] if self.phase is _PLAYING else None

    def legal_actions(self) -> list[LegalAction]:
        """The actions ``act`` accepts now, with their stakes; empty once finished."""
        if self.phase is _INSURING:
            return self._insurance_legal()
        if self.phase is _PLAYING:
            return self._play_legal()
        return []

    def act(self, action: Action) -> list[Event]:
        """Applies ``action`` to the current decision; returns the events it caused.

        An illegal action raises ``IllegalAction`` and changes nothing. A shoe that runs out
        mid-action voids the round (a game fault), which the returned events show.
        """
        if self.finished:
            raise IllegalAction(f"the round is {self.phase}; no action is accepted")
        if action.kind not in ACTIONS:
            raise IllegalAction(f"unknown action {quote(action.kind)}")
        mark = len(self.events)
        try:
            if self.phase is _INSURING:
                self._act_insurance(action)
            else:
                self._act_play(action)
        except ShoeExhausted as exc:
            self.void(str(exc))
        return self.events[mark:]

    def _record(self, action: Action, hand_id: int, amount: int | None = None,
                alert: Alert | None = None) -> None:
        self.actions.append(action)
        self.events.append(DecisionMade(hand_id, action.kind, amount, action.accept))
        if alert is not None:
            self.events.append(AlertRaised(hand_id, action.kind, alert))

    def void(self, reason: str) -> None:
        """A game fault: every stake of the round is returned and the round is recorded void."""
        if self.phase is Phase.VOID:
            return
        if self.phase is Phase.FINISHED:
            raise IllegalAction("a finished round is settled and cannot be voided")
        self.void_reason = reason
        for w in self.wagers:
            w.outcome = Outcome.VOID
            w.returned = w.staked
        self._returned = self._staked
        for h in self.hands:
            h.outcome = Outcome.VOID
            h.done = True
        self.phase = Phase.VOID
        self.finished = True
        self._pending_credit = 0
        self.events.append(RoundVoided(reason))

    @property
    def alerts(self) -> list[AlertRaised]:
        """The advisories raised so far, in order."""
        return [e for e in self.events if isinstance(e, AlertRaised)]

    # ----- persistence -----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The round's inputs, the cards dealt so far and its actions; ``from_bytes`` replays them.

        Cards not yet dealt are not written: they are as secret as the shoe's seed, which is kept
        encrypted at rest. An unfinished round therefore continues only on its shoe, re-derived
        from the sealed seed and passed to ``from_bytes``. The format: ``game_math.round_state``.
        """
        return state_bytes(self)

    @classmethod
    def from_bytes(cls, data: bytes, shoe: Sequence[Card] | None = None) -> Round:
        """The round ``to_bytes`` wrote. An unfinished one needs ``shoe``, its whole shoe."""
        return restore(cls, data, shoe)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready view of the whole round (what ``fairshoe replay`` prints)."""
        out: dict[str, Any] = {
            "game": self.rules.game,
            "status": "awaiting" if not self.finished else str(self.phase),
        }
        if not self.finished:
            turn = self.turn
            out["awaiting"] = {"phase": str(turn.phase), "hand": turn.hand,
                               "decision": None if turn.decision is None else str(turn.decision),
                               "legal_actions": [la.to_dict() for la in self.legal_actions()]}
        if self.void_reason:
            out["void_reason"] = self.void_reason
        out["dealer"] = self.public_dealer()
        out["hands"] = [h.to_dict() for h in self.hands]
        out["wagers"] = [w.to_dict() for w in self.wagers]
        out["events"] = [e.to_dict() for e in self.public_events()]
        out["total_staked"] = self.total_staked
        out["total_returned"] = self.total_returned
        out["cards_used"] = [self.start, self.position]
        return out

    def public_dealer(self) -> dict[str, Any]:
        """The dealer's hand as ``summary`` shows it: the face-up cards, their total, and
        blackjack only once the hole card (if any) is turned."""
        visible = self.dealer if self._dealer_visible() else self.dealer[:1]
        total, soft = _dealer_total(visible)
        return {"cards": card_codes(visible), "total": total, "soft": soft,
                "blackjack": self._shown_bj()}

    def public_events(self) -> list[Event]:
        """The events as ``summary`` shows them: the hole card's identity hidden until it is
        turned (that it was dealt is not)."""
        return [self._public(e) for e in self.events]

    def _dealer_visible(self) -> bool:
        return self.rules.dealer.cards is not DealerCards.HOLE_CARD or self.hole_revealed

    def _shown_bj(self) -> bool:
        return self._dealer_visible() and self._dealer_blackjack()

    def _public(self, event: Event) -> Event:
        # the hole card's identity stays hidden until it is revealed; that it was dealt is not
        if isinstance(event, CardDealt) and not event.face_up and not self.hole_revealed:
            return replace(event, card=None)
        return event
