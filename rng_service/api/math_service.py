"""MathService: the game math over gRPC (fairshoe.math.v1), stateless but for live advice.

Each RPC is a pure function of its request built on ``game_math``: hand evaluation
(``game_math.cards``), the side-bet evaluators (``game_math.sidebets``), the live advice of the
exact analyser (``game_math.analysis.main_game.action_values``: for explicit cards, or for a live
round read through the round service as its player sees it) and the PAR sheet
(``game_math.analysis.par``). Inputs are bounded so that every answer is exact and quick; the one
slow answer, the PAR figures of a rule set never seen before (seconds), is computed one at a time
and cached by rules digest.

Bad input raises :class:`~rng_service.core.errors.InvalidInput` (the field named as the request
names it, e.g. ``situation.player_cards[1]``), an unknown game or side bet
:class:`~rng_service.core.errors.NotFound`.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import partial
from math import perm
from typing import TYPE_CHECKING, Any, Final

import grpc

from game_math.cards import (
    RANK_OF,
    VALUE_OF,
    Card,
    CardError,
    card_code,
    hand_total,
    parse_card,
)
from game_math.errors import RulesError
from game_math.games import game_rules
from game_math.legality import why_no_double, why_no_hit, why_no_split
from game_math.round import ActionKind as Action
from game_math.rules import (
    GAME_IDS,
    DealerCards,
    Payout,
    Rules,
    SideBet,
    SideBetKind,
    paytable_lines,
    rules_from_toml,
)
from game_math.sidebets import qualifying_lines, side_bet_result
from rng_service.api import calls
from rng_service.api.caller import caller_of, operator_of
from rng_service.api.par_jobs import AnalysisFailed, Busy, CallerGone, ParJobs
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2
from rng_service.core.errors import IllegalState, InvalidInput, NotFound, quote
from rng_service.service import validate
from rng_service.service.rounds import RoundService
from rng_service.service.views import RoundView

if TYPE_CHECKING:
    from game_math.analysis.par import ParSheet

#: reads a live round named by a request (as its player may see it)
LiveRounds = Callable[[math_pb2.LiveDecision], RoundView]

#: a hand of more cards cannot stay at 21 or under (A A A A 2 2 2 2 3 3 3 = 21 is 11 cards; with
#: 16 decks more aces exist, but no hand an engine deals reaches this many cards)
MAX_HAND_CARDS: Final = 21
MAX_SIDE_BETS: Final = 16
MAX_PAYTABLE_LINES: Final = 16
MAX_RULES_TOML_BYTES: Final = 64 * 1024
MAX_NAME_CHARS: Final = 64
#: unseen cards an ActionValues shoe must keep: the analysis does not model a shoe running out
#: (a void round), which a shoe this full never does in one hand
MIN_UNSEEN_CARDS: Final = 26
#: PAR answers kept (each a few hundred KB of JSON at most)
PAR_CACHE_SIZE: Final = 32

_KINDS: Final[dict[math_pb2.SideBetKind, SideBetKind]] = {
    math_pb2.SIDE_BET_KIND_SNAP: SideBetKind.SNAP,
    math_pb2.SIDE_BET_KIND_PERFECT_PAIRS: SideBetKind.PERFECT_PAIRS,
    math_pb2.SIDE_BET_KIND_TWENTY_ONE_PLUS_THREE: SideBetKind.TWENTY_ONE_PLUS_THREE,
}
_KIND_ENUM: Final = {kind: value for value, kind in _KINDS.items()}
#: cards each evaluator judges
_KIND_CARDS: Final = {SideBetKind.SNAP: 5, SideBetKind.PERFECT_PAIRS: 2,
                      SideBetKind.TWENTY_ONE_PLUS_THREE: 3}
_ACTION_ENUM: Final = {
    Action.HIT: round_types_pb2.ACTION_KIND_HIT,
    Action.STAND: round_types_pb2.ACTION_KIND_STAND,
    Action.DOUBLE: round_types_pb2.ACTION_KIND_DOUBLE,
    Action.SPLIT: round_types_pb2.ACTION_KIND_SPLIT,
}
_INT64_MAX: Final = 2**63 - 1
#: ``game_math.analysis.par.FLOAT_DENOMINATOR_LIMIT`` (the denominator of a main-game figure),
#: named here so that checking a rule set does not load the analysis (and numpy)
_PAR_FLOAT_DENOMINATOR: Final = 10**12


# ----- shared input parsing --------------------------------------------------------------------


def parse_cards(field: str, codes: Sequence[str], *, least: int, most: int) -> list[Card]:
    """Card codes to cards; InvalidInput naming ``field`` (or ``field[i]``) when malformed."""
    if not least <= len(codes) <= most:
        wanted = str(least) if least == most else f"{least} to {most}"
        raise InvalidInput(field, f"needs {wanted} cards, got {len(codes)}")
    cards = []
    for i, code in enumerate(codes):
        try:
            cards.append(parse_card(code))
        except CardError:
            raise InvalidInput(f"{field}[{i}]", f"bad card code {quote(code)}: rank "
                               "(A 2-9 T J Q K) then suit (S H D C), e.g. 'AS'") from None
    return cards


def builtin_rules(game: str, field: str = "game") -> Rules:
    """A built-in game's rules; InvalidInput when empty, NotFound when unknown."""
    if not game:
        raise InvalidInput(field, "required")
    try:
        return game_rules(game)
    except KeyError:
        raise NotFound(field, f"no game {quote(game)} (known: {', '.join(GAME_IDS)})") from None


