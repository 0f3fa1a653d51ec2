"""RoundService over gRPC (fairshoe.round.v1): live rounds, the player's next shoe and its seed.

Each RPC checks its request once, here, under the proto's field names (:mod:`rng_service.api.calls`,
:mod:`rng_service.service.validate`), builds the engine's typed ``Action`` and ``HandBet`` straight
from the proto's messages, calls one use case of :class:`rng_service.service.rounds.RoundService`
with them and renders the answer. What only the use case can know (the game's limits, the round's
state, the balance) it checks itself, naming the request's fields as the proto names them. Errors
are simply raised (the error kinds of :mod:`rng_service.core.errors`); one interceptor reports
them as status codes. A round is shown only as the service's ``RoundView`` shows it: the hole
card hidden until turned, nothing of the undealt shoe. StartRound and Act, a round's
transitions, answer with the response's bytes themselves (``EncodedAnswer``: encoded once, not
parsed into a message to be encoded again); :func:`add_round_service` registers them so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import grpc

from game_math.round import Action, HandBet
from rng_service.api import calls
from rng_service.api.caller import operator_of
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.round_messages import (
    MAX_HANDS,
    MAX_SIDE_BETS,
    EncodedAnswer,
    answer_bytes,
    fill_live_round_view,
    player_action,
)
from rng_service.core.errors import InvalidInput
from rng_service.service import validate
from rng_service.service.ports import Mode
from rng_service.service.rounds import RoundService
from rng_service.service.views import ShoeView

#: game, level, side-bet and shoe ids
MAX_NAME_CHARS: Final = 64
MAX_CLIENT_SEED_BYTES: Final = 256
MAX_ROUNDS_PAGE: Final = validate.MAX_PAGE_SIZE

_OPEN_FILTER: Final[dict[int, bool | None]] = {
    round_pb2.ROUND_FILTER_UNSPECIFIED: None,
    round_pb2.ROUND_FILTER_OPEN: True,
    round_pb2.ROUND_FILTER_FINISHED: False,
}


class RoundApi(round_pb2_grpc.RoundServiceServicer):  # type: ignore[misc]
    """The RoundService servicer: requests in, one use case each, round views out."""

    def __init__(self, rounds: RoundService) -> None:
        self._rounds = rounds

    def StartRound(self, request: round_pb2.StartRoundRequest, context: grpc.ServicerContext
                   ) -> EncodedAnswer:
        """Deal a new round on the player's next shoe with the request's bets."""
        op = operator_of(context)
        player = _players.get(request.player_id) or calls.kept(_players, request.player_id,
                                                                validate.player)
        key = (request.game, request.level, request.mode, request.currency)
        game, level, mode, currency = _games.get(key) or calls.kept(_games, key, game_fields)
        hands = hand_bets(request.hands)
        stakes = request.side_bets  # most rounds have none: nothing to walk
        side_bets = side_bet_stakes("side_bets", stakes) if stakes else {}
        request_id = validate.request_id(request.request_id)
        calls.require_time(context)
        view = self._rounds.start_round(op, player, game, level=level, mode=mode,
                                        currency=currency, hands=hands, side_bets=side_bets,
                                        request_id=request_id)
        return EncodedAnswer(view)  # a StartRoundResponse's bytes

    def Act(self, request: round_pb2.ActRequest, context: grpc.ServicerContext
            ) -> EncodedAnswer:
        """Apply one decision to the player's open round at the version the client saw."""
        op = operator_of(context)
        player = _players.get(request.player_id) or calls.kept(_players, request.player_id,
                                                                validate.player)
        round_id = checked_round_id(request.round_id)
        hand_id = request.hand_id  # each read of a message's field is a call into the runtime
        if hand_id < 0:
            raise InvalidInput("hand_id", f"must be a hand id (0 or more), got {hand_id}")
        action = act_action(request.action)
        version = request.expected_version
        if version < 1:
            raise InvalidInput("expected_version", "required: the version of the round the "
                               f"decision was made on (1 or more), got {version}")
        request_id = validate.request_id(request.request_id)
        calls.require_time(context)
        view = self._rounds.act(op, round_id, action, hand_id=hand_id, expected_version=version,
                                request_id=request_id, player=player)
        return EncodedAnswer(view)  # an ActResponse's bytes

    def GetRound(self, request: round_pb2.GetRoundRequest, context: grpc.ServicerContext
                 ) -> round_pb2.GetRoundResponse:
        """One round of the player, as it stands now."""
        op = operator_of(context)
        # only compared with the round's player: an id of no player finds no round (NOT_FOUND),
        # as it always has, rather than being refused for its form
        player = calls.text("player_id", request.player_id)
        round_id = validate.round_id(request.round_id)
        view = self._rounds.get_round(op, round_id, player=player)
        response = round_pb2.GetRoundResponse()
        fill_live_round_view(response.round, view)
        return response

    def ListRounds(self, request: round_pb2.ListRoundsRequest, context: grpc.ServicerContext
                   ) -> round_pb2.ListRoundsResponse:
        """The player's rounds: open ones first, then the others newest first, a page at a
        time."""
        op = operator_of(context)
        player = validate.player(request.player_id)
        mode = calls.optional_mode("mode", request.mode)
        if request.filter not in _OPEN_FILTER:
            raise InvalidInput("filter", f"unknown filter {request.filter}")
        size = calls.page_size("page_size", request.page_size, MAX_ROUNDS_PAGE)
        token = calls.page_token("page_token", request.page_token)
        page = self._rounds.list_rounds(op, player, page_size=size, page_token=token, mode=mode,
                                        is_open=_OPEN_FILTER[request.filter])
        response = round_pb2.ListRoundsResponse(next_page_token=page.next_page_token)
        for v in page.rounds:
            fill_live_round_view(response.rounds.add(), v)
        return response

    def GetNextShoe(self, request: round_pb2.GetNextShoeRequest, context: grpc.ServicerContext
                    ) -> round_pb2.GetNextShoeResponse:
        """The player's next shoe of a game, committed (and created) before any client seed."""
        op = operator_of(context)
        player = validate.player(request.player_id)
        game = calls.text("game", request.game, most=MAX_NAME_CHARS)
        mode = calls.mode("mode", request.mode)
        calls.require_time(context)  # it may create and commit a shoe: a write
        shoe = self._rounds.get_next_shoe(op, player, game, mode=mode)
        return round_pb2.GetNextShoeResponse(shoe=next_shoe(shoe, request.mode))

    def SetClientSeed(self, request: round_pb2.SetClientSeedRequest,
                      context: grpc.ServicerContext) -> round_pb2.SetClientSeedResponse:
        """Set the client seed of the shoe the player was shown, until its first card."""
        op = operator_of(context)
        player = validate.player(request.player_id)
        game = calls.text("game", request.game, most=MAX_NAME_CHARS)
        mode = calls.mode("mode", request.mode)
        shoe_id = calls.text("shoe_id", request.shoe_id, most=MAX_NAME_CHARS)
        seed = request.client_seed
        if not 1 <= len(seed) <= MAX_CLIENT_SEED_BYTES:
            raise InvalidInput("client_seed", f"must be 1 to {MAX_CLIENT_SEED_BYTES} bytes, got "
                               f"{len(seed)}")
        request_id = validate.request_id(request.request_id)
        calls.require_time(context)
        shoe = self._rounds.set_client_seed(op, player, game, seed, mode=mode, shoe_id=shoe_id,
                                            request_id=request_id)
        return round_pb2.SetClientSeedResponse(shoe=next_shoe(shoe, request.mode))


