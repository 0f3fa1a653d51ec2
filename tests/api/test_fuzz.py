"""A hostile client against the whole server: every RPC of every service the server registers
(GameService, MathService and, with live services on a temp SQLite file, RoundService,
WalletService, AuditService and RngService; health and reflection too), found through
reflection, so a service or RPC added later is fuzzed without editing this file.

Each RPC gets arbitrary request bytes, and structurally valid but hostile messages generated from
its request descriptor (huge and negative integers, unknown enum values, long strings, random
bytes, long repeated fields within gRPC's 4 MiB limit, nested messages and oneofs), mixed with
plausible values (real player ids, games, amounts, and the round, shoe and page ids the server
has answered) so the fuzzing reaches the use cases, not only the first field check. Whatever is
sent, the answer is success or a clean client error: never INTERNAL, UNKNOWN,
RESOURCE_EXHAUSTED or DATA_LOSS, with short printable details. And whatever was written, the
ledger still balances (:func:`ledger_problems`): fuzzing writes must never corrupt money.

GameService's deprecated ``script_json`` also gets arbitrary and deeply nested JSON.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import pkgutil
import re
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.ledger_audit import ledger_problems

import rng_service.api.proto_gen.fairshoe as fairshoe_protos
from game_math.games import game_rules
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from rng_service.api.server import LiveServices, ServerConfig, build_server

FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN,
             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DATA_LOSS}
#: gRPC's default limit on a received message; the fuzzing stays under it
MAX_MESSAGE_BYTES = 4 * 1024 * 1024 - 1024
CALL_TIMEOUT = 20.0
# a module-scoped server is the point (one database the whole run writes to), and generating a
# long repeated field or a 1 MiB string is slow by design: both health checks would only flag that
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
_ENV = ("FAIRSHOE_ENV", "FAIRSHOE_DATABASE", "FAIRSHOE_SEED_KEY", "FAIRSHOE_TEST_SHOES",
        "FAIRSHOE_TEST_STACK_DIR")
PLAYERS = ("fuzz-a", "fuzz-b")
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")


#: declared in proto/ for the other side to implement, not served by Fairshoe: the operator's
#: seamless wallet, which Fairshoe calls
CALLED_SERVICES = frozenset({"fairshoe.operator.v1.OperatorWalletService"})


def fairshoe_services() -> set[str]:
    """Every service the protos declare (``fairshoe.<area>.v1``) for Fairshoe to serve, from the
    generated modules."""
    names = set()
    for info in pkgutil.walk_packages(fairshoe_protos.__path__, fairshoe_protos.__name__ + "."):
        if info.name.endswith("_pb2"):
            module = importlib.import_module(info.name)
            names |= {s.full_name for s in module.DESCRIPTOR.services_by_name.values()}
    assert names >= CALLED_SERVICES  # a service renamed leaves this list
    return names - CALLED_SERVICES


FAIRSHOE_SERVICES = sorted(fairshoe_services())
STANDARD_SERVICES = ["grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"]
#: examples per RPC of each service: a few seconds per service on 2 shared cores
EXAMPLES: dict[str, int] = defaultdict(lambda: 30, {
    "fairshoe.round.v1.RoundService": 20,  # writes commit (fsync) and deal from fresh shoes
    "fairshoe.math.v1.MathService": 15,  # exact analyses: the slowest answers
    "grpc.reflection.v1alpha.ServerReflection": 20,
    "grpc.health.v1.Health": 10,
})


@dataclass(frozen=True)
class Rpc:
    """One registered method, with its request and response classes."""

    path: str
    descriptor: MethodDescriptor

    @property
    def request_class(self) -> type[Message]:
        return message_factory.GetMessageClass(self.descriptor.input_type)

    @property
    def response_class(self) -> type[Message]:
        return message_factory.GetMessageClass(self.descriptor.output_type)

    def callable(self, channel: grpc.Channel, *, raw: bool) -> Callable[..., Any]:
        kinds = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
                 (True, False): channel.stream_unary, (True, True): channel.stream_stream}
        kind = kinds[(self.descriptor.client_streaming, self.descriptor.server_streaming)]
        if raw:
            return kind(self.path)  # type: ignore[no-any-return]
        return kind(self.path,  # type: ignore[no-any-return]
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=self.response_class.FromString)


@dataclass
class Seen:
    """Values the server answered (round ids, versions, shoe ids, page tokens...), by field
    name: fed back into requests so the fuzzing reaches real rounds, shoes and pages."""

    values: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    #: the rounds awaiting a decision, as last answered: round id -> (player, view)
    open_rounds: dict[str, tuple[str, rt.RoundView]] = field(default_factory=dict)

    def learn(self, message: Message, request: Message | None = None) -> None:
        """Remember the values of ``message``, the answer to ``request``."""
        player = getattr(request, "player_id", "")
        for fd, value in message.ListFields():
            items = value if fd.is_repeated else [value]
            for item in list(items)[:50]:
                if isinstance(item, rt.RoundView) and player:
                    self._round(player, item)
                if isinstance(item, Message):
                    self.learn(item)
                elif isinstance(item, str | int | bytes) and not isinstance(item, bool):
                    known = self.values[fd.name]
                    if item not in known:
                        known.append(item)
                        del known[:-200]

    def _round(self, player: str, view: rt.RoundView) -> None:
        if view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            self.open_rounds[view.round_id] = (player, view)
        else:
            self.open_rounds.pop(view.round_id, None)

    def strategy(self, name: str) -> st.SearchStrategy[Any]:
        """One of the values seen under ``name`` (read when drawn, so later answers count)."""
        def pick(i: int) -> Any:
            known = self.values.get(name)
            if not known:
                return {"version": 1, "hand_id": 0}.get(name, "")
            return known[i % len(known)]
        return st.integers(0, 10**6).map(pick)


@dataclass
class Fuzzed:
    """The server under fuzzing: its channel, its database file, what it registered."""

    channel: grpc.Channel
    database: Path
    rpcs: list[Rpc]
    seen: Seen

    def rpcs_of(self, service: str) -> list[Rpc]:
        return [rpc for rpc in self.rpcs if rpc.path.startswith(f"/{service}/")]


def _registered(channel: grpc.Channel) -> list[Rpc]:
    """Every method of every service the server lists through reflection."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    listed = next(iter(stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)))
    pool = descriptor_pool.Default()
    return [Rpc(f"/{service.name}/{method.name}", method)
            for service in listed.list_services_response.service
            for method in pool.FindServiceByName(service.name).methods]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    """The server with its live services on a temp SQLite file and data directory (keys, seed
    vault), with a little play already stored: real money deposited, open rounds."""
    root = tmp_path_factory.mktemp("fuzz")
    database = root / "fairshoe.db"
    with pytest.MonkeyPatch.context() as env:
        for name in _ENV:
            env.delenv(name, raising=False)
        env.setenv("FAIRSHOE_DATA_DIR", str(root))
        live = LiveServices.open(database)
        server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=4), live)
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                found = Fuzzed(channel, database, _registered(channel), Seen())
                _seed_play(channel, found.seen)
                yield found
        finally:
            server.stop(grace=None)
            live.close()


