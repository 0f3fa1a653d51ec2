"""Hostile requests for any RPC, built from its request descriptor with :mod:`random` (the
generator of ``bench/fuzz_rpcs.py``; ``tests/api/test_fuzz.py`` draws the same kinds of values
with hypothesis, which is far too slow for a million requests).

A request is one of:

* random bytes as the whole message (a tenth of them): junk, truncated lengths, over-long
  varints, groups nested past the parser's depth;
* tame (most): every field with a plausible value (:data:`Requests.plausible`: real players,
  games, amounts, and the round, shoe, page and version values the server answered, seen by
  :class:`Seen`), an enum a declared value, a oneof one member; then a field may turn wild.
  A tame request passes the first checks, so the fuzzing reaches the use cases and storage;
* wild: any field absent or holding anything its type carries: int64 and uint64 edges, huge
  and negative numbers, unknown enum values, empty, long, control and unicode strings, random
  bytes, repeated fields blown up to megabytes (within gRPC's 4 MiB).

Each request is drawn from its own ``random.Random`` (:func:`request_rng`), so a request's
shape follows from the run's seed and its index; the values fed back from answers
(:class:`Seen`) depend on what the server answered before it.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from game_math.games import game_rules
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

#: gRPC's default limit on a received message; requests stay under it
MAX_MESSAGE_BYTES = 4 * 1024 * 1024 - 1024
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
CARDS = tuple(r + s for r in "A23456789TJQK" for s in "SHDC")
STAKES = (100, 200, 500, 1000, 2000, 2500, 10_000, 100_000)

INT_BOUNDS = {
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
EDGES = (0, 1, -1, 2, 51, 52, 10_001, 2**31 - 1, -(2**31), 2**32, 2**53 - 1, 2**53, 2**53 + 1,
         2**62, 2**63 - 1, -(2**63), 2**64 - 1)
ODD_TEXTS = ("", " ", "\x00", "\t", "EUR\n", "\u202e", "\U0001f0a1", "é" * 65, "../../etc/passwd",
             "'; DROP TABLE accounts; --", "@house", "@cash", "%s%n", "0" * 32, "f" * 32, "{}",
             "[]", "AS", "１０S", "Aſ", "ＥＵＲ", "eur", "snap\x00", "\ufeffsnap", "a" * 129,
             "fuzz-a ", "FUZZ-A", "op-b", "default", "*", "%", "_")
#: lengths of a long string or bytes field, the longest rarely (a megabyte costs both ends)
LONG_LENGTHS = (129, 513, 5_000, 70_000) * 8 + (1 << 20,)
#: copies of one item in a blown-up repeated field, capped to about 3 MiB
BLOWN_UP = (100, 5_000, 100_000)
RAW_BYTES = (
    b"\x0a\x02\xff\xfe",  # field 1, a string that is not UTF-8
    b"\x0a\x10{}",  # a length past the end
    b"\x0a\x01\x80",
    b"\xff" * 8,
    b"\x0b" * 200 + b"\x0c" * 200,  # groups nested past the parser's depth limit
    b"\x12\x80\x80\x80\x80\x10",  # a length of 2^32
    b"\x08" + b"\xff" * 9 + b"\x01",  # a 64-bit varint at its limit
    b"\x08" + b"\xff" * 10 + b"\x01",  # a varint one byte too long
    b"\x0a\x00" * 1000,
    b"\x1a\x03\x0a\x01\x80",  # a nested message holding a bad string
)


def request_rng(seed: int, index: int) -> random.Random:
    """The generator of request ``index`` of a run with ``seed``."""
    return random.Random(seed * 1_000_000_007 + index)


def random_text(rng: random.Random) -> str:
    """Any string: odd, short random unicode (no surrogates: protobuf refuses them), or long."""
    pick = rng.random()
    if pick < 0.45:
        return rng.choice(ODD_TEXTS)
    if pick < 0.95:
        alphabet = rng.choice((0x7F, 0x7FF, 0xD7FF))
        return "".join(chr(rng.randint(1, alphabet)) for _ in range(rng.randint(0, 40)))
    return rng.choice("x\u00e9\U0001f0a1") * rng.choice(LONG_LENGTHS)


def random_bytes(rng: random.Random) -> bytes:
    if rng.random() < 0.97:
        return rng.randbytes(rng.randint(0, 300))
    return b"\xff" * rng.choice(LONG_LENGTHS)


def random_int(rng: random.Random, lo: int, hi: int) -> int:
    pick = rng.random()
    if pick < 0.5:
        edges = [e for e in EDGES if lo <= e <= hi]
        return rng.choice(edges)
    if pick < 0.75:
        return max(lo, min(hi, rng.randint(-1000, 100_000)))
    return rng.randint(lo, hi)


@dataclass
class Seen:
    """Values the server answered (round ids, versions, shoe ids, page tokens, tree sizes...),
    by field name, fed back into requests so the fuzzing reaches real rounds, shoes and pages;
    and the rounds awaiting a decision: round id -> (caller, player, view)."""

    values: dict[str, list[Any]] = field(default_factory=dict)
    open_rounds: dict[str, tuple[int, str, rt.RoundView]] = field(default_factory=dict)
    KEEP = 200

    def learn(self, message: Message, caller: int = 0, player: str = "", depth: int = 0) -> None:
        for fd, value in message.ListFields():
            items = list(value)[:10] if fd.is_repeated else [value]
            for item in items:
                if isinstance(item, rt.RoundView) and player:
                    self._round(caller, player, item)
                if isinstance(item, Message):
                    if depth < 4:
                        self.learn(item, caller, player, depth + 1)
                elif isinstance(item, str | int | bytes) and not isinstance(item, bool):
                    known = self.values.setdefault(fd.name, [])
                    if item not in known:
                        known.append(item)
                        if len(known) > self.KEEP:
                            del known[: len(known) - self.KEEP]

    def _round(self, caller: int, player: str, view: rt.RoundView) -> None:
        if view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            self.open_rounds[view.round_id] = (caller, player, view)
        else:
            self.open_rounds.pop(view.round_id, None)

    def pick(self, rng: random.Random, name: str, default: Any = "") -> Any:
        known = self.values.get(name)
        return rng.choice(known) if known else default


Draw = Callable[[random.Random], Any]


def _rules_toml(rng: random.Random) -> str:
    text = game_rules(rng.choice(GAMES)).to_toml()
    decks = rng.choice((None, None, 1, 8, 0, -1, 10**6, 2**63))
    return text if decks is None else re.sub(r"(?m)^decks = \d+$", f"decks = {decks}", text)


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 3 or pick < 0.5:
        return rng.choice((None, True, False, 0, -1, 10**300, 2**63, 1.5, 1e308, "x", "",
                           "\ud800", "AS", 1000, "x" * 20_000))
    if pick < 0.75:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {random_text(rng)[:30]: _json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _script_json(rng: random.Random) -> str:
    """A ReplayRound script: mostly well-formed, any part arbitrary JSON; or deep nesting."""
    pick = rng.random()
    if pick < 0.05:
        n = rng.randint(1, 3000)
        return "[" * n + "]" * n
    if pick < 0.15:
        return json.dumps(_json_value(rng))

    def mostly(valid: Any) -> Any:
        return valid if rng.random() < 0.8 else _json_value(rng)

    game = rng.choice(GAMES)
    hands = [{"bet": mostly(rng.choice((1000, 500, 2000)))}
             for _ in range(2 if game == "snap" else rng.choice((1, 1, 3)))]
    script: dict[str, Any] = {"game": mostly(game), "hands": mostly(hands),
                              "shoe": mostly(rng.sample(CARDS, 14))}
    if rng.random() < 0.6:
        script["actions"] = mostly([mostly(rng.choice(("hit", "stand", "split", "double",
                                                       "surrender", "insurance")))
                                    for _ in range(rng.randint(0, 5))])
    if rng.random() < 0.3:
        script["level"] = mostly(rng.choice(("low", "high", "table", "1-500")))
    if rng.random() < 0.3:
        script["balance"] = mostly(rng.randint(-10**6, 10**9))
    return json.dumps(script)


def plausible_values(seen: Seen, players: Sequence[str]) -> dict[str, Draw]:
    """Values that pass the first checks, by request field name."""
    ids = iter(range(10**12))

    def ascii_id(rng: random.Random) -> str:
        return "".join(chr(rng.randint(0x21, 0x7E)) for _ in range(rng.randint(1, 16)))

    def request_id(rng: random.Random) -> str:
        pick = rng.random()
        if pick < 0.75:
            return f"fuzz-{rng.getrandbits(48):x}-{next(ids)}"
        return ascii_id(rng) if pick < 0.85 else str(seen.pick(rng, "request_id", "x"))

    def seen_as(name: str, default: Any = "") -> Draw:
        return lambda rng: seen.pick(rng, name, default)

    def tree_size(rng: random.Random) -> int:
        size = int(seen.pick(rng, "size", 0) or seen.pick(rng, "tree_size", 0))
        return rng.randint(0, size + 1)

    def stake(rng: random.Random) -> int:
        return rng.choice(STAKES)

    def card(rng: random.Random) -> str:
        return rng.choice(CARDS)

    now = int(time.time())
    return {
        "player_id": lambda rng: rng.choice(players),
        "game": lambda rng: rng.choice(GAMES),
        "level": lambda rng: rng.choice(("", "low", "medium", "high", "table")),
        "currency": lambda rng: rng.choice(("EUR", "EUR", "USD")),
        "mode": lambda rng: rng.choice((common_pb2.MODE_DEMO, common_pb2.MODE_REAL)),
        "request_id": request_id,
        "round_id": seen_as("round_id"),
        "shoe_id": seen_as("shoe_id"),
        "id": lambda rng: seen.pick(rng, rng.choice(("round_id", "shoe_id"))),
        "page_token": lambda rng: "" if rng.random() < 0.5 else seen.pick(rng, "next_page_token"),
        "expected_version": seen_as("version", 1),
        "hand_id": seen_as("hand_id", 0),
        "bet_minor": stake,
        "stake_minor": stake,
        "amount_minor": lambda rng: rng.choice((*STAKES, 0, 10**7, 2**53 - 1)),
        "balance_minor": stake,
        "name": lambda rng: rng.choice(("perfect_pairs", "twenty_one_plus_three", "snap")),
        "reference": ascii_id,
        "client_seed": lambda rng: rng.randbytes(rng.randint(1, 32)),
        "page_size": lambda rng: rng.randint(0, 3),
        "count": lambda rng: rng.randint(1, 20),
        "n": lambda rng: rng.randint(1, 60),
        "min": lambda rng: rng.randint(-10, 10),
        "max": lambda rng: rng.randint(-10, 10),
        "seconds": lambda rng: rng.randint(now - 3600, now + 60),
        "nanos": lambda rng: rng.randint(0, 10**9 - 1),
        "cards": card, "player_cards": card, "dealer_cards": card, "removed_cards": card,
        "shoe": card,
        "hands_at_seat": lambda rng: rng.randint(1, 3),
        "rules_toml": _rules_toml,
        "script_json": _script_json,
        "leaf_index": tree_size, "tree_size": tree_size, "from_size": tree_size,
        "to_size": tree_size, "from_tree_size": tree_size,
        "line": lambda rng: rng.choice(("pair", "flush", "straight", "suited trips", "any")),
        "payout": lambda rng: rng.choice(("1", "5", "25", "100", "0", "-1", "1/2", "1e9")),
    }


#: how many items a tame repeated field holds, where the default (0 to 8) is mostly refused
TAME_ITEMS = {"hands": (1, 3), "side_bets": (0, 1), "bets": (1, 2), "actions": (0, 6)}
ACTIONS = {rt.ACTION_KIND_HIT: "hit", rt.ACTION_KIND_STAND: "stand",
           rt.ACTION_KIND_DOUBLE: "double", rt.ACTION_KIND_SPLIT: "split",
           rt.ACTION_KIND_INSURANCE: "insurance", rt.ACTION_KIND_EVEN_MONEY: "even_money"}


def _size(value: Any) -> int:
    """About the bytes ``value`` takes in a request."""
    if isinstance(value, Message):
        return value.ByteSize() + 2
    if isinstance(value, str):
        return len(value.encode()) + 2
    if isinstance(value, bytes):
        return len(value) + 2
    return 10


def _total_size(value: Any) -> int:
    """About the bytes a field's value takes: a blown-up list is copies of one item."""
    if isinstance(value, dict):
        return sum(map(_size, value)) + sum(map(_size, value.values()))
    if isinstance(value, list):
        return len(value) * _size(value[0]) if len(value) > 100 else sum(map(_size, value))
    return _size(value)


