"""StartRound and Act hand gRPC their answer's bytes (``round_messages.EncodedAnswer``, sent by
``answer_bytes``), encoded once and never parsed into a response: what a client receives is
byte for byte what the server sent before, when it filled a ``StartRoundResponse`` or
``ActResponse`` (``fill_live_round_view``) and gRPC encoded it. Checked over real gRPC (an
in-process server on a temp SQLite file) at every transition of rounds of every game, for
retried requests (the stored answers), beside errors, and for the other methods, which answer
with messages as before; and the call's log line names a new round as it did."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from rng_service.api import round_api
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.round_messages import (
    EncodedAnswer,
    answer_bytes,
    fill_live_round_view,
)
from rng_service.api.rpc_call import Call
from rng_service.api.rpc_log import RpcLog
from rng_service.api.server import LiveServices, ServerConfig, build_server
from rng_service.service import views
from rng_service.service.ports import DEFAULT_OPERATOR

_ENV = ("FAIRSHOE_ENV", "FAIRSHOE_DATABASE", "FAIRSHOE_SEED_KEY", "FAIRSHOE_TEST_SHOES",
        "FAIRSHOE_TEST_STACK_DIR")
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
ROUNDS = 120
SERVICE = "/fairshoe.round.v1.RoundService/"


def old_answer(response: type[Any], view: views.RoundView) -> bytes:
    """What the server sent before: the response filled in place, encoded by the runtime."""
    message = response()
    fill_live_round_view(message.round, view)
    return bytes(message.SerializeToString())


@dataclass
class Served:
    """The live services behind a real server, the views their use cases answered with, and
    a channel that reads the answers as bytes."""

    live: LiveServices
    channel: grpc.Channel
    answered: list[views.RoundView] = field(default_factory=list)

    def raw(self, method: str, request: Any) -> bytes:
        call = self.channel.unary_unary(SERVICE + method,
                                        request_serializer=type(request).SerializeToString,
                                        response_deserializer=None)
        return bytes(call(request, timeout=10))


def _recording(answered: list[views.RoundView], use_case: Callable[..., views.RoundView]
               ) -> Callable[..., views.RoundView]:
    def recorded(*args: Any, **kwargs: Any) -> views.RoundView:
        view = use_case(*args, **kwargs)
        answered.append(view)
        return view
    return recorded


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("answers")
    with pytest.MonkeyPatch.context() as env:
        for name in _ENV:
            env.delenv(name, raising=False)
        env.setenv("FAIRSHOE_DATA_DIR", str(root))
        live = LiveServices.open(root / "fairshoe.db")
        answered: list[views.RoundView] = []
        for name in ("start_round", "act", "get_round"):  # the views the handlers answer with
            env.setattr(live.rounds, name, _recording(answered, getattr(live.rounds, name)))
        server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2), live)
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                yield Served(live, channel, answered)
        finally:
            server.stop(grace=None)
            live.close()


def _choice(rng: random.Random, view: rt.RoundView, taken: set[int]) -> rt.PlayerAction:
    """One of the round's legal actions (its kind added to ``taken``), a stake picked where it
    takes one."""
    la = rng.choice(list(view.legal_actions))
    taken.add(la.action)
    if la.action == rt.ACTION_KIND_HIT:
        return rt.PlayerAction(hit=rt.PlayerAction.Hit())
    if la.action == rt.ACTION_KIND_STAND:
        return rt.PlayerAction(stand=rt.PlayerAction.Stand())
    if la.action == rt.ACTION_KIND_SPLIT:
        return rt.PlayerAction(split=rt.PlayerAction.Split())
    if la.action == rt.ACTION_KIND_EVEN_MONEY:
        return rt.PlayerAction(even_money=rt.PlayerAction.EvenMoney(accept=rng.random() < 0.5))
    amount = rng.choice([None, la.min_stake_minor, la.max_stake_minor, *la.stakes_minor])
    if la.action == rt.ACTION_KIND_DOUBLE:
        return rt.PlayerAction(double=rt.PlayerAction.Double(amount_minor=amount))
    return rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=amount))


def test_every_transition_sends_the_bytes_it_sent_before(served: Served) -> None:
    """Rounds of every game, one or three hands, random legal actions (splits, doubles for
    less, insurance; even money when it comes); every few transitions the same request again,
    whose stored answer is again the bytes of the first."""
    rng = random.Random(16)
    player = "answers-1"
    served.live.wallet.deposit(DEFAULT_OPERATOR, player, "EUR", 10**9, request_id="fund-1")
    statuses: set[int] = set()
    taken: set[int] = set()
    transitions = retries = 0

    def sent(method: str, request: Any, response: type[Any]) -> rt.RoundView:
        nonlocal transitions, retries
        first = len(served.answered)
        data = served.raw(method, request)
        [view] = served.answered[first:]
        assert data == old_answer(response, view)
        transitions += 1
        if rng.random() < 0.2:  # a retry: the stored answer, the same bytes
            assert served.raw(method, request) == data
            retries += 1
        answer: rt.RoundView = response.FromString(data).round
        assert answer.round_id == view.round_id and answer.version == view.version
        return answer

    for i in range(ROUNDS):
        game = GAMES[i % len(GAMES)]
        hands = rng.choice([1, 3]) if game == "multi-hand" else 1
        view = sent("StartRound", round_pb2.StartRoundRequest(
            player_id=player, game=game, mode=common_pb2.MODE_REAL, currency="EUR",
            hands=[rt.HandBet(bet_minor=rng.choice([1000, 2500, 5000]))] * hands,
            request_id=f"start-{i}"), round_pb2.StartRoundResponse)
        step = 0
        while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            step += 1
            view = sent("Act", round_pb2.ActRequest(
                player_id=player, round_id=view.round_id, hand_id=view.turn.hand_id,
                action=_choice(rng, view, taken), expected_version=view.version,
                request_id=f"act-{i}-{step}"), round_pb2.ActResponse)
        statuses.add(view.status)
        first = len(served.answered)  # read back: GetRound answers with a message, as before
        got = served.raw("GetRound", round_pb2.GetRoundRequest(player_id=player,
                                                                round_id=view.round_id))
        assert got == old_answer(round_pb2.GetRoundResponse, served.answered[first])
        assert round_pb2.GetRoundResponse.FromString(got).round == view
    assert transitions > 2 * ROUNDS and retries > 10
    assert rt.ROUND_STATUS_FINISHED in statuses
    assert taken >= {rt.ACTION_KIND_HIT, rt.ACTION_KIND_STAND, rt.ACTION_KIND_DOUBLE,
                     rt.ACTION_KIND_SPLIT, rt.ACTION_KIND_INSURANCE}


def test_errors_are_sent_as_before(served: Served) -> None:
    """A bad request, a stale version and a reused request id end in the same statuses, with
    the same details, through the typed stub as through raw bytes; nothing is answered."""
    player = "answers-2"
    served.live.wallet.deposit(DEFAULT_OPERATOR, player, "EUR", 10**6, request_id="fund-2")
    stub = round_pb2_grpc.RoundServiceStub(served.channel)
    start = round_pb2.StartRoundRequest(player_id=player, game="double-deck",
                                        mode=common_pb2.MODE_REAL, currency="EUR",
                                        hands=[rt.HandBet(bet_minor=1000)], request_id="e-1")
    view = stub.StartRound(start).round
    stale = round_pb2.ActRequest(player_id=player, round_id=view.round_id,
                                 action=rt.PlayerAction(stand=rt.PlayerAction.Stand()),
                                 expected_version=view.version + 5, request_id="e-2")
    bad = round_pb2.StartRoundRequest(player_id=player, game="double-deck",
                                      mode=common_pb2.MODE_REAL, currency="EUR",
                                      hands=[rt.HandBet(bet_minor=0)], request_id="e-3")
    reused = round_pb2.StartRoundRequest(player_id=player, game="snap", mode=common_pb2.MODE_REAL,
                                         currency="EUR", hands=[rt.HandBet(bet_minor=1000)],
                                         request_id="e-1")
    for method, request, code in (("Act", stale, grpc.StatusCode.ABORTED),
                                  ("StartRound", bad, grpc.StatusCode.INVALID_ARGUMENT),
                                  ("StartRound", reused, grpc.StatusCode.INVALID_ARGUMENT)):
        before = len(served.answered)
        with pytest.raises(grpc.RpcError) as typed:
            getattr(stub, method)(request)
        with pytest.raises(grpc.RpcError) as raw:
            served.raw(method, request)
        assert typed.value.code() == raw.value.code() == code
        assert typed.value.details() == raw.value.details()
        assert len(served.answered) == before  # no view was answered
    assert stub.GetRound(round_pb2.GetRoundRequest(player_id=player,
                                                   round_id=view.round_id)).round == view


def test_only_the_transitions_answer_in_bytes() -> None:
    """StartRound and Act serialize with ``answer_bytes``; every other method with its
    response message's own encoder, as the generated registration has it."""
    handlers = round_api.method_handlers(round_api.RoundApi(None))  # type: ignore[arg-type]
    declared = round_pb2.DESCRIPTOR.services_by_name["RoundService"].methods
    assert set(handlers) == {m.name for m in declared}
    for method in declared:
        handler = handlers[method.name]
        assert handler.unary_unary is not None
        request = getattr(round_pb2, method.input_type.name)
        assert handler.request_deserializer == request.FromString
        if method.name in round_api.ENCODED:
            assert handler.response_serializer is answer_bytes
        else:
            response = getattr(round_pb2, method.output_type.name)
            assert handler.response_serializer == response.SerializeToString