def _seed_play(channel: grpc.Channel, seen: Seen) -> None:
    wallet = wallet_pb2_grpc.WalletServiceStub(channel)
    rounds = round_pb2_grpc.RoundServiceStub(channel)
    for player in PLAYERS:
        account = wallet_pb2.Account(player_id=player, currency="EUR", mode=common_pb2.MODE_REAL)
        seen.learn(wallet.Deposit(wallet_pb2.DepositRequest(
            account=account, amount_minor=10**7, request_id=f"seed-deposit-{player}")))
    # an open round of each game for one player (one open round per player and game)
    for game in GAMES:
        request = round_pb2.StartRoundRequest(
            player_id=PLAYERS[1], game=game, mode=common_pb2.MODE_REAL, currency="EUR",
            hands=[rt.HandBet(bet_minor=1000)] * (2 if game == "snap" else 1),
            request_id=f"seed-{game}")
        seen.learn(rounds.StartRound(request), request)


# ----- the server registers what the protos declare --------------------------------------------


def test_every_service_is_registered_and_fuzzed(fuzzed: Fuzzed) -> None:
    services = {rpc.path.split("/")[1] for rpc in fuzzed.rpcs}
    # each fairshoe service the protos declare is served (six today), and nothing is served that
    # the parametrized fuzz tests below do not cover
    assert set(FAIRSHOE_SERVICES) <= services
    assert services == set(FAIRSHOE_SERVICES) | set(STANDARD_SERVICES)
    assert {"fairshoe.game.v1.GameService", "fairshoe.math.v1.MathService",
            "fairshoe.round.v1.RoundService", "fairshoe.wallet.v1.WalletService",
            "fairshoe.audit.v1.AuditService", "fairshoe.rng.v1.RngService"} <= services
    for service in services:
        declared = descriptor_pool.Default().FindServiceByName(service).methods
        assert {m.name for m in declared} == {r.path.split("/")[2]
                                              for r in fuzzed.rpcs_of(service)}