def resolve_rules(source: math_pb2.RulesSource, field: str) -> Rules:
    """The rules a ``RulesSource`` names: a built-in game or a bounded TOML document."""
    which = source.WhichOneof("source")
    if which == "game":
        return builtin_rules(source.game, f"{field}.game")
    if which != "rules_toml":
        raise InvalidInput(field, "set game or rules_toml")
    size = len(source.rules_toml.encode())
    if size > MAX_RULES_TOML_BYTES:
        raise InvalidInput(f"{field}.rules_toml",
                           f"{size} bytes; at most {MAX_RULES_TOML_BYTES} are accepted")
    try:
        return rules_from_toml(source.rules_toml)
    except RulesError as exc:
        raise InvalidInput(f"{field}.rules_toml", str(exc)) from None
    except RecursionError:  # arrays nested thousands deep
        raise InvalidInput(f"{field}.rules_toml", "nested too deeply") from None


def check_shoe_holds(field: str, cards: Sequence[Card], decks: int) -> None:
    """Every card at most ``decks`` times: the cards must come from one shoe."""
    card, count = Counter(cards).most_common(1)[0] if cards else (0, 0)
    if count > decks:
        raise InvalidInput(field, f"{card_code(card)} appears {count} times; a {decks}-deck "
                           f"shoe holds {decks}")


def fits_ratio(value: Fraction) -> bool:
    """Whether ``value`` can be written as a ``fairshoe.common.v1.Ratio`` (int64 terms)."""
    return max(abs(value.numerator), value.denominator) <= _INT64_MAX


def ratio(value: Fraction) -> common_pb2.Ratio:
    """An exact fraction as a ``fairshoe.common.v1.Ratio``; ValueError if a term exceeds int64
    (the inputs are checked first, so that this is never the client's doing)."""
    if not fits_ratio(value):
        raise ValueError(f"{value} does not fit an int64 ratio")
    return common_pb2.Ratio(numerator=value.numerator, denominator=value.denominator)


# ----- EvaluateHand ----------------------------------------------------------------------------


def evaluate_hand(request: math_pb2.EvaluateHandRequest) -> math_pb2.EvaluateHandResponse:
    """Total, softness, blackjack and bust of the cards, as the engine counts them."""
    cards = parse_cards("cards", request.cards, least=1, most=MAX_HAND_CARDS)
    total, soft = hand_total(cards)
    return math_pb2.EvaluateHandResponse(
        total=total, soft=soft, bust=total > 21, hard_total=sum(VALUE_OF[c] for c in cards),
        blackjack=len(cards) == 2 and total == 21 and not request.from_split,
    )


