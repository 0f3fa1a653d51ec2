"""GameService: the game catalogue, a game's rules, and replaying a scripted round.

Handlers raise the service's errors; the interceptor reports them by kind (``api/errors.py``), so
no handler chooses a status code itself.
"""

from __future__ import annotations

import json
from typing import Any, Final

import grpc

from game_math.games import game_rules
from game_math.rules import GAME_IDS
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.round_messages import has_typed_fields, replay_round
from rng_service.core.errors import FairshoeError, InvalidInput
from rng_service.service.replay import decode_script, play_script
from rng_service.service.rules import builtin_rules

#: far more than the largest round's script (a 16-deck shoe, 256 actions, 16 hands), far less
#: than what takes a second to parse and check
MAX_SCRIPT_JSON_BYTES: Final = 64 * 1024


class GameService(game_pb2_grpc.GameServiceServicer):  # type: ignore[misc]
    """The ``fairshoe.game.v1.GameService`` RPCs."""

    def ListGames(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Every built-in game with its deck count and rules digest."""
        games = []
        for gid in GAME_IDS:
            rules = game_rules(gid)
            games.append(game_pb2.Game(id=gid, name=rules.name, decks=rules.decks,
                                       rules_digest=rules.digest()))
        return game_pb2.ListGamesResponse(games=games)

    def GetRules(self, request: Any, context: grpc.ServicerContext) -> Any:
        """A built-in game's rules as TOML; NOT_FOUND for an unknown game."""
        if not request.game:
            raise InvalidInput("game", "required")
        rules = builtin_rules(request.game)
        return game_pb2.GetRulesResponse(game=rules.game, rules_toml=rules.to_toml(),
                                         rules_digest=rules.digest())

    def ReplayRound(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Plays the typed round (errors name the request's fields) or, deprecated, the round
        ``script_json`` describes (errors name ``script_json.<field>``)."""
        if not request.script_json:
            return replay_round(request)
        size = len(request.script_json.encode())
        if size > MAX_SCRIPT_JSON_BYTES:  # refused before it is parsed
            raise InvalidInput("script_json", f"at most {MAX_SCRIPT_JSON_BYTES} bytes, got {size}")
        if has_typed_fields(request):
            raise InvalidInput("script_json", "deprecated; send it alone or use the typed fields")
        try:
            rnd = play_script(decode_script(request.script_json))
        except FairshoeError as exc:
            raise exc.under("script_json") from None
        return game_pb2.ReplayRoundResponse(result_json=json.dumps(rnd.summary()))