# ----- outcomes --------------------------------------------------------------------------------


def _outcome(fuzzed: Fuzzed, rpc: Rpc, request: bytes | Message) -> grpc.RpcError | None:
    """The error a call with ``request`` as its (only) request ends in, None if it succeeds (for
    a stream: if its first response arrives). Typed answers are learnt from."""
    raw = isinstance(request, bytes)
    call = rpc.callable(fuzzed.channel, raw=raw)
    sent = iter([request]) if rpc.descriptor.client_streaming else request
    try:
        if rpc.descriptor.server_streaming:
            responses = call(sent, timeout=CALL_TIMEOUT)
            first = next(responses, None)
            responses.cancel()
            answers = [first]
        else:
            answers = [call(sent, timeout=CALL_TIMEOUT)]
    except grpc.RpcError as err:
        return err
    for answer in answers:
        if isinstance(answer, Message):
            fuzzed.seen.learn(answer, None if raw else request)
    return None


def _assert_clean(err: grpc.RpcError | None, sent: object = None) -> None:
    if err is None:
        return
    details = err.details() or ""
    assert err.code() not in FORBIDDEN, (err.code(), details, sent)
    assert len(details.encode()) < 1024 and details.isprintable(), (details, sent)


# ----- money -----------------------------------------------------------------------------------


def test_the_ledger_check_sees_a_corrupted_balance(tmp_path: Path) -> None:
    """The money check is not vacuous: one changed balance, or one changed entry, is found."""
    database = tmp_path / "fairshoe.db"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FAIRSHOE_DATA_DIR", str(tmp_path))
        live = LiveServices.open(database)
    try:
        live.wallet.deposit("default", "p", "EUR", 500, request_id="r1")
        live.wallet.withdraw("default", "p", "EUR", 200, request_id="r2")
    finally:
        live.close()
    assert ledger_problems(database) == []
    with contextlib.closing(sqlite3.connect(database)) as conn, conn:
        conn.execute("UPDATE accounts SET balance = balance + 1 WHERE holder = 'p'")
    assert len(ledger_problems(database)) == 2  # p's own sum, and EUR REAL's zero sum
    with contextlib.closing(sqlite3.connect(database)) as conn, conn:
        conn.execute("UPDATE accounts SET balance = balance - 1 WHERE holder = 'p'")
        conn.execute("UPDATE ledger_entries SET amount = 201 WHERE request_id = 'r2'")
    assert ledger_problems(database)


# ----- arbitrary bytes -------------------------------------------------------------------------

_BYTES = st.binary(max_size=64) | st.sampled_from([
    b"\x0a\x02\xff\xfe",  # field 1, a string that is not UTF-8
    b"\x0a\x10{}",  # a length past the end
    b"\x0a\x01\x80",
    b"\xff" * 8,
    b"\x0b" * 200 + b"\x0c" * 200,  # groups nested past the parser's depth limit
    b"\x12\x80\x80\x80\x80\x10",  # a length of 2^32
    b"\x08" + b"\xff" * 9 + b"\x01",  # a 64-bit varint at its limit
    b"\x08" + b"\xff" * 10 + b"\x01",  # a varint one byte too long
])