# ----- EvaluateSideBets ------------------------------------------------------------------------


def evaluate_side_bets(request: math_pb2.EvaluateSideBetsRequest
                       ) -> math_pb2.EvaluateSideBetsResponse:
    """Each bet's lines judged on its cards: which qualify, which one pays, what it returns."""
    rules = builtin_rules(request.game) if request.game else None
    if not 1 <= len(request.bets) <= MAX_SIDE_BETS:
        raise InvalidInput("bets", f"needs 1 to {MAX_SIDE_BETS} bets, got {len(request.bets)}")
    results = [_judge(f"bets[{i}]", bet, rules) for i, bet in enumerate(request.bets)]
    return math_pb2.EvaluateSideBetsResponse(results=results)


def _judge(field: str, item: math_pb2.SideBetInput, rules: Rules | None
           ) -> math_pb2.SideBetResult:
    bet = _side_bet(field, item, rules)
    cards = parse_cards(f"{field}.cards", item.cards, least=_KIND_CARDS[bet.kind],
                        most=_KIND_CARDS[bet.kind])
    if rules is not None:
        check_shoe_holds(f"{field}.cards", cards, rules.decks)
    line, returns = side_bet_result(bet, cards)
    qualifying = set(qualifying_lines(bet.kind, cards))
    return math_pb2.SideBetResult(
        name=bet.name, kind=_KIND_ENUM[bet.kind], paying_line=line or "", returns=ratio(returns),
        returned_minor=_returned(f"{field}.stake_minor", item.stake_minor, bet, returns),
        lines=[math_pb2.LineOutcome(line=name, payout=payout.text, qualifies=name in qualifying,
                                    pays=name == line, returns=ratio(payout.returns))
               for name, payout in bet.paytable],
    )


def _side_bet(field: str, item: math_pb2.SideBetInput, rules: Rules | None) -> SideBet:
    """The bet to judge: the game's bet of that name, or the kind and paytable given."""
    known = rules.side_bet(item.name) if rules is not None and item.name else None
    if not item.paytable:
        if known is None:
            where = f"game {rules.game}" if rules is not None else "no game (set game)"
            raise NotFound(f"{field}.name", f"no side bet {quote(item.name)} in {where}")
        return known
    kind = _KINDS.get(item.kind) or (known.kind if known is not None else None)
    if kind is None:
        raise InvalidInput(f"{field}.kind", "required with a paytable of the caller's")
    if len(item.name) > MAX_NAME_CHARS:
        raise InvalidInput(f"{field}.name", f"at most {MAX_NAME_CHARS} characters")
    return SideBet(item.name or str(kind), kind, _paytable(f"{field}.paytable", item, kind))


def _paytable(field: str, item: math_pb2.SideBetInput, kind: SideBetKind
              ) -> tuple[tuple[str, Payout], ...]:
    if len(item.paytable) > MAX_PAYTABLE_LINES:
        raise InvalidInput(field, f"at most {MAX_PAYTABLE_LINES} lines")
    lines = []
    for i, entry in enumerate(item.paytable):
        if entry.line not in paytable_lines(kind):
            known = ", ".join(paytable_lines(kind))
            raise InvalidInput(f"{field}[{i}].line",
                               f"{quote(entry.line)} is not a {kind} outcome (known: {known})")
        try:
            payout = Payout.parse(entry.payout, f"{field}[{i}].payout")
        except RulesError as exc:
            raise InvalidInput(exc.key, str(exc).removeprefix(f"{exc.key}: ")) from None
        if not fits_ratio(payout.returns):  # every line's return is answered, qualifying or not
            raise InvalidInput(f"{field}[{i}].payout",
                               f"{quote(entry.payout)} returns {payout.returns} per unit staked, "
                               "whose terms do not fit the answer's int64 ratio")
        lines.append((entry.line, payout))
    return tuple(lines)


