"""End to end over real gRPC: health, reflection, GameService and its error codes."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from prometheus_client import REGISTRY

from game_math.games import game_rules as game_rules_of
from rng_service.api import game_service as game_service_module
from rng_service.api import metrics as metrics_module
from rng_service.api.metrics import grpc_code
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.server import ServerConfig, build_server
from rng_service.rng.selftest import SelfTestFailed

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield ch
    server.stop(grace=None)


def test_health_reports_serving(channel: grpc.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    for service in ("", "fairshoe.game.v1.GameService"):
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_health_list_reports_every_status_without_a_traceback(
        channel: grpc.Channel, caplog: pytest.LogCaptureFixture) -> None:
    # grpcio-health-checking registers List without implementing it: each call was an
    # error-level traceback in the server's log, which any peer could send
    stub = health_pb2_grpc.HealthStub(channel)
    with caplog.at_level(logging.WARNING):
        reply = stub.List(health_pb2.HealthListRequest())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert {"", "fairshoe.game.v1.GameService", "fairshoe.math.v1.MathService"} <= set(
        reply.statuses)
    for service, status in reply.statuses.items():
        assert status == stub.Check(health_pb2.HealthCheckRequest(service=service)), service
        assert status.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_game_service(channel: grpc.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    reply = next(iter(stub.ServerReflectionInfo(iter([request]))))
    names = {s.name for s in reply.list_services_response.service}
    assert "fairshoe.game.v1.GameService" in names
    assert "grpc.health.v1.Health" in names


def test_list_games_and_rules(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    games = stub.ListGames(game_pb2.ListGamesRequest()).games
    assert [g.id for g in games] == ["snap", "double-deck", "double-exposure", "multi-hand"]
    rules = stub.GetRules(game_pb2.GetRulesRequest(game="multi-hand"))
    assert 'game = "multi-hand"' in rules.rules_toml
    assert rules.rules_digest == games[3].rules_digest


def test_unknown_game_is_not_found(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    with pytest.raises(grpc.RpcError) as err:
        stub.GetRules(game_pb2.GetRulesRequest(game="baccarat"))
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert "baccarat" in (err.value.details() or "")


def test_replay_round_and_invalid_script(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    script = {"game": "snap", "hands": [{"bet": 1000}],
              "shoe": ["TS", "6D", "9H", "TD", "8C"], "actions": ["stand"]}
    reply = stub.ReplayRound(game_pb2.ReplayRoundRequest(script_json=json.dumps(script)))
    result = json.loads(reply.result_json)
    # player 19 against dealer 6+10 = 16, who draws 8 and busts: the bet is paid 1:1
    assert result["status"] == "finished"
    assert result["total_returned"] == 2000
    script["actions"] = ["split"]
    with pytest.raises(grpc.RpcError) as err:
        stub.ReplayRound(game_pb2.ReplayRoundRequest(script_json=json.dumps(script)))
    # an action the round refuses in its state is a failed precondition, naming the action
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert (err.value.details() or "").startswith("script_json.actions[0]: cannot split")


@pytest.mark.parametrize(("script_json", "code", "prefix"), [
    ('{"game": "baccarat", "hands": [], "shoe": []}', grpc.StatusCode.NOT_FOUND,
     "script_json.game: no game 'baccarat'"),
    ('{"game": "snap", "hands": [{"bet": 1}], "shoe": []}', grpc.StatusCode.INVALID_ARGUMENT,
     "script_json.hands[0].bet: 1 is outside the limits"),
    ('[1, 2]', grpc.StatusCode.INVALID_ARGUMENT, "script_json: the script must be a JSON object"),
    ('{"hands": ' + "9" * 5000 + "}", grpc.StatusCode.INVALID_ARGUMENT, "script_json: not JSON"),
    ("[" * 30_000 + "]" * 30_000, grpc.StatusCode.INVALID_ARGUMENT, "script_json: not JSON"),
])
def test_bad_scripts_get_a_code_and_the_field(
    channel: grpc.Channel, script_json: str, code: grpc.StatusCode, prefix: str
) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    with pytest.raises(grpc.RpcError) as err:
        stub.ReplayRound(game_pb2.ReplayRoundRequest(script_json=script_json))
    assert err.value.code() is code
    assert (err.value.details() or "").startswith(prefix), err.value.details()


HIT = rt.PlayerAction(hit=rt.PlayerAction.Hit())
STAND = rt.PlayerAction(stand=rt.PlayerAction.Stand())
SPLIT = rt.PlayerAction(split=rt.PlayerAction.Split())


def typed_replay(shoe: list[str], actions: list[rt.PlayerAction], *, game: str = "snap",
                 bet: int = 1000, balance: int | None = None) -> game_pb2.ReplayRoundRequest:
    return game_pb2.ReplayRoundRequest(game=game, hands=[rt.HandBet(bet_minor=bet)], shoe=shoe,
                                       actions=actions, balance_minor=balance)


def test_typed_replay_round_plays_and_shows_the_round(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    reply = stub.ReplayRound(typed_replay(["TS", "6D", "9H", "TD", "8C"], [STAND],
                                          balance=5000))
    r = reply.round
    # player 19 against dealer 6+10 = 16, who draws 8 and busts: the bet is paid 1:1
    assert r.status == rt.ROUND_STATUS_FINISHED and not reply.result_json
    assert [c.code for c in r.dealer.cards] == ["6D", "TD", "8C"] and r.dealer.total == 24
    assert (r.hands[0].total, r.hands[0].outcome) == (19, rt.OUTCOME_WIN)
    assert [(w.kind, w.staked_minor, w.returned_minor) for w in r.wagers] == [
        (rt.WAGER_KIND_MAIN, 1000, 2000)]
    assert (r.total_staked_minor, r.total_returned_minor, r.balance_after_minor) == (
        1000, 2000, 6000)
    kinds = [e.kind for e in r.events]
    assert kinds.count(rt.EVENT_KIND_CARD) == 5 and rt.EVENT_KIND_REVEAL in kinds
    assert (r.cards_used.start, r.cards_used.end) == (0, 5)


def test_typed_replay_hides_the_hole_card_until_turned(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    reply = stub.ReplayRound(typed_replay(["TS", "6D", "9H", "QD", "8C"], []))
    r = reply.round
    assert r.status == rt.ROUND_STATUS_AWAITING_PLAYER
    assert (r.turn.hand_id, r.turn.decision) == (0, rt.DECISION_PLAY)
    assert [(c.code, c.hidden) for c in r.dealer.cards] == [("6D", False), ("", True)]
    assert r.dealer.total == 6
    hole = [e for e in r.events if e.dealer and e.kind == rt.EVENT_KIND_CARD][1]
    assert hole.card.hidden and not hole.card.code
    # neither the hole card (QD) nor the undealt card (8C) is anywhere in the answer
    assert b"QD" not in reply.SerializeToString() and b"8C" not in reply.SerializeToString()
    legal = {la.action: la for la in r.legal_actions}
    assert set(legal) == {rt.ACTION_KIND_HIT, rt.ACTION_KIND_STAND, rt.ACTION_KIND_DOUBLE}
    assert (legal[rt.ACTION_KIND_DOUBLE].min_stake_minor,
            legal[rt.ACTION_KIND_DOUBLE].max_stake_minor) == (1000, 1000)


def test_typed_replay_insurance_with_an_amount(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    decline = rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=0))
    r = stub.ReplayRound(typed_replay(["TS", "AS", "9H", "7D"], [decline, STAND])).round
    decisions = [(e.action, e.amount_minor) for e in r.events
                 if e.kind == rt.EVENT_KIND_DECISION]
    assert decisions == [(rt.ACTION_KIND_INSURANCE, 0), (rt.ACTION_KIND_STAND, 0)]
    assert [w.kind for w in r.wagers] == [rt.WAGER_KIND_MAIN]  # declined: no insurance wager
    assert r.hands[0].outcome == rt.OUTCOME_WIN  # 19 against a soft 18


@pytest.mark.parametrize(("request_", "code", "prefix"), [
    (typed_replay(["TS", "6D", "9H", "TD", "8C"], [SPLIT]), grpc.StatusCode.FAILED_PRECONDITION,
     "actions[0]: cannot split"),
    (typed_replay(["TS", "6D"], [], bet=1), grpc.StatusCode.INVALID_ARGUMENT,
     "hands[0].bet_minor: 1 is outside the limits"),
    (typed_replay(["TS", "6X"], []), grpc.StatusCode.INVALID_ARGUMENT, "shoe[1]: bad card code"),
    (typed_replay(["TS", "6D", "9H", "TD", "8C"], [rt.PlayerAction()]),
     grpc.StatusCode.INVALID_ARGUMENT, "actions[0]: no action set"),
    (typed_replay(["TS", "6D", "9H", "TD"], [HIT]), grpc.StatusCode.INVALID_ARGUMENT,
     "shoe: round void"),
    (typed_replay([], [], game="baccarat"), grpc.StatusCode.NOT_FOUND,
     "game: no game 'baccarat'"),
    (typed_replay(["TS"] * 833, []), grpc.StatusCode.INVALID_ARGUMENT, "shoe: at most 832"),
    # a side bet by its place in the request's list, as StartRound names it
    (game_pb2.ReplayRoundRequest(game="snap", hands=[rt.HandBet(
        bet_minor=1000, side_bets=[rt.SideBetStake(name="lucky", stake_minor=500)])],
        shoe=["TS", "6D", "9H", "TD"]), grpc.StatusCode.INVALID_ARGUMENT,
     "hands[0].side_bets[0]: snap offers no side bet 'lucky'"),
    (game_pb2.ReplayRoundRequest(game="snap", hands=[rt.HandBet(bet_minor=1000)],
                                 side_bets=[rt.SideBetStake(name="snap", stake_minor=1)],
                                 shoe=["TS", "6D", "9H", "TD"]),
     grpc.StatusCode.INVALID_ARGUMENT, "side_bets[0]: 1 is outside the limits"),
    (typed_replay(["TS", "6D"], [], balance=-1), grpc.StatusCode.INVALID_ARGUMENT,
     "balance_minor: must be 0 or more"),
    (typed_replay(["TS", "6D", "9H", "TD", "8C"],
                  [rt.PlayerAction(double=rt.PlayerAction.Double(amount_minor=-5))]),
     grpc.StatusCode.INVALID_ARGUMENT, "actions[0].double.amount_minor: must be 0 or more"),
    (game_pb2.ReplayRoundRequest(script_json="{}", game="snap"),
     grpc.StatusCode.INVALID_ARGUMENT, "script_json: deprecated; send it alone"),
])
def test_typed_replay_errors_name_the_request_field(
    channel: grpc.Channel, request_: game_pb2.ReplayRoundRequest, code: grpc.StatusCode,
    prefix: str,
) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    with pytest.raises(grpc.RpcError) as err:
        stub.ReplayRound(request_)
    assert err.value.code() is code
    assert (err.value.details() or "").startswith(prefix), err.value.details()


def test_reflection_lists_the_math_service(channel: grpc.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    reply = next(iter(stub.ServerReflectionInfo(iter([request]))))
    assert "fairshoe.math.v1.MathService" in {s.name for s in reply.list_services_response.service}


def test_tls_round_trip(tmp_path: Path) -> None:
    certs = Path(__file__).resolve().parents[2] / "certs"
    work = tmp_path
    shutil.copy(certs / "make-dev-certs", work / "make-dev-certs")
    subprocess.run([str(work / "make-dev-certs")], check=True, capture_output=True)
    dev = work / "dev"
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2,
                                             tls_cert=str(dev / "server.pem"),
                                             tls_key=str(dev / "server.key")))
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=(dev / "ca.pem").read_bytes())
        with grpc.secure_channel(f"localhost:{port}", creds) as ch:
            games = game_pb2_grpc.GameServiceStub(ch).ListGames(game_pb2.ListGamesRequest())
        assert len(games.games) == 4
    finally:
        server.stop(grace=None)


def test_a_failed_rng_self_test_reports_not_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise SelfTestFailed("known answer mismatch")

    monkeypatch.setattr(metrics_module, "run_self_test", broken)
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        server.stop(grace=None)


# --- findings of a hostile client (fuzzed ReplayRound requests) ----------------------------------

REPLAY = "/fairshoe.game.v1.GameService/ReplayRound"


def _count(method: str, code: str, grpc_type: str = "unary") -> float:
    """grpc_server_handled_total of ``method`` (``/package.Service/Method``) at ``code``
    (``INVALID_ARGUMENT``, labelled as Go spells it)."""
    service, _, name = method.lstrip("/").rpartition("/")
    return REGISTRY.get_sample_value("grpc_server_handled_total", {
        "grpc_type": grpc_type, "grpc_service": service, "grpc_method": name,
        "grpc_code": grpc_code(code)}) or 0.0


def _raw_call(channel: grpc.Channel, method: str, data: bytes) -> grpc.RpcError:
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as err:
        call(data, timeout=10)
    return err.value


@pytest.mark.parametrize("data", [
    b"\x0a\x02\xff\xfe",  # script_json (field 1, a string) holding invalid UTF-8
    b"\x0a\x10{}",  # script_json says 16 bytes follow, 2 do: truncated
])
def test_a_request_that_does_not_decode_is_invalid_argument_and_counted(
    channel: grpc.Channel, data: bytes
) -> None:
    before = _count(REPLAY, "INVALID_ARGUMENT")
    err = _raw_call(channel, REPLAY, data)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "fairshoe.game.v1.ReplayRoundRequest" in (err.details() or "")
    assert _count(REPLAY, "INVALID_ARGUMENT") == before + 1


def _replay_error(channel: grpc.Channel, script: object) -> grpc.RpcError:
    stub = game_pb2_grpc.GameServiceStub(channel)
    text = script if isinstance(script, str) else json.dumps(script)
    with pytest.raises(grpc.RpcError) as err:
        stub.ReplayRound(game_pb2.ReplayRoundRequest(script_json=text), timeout=10)
    details = err.value.details() or ""
    assert len(details) < 1024 and details.isprintable(), details
    return err.value


SNAP = {"game": "snap", "hands": [{"bet": 1000}], "shoe": ["TS", "6D", "9H", "TD", "8C"]}


@pytest.mark.parametrize(("edit", "prefix"), [
    # parseable JSON nested deeper than repr() can recurse while the message is built
    ({"actions": [json.loads("[" * 900 + "]" * 900)]}, "script_json.actions[0]: an action is"),
    ({"level": json.loads("[" * 900 + "]" * 900)}, "script_json.level: must be a string"),
    ({"shoe": [json.loads("[" * 900 + "]" * 900)]}, "script_json.shoe[0]: must be a card code"),
])
def test_deeply_nested_values_are_invalid_argument(
    channel: grpc.Channel, edit: dict[str, object], prefix: str
) -> None:
    err = _replay_error(channel, {**SNAP, **edit})
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(prefix), err.details()


@pytest.mark.parametrize("edit", [
    {"hands": [{"bet": 1000, "side_bets": {"\ud800": 100}}]},
    {"actions": [{"action": "stand", "\udfff": 1}]},
    {"shoe": ["T\ud800"]},
])
def test_a_lone_surrogate_is_echoed_escaped(
    channel: grpc.Channel, edit: dict[str, object]
) -> None:
    err = _replay_error(channel, {**SNAP, **edit})
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = err.details() or ""
    assert "\\ud800" in details or "\\udfff" in details, details
    assert "encode" not in details


@pytest.mark.parametrize(("edit", "code"), [
    ({"game": "x" * 20_000}, grpc.StatusCode.NOT_FOUND),
    ({"x" * 20_000: 1}, grpc.StatusCode.INVALID_ARGUMENT),
    ({"actions": ["y" * 20_000]}, grpc.StatusCode.INVALID_ARGUMENT),
    ({"hands": [{"bet": 1000, "side_bets": {"z" * 20_000: 100}}]},
     grpc.StatusCode.INVALID_ARGUMENT),
    ({"hands": [{"bet": int("9" * 4000)}]}, grpc.StatusCode.INVALID_ARGUMENT),
])
def test_long_client_text_is_quoted_and_cut(
    channel: grpc.Channel, edit: dict[str, object], code: grpc.StatusCode
) -> None:
    err = _replay_error(channel, {**SNAP, **edit})
    assert err.code() is code
    assert "chars)" in (err.details() or "") or "..." in (err.details() or "")


def test_get_rules_quotes_a_long_game_name(channel: grpc.Channel) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    with pytest.raises(grpc.RpcError) as err:
        stub.GetRules(game_pb2.GetRulesRequest(game="b" * 20_000), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert len(err.value.details() or "") < 300


def test_a_shoe_with_more_copies_of_a_card_than_the_decks_hold_is_refused(
    channel: grpc.Channel
) -> None:
    # whatever the game's decks, one more copy of a card than that cannot be dealt
    decks = game_rules_of("snap").decks
    shoe = ["TS", "6D", "9H", "TD"] + ["8C"] * (decks + 1)
    err = _replay_error(channel, {**SNAP, "shoe": shoe})
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(f"script_json.shoe[{4 + decks}]: a {decks}-deck shoe")
    status = rpc_status.from_call(err)
    assert status is not None
    bad_request = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad_request)
    assert bad_request.field_violations[0].field == f"script_json.shoe[{4 + decks}]"


@pytest.mark.parametrize("code", ["\uff34S", "T\uff33", "1\u0660S", "Tſ", "TS\u3000"])
def test_look_alike_card_codes_are_refused(channel: grpc.Channel, code: str) -> None:
    err = _replay_error(channel, {**SNAP, "shoe": [code, "6D", "9H", "TD", "8C"]})
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith("script_json.shoe[0]: bad card code")


def test_an_unexpected_exception_is_internal_with_a_generic_message(
    channel: grpc.Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(script: object) -> None:
        raise KeyError("secret-looking internals")

    monkeypatch.setattr(game_service_module, "play_script", broken)
    before = _count(REPLAY, "INTERNAL")
    err = _replay_error(channel, SNAP)
    assert err.code() is grpc.StatusCode.INTERNAL
    assert "secret" not in (err.details() or "") and "KeyError" not in (err.details() or "")
    assert _count(REPLAY, "INTERNAL") == before + 1