class Requests:
    """Requests of any message type (see the module's docstring). ``callers`` is how many
    identities the client calls as (one per tenant's certificate): a request built on an
    answer to one caller is sometimes sent as another, reaching for another tenant's ids."""

    MAX_DEPTH = 4

    def __init__(self, seen: Seen, players: Sequence[str]) -> None:
        self.seen = seen
        self.plausible = plausible_values(seen, players)
        self.coherent: dict[str, Callable[[random.Random], dict[str, Any]]] = {
            "fairshoe.round.v1.ActRequest": self._act_on_an_open_round,
            "fairshoe.round.v1.StartRoundRequest": self._bets_a_game_takes}
        #: the caller a coherent request belongs to, if it chose one (see :meth:`caller`)
        self.owner: int | None = None

    def request(self, rng: random.Random, descriptor: Descriptor
                ) -> tuple[bytes, Message | None]:
        """The serialized request, and its message (None: random bytes)."""
        self.owner = None
        pick = rng.random()
        if pick < 0.1:
            return (rng.choice(RAW_BYTES) if rng.random() < 0.3 else random_bytes(rng)), None
        message = self.tame(rng, descriptor) if pick < 0.75 else self.wild(rng, descriptor)
        data = message.SerializeToString()
        if len(data) > MAX_MESSAGE_BYTES:  # the estimate of _within_limit fell short
            message = message_factory.GetMessageClass(descriptor)()
            data = b""
        return data, message

    # ----- wild ---------------------------------------------------------------------------------

    def wild(self, rng: random.Random, descriptor: Descriptor, depth: int = 0) -> Message:
        fields: dict[str, Any] = {}
        if depth < self.MAX_DEPTH:
            for fd in descriptor.fields:
                if rng.random() < 0.5:
                    fields[fd.name] = self.wild_field(rng, fd, depth)
        return self._within_limit(descriptor, fields)

    def wild_field(self, rng: random.Random, fd: FieldDescriptor, depth: int) -> Any:
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            key, value = (fd.message_type.fields_by_name[n] for n in ("key", "value"))
            return {self.wild_value(rng, key, depth): self.wild_value(rng, value, depth)
                    for _ in range(rng.randint(0, 4))}
        if not fd.is_repeated:
            return self.wild_value(rng, fd, depth)
        if rng.random() < 0.03:
            item = self.wild_value(rng, fd, depth)
            return [item] * min(rng.choice(BLOWN_UP), 3 * 1024 * 1024 // _size(item))
        return [self.wild_value(rng, fd, depth) for _ in range(rng.randint(0, 4))]

    def wild_value(self, rng: random.Random, fd: FieldDescriptor, depth: int) -> Any:
        if fd.message_type is not None:
            return self.wild(rng, fd.message_type, depth + 1)
        plausible = self.plausible.get(fd.name)
        if plausible is not None and rng.random() < 0.5:
            value = plausible(rng)
            if _fits(fd, value):
                return value
        return self.scalar(rng, fd)

    @staticmethod
    def scalar(rng: random.Random, fd: FieldDescriptor) -> Any:
        """Any value the field's type can carry, edges often."""
        if fd.type in INT_BOUNDS:
            return random_int(rng, *INT_BOUNDS[fd.type])
        if fd.enum_type is not None:
            if rng.random() < 0.5:
                return rng.choice(fd.enum_type.values).number
            return random_int(rng, -(2**31), 2**31 - 1)
        if fd.type == FieldDescriptor.TYPE_BOOL:
            return rng.random() < 0.5
        if fd.type == FieldDescriptor.TYPE_STRING:
            return random_text(rng)
        if fd.type == FieldDescriptor.TYPE_BYTES:
            return random_bytes(rng)
        if fd.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
            return rng.choice((0.0, -0.0, 1.5, -1e300, 1e300, float("inf"), float("nan")))
        raise AssertionError(f"no values for {fd.full_name}")

    # ----- tame ---------------------------------------------------------------------------------

    def tame(self, rng: random.Random, descriptor: Descriptor, depth: int = 0) -> Message:
        fields: dict[str, Any] = {}
        if depth >= self.MAX_DEPTH:
            return self._within_limit(descriptor, fields)
        oneofs = [o for o in descriptor.oneofs
                  if not (len(o.fields) == 1 and o.name == "_" + o.fields[0].name)]
        in_oneof = {fd.name for oneof in oneofs for fd in oneof.fields}
        for oneof in oneofs:
            member = rng.choice(oneof.fields)
            value = self.tame_field(rng, member, depth)
            if value is not None:
                fields[member.name] = value
        for fd in descriptor.fields:
            if fd.name not in in_oneof:
                value = self.tame_field(rng, fd, depth)
                if value is not None:
                    fields[fd.name] = value
        coherent = self.coherent.get(descriptor.full_name)
        if coherent is not None:
            fields.update(coherent(rng))
        if descriptor.fields and rng.random() < 0.25:
            wild = rng.choice(descriptor.fields)
            fields[wild.name] = self.wild_field(rng, wild, depth)
        return self._within_limit(descriptor, fields)

    def tame_field(self, rng: random.Random, fd: FieldDescriptor, depth: int) -> Any:
        """A plausible value of ``fd``; None: leave it out."""
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            return None
        draw: Draw
        kind, enum = fd.message_type, fd.enum_type
        if kind is not None:
            def draw(r: random.Random) -> Message:
                return self.tame(r, kind, depth + 1)
        elif fd.name in self.plausible:
            draw = self.plausible[fd.name]
        elif enum is not None:
            def draw(r: random.Random) -> int:
                return int(r.choice(enum.values).number)
        elif fd.type == FieldDescriptor.TYPE_BOOL:
            def draw(r: random.Random) -> bool:
                return r.random() < 0.5
        else:
            return None
        if not fd.is_repeated:
            value = draw(rng)
            return value if _fits(fd, value) else None
        least, most = TAME_ITEMS.get(fd.name, (0, 8))
        items = [draw(rng) for _ in range(rng.randint(least, most))]
        return [item for item in items if _fits(fd, item)]

    def _bets_a_game_takes(self, rng: random.Random) -> dict[str, Any]:
        """The fields of a StartRoundRequest whose bets and side bets its game takes."""
        def hand(side_bets: Sequence[str]) -> rt.HandBet:
            chosen = [n for n in side_bets if rng.random() < 0.3]
            return rt.HandBet(bet_minor=rng.choice((1000, 2000, 5000)), side_bets=[
                rt.SideBetStake(name=n, stake_minor=rng.choice((100, 500))) for n in chosen])

        game = rng.choice(("snap", "double-deck", "double-exposure", "multi-hand"))
        if game == "snap":
            side = [rt.SideBetStake(name="snap", stake_minor=rng.choice((100, 500)))]
            return {"game": game, "level": "", "hands": [hand(()), hand(())],
                    "side_bets": side if rng.random() < 0.5 else []}
        if game == "multi-hand":
            return {"game": game, "level": "", "hands": [
                hand(("perfect_pairs", "twenty_one_plus_three"))
                for _ in range(rng.choice((1, 3)))]}
        return {"game": game, "level": "", "hands": [hand(())]}

    def _act_on_an_open_round(self, rng: random.Random) -> dict[str, Any]:
        """The fields of an ActRequest making a legal decision on a round seen awaiting one."""
        if not self.seen.open_rounds:
            return {}
        caller, player, view = self.seen.open_rounds[rng.choice(list(self.seen.open_rounds))]
        if not view.legal_actions:
            return {}
        legal = rng.choice(view.legal_actions)
        name = ACTIONS.get(legal.action)
        if name is None:
            return {}
        action = rt.PlayerAction()
        part = getattr(action, name)
        part.SetInParent()
        if name in ("double", "insurance") and rng.random() < 0.5:
            part.amount_minor = rng.choice([legal.min_stake_minor, legal.max_stake_minor,
                                            *legal.stakes_minor])
        elif name == "even_money":
            part.accept = rng.random() < 0.5
        self.owner = caller
        return {"player_id": player, "round_id": view.round_id, "hand_id": legal.hand_id,
                "expected_version": view.version, "action": action}

    @staticmethod
    def _within_limit(descriptor: Descriptor, fields: dict[str, Any]) -> Message:
        """The message of ``fields``, its largest fields left out until it fits a request."""
        sizes = {name: _total_size(value) for name, value in fields.items()}
        if sum(sizes.values()) > MAX_MESSAGE_BYTES:
            for name in sorted(sizes, key=sizes.__getitem__, reverse=True):
                if sum(sizes.values()) <= MAX_MESSAGE_BYTES:
                    break
                del fields[name], sizes[name]
        return message_factory.GetMessageClass(descriptor)(**fields)


def _fits(fd: FieldDescriptor, value: Any) -> bool:
    """Whether ``value`` is of ``fd``'s type (a seen value may be of another field's)."""
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return isinstance(value, Message)
    if fd.type in INT_BOUNDS:
        lo, hi = INT_BOUNDS[fd.type]
        return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return isinstance(value, int) and -(2**31) <= value < 2**31
    if fd.type == FieldDescriptor.TYPE_STRING:
        return isinstance(value, str)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return isinstance(value, bytes)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return isinstance(value, bool)
    return True