def _returned(field: str, stake: int, bet: SideBet, returns: Fraction) -> int:
    if stake < 0:
        raise InvalidInput(field, f"must not be negative, got {stake}")
    if stake % bet.stake_multiple:
        raise InvalidInput(field, f"{stake} must be a multiple of {bet.stake_multiple} so the "
                           "payout is whole")
    returned = stake * returns.numerator // returns.denominator
    if returned > _INT64_MAX:
        raise InvalidInput(field, f"a stake of {stake} returns {returned}, past the largest "
                           f"amount ({_INT64_MAX}) an answer holds")
    return returned


# ----- ActionValues ----------------------------------------------------------------------------


def action_values_of(request: math_pb2.ActionValuesRequest, live: LiveRounds | None = None
                     ) -> math_pb2.ActionValuesResponse:
    """The value of each legal action of a decision given by its cards, or of a live round's
    current decision when ``live`` can read rounds."""
    which = request.WhichOneof("decision")
    if which == "live":
        if live is None:  # a server without rounds (stateless): no round id names one
            raise NotFound("live.round_id", f"no round {quote(request.live.round_id)}")
        return live_values(live(request.live), "live")
    if which != "situation":
        raise InvalidInput("decision", "set situation (explicit cards) or live")
    return situation_values(request.situation, "situation")


def read_live_round(rounds: RoundService, operator: str, live: math_pb2.LiveDecision
                    ) -> RoundView:
    """The live round a request names, read as its player may see it; the request's
    ``LiveDecision`` holds the round's fields, so an error about them is named under ``live``."""
    # the player id is only compared with the round's, as GetRound's is
    player = calls.text("live.player_id", live.player_id)
    round_id = validate.round_id(live.round_id, "live.round_id")
    try:
        return rounds.get_round(operator, round_id, player=player)
    except NotFound as exc:
        if exc.field == "round_id":  # no such round of the player: the LiveDecision's round
            raise exc.under("live") from None
        raise


def live_values(view: RoundView, field: str) -> math_pb2.ActionValuesResponse:
    """The values of a live round's current play decision, from what the player sees: the
    hand's cards, the dealer's face-up cards, and the other hands' cards as removed (earlier
    rounds of a cut-card shoe are not counted: the analysis treats the rest of the shoe as
    unseen)."""
    if view.status != "awaiting" or view.turn_hand is None:
        raise IllegalState(f"round {view.round_id} is {view.status}: no decision is awaited",
                           reason="ROUND_FINISHED")
    if view.decision == "even_money":
        raise IllegalState("the round awaits an even-money decision, which has no play values",
                           reason="NOT_A_PLAY_DECISION")
    hand = next(h for h in view.hands if h.hand_id == view.turn_hand)
    others = [c for h in view.hands if h.hand_id != hand.hand_id for c in h.cards]
    situation = math_pb2.Situation(
        rules=math_pb2.RulesSource(game=view.game), player_cards=hand.cards,
        dealer_cards=view.dealer.cards, removed_cards=others, from_split=hand.from_split,
        hands_at_seat=sum(1 for h in view.hands if h.seat == hand.seat))
    if builtin_rules(view.game).digest() != view.rules_digest:
        raise IllegalState(f"round {view.round_id} is played under rules other than the "
                           f"built-in {view.game}'s", reason="RULES_CHANGED")
    return situation_values(situation, field)


