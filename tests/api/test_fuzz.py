"""A hostile client: arbitrary request bytes to every RPC the server registers, and arbitrary JSON
to ReplayRound. Whatever is sent, the answer is a clean client error or success: never INTERNAL,
UNKNOWN or RESOURCE_EXHAUSTED, and its details are short and printable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.server import ServerConfig, build_server

FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN,
             grpc.StatusCode.RESOURCE_EXHAUSTED}
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield ch
    server.stop(grace=None)


def _registered_methods(channel: grpc.Channel) -> list[tuple[str, bool, bool]]:
    """(path, client streams, server streams) of every method of every service the server lists
    through reflection: a service or RPC added later is fuzzed without editing this file."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    listed = next(iter(stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)))
    methods = []
    pool = descriptor_pool.Default()
    for service in listed.list_services_response.service:
        for method in pool.FindServiceByName(service.name).methods:
            methods.append((f"/{service.name}/{method.name}", method.client_streaming,
                            method.server_streaming))
    return methods


def _first_outcome(channel: grpc.Channel, method: tuple[str, bool, bool], data: bytes
                   ) -> grpc.RpcError | None:
    """The error a call with ``data`` as its (only) request ends in, None if it succeeds (for a
    stream: if its first response arrives)."""
    path, client_streams, server_streams = method
    kinds = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
             (True, False): channel.stream_unary, (True, True): channel.stream_stream}
    call = kinds[(client_streams, server_streams)](path)
    request = iter([data]) if client_streams else data
    try:
        if server_streams:
            responses = call(request, timeout=10)
            next(responses, None)
            responses.cancel()
        else:
            call(request, timeout=10)
    except grpc.RpcError as err:
        return err
    return None


def _assert_clean(err: grpc.RpcError | None) -> None:
    if err is None:
        return
    details = err.details() or ""
    assert err.code() not in FORBIDDEN, (err.code(), details)
    assert len(details.encode()) < 1024 and details.isprintable(), details


def test_every_registered_rpc_is_found(channel: grpc.Channel) -> None:
    paths = {path for path, _, _ in _registered_methods(channel)}
    assert {"/fairshoe.game.v1.GameService/ReplayRound", "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"} <= paths


@FUZZ
@given(data=st.binary(max_size=64) | st.sampled_from([b"\x0a\x02\xff\xfe", b"\x0a\x10{}",
                                                        b"\x0a\x01\x80", b"\xff" * 8]))
def test_arbitrary_bytes_to_every_rpc(channel: grpc.Channel, data: bytes) -> None:
    for method in _registered_methods(channel):
        if method[0].endswith("/Watch") and not data:
            continue  # a valid Watch request streams forever by design; covered by other bytes
        _assert_clean(_first_outcome(channel, method, data))


_TEXT = (st.text(max_size=30) | st.sampled_from(["\ud800", "T\udfffS", "１０S", "Aſ"])
         | st.integers(1000, 20_000).map(lambda n: "x" * n))
_JSON_LEAF = (st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300)
              | st.floats(allow_nan=False) | _TEXT)
_JSON = st.recursive(_JSON_LEAF, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(_TEXT, inner, max_size=4), max_leaves=12)
_DEEP = st.integers(min_value=1, max_value=3000).map(lambda n: "[" * n + "]" * n)
_CODES = [r + s for r in "A23456789TJQK" for s in "SHDC"]


def _mostly(valid: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """``valid`` three times in four, arbitrary JSON otherwise."""
    return st.one_of(valid, valid, valid, _JSON)


_CARD = _mostly(st.sampled_from(_CODES)) | st.sampled_from(["10h", "XX", "AS\u3000", "1\u0660S"])
_SIDE_BETS = st.dictionaries(
    st.sampled_from(["perfect_pairs", "twenty_one_plus_three", "snap"]) | _TEXT,
    _mostly(st.sampled_from([100, 500])), max_size=2)
_HAND = st.fixed_dictionaries({"bet": _mostly(st.sampled_from([1000, 500, 2000]))},
                              optional={"side_bets": _mostly(_SIDE_BETS)})
# mostly well-formed scripts, so the fuzzing reaches the round and its actions, not only the
# first type check; any part may still be arbitrary JSON
_SCRIPT = st.fixed_dictionaries(
    {"game": _mostly(st.sampled_from(["snap", "double-deck", "double-exposure", "multi-hand"])),
     "hands": _mostly(st.lists(_HAND, min_size=1, max_size=3)),
     "shoe": _mostly(st.permutations(_CODES).map(lambda cards: cards[:14]))
             | st.lists(_CARD, min_size=4, max_size=14)},
    optional={"actions": _mostly(st.lists(_mostly(st.sampled_from(
                  ["hit", "stand", "split", "double", "surrender", "insurance"])), max_size=5)),
              "level": _mostly(st.sampled_from(["low", "high", "table", "1-500"])),
              "balance": _mostly(st.integers()), "side_bets": _mostly(_SIDE_BETS)})


def _replay(channel: grpc.Channel, script_json: str) -> None:
    stub = game_pb2_grpc.GameServiceStub(channel)
    try:
        reply = stub.ReplayRound(game_pb2.ReplayRoundRequest(script_json=script_json), timeout=10)
    except grpc.RpcError as err:
        _assert_clean(err)
    else:
        assert json.loads(reply.result_json)["status"]


def _dumps(value: object) -> str:
    # json.dumps writes a lone surrogate as \ud800, which the server must read back into one
    return json.dumps(value)


@FUZZ
@given(script=_SCRIPT | _JSON)
def test_arbitrary_json_to_replay_round(channel: grpc.Channel, script: object) -> None:
    _replay(channel, _dumps(script))


@FUZZ
@given(deep=_DEEP, where=st.sampled_from(["hands", "shoe", "actions", "level", "game", "x"]))
def test_deeply_nested_json_to_replay_round(channel: grpc.Channel, deep: str, where: str) -> None:
    _replay(channel, deep)
    _replay(channel, '{"game": "snap", "%s": %s}' % (where, deep))  # noqa: UP031