SERVICE: Final = round_pb2.DESCRIPTOR.services_by_name["RoundService"].full_name
#: the methods that answer a transition with the round: their answers reach gRPC as bytes
ENCODED: Final = ("StartRound", "Act")


def method_handlers(api: RoundApi) -> dict[str, grpc.RpcMethodHandler]:
    """The generated code's handlers of ``api``'s methods, StartRound's and Act's serializing
    with :func:`rng_service.api.round_messages.answer_bytes`: what the handler encoded is
    sent as it is (the bytes the response message it stands for encodes to)."""
    taken = _Taken()
    round_pb2_grpc.add_RoundServiceServicer_to_server(api, taken)
    handlers = dict(taken.handlers)
    for name in ENCODED:
        generated = handlers[name]
        handlers[name] = grpc.unary_unary_rpc_method_handler(
            generated.unary_unary, request_deserializer=generated.request_deserializer,
            response_serializer=answer_bytes)
    return handlers


def add_round_service(api: RoundApi, server: grpc.Server) -> None:
    """Serve ``api`` on ``server``, as the generated ``add_RoundServiceServicer_to_server``
    does, with :func:`method_handlers`'s handlers."""
    handlers = method_handlers(api)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)


class _Taken:
    """Takes the handlers the generated registration makes, in place of a server."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, _handlers: object) -> None:
        """The same handlers, behind a generic handler: nothing more to take."""

    def add_registered_method_handlers(self, _service: str,
                                       handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.handlers = handlers


# ----- requests -> service ---------------------------------------------------------------------


#: what the checks of every transition's request let through, by the values checked
#: (``calls.kept``): a server meets the same players, and the same game, level, mode and
#: currency, call after call, so their checks run once per value rather than on every call
_players: Final[dict[str, str]] = {}
_games: Final[dict[tuple[str, str, int, str], tuple[str, str | None, Mode, str]]] = {}
#: the characters of a round id (``validate.round_id``'s pattern: 32 lowercase hex digits)
_HEX_DIGITS: Final = "0123456789abcdef"
#: a hand's bet without side bets, by its amount (a frozen ``HandBet``, shared as
#: ``_BARE_ACTIONS`` are: nothing changes one once made)
_plain_bets: Final[dict[int, HandBet]] = {}


def game_fields(game: str, level: str, mode: int, currency: str
                ) -> tuple[str, str | None, Mode, str]:
    """StartRound's ``game``, ``level`` (None for the game's default), ``mode`` and
    ``currency``, checked in that order under the proto's names."""
    return (calls.text("game", game, most=MAX_NAME_CHARS),
            calls.text("level", level, most=MAX_NAME_CHARS, required=False) or None,
            calls.mode("mode", mode), validate.currency(currency))