def situation_values(s: math_pb2.Situation, field: str) -> math_pb2.ActionValuesResponse:
    """The action values of an explicit situation (rules, the player's cards, the dealer's
    visible cards, cards removed), checked under the request's field names below ``field``.
    """
    rules = resolve_rules(s.rules, f"{field}.rules")
    player = parse_cards(f"{field}.player_cards", s.player_cards, least=2, most=MAX_HAND_CARDS)
    n_dealer = 2 if rules.dealer.cards is DealerCards.BOTH_EXPOSED else 1
    dealer = parse_cards(f"{field}.dealer_cards", s.dealer_cards, least=n_dealer, most=n_dealer)
    removed = parse_cards(f"{field}.removed_cards", s.removed_cards, least=0,
                          most=52 * rules.decks)
    _check_situation(field, s, rules, player=player, dealer=dealer, removed=removed)
    hands = s.hands_at_seat or 1
    legal = _legal(rules, player, s.from_split, hands)
    # the analysis (and numpy under it) loads at the first call, not at start-up: a restarted
    # server is SERVING ~0.15 s of CPU sooner (bench/bench_service.py, tests/api/test_crash.py)
    from game_math.analysis.main_game import (  # noqa: PLC0415
        SPLIT_METHOD,
        action_values,
        insurance_value,
    )

    values = action_values(rules, player, dealer, removed, can_hit=legal["hit"],
                           can_double=legal["double"], can_split=legal["split"],
                           hands_at_seat=hands)
    ranked = sorted(values.items(), key=lambda kv: -kv[1])
    out = math_pb2.ActionValuesResponse(
        values=[math_pb2.ActionValue(action=_ACTION_ENUM[a], expected_value=v) for a, v in ranked],
        best=_ACTION_ENUM[ranked[0][0]],
        method=SPLIT_METHOD if Action.SPLIT in values else "exact over the remaining cards",
    )
    if _insurance_offered(rules, player, dealer, s.from_split):
        out.insurance_value = insurance_value(rules, player, dealer[0], removed)
    return out


def par_sheet(rules: Rules) -> ParSheet:
    """The PAR sheet of ``rules``; the analysis loads at the first call, as above."""
    from game_math.analysis.par import par_sheet as sheet  # noqa: PLC0415

    return sheet(rules)


def _check_situation(field: str, s: math_pb2.Situation, rules: Rules, *, player: list[Card],
                     dealer: list[Card], removed: list[Card]) -> None:
    """What the engine could never ask: a bust or settled hand, cards no shoe holds."""
    total, _ = hand_total(player)
    if total > 21:
        raise InvalidInput(f"{field}.player_cards", f"the hand is bust ({total}): no decision")
    if len(player) == 2 and total == 21 and not s.from_split:
        raise InvalidInput(f"{field}.player_cards", "a blackjack is settled, not played")
    if not 0 <= s.hands_at_seat <= rules.split.max_hands:
        raise InvalidInput(f"{field}.hands_at_seat",
                           f"must be 0 to {rules.split.max_hands}, got {s.hands_at_seat}")
    seen = [*player, *dealer, *removed]
    check_shoe_holds(field, seen, rules.decks)
    unseen = 52 * rules.decks - len(seen)
    if unseen < MIN_UNSEEN_CARDS:
        raise InvalidInput(f"{field}.removed_cards", f"leaves {unseen} unseen cards; at least "
                           f"{MIN_UNSEEN_CARDS} must remain (a shoe running out is not modelled)")


def _legal(rules: Rules, player: list[Card], from_split: bool, hands: int) -> dict[str, bool]:
    """Which play actions the engine offers this hand: the engine's own rules
    (``game_math.legality``) asked with the facts of these cards."""
    total, soft = hand_total(player)
    split_aces = from_split and RANK_OF[player[0]] == 1
    pair = len(player) == 2 and VALUE_OF[player[0]] == VALUE_OF[player[1]]
    return {
        "hit": total < 21 and why_no_hit(rules, split_aces=split_aces) is None,
        "double": why_no_double(rules, total=total, soft=soft, two_cards=len(player) == 2,
                                from_split=from_split, split_aces=split_aces) is None,
        "split": pair and why_no_split(rules, equal_values=pair, hands_from_bet=hands,
                                       split_aces=split_aces) is None,
    }


def _insurance_offered(rules: Rules, player: list[Card], dealer: list[Card],
                       from_split: bool) -> bool:
    return (rules.insurance.offered and rules.dealer.cards is not DealerCards.BOTH_EXPOSED
            and RANK_OF[dealer[0]] == 1 and len(player) == 2 and not from_split)


# ----- GetReturns ------------------------------------------------------------------------------