@pytest.mark.parametrize("service", FAIRSHOE_SERVICES + STANDARD_SERVICES)
def test_arbitrary_bytes_to_every_rpc(fuzzed: Fuzzed, service: str) -> None:
    rpcs = fuzzed.rpcs_of(service)
    assert rpcs, f"{service} is not registered"

    @FUZZ
    @given(data=_BYTES)
    def fuzz(data: bytes) -> None:
        for rpc in rpcs:
            _assert_clean(_outcome(fuzzed, rpc, data), data)

    fuzz()
    assert ledger_problems(fuzzed.database) == []


# ----- hostile messages, from the descriptors --------------------------------------------------

_INT_BOUNDS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_EDGES = (0, 1, -1, 2, 51, 52, 10_001, 2**31 - 1, -(2**31), 2**32, 2**53 - 1, 2**53, 2**53 + 1,
          2**62, 2**63 - 1, -(2**63), 2**64 - 1)
_LONG = st.sampled_from([129, 513, 5_000, 70_000, 1 << 20])
_TEXTS = (st.text(max_size=40)
          | st.sampled_from(["", " ", "\x00", "\t", "EUR\n", "\u202e", "\U0001f0a1", "é" * 65,
                             "../../etc/passwd", "'; DROP TABLE accounts; --", "@house",
                             "@cash", "%s%n", "0" * 32, "f" * 32, "{}", "[]", "AS"])
          | _LONG.map(lambda n: "x" * n)
          # wide characters: an error echoing them must stay short in bytes, not only in characters
          | _LONG.map(lambda n: "\U0001f0a1" * n))
_BINARY = st.binary(max_size=300) | _LONG.map(lambda n: b"\xff" * n)


_IDS = itertools.count()


def _plausible(seen: Seen) -> dict[str, st.SearchStrategy[Any]]:
    """Values that pass the first checks, by request field name."""
    ascii_id = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                       max_size=16)
    cards = st.sampled_from([r + s for r in "A23456789TJQK" for s in "SHDC"])
    stakes = st.sampled_from([100, 200, 500, 1000, 2000, 2500, 10_000, 100_000])
    return {
        "player_id": st.sampled_from(PLAYERS),
        "game": st.sampled_from(GAMES),
        "level": st.sampled_from(["", "low", "medium", "high", "table"]),
        "currency": st.sampled_from(["EUR", "EUR", "USD"]),
        "mode": st.sampled_from([common_pb2.MODE_DEMO, common_pb2.MODE_REAL]),
        # mostly fresh (hypothesis would draw "0" again and again); some reused, which is
        # refused unless the request is the same
        "request_id": st.one_of(*[st.builds(lambda: f"fuzz-{next(_IDS)}")] * 3, ascii_id,
                                seen.strategy("request_id")),
        "round_id": seen.strategy("round_id"),
        "shoe_id": seen.strategy("shoe_id"),
        "page_token": st.just("") | seen.strategy("next_page_token"),
        "expected_version": seen.strategy("version"),
        "hand_id": seen.strategy("hand_id"),
        "bet_minor": stakes,
        "stake_minor": stakes,
        "amount_minor": stakes | st.sampled_from([0, 10**7, 2**53 - 1]),
        "balance_minor": stakes,
        "name": st.sampled_from(["perfect_pairs", "twenty_one_plus_three", "snap"]),
        "reference": ascii_id,
        "client_seed": st.binary(min_size=1, max_size=32),
        "page_size": st.integers(0, 3),
        "count": st.integers(1, 20),
        "n": st.integers(1, 60),
        "min": st.integers(-10, 10),
        "max": st.integers(-10, 10),
        "seconds": st.integers(int(time.time()) - 3600, int(time.time()) + 60),
        "nanos": st.integers(0, 10**9 - 1),
        "cards": cards, "player_cards": cards, "dealer_cards": cards, "removed_cards": cards,
        "shoe": cards,
        "hands_at_seat": st.integers(1, 3),
        "rules_toml": st.builds(_rules_toml, st.sampled_from(GAMES),
                                st.sampled_from([None, 1, 8, 0, -1, 10**6, 2**63])),
    }


