"""The shared round messages (fairshoe.round.v1 round_types) to and from the engine.

``round_view`` renders a ``game_math.round.Round`` as the player may see it: it reads the engine's
own public view (``Round.summary``: the hole card's identity is hidden until revealed, nothing of
the undealt shoe) and adds a hidden placeholder for a hole card that was dealt. ``player_action``
builds the engine's ``Action`` from a typed ``PlayerAction``. ``replay_round`` serves the typed
``GameService.ReplayRound``: it builds the engine's bets, cards and actions straight from the
request and plays them with the function that plays a ``fairshoe replay`` script
(:func:`rng_service.service.replay.play`), its errors naming the request's fields.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar, Final

from google.protobuf.message import Message

from game_math.round import Action, ActionKind, HandBet, Round
from rng_service.api.calls import count
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.round_wire import round_view_wire
from rng_service.core.errors import InvalidInput
from rng_service.service import views
from rng_service.service.replay import Replay, play, shoe_cards
from rng_service.service.rules import builtin_rules
from rng_service.service.validate import bet_field

#: the largest shoe (16 decks)
MAX_SHOE_CARDS: Final = 16 * 52
#: more actions than this cannot all be legal in one round
MAX_ACTIONS: Final = 256
#: more hands and side bets than any game takes (the rules refuse what they do not play); a
#: request is refused on its counts before any item is read
MAX_HANDS: Final = 16
MAX_SIDE_BETS: Final = 16

_STATUS: Final = {"awaiting": rt.ROUND_STATUS_AWAITING_PLAYER,
                  "finished": rt.ROUND_STATUS_FINISHED, "void": rt.ROUND_STATUS_VOID}
_DECISION: Final = {"insurance": rt.DECISION_INSURANCE, "even_money": rt.DECISION_EVEN_MONEY,
                    "play": rt.DECISION_PLAY}
_CREDIT: Final = {"pending": rt.CREDIT_STATE_PENDING,
                  "acknowledged": rt.CREDIT_STATE_ACKNOWLEDGED}
_ACTION: Final = {"hit": rt.ACTION_KIND_HIT, "stand": rt.ACTION_KIND_STAND,
                  "double": rt.ACTION_KIND_DOUBLE, "split": rt.ACTION_KIND_SPLIT,
                  "insurance": rt.ACTION_KIND_INSURANCE, "even_money": rt.ACTION_KIND_EVEN_MONEY}
_OUTCOME: Final = {None: rt.OUTCOME_UNSPECIFIED, "win": rt.OUTCOME_WIN, "lose": rt.OUTCOME_LOSE,
                   "push": rt.OUTCOME_PUSH, "blackjack": rt.OUTCOME_BLACKJACK,
                   "bust": rt.OUTCOME_BUST, "even_money": rt.OUTCOME_EVEN_MONEY,
                   "void": rt.OUTCOME_VOID}
_WAGER: Final = {"main": rt.WAGER_KIND_MAIN, "split": rt.WAGER_KIND_SPLIT,
                 "double": rt.WAGER_KIND_DOUBLE, "insurance": rt.WAGER_KIND_INSURANCE}
_EVENT: Final = {"card": rt.EVENT_KIND_CARD, "reveal": rt.EVENT_KIND_REVEAL,
                 "decision": rt.EVENT_KIND_DECISION, "split": rt.EVENT_KIND_SPLIT,
                 "peek": rt.EVENT_KIND_PEEK, "settle": rt.EVENT_KIND_SETTLE,
                 "alert": rt.EVENT_KIND_ALERT, "void": rt.EVENT_KIND_VOID}
_ALERT: Final = {None: rt.ALERT_UNSPECIFIED, "hit_hard_17_20": rt.ALERT_HIT_HARD_17_20,
                 "stand_hard_under_12": rt.ALERT_STAND_HARD_UNDER_12}


# ----- engine -> messages ----------------------------------------------------------------------


def round_view(rnd: Round) -> rt.RoundView:
    """The round as the player may see it (no round id, shoe or currency: the caller adds them)."""
    s = rnd.summary()
    view = rt.RoundView(
        game=rnd.rules.game, rules_digest=rnd.rules.digest(),
        level=rnd.level_name or rnd.rules.default_level, status=_STATUS[s["status"]],
        dealer=_dealer(rnd, s["dealer"]), hands=[_hand(rnd, h) for h in s["hands"]],
        wagers=[_wager(w) for w in s["wagers"]], events=[_event(e) for e in s["events"]],
        total_staked_minor=s["total_staked"], total_returned_minor=s["total_returned"],
        cards_used=rt.CardRange(start=s["cards_used"][0], end=s["cards_used"][1]),
        void_reason=s.get("void_reason") or "", balance_after_minor=rnd.available,
    )
    if "awaiting" in s:
        turn = s["awaiting"]
        view.turn.CopyFrom(rt.Turn(hand_id=turn["hand"], decision=_DECISION[turn["decision"]]))
        view.legal_actions.extend(
            rt.LegalAction(action=_ACTION[la.action], hand_id=la.hand,
                           min_stake_minor=la.min_stake, max_stake_minor=la.max_stake,
                           any_amount=la.any_amount, stakes_minor=la.amounts,
                           alert=_ALERT[la.alert])
            for la in rnd.legal_actions())
    return view


def _dealer(rnd: Round, d: dict[str, Any]) -> rt.DealerView:
    cards = [rt.Card(code=c) for c in d["cards"]]
    # a dealt hole card shows as dealt, face down, until it is turned
    cards += [rt.Card(hidden=True) for _ in range(len(rnd.dealer) - len(cards))]
    return rt.DealerView(cards=cards, total=d["total"], soft=d["soft"], blackjack=d["blackjack"])


def _hand(rnd: Round, h: dict[str, Any]) -> rt.HandView:
    return rt.HandView(hand_id=h["id"], seat=h["seat"], bet_minor=rnd.hand(h["id"]).bet,
                       cards=[rt.Card(code=c) for c in h["cards"]], total=h["total"],
                       soft=h["soft"], blackjack=h["blackjack"], from_split=h["from_split"],
                       outcome=_OUTCOME[h["outcome"]])


def _wager(w: dict[str, Any]) -> rt.Wager:
    kind = _WAGER.get(w["kind"], rt.WAGER_KIND_SIDE_BET)
    return rt.Wager(wager_id=w["id"], kind=kind, hand_id=w.get("hand"),
                    side_bet=w["kind"] if kind == rt.WAGER_KIND_SIDE_BET else "",
                    staked_minor=w["staked"], returned_minor=w["returned"],
                    outcome=_OUTCOME[w["outcome"]], line=w.get("line") or "")


def _event(e: dict[str, Any]) -> rt.Event:
    kind = e["kind"]
    hand = e.get("hand")
    out = rt.Event(kind=_EVENT[kind], dealer=hand == "dealer",
                   hand_id=hand if isinstance(hand, int) else None,
                   amount_minor=e.get("amount"), wager_id=e.get("wager"),
                   returned_minor=e.get("returned"))
    if kind == "settle":
        out.outcome = _OUTCOME[e["outcome"]]
    if kind in ("card", "reveal"):
        code = e.get("card")
        out.card.CopyFrom(rt.Card(code=code) if code else rt.Card(hidden=True))
    if "action" in e:
        out.action = _ACTION[e["action"]]
    if kind == "peek":
        out.dealer_blackjack = e.get("outcome") == "blackjack"
    elif kind == "alert":
        out.alert = _ALERT[e.get("note")]
    else:
        out.note = e.get("note") or ""
    return out


# ----- live rounds (the service's views) -> messages -------------------------------------------


def live_round_view(view: views.RoundView) -> rt.RoundView:
    """A live round as the player may see it: the service's view (hole card already hidden,
    nothing of the undealt shoe) in the same messages, through the same tables, as a replay."""
    out = rt.RoundView()
    fill_live_round_view(out, view)
    return out


def fill_live_round_view(out: rt.RoundView, view: views.RoundView) -> None:
    """:func:`live_round_view` written into ``out`` (a new message, e.g. a response's
    ``round``), so the response needs no copy of it.

    GetRound and ListRounds answer with this, events and all: it is encoded straight to wire
    bytes (:mod:`rng_service.api.round_wire`, a third of the cost of building it through the
    protobuf runtime field by field) and parsed into ``out`` in one call. StartRound and Act
    send those bytes without the parse (:class:`EncodedAnswer`).
    ``tests/api/test_round_messages.py`` holds it to the replay's rendering of the same round,
    ``tests/api/test_round_wire.py`` to the field-by-field build, byte for byte.
    """
    out.MergeFromString(round_view_wire(view))


class EncodedAnswer:
    """A ``StartRoundResponse`` or ``ActResponse`` already encoded: ``wire`` is the message's
    bytes, handed to gRPC as they are (:func:`answer_bytes`, the methods' response serializer),
    so the answer is encoded once and never parsed into a message to be encoded again.
    ``round_id`` names its round (the ``round.round_id`` of the message it stands for) for the
    call's log line (``rpc_log.answered_round``, which reads it from answers of a type that says
    ``NAMES_A_ROUND``)."""

    __slots__ = ("round_id", "wire")
    NAMES_A_ROUND: ClassVar[bool] = True

    def __init__(self, view: views.RoundView) -> None:
        self.wire = round_view_wire(view, True)  # answer_wire's: one Python call less
        self.round_id = view.round_id


def answer_bytes(answer: EncodedAnswer | Message) -> bytes:
    """The wire bytes gRPC sends for ``answer``: an :class:`EncodedAnswer`'s own, a message's
    encoding."""
    if type(answer) is EncodedAnswer:
        return answer.wire
    return answer.SerializeToString()  # type: ignore[union-attr]


# ----- messages -> engine ----------------------------------------------------------------------

#: the oneof's names are the engine's action kinds
_KIND_OF: Final = {str(kind): kind for kind in ActionKind}
_BARE: Final = {kind: Action(kind) for kind in (ActionKind.HIT, ActionKind.STAND,
                                                ActionKind.SPLIT)}


def player_action(field: str, action: rt.PlayerAction) -> Action:
    """The engine's action built from the typed one (the oneof's names are the engine's); a
    stake, when given, is 0 or more (an absent one is the full stake, the engine's None).
    Whether the round takes it is the round's to say."""
    which = action.WhichOneof("kind")
    if which is None:
        raise InvalidInput(field, "no action set (hit, stand, double, split, insurance, "
                           "even_money)")
    kind = _KIND_OF[which]
    if kind in _BARE:  # hit, stand, split: one frozen Action each, made once
        return _BARE[kind]
    if kind is ActionKind.EVEN_MONEY:
        return Action(kind, accept=action.even_money.accept)
    if kind is ActionKind.DOUBLE or kind is ActionKind.INSURANCE:
        part = action.double if kind is ActionKind.DOUBLE else action.insurance
        if not part.HasField("amount_minor"):
            return Action(kind)
        if part.amount_minor < 0:
            raise InvalidInput(f"{field}.{which}.amount_minor",
                               f"must be 0 or more minor units, got {part.amount_minor}")
        return Action(kind, part.amount_minor)
    return Action(kind)


def _side_bets(field: str, stakes: Any) -> dict[str, int]:
    """A replay's side-bet stakes by name, in the request's order (the rules judge them)."""
    count(field, stakes, MAX_SIDE_BETS)
    out: dict[str, int] = {}
    for j, stake in enumerate(stakes):
        if stake.name in out:
            raise InvalidInput(f"{field}[{j}].name", f"{stake.name!r} is placed twice")
        out[stake.name] = stake.stake_minor
    return out


def replay_of(request: game_pb2.ReplayRoundRequest) -> Replay:
    """The round the typed request describes, in the engine's types; its actions are read as
    the round reaches them, as a script's are."""
    if len(request.shoe) > MAX_SHOE_CARDS:
        raise InvalidInput("shoe", f"at most {MAX_SHOE_CARDS} cards, got {len(request.shoe)}")
    if len(request.actions) > MAX_ACTIONS:
        raise InvalidInput("actions", f"at most {MAX_ACTIONS}, got {len(request.actions)}")
    count("hands", request.hands, MAX_HANDS)
    rules = builtin_rules(request.game)
    hands = [HandBet(h.bet_minor, _side_bets(f"hands[{i}].side_bets", h.side_bets))
             for i, h in enumerate(request.hands)]
    side_bets = _side_bets("side_bets", request.side_bets)
    shoe = shoe_cards(request.shoe, rules)
    balance = request.balance_minor if request.HasField("balance_minor") else None
    if balance is not None and balance < 0:
        raise InvalidInput("balance_minor", f"must be 0 or more minor units, got {balance}")
    actions = (player_action(f"actions[{i}]", a) for i, a in enumerate(request.actions))
    return Replay(rules, hands, side_bets, shoe, actions, level=request.level or None,
                  balance=balance)


def replay_round(request: game_pb2.ReplayRoundRequest) -> game_pb2.ReplayRoundResponse:
    """Plays the typed round; errors name the request's fields (``actions[2]``, ``shoe[0]``,
    ``hands[0].bet_minor``)."""
    replay = replay_of(request)
    rnd = play(replay, bet_field=partial(bet_field, hands=replay.hands,
                                         side_bets=replay.side_bets))
    return game_pb2.ReplayRoundResponse(round=round_view(rnd))


def has_typed_fields(request: game_pb2.ReplayRoundRequest) -> bool:
    """Whether any field besides the deprecated ``script_json`` is set."""
    return any(f.name != "script_json" for f, _ in request.ListFields())