def checked_round_id(value: str) -> str:
    """A request's ``round_id``, as :func:`validate.round_id` takes it: 32 of its digits found
    by the string's own checks (strip leaves nothing), anything else through the pattern,
    which names the error (every Act carries one)."""
    if type(value) is str and len(value) == 32 and not value.strip(_HEX_DIGITS):
        return value
    return validate.round_id(value)


#: the actions without a stake, one frozen ``Action`` each (as ``player_action`` makes them)
_BARE_ACTIONS: Final[dict[str | None, Action]] = {
    which: player_action("action", rt.PlayerAction(**{which: {}}))
    for which in ("hit", "stand", "split")}


def act_action(action: rt.PlayerAction) -> Action:
    """Act's ``action`` as the engine's, its stake checked under the proto's name
    (``action.double.amount_minor``): a double stakes something, insurance 0 declines, and no
    stake is past what a record holds. Whether the round takes it is the round's to say."""
    which = action.WhichOneof("kind")
    bare = _BARE_ACTIONS.get(which)
    if bare is not None:  # hit, stand, split: nothing more to read or check
        return bare
    if which in ("double", "insurance"):
        part = action.double if which == "double" else action.insurance
        least = 1 if which == "double" else 0
        if part.HasField("amount_minor") and part.amount_minor < least:
            raise InvalidInput(f"action.{which}.amount_minor",
                               f"must be {least} or more minor units, got {part.amount_minor}")
        if part.amount_minor > validate.MAX_AMOUNT:
            raise InvalidInput(f"action.{which}.amount_minor", f"must be at most "
                               f"{validate.MAX_AMOUNT} minor units, got {part.amount_minor}")
    return player_action("action", action)


def hand_bets(hands: Sequence[rt.HandBet]) -> list[HandBet]:
    """The engine's hand bets built from the request's, each bet and stake positive (the
    game's limits are the use case's to check); side bets keep the request's order, by which
    an error names one (``hands[0].side_bets[1]``)."""
    if not hands:
        raise InvalidInput("hands", "required: one bet per hand")
    calls.count("hands", hands, MAX_HANDS)
    out = []
    # by index: iterating the runtime's repeated field ends in an IndexError raised and caught
    for i in range(len(hands)):
        hand = hands[i]
        bet = hand.bet_minor  # each read of a message's field is a call into the runtime
        if bet <= 0:
            raise InvalidInput(f"hands[{i}].bet_minor",
                               f"must be a positive number of minor units, got {bet}")
        stakes = hand.side_bets
        if stakes:
            out.append(HandBet(bet, side_bet_stakes(f"hands[{i}].side_bets", stakes)))
        else:  # a hand without side bets: one frozen HandBet a bet, as _BARE_ACTIONS
            out.append(_plain_bets.get(bet) or calls.kept(_plain_bets, bet, HandBet))
    return out


def side_bet_stakes(field: str, stakes: Sequence[rt.SideBetStake]) -> dict[str, int]:
    """Side-bet stakes by name, in the request's order; each named once, each positive."""
    calls.count(field, stakes, MAX_SIDE_BETS)
    out: dict[str, int] = {}
    for j, stake in enumerate(stakes):
        name = calls.text(f"{field}[{j}].name", stake.name, most=MAX_NAME_CHARS)
        if name in out:
            raise InvalidInput(f"{field}[{j}].name", f"{name!r} is placed twice")
        if stake.stake_minor <= 0:
            raise InvalidInput(f"{field}[{j}].stake_minor", "must be a positive number of minor "
                               f"units (leave the side bet out to not play it), got "
                               f"{stake.stake_minor}")
        out[name] = stake.stake_minor
    return out


# ----- service -> messages ---------------------------------------------------------------------


def next_shoe(shoe: ShoeView, mode: common_pb2.Mode) -> round_pb2.NextShoe:
    """A player's next shoe: its public facts (the seed stays sealed until the reveal)."""
    out = round_pb2.NextShoe(shoe_id=shoe.shoe_id, game=shoe.game, mode=mode,
                             commitment=shoe.commitment, decks=shoe.decks,
                             client_seed=bytes.fromhex(shoe.client_seed),
                             client_seed_locked=shoe.client_seed_locked)
    if shoe.committed_at:
        calls.set_timestamp(out.committed_at, shoe.committed_at)
    return out