def _rules_toml(game: str, decks: int | None) -> str:
    """A built-in game's rules as TOML, with another deck count if ``decks``."""
    text = game_rules(game).to_toml()
    return text if decks is None else re.sub(r"(?m)^decks = \d+$", f"decks = {decks}", text)


def _scalar(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    """Any value the field's type can carry, edges first."""
    if fd.type in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[fd.type]
        return st.sampled_from([e for e in _EDGES if lo <= e <= hi]) | st.integers(lo, hi)
    if fd.type == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in fd.enum_type.values]
        return st.sampled_from(known) | st.integers(-(2**31), 2**31 - 1)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if fd.type == FieldDescriptor.TYPE_STRING:
        return _TEXTS
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return _BINARY
    if fd.type == FieldDescriptor.TYPE_FLOAT:
        return st.floats(width=32)
    if fd.type == FieldDescriptor.TYPE_DOUBLE:
        return st.floats()
    raise AssertionError(f"no strategy for {fd.full_name}")


def _size(value: Any) -> int:
    """About the bytes ``value`` takes in a request."""
    if isinstance(value, Message):
        return value.ByteSize() + 2
    return len(value.encode() if isinstance(value, str) else value) + 2 if isinstance(
        value, str | bytes) else 10


def _many(item_and_count: tuple[Any, int]) -> list[Any]:
    """``count`` copies of the item, as many as fit in a request (about 3 MiB)."""
    item, count = item_and_count
    return [item] * min(count, 3 * 1024 * 1024 // _size(item))


def _within_limit(cls: type[Message], fields: dict[str, Any]) -> Message:
    """The message of ``fields``, its largest fields left out until it fits in a request."""
    sizes = {name: sum(map(_size, value)) if isinstance(value, list | dict) else _size(value)
             for name, value in fields.items()}
    for name in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if sum(sizes.values()) <= MAX_MESSAGE_BYTES:
            break
        del fields[name], sizes[name]
    return cls(**fields)


def _repeated(item: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """A few items, or (rarely) one item repeated very many times."""
    many = st.tuples(item, st.sampled_from([100, 5_000, 100_000])).map(_many)
    return st.one_of(st.lists(item, max_size=4), st.lists(item, max_size=4), many)


class Messages:
    """Hypothesis strategies for any message type, built from its descriptor, two ways:

    * wild: any field may be absent or hold anything its type carries;
    * tame: every field with a plausible value (:func:`_plausible`) has one, an enum a declared
      value, a oneof one member; then a field of each message may turn wild. A tame request
      passes the first checks, so the fuzzing reaches the use cases and their storage.
    """

    MAX_DEPTH = 4

    def __init__(self, seen: Seen) -> None:
        self.plausible = _plausible(seen)
        #: requests whose fields must agree with each other to get anywhere
        self.coherent = {"fairshoe.round.v1.ActRequest": _act_on_an_open_round(seen),
                         "fairshoe.round.v1.StartRoundRequest": _bets_a_game_takes()}

    def of(self, descriptor: Descriptor) -> st.SearchStrategy[Message]:
        """Tame two times in three, wild otherwise."""
        return st.one_of(self.tame(descriptor), self.tame(descriptor), self.wild(descriptor))

    def wild(self, descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
        cls = message_factory.GetMessageClass(descriptor)
        if depth >= self.MAX_DEPTH:
            return st.just(cls())
        fields = {fd.name: self.wild_field(fd, depth) for fd in descriptor.fields}
        # every field may be left out; of a oneof, whichever is set last wins
        return st.fixed_dictionaries({}, optional=fields).map(partial(_within_limit, cls))

    def wild_field(self, fd: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            key, value = (fd.message_type.fields_by_name[n] for n in ("key", "value"))
            return st.dictionaries(self.wild_value(key, depth), self.wild_value(value, depth),
                                   max_size=4)
        item = self.wild_value(fd, depth)
        return _repeated(item) if fd.is_repeated else item

    def wild_value(self, fd: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            return st.deferred(lambda: self.wild(fd.message_type, depth + 1))
        hostile = _scalar(fd)
        plausible = self.plausible.get(fd.name)
        return hostile if plausible is None else st.one_of(plausible, hostile)

    def tame(self, descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
        cls = message_factory.GetMessageClass(descriptor)
        if depth >= self.MAX_DEPTH:
            return st.just(cls())
        return _tame_fields(self, descriptor, depth).map(partial(_within_limit, cls))

    def tame_field(self, fd: FieldDescriptor, depth: int) -> st.SearchStrategy[Any] | None:
        """A plausible value of ``fd``; None: leave it out."""
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            return None
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            item: st.SearchStrategy[Any] | None = st.deferred(
                lambda: self.tame(fd.message_type, depth + 1))
        elif fd.name in self.plausible:
            item = self.plausible[fd.name]
        elif fd.type == FieldDescriptor.TYPE_ENUM:
            item = st.sampled_from([v.number for v in fd.enum_type.values])
        elif fd.type == FieldDescriptor.TYPE_BOOL:
            item = st.booleans()
        else:
            return None
        if not fd.is_repeated:
            return item
        least, most = _TAME_ITEMS.get(fd.name, (0, 8))
        return st.lists(item, min_size=least, max_size=most)


#: how many items a tame repeated field holds, where the default (0 to 8) is mostly refused
_TAME_ITEMS = {"hands": (1, 3), "side_bets": (0, 1), "bets": (1, 2), "actions": (0, 6)}


_ACTIONS = {rt.ACTION_KIND_HIT: "hit", rt.ACTION_KIND_STAND: "stand",
            rt.ACTION_KIND_DOUBLE: "double", rt.ACTION_KIND_SPLIT: "split",
            rt.ACTION_KIND_INSURANCE: "insurance", rt.ACTION_KIND_EVEN_MONEY: "even_money"}


def _bets_a_game_takes() -> st.SearchStrategy[dict[str, Any]]:
    """The fields of a StartRoundRequest whose bets and side bets its game takes."""
    def stake(name: str) -> st.SearchStrategy[rt.SideBetStake]:
        return st.builds(rt.SideBetStake, name=st.just(name),
                         stake_minor=st.sampled_from([100, 500]))

    def hand(side_bets: list[str]) -> st.SearchStrategy[rt.HandBet]:
        chosen = st.lists(st.sampled_from(side_bets), unique=True) if side_bets else st.just([])
        return st.builds(rt.HandBet, bet_minor=st.sampled_from([1000, 2000, 5000]),
                         side_bets=chosen.flatmap(lambda names: st.tuples(*map(stake, names))))

    per_hand = ["perfect_pairs", "twenty_one_plus_three"]
    return st.one_of(
        st.fixed_dictionaries({"game": st.just("snap"), "level": st.just(""),
                               "hands": st.lists(hand([]), min_size=2, max_size=2),
                               "side_bets": st.lists(stake("snap"), max_size=1)}),
        st.fixed_dictionaries({"game": st.sampled_from(["double-deck", "double-exposure"]),
                               "level": st.just(""), "hands": st.lists(hand([]), min_size=1,
                                                                       max_size=1)}),
        st.fixed_dictionaries({"game": st.just("multi-hand"), "level": st.just(""),
                               "hands": st.lists(hand(per_hand), min_size=1, max_size=3)}))


def _act_on_an_open_round(seen: Seen) -> st.SearchStrategy[dict[str, Any]]:
    """The fields of an ActRequest making a legal decision on a round seen awaiting one.

    The rounds seen change as the server answers, so the same draws are made whatever they are
    (hypothesis requires it): three numbers, read as choices among the rounds, their legal
    actions and stakes.
    """
    def act(choices: tuple[int, int, int, bool]) -> dict[str, Any]:
        which, how, much, give = choices
        rounds = sorted(seen.open_rounds)
        if not rounds:
            return {}
        player, view = seen.open_rounds[rounds[which % len(rounds)]]
        if not view.legal_actions:
            return {}
        legal = view.legal_actions[how % len(view.legal_actions)]
        name = _ACTIONS.get(legal.action)
        if name is None:
            return {}
        action = rt.PlayerAction()
        part = getattr(action, name)
        part.SetInParent()
        stakes = [legal.min_stake_minor, legal.max_stake_minor, *legal.stakes_minor]
        if name in ("double", "insurance") and give:
            part.amount_minor = stakes[much % len(stakes)]
        elif name == "even_money":
            part.accept = give
        return {"player_id": player, "round_id": view.round_id, "hand_id": legal.hand_id,
                "expected_version": view.version, "action": action}

    index = st.integers(0, 2**16)
    return st.tuples(index, index, index, st.booleans()).map(act)


def _real_oneofs(descriptor: Descriptor) -> list[Any]:
    """The message's oneofs, without proto3 ``optional``'s one-field synthetic ones."""
    return [o for o in descriptor.oneofs
            if not (len(o.fields) == 1 and o.name == "_" + o.fields[0].name)]


@st.composite
def _tame_fields(draw: st.DrawFn, messages: Messages, descriptor: Descriptor, depth: int
                 ) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    oneofs = _real_oneofs(descriptor)
    for oneof in oneofs:
        member = draw(st.sampled_from(list(oneof.fields)))
        strategy = messages.tame_field(member, depth)
        if strategy is not None:
            fields[member.name] = draw(strategy)
    in_oneof = {fd.name for oneof in oneofs for fd in oneof.fields}
    for fd in descriptor.fields:
        strategy = messages.tame_field(fd, depth)
        if fd.name not in in_oneof and strategy is not None:
            fields[fd.name] = draw(strategy)
    coherent = messages.coherent.get(descriptor.full_name)
    if coherent is not None:
        fields.update(draw(coherent))
    if descriptor.fields and draw(st.integers(0, 3)) == 0:
        wild = draw(st.sampled_from(list(descriptor.fields)))
        fields[wild.name] = draw(messages.wild_field(wild, depth))
    return fields


@pytest.mark.parametrize("service", FAIRSHOE_SERVICES + STANDARD_SERVICES)
def test_hostile_messages_to_every_rpc(fuzzed: Fuzzed, service: str) -> None:
    rpcs = fuzzed.rpcs_of(service)
    assert rpcs, f"{service} is not registered"
    messages = Messages(fuzzed.seen)
    strategies = {rpc.path: messages.of(rpc.descriptor.input_type) for rpc in rpcs}

    @settings(FUZZ, max_examples=EXAMPLES[service] * len(rpcs))
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        rpc = data.draw(st.sampled_from(rpcs), label="rpc")
        request = data.draw(strategies[rpc.path], label="request")
        assume(request.ByteSize() <= MAX_MESSAGE_BYTES)
        err = _outcome(fuzzed, rpc, request)
        outcomes[(rpc.path, "OK" if err is None else err.code().name)] += 1
        _assert_clean(err, (rpc.path, _short(request)))

    outcomes: Counter[tuple[str, str]] = Counter()
    fuzz()
    assert ledger_problems(fuzzed.database) == [], sorted(outcomes.items())
    # the fuzzing got past the request checks, into the use cases
    assert {code for _, code in outcomes} - {"INVALID_ARGUMENT"}, sorted(outcomes.items())


def _short(request: Message) -> str:
    text = str(request)
    return text if len(text) < 2000 else text[:2000] + "..."


# ----- ReplayRound's script_json ---------------------------------------------------------------

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


@FUZZ
@given(script=_SCRIPT | _JSON)
def test_arbitrary_json_to_replay_round(fuzzed: Fuzzed, script: object) -> None:
    # json.dumps writes a lone surrogate as \ud800, which the server must read back into one
    _replay(fuzzed.channel, json.dumps(script))


@FUZZ
@given(deep=_DEEP, where=st.sampled_from(["hands", "shoe", "actions", "level", "game", "x"]))
def test_deeply_nested_json_to_replay_round(fuzzed: Fuzzed, deep: str, where: str) -> None:
    _replay(fuzzed.channel, deep)
    _replay(fuzzed.channel, '{"game": "snap", "%s": %s}' % (where, deep))  # noqa: UP031