class ParCache:
    """PAR answers by rules digest. A missing one is computed by ``jobs`` (child processes,
    bounded, per caller, stopped once its callers have gone: :mod:`.par_jobs`) when given, else
    here by one thread at a time (an analysis takes seconds of CPU: concurrent ones would only
    slow each other down)."""

    def __init__(self, size: int = PAR_CACHE_SIZE, *, jobs: ParJobs | None = None) -> None:
        self._size = size
        self._items: OrderedDict[str, math_pb2.GetReturnsResponse] = OrderedDict()
        self._lock = threading.Lock()
        self._compute = threading.Lock()
        self.jobs = jobs

    def get(self, rules: Rules, caller: str = "", alive: Callable[[], bool] = lambda: True
            ) -> math_pb2.GetReturnsResponse:
        """The PAR figures of ``rules``: cached by rules digest, else computed for ``caller``
        while ``alive()`` (with ``jobs``; raises their Busy, CallerGone, AnalysisFailed)."""
        digest = rules.digest()
        cached = self._lookup(digest)
        if cached is not None:
            return cached
        if self.jobs is not None:
            return self._store(digest, returns_response(self.jobs.analyse(rules, caller, alive)))
        with self._compute:  # cached answers above never wait for an analysis
            cached = self._lookup(digest)  # another thread may have just computed it
            if cached is not None:
                return cached
            return self._store(digest, returns_response(par_sheet(rules).to_dict()))

    def _store(self, digest: str, response: math_pb2.GetReturnsResponse
               ) -> math_pb2.GetReturnsResponse:
        with self._lock:
            self._items[digest] = response
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return response

    def _lookup(self, digest: str) -> math_pb2.GetReturnsResponse | None:
        with self._lock:
            if digest in self._items:
                self._items.move_to_end(digest)
                return self._items[digest]
            return None


def check_reportable(rules: Rules, field: str) -> None:
    """InvalidInput on ``field`` unless every figure of the PAR answer of ``rules`` is sure to fit
    its int64 ratio, judged from the payouts alone so that no analysis is spent on rules whose
    answer could not be given.

    A main-game return is ``Fraction(double).limit_denominator(10**12)``: its numerator is at
    most the return times 10**12, and no round returns more per unit of initial bet than the
    blackjack payout or a win on every split hand doubled. A side bet's expected return is
    ``sum(deals * line returns) / deals in all``: over the common denominator (the ordered deals
    of its cards times the paytable's lcm of denominators) its numerator is at most the largest
    line's return times that denominator.
    """
    def refuse(key: str, message: str) -> InvalidInput:
        return InvalidInput(field, f"{key}: {message}")

    most = max(rules.payouts.blackjack.returns, Fraction(4 * rules.split.max_hands))
    if most * _PAR_FLOAT_DENOMINATOR > _INT64_MAX:
        raise refuse("payouts.blackjack",
                     f"{quote(rules.payouts.blackjack.text)} pays too much for the main game's "
                     f"return to be answered (at most {_INT64_MAX // _PAR_FLOAT_DENOMINATOR} "
                     "returned per unit)")
    for bet in rules.side_bets:
        line, payout = max(bet.paytable, key=lambda lp: lp[1].returns)
        common = perm(52 * rules.decks, _KIND_CARDS[bet.kind]) * bet.stake_multiple
        if payout.returns * common > _INT64_MAX:
            limit = Fraction(_INT64_MAX, common)
            raise refuse(f"side_bets.{bet.name}.paytable.{line}",
                         f"{quote(payout.text)} pays too much for the exact expected return of "
                         f"a {rules.decks}-deck shoe to be answered as an int64 ratio (at most "
                         f"{limit.numerator // limit.denominator} returned per unit with these "
                         "payout denominators)")


def _figure(doc: dict[str, str] | None) -> math_pb2.ExactFigure | None:
    if doc is None:
        return None
    return math_pb2.ExactFigure(ratio=ratio(Fraction(doc["fraction"])), decimal=doc["decimal"])