def test_a_message_given_to_answer_bytes_is_encoded() -> None:
    message = round_pb2.ActResponse(round=rt.RoundView(round_id="r-1", version=2))
    assert answer_bytes(message) == message.SerializeToString()


class Lines:
    """A logger that keeps what it was asked to write."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))

    error = info


def test_the_log_line_names_a_new_round_as_before(served: Served) -> None:
    """The line of a StartRound names the round its answer shows, the same with the encoded
    answer as with the message it stands for (and an odd id, printable and bounded, alike)."""
    # its own round: the module's other tests may run after it, or in another worker
    served.live.wallet.deposit(DEFAULT_OPERATOR, "answers-log", "EUR", 10**6,
                               request_id="fund-log")
    first = len(served.answered)
    served.raw("StartRound", round_pb2.StartRoundRequest(
        player_id="answers-log", game="snap", mode=common_pb2.MODE_REAL, currency="EUR",
        hands=[rt.HandBet(bet_minor=1000)], request_id="start-log"))
    [view] = served.answered[first:]
    assert view.version == 1
    for round_id in (view.round_id, "r\n" + "x" * 500):
        shown = dataclasses.replace(view, round_id=round_id)
        lines = Lines()
        for answer in (round_pb2.StartRoundResponse.FromString(old_answer(
                round_pb2.StartRoundResponse, shown)), EncodedAnswer(shown)):
            call = Call(SERVICE + "StartRound", None)  # type: ignore[arg-type]
            call.request = round_pb2.StartRoundRequest(request_id="q-1")
            RpcLog(lines).write(call, "OK", 0.001, {}, answer)
        [(_, message_line), (_, encoded_line)] = lines.lines
        assert message_line == encoded_line
        assert encoded_line["round_id"].startswith(round_id[:1])