def returns_response(par: dict[str, Any]) -> math_pb2.GetReturnsResponse:
    """The GetReturns answer from a ``fairshoe.par/v1`` document."""
    rec, freq = par["reconciliation"], par["frequencies"]
    return math_pb2.GetReturnsResponse(
        game=par["game"], name=par["name"], rules_digest=par["rules_digest"],
        basic_return=_figure(par["return"]["basic"]),
        composition_return=_figure(par["return"]["composition"]),
        basic_house_edge=_figure(par["house_edge"]["basic"]),
        composition_house_edge=_figure(par["house_edge"]["composition"]),
        published_return=_figure(par["published"]),
        published_agrees=rec["agrees"], reconciliation=rec["explanation"],
        side_bets=[math_pb2.SideBetReturn(name=name, expected_return=_figure(value),
                                          published_return=_figure(
                                              par["side_bet_tables"][name]["published"]))
                   for name, value in par["side_bets"].items()],
        frequencies=math_pb2.Frequencies(
            win=freq["win"], push=freq["push"], lose=freq["lose"], bust=freq["bust"],
            player_blackjack=freq["player_blackjack"], hands_per_round=freq["hands_per_round"],
            dealer_bust=freq["dealer_bust"]),
        insurance_ev=par["insurance_ev"],
        par_json=json.dumps(par, sort_keys=True),
    )


# ----- the servicer ----------------------------------------------------------------------------


class MathService(math_pb2_grpc.MathServiceServicer):  # type: ignore[misc]
    """fairshoe.math.v1.MathService: see the module docstring. With ``rounds``, ActionValues
    answers for live rounds too (read as the player sees them)."""

    def __init__(self, rounds: RoundService | None = None, *, jobs: ParJobs | None = None
                 ) -> None:
        self.par_cache = ParCache(jobs=jobs)
        self._rounds = rounds

    def EvaluateHand(self, request: math_pb2.EvaluateHandRequest, context: grpc.ServicerContext
                     ) -> math_pb2.EvaluateHandResponse:
        """Total, softness, blackjack and bust of the cards given."""
        return evaluate_hand(request)

    def EvaluateSideBets(self, request: math_pb2.EvaluateSideBetsRequest,
                         context: grpc.ServicerContext) -> math_pb2.EvaluateSideBetsResponse:
        """Which paytable lines the cards qualify for, and what each side bet returns."""
        return evaluate_side_bets(request)

    def ActionValues(self, request: math_pb2.ActionValuesRequest, context: grpc.ServicerContext
                     ) -> math_pb2.ActionValuesResponse:
        """The expected value of every action in a situation given by its cards, or in a live round
        as its player sees it.
        """
        live = None
        if self._rounds is not None:
            live = partial(read_live_round, self._rounds, operator_of(context))
        return action_values_of(request, live=live)

    def GetReturns(self, request: math_pb2.GetReturnsRequest, context: grpc.ServicerContext
                   ) -> math_pb2.GetReturnsResponse:
        """The PAR figures (returns, hit frequencies) of a built-in game or a rules document:
        RESOURCE_EXHAUSTED when no analysis may start for this caller now, and an analysis
        nobody waits for any more is stopped."""
        try:
            return self.returns(request, caller_of(context), alive=partial(_waiting, context))
        except Busy as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except CallerGone:
            remaining = context.time_remaining()
            expired = remaining is not None and remaining <= 0
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED if expired
                          else grpc.StatusCode.CANCELLED, "the caller has gone")
        raise AssertionError("abort returned")  # pragma: no cover

    def returns(self, request: math_pb2.GetReturnsRequest, caller: str = "",
                alive: Callable[[], bool] = lambda: True) -> math_pb2.GetReturnsResponse:
        """The PAR figures of the rules the request names, from the cache when seen before."""
        rules = resolve_rules(request.rules, "rules")
        check_reportable(rules, f"rules.{request.rules.WhichOneof('source')}")
        try:
            return self.par_cache.get(rules, caller, alive)
        except AnalysisFailed as exc:
            if exc.invalid:  # game_math refused the rules: the caller's to fix
                raise InvalidInput(f"rules.{request.rules.WhichOneof('source')}",
                                   str(exc)) from None
            raise


def _waiting(context: grpc.ServicerContext) -> bool:
    """Whether the call's client still waits for its answer (not cancelled, deadline ahead)."""
    remaining = context.time_remaining()
    return bool(context.is_active()) and (remaining is None or remaining > 0)
