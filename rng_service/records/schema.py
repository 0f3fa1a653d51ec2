"""Signed round records and shoe reveals, and the round collector that writes them.

Round record (payload schema ``fairshoe.round/v1``), one finished round::

    {"schema": "fairshoe.round/v1",
     "round_id": "<32 hex>", "game": "snap",
     "rules_digest": "<Rules.digest(): SHA-256 hex of the rules' sorted compact JSON>",
     "shoe": {"id": ..., "commitment": ..., "decks": 2, "client_seed": "<hex>",
              "start": 0, "end": 9},                # shoe positions used, [start, end)
     "cards": ["KS", "4H", ...],                    # every card dealt, in order
     "level": "medium",
     "bets": {"hands": [{"bet": 1000, "side_bets": {}}], "side_bets": {"snap": 500}},
     "actions": [{"hand": 0, "action": "hit", "cards": ["5D"]}, ...],
     "wagers": [{"id": 0, "kind": "main", "hand": 0, "staked": 1000, "returned": 2000,
                 "outcome": "win"}, ...],
     "hands": [{"id": 0, "seat": 0, "cards": [...], "total": 20, "soft": false,
                "blackjack": false, "from_split": false, "outcome": "win"}, ...],
     "dealer": {"cards": ["4H", "TC", "7S"]},
     "status": "finished" | "void", "void_reason": null | "...",
     "total_staked": 1500, "total_returned": 2000,
     "started_at": "2024-05-01T12:00:00.000Z", "finished_at": "...",
     "service_version": "0.1.0",
     "mode": "DEMO" | "REAL",                       # a live round's money; not in the replay's
     "wallet": {...}}                               # a seamless-wallet round's movements only

A round played on an operator's seamless wallet (``docs/wallet.md``) names every movement of it
the wallet was sent under its transaction id (32 hex), so an auditor can match the record with the
operator's wallet statement::

    "wallet": {"debits": [{"transaction_id": ..., "purpose": "bet", "amount": 1000}, ...],
               "cancelled": [{"transaction_id": ..., "purpose": "double", "amount": 1000}],
               "rollbacks": [{"transaction_id": ..., "debit": "<a cancelled debit's id>",
                              "amount": 1000}],
               "credit": {"transaction_id": ..., "amount": 2000, "debits": [...]} | null}

``debits`` are the stakes the wallet accepted, which add up to ``total_staked`` by purpose (bet,
double, split, insurance, side_bet: the wagers of kind main, double, split, insurance and the
side bets'); ``cancelled`` the debits it did not take (refused, or unanswered and so rolled
back: their ``rollbacks`` are listed); ``credit`` the returns, ``total_returned``, settling
every debit. A round void before its deal because its stakes went unconfirmed has no debit taken
and no credit: its stakes are cancelled and every one rolled back.

Each action entry is the decision (``Action.to_json()``), the hand it was taken on and the cards
that hand received from it (a hit's or a double's card, the second card after a split; none for a
stand or an insurance decision), so an auditor's replay can say which decision a record and its
shoe disagree on.

A record names its rule set by digest only: the rules (0.8-1.4 KB of JCS) were 35-50 % of a
record that embedded them, and encoding plus signing them every round cost 30-60 µs
(bench/bench_signing.py, column ``old format``). The rules travel as a rules document (schema
``fairshoe.rules/v1``), written once per rule set, unsigned::

    {"schema": "fairshoe.rules/v1", "rules": {...rules.to_dict()...}}

It needs no signature of its own: the signed record commits to ``rules_digest``, and the audit
recomputes each document's digest from its content (``rules_from_dict(...).digest()``, never the
file name), so an altered document no longer matches any record. The built-in rule sets
(``game_math.games``) are known to the audit by digest; a custom rule set must be handed to it.

Shoe reveal (payload schema ``fairshoe.shoe-reveal/v1``), written once the shoe is finished: after
its one round for a per-round shoe, after the cut card came out for a cut-card shoe::

    {"schema": "fairshoe.shoe-reveal/v1", "shoe_id": ..., "commitment": ..., "seed": "<hex>",
     "client_seed": "<hex>", "decks": 6}

Both are signed with :func:`rng_service.crypto.signing.sign_and_encode` and stored one envelope per
file
as its canonical (JCS) bytes. A collection directory holds ``rounds/<round id>.json``,
``reveals/<shoe id>.json``, ``rules/<rules digest>.json`` (one per rule set played, built-in ones
included, so the collection says what was played) and ``keys.jwks.json`` (the public keys, for
convenience: an auditor should obtain them independently, and ``fairshoe audit verify`` trusts only
keys passed to it).

RNG record (payload schema ``fairshoe.rng/v1``), one certified draw outside blackjack (RngService),
signed when the values are drawn; never the seed::

    {"schema": "fairshoe.rng/v1", "draw_id": "<32 hex>",
     "kind": "integers" | "shuffle",
     "parameters": {"count": 3, "min": 1, "max": 6} | {"n": 52},
     "client_seed": "<hex>", "commitment": "<hex>",
     "results": [4, 1, 6],                          # the values, or the permutation
     "drawn_at": "2024-05-01T12:00:00.000Z", "service_version": "0.1.0"}

RNG reveal (payload schema ``fairshoe.rng-reveal/v1``), signed and stored with the record, after
the draw::

    {"schema": "fairshoe.rng-reveal/v1", "draw_id": ..., "commitment": ..., "seed": "<hex>"}

How the results follow from the seed is :mod:`rng_service.rng.draws`. A collection keeps them as
``rng/<draw id>.json`` and ``rng-reveals/<draw id>.json``.

Key record (payload schema ``fairshoe.key/v1``), signed by the key it names, logged before the
first leaf of an operator's log that key signs; shoe commitment (``fairshoe.shoe-commitment/v1``),
logged when the shoe is created, before any client seed is set or card dealt::

    {"schema": "fairshoe.key/v1", "key_id": "ed25519:...", "jwk": {...public JWK...},
     "valid_from": "2024-05-01T12:00:00Z"}
    {"schema": "fairshoe.shoe-commitment/v1", "shoe_id": ..., "commitment": ..., "game": ...,
     "rules_digest": ..., "decks": 6, "mode": "DEMO" | "REAL", "created_at": "..."}

A shoe serves one kind of money (``mode``): the audit fails a live round whose ``mode`` is not
its shoe commitment's, so demo play provably never dealt from a real-money shoe.

A collection keeps them as ``keys/<key id>.json`` and ``shoes/<shoe id>.json``, and the log's
files under ``log/`` (``checkpoint``, ``leaves.jsonl``, ``frontier.json``, optionally
``consistency.json``; see :mod:`rng_service.audit.log_audit`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import random
import secrets
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from math import lcm
from pathlib import Path
from typing import Any, Final

from game_math.cards import CODE_OF
from game_math.round import Action, ActionKind, CardDealt, DecisionMade, HandBet, Phase, Round
from game_math.rules import Rules, ShufflePolicy, SideBet, StakeLevel
from rng_service.crypto.keys import SigningKey, atomic_write
from rng_service.crypto.signing import encode_envelope, sign_and_encode
from rng_service.rng.draws import DrawRequest
from rng_service.rng.shoe import Shoe

RECORD_SCHEMA: Final = "fairshoe.round/v1"
REVEAL_SCHEMA: Final = "fairshoe.shoe-reveal/v1"
RULES_SCHEMA: Final = "fairshoe.rules/v1"
RNG_SCHEMA: Final = "fairshoe.rng/v1"
RNG_REVEAL_SCHEMA: Final = "fairshoe.rng-reveal/v1"
ROUNDS_SUBDIR: Final = "rounds"
REVEALS_SUBDIR: Final = "reveals"
RULES_SUBDIR: Final = "rules"
RNG_SUBDIR: Final = "rng"
RNG_REVEALS_SUBDIR: Final = "rng-reveals"
KEYS_FILE: Final = "keys.jwks.json"
KEY_SCHEMA: Final = "fairshoe.key/v1"
SHOE_COMMITMENT_SCHEMA: Final = "fairshoe.shoe-commitment/v1"
KEYS_SUBDIR: Final = "keys"
SHOES_SUBDIR: Final = "shoes"
#: the transparency log's part of a collection (docs/transparency log contract): the checkpoint
#: the export was made against, the leaves it holds with their inclusion proofs, the frontier
LOG_SUBDIR: Final = "log"
LOG_CHECKPOINT_FILE: Final = "checkpoint"
LOG_LEAVES_FILE: Final = "leaves.jsonl"
LOG_FRONTIER_FILE: Final = "frontier.json"
LOG_CONSISTENCY_FILE: Final = "consistency.json"


@functools.cache
def service_version() -> str:
    """The installed fairshoe's version, read once per process: reading the package metadata
    parses its METADATA file (about 2.5 ms, once per round record before this cache)."""
    try:
        return importlib.metadata.version("fairshoe")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


#: the last second :func:`rfc3339_now` formatted, and its text: a collection asks two or three
#: times a round, and formatting a whole datetime each time cost more than the rest of the call
_SECOND: tuple[int, str] = (-1, "")


def rfc3339_now() -> str:
    """The current UTC time as RFC 3339 with milliseconds, e.g. ``2024-05-01T12:00:00.123Z``: the
    text of ``datetime.now(UTC).isoformat(timespec="milliseconds")`` with ``Z`` (the same clock,
    the milliseconds truncated likewise)."""
    global _SECOND  # noqa: PLW0603  (a one-entry cache of the second's text)
    second, millis = divmod(time.time_ns() // 1_000_000, 1000)
    cached = _SECOND
    if cached[0] != second:
        cached = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{millis:03d}Z"


def new_round_id() -> str:
    """A fresh round id: ``uuid.uuid4().hex`` (122 random bits, the version and variant bits
    set), made from the 16 random bytes directly, without a UUID object (a quarter the cost)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


# --- payloads ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShoeRef:
    """What a record says about its shoe: public facts only (never the seed)."""

    shoe_id: str
    commitment: str
    decks: int
    client_seed: bytes

    @classmethod
    def of(cls, shoe: Shoe) -> ShoeRef:
        """The reference to ``shoe`` a round record carries."""
        return cls(shoe.id, shoe.commitment, shoe.decks, shoe.client_seed)


def rules_digest(rules: Rules) -> str:
    """``rules.digest()``: a SHA-256 over the rules' canonical JSON, which each rules object
    makes once (``Rules.canonical_json``), as it does the digest. Not memoised by rules here:
    hashing the nested frozen rules for a dict lookup cost more (~0.3 ms) than the digest.

    Records name their rule set by this digest alone, so a built-in game's is fixed:

    >>> from game_math.games import game_rules
    >>> rules_digest(game_rules("snap"))
    '61e0310fa75d2a705521891422d1c1df2c74c1238608cbe803b9db480813eda2'
    """
    return rules.digest()


def rules_document(rules: Rules) -> dict[str, Any]:
    """The rules document of ``rules`` (see the module docstring)."""
    return {"schema": RULES_SCHEMA, "rules": rules.to_dict()}


def rules_file_bytes(rules: Rules) -> bytes:
    """The rules document of ``rules`` as a collection stores it (``rules/<digest>.json``)."""
    text = json.dumps(rules_document(rules), indent=2, sort_keys=True, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def action_entries(rnd: Round) -> list[dict[str, Any]]:
    """Each decision with its hand and the cards that hand received from it (see module doc)."""
    entries: list[dict[str, Any]] = []
    dealt: list[str] = []
    hand = None
    for event in rnd.events:
        if isinstance(event, DecisionMade):
            dealt, hand = [], event.hand
            action = rnd.actions[len(entries)]
            entries.append({"hand": hand, "action": action.to_json(), "cards": dealt})
        elif isinstance(event, CardDealt) and event.hand == hand and event.card is not None:
            dealt.append(CODE_OF[event.card])
    return entries


def dealt_cards(rnd: Round) -> list[str]:
    """Every card the round dealt, in order, as codes."""
    return [CODE_OF[e.card] for e in rnd.events if isinstance(e, CardDealt) and e.card is not None]


def round_payload(
    rnd: Round,
    *,
    round_id: str,
    shoe: ShoeRef,
    started_at: str,
    finished_at: str,
    version: str | None = None,
    mode: str | None = None,
    wallet: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of a finished round (see the module docstring). ``mode`` (``DEMO`` or
    ``REAL``), the money a live round was played for, is recorded when given: the replay's
    records play no money and have none; so is ``wallet``, a seamless-wallet round's
    movements."""
    if not rnd.finished:
        raise ValueError("only a finished round becomes a record")
    rules = rnd.rules
    void = rnd.phase is Phase.VOID
    return {
        "schema": RECORD_SCHEMA,
        "round_id": round_id,
        "game": rules.game,
        "rules_digest": rules_digest(rules),
        "shoe": {
            "id": shoe.shoe_id, "commitment": shoe.commitment, "decks": shoe.decks,
            "client_seed": shoe.client_seed.hex(), "start": rnd.start, "end": rnd.position,
        },
        "cards": dealt_cards(rnd),
        "level": rules.level(rnd.level_name).name,
        "bets": {
            "hands": [hb.to_json() for hb in rnd.hand_bets],
            "side_bets": dict(rnd.round_side_bets),
        },
        "actions": action_entries(rnd),
        "wagers": [w.to_dict() for w in rnd.wagers],
        "hands": [h.to_dict() for h in rnd.hands],
        "dealer": {"cards": [CODE_OF[c] for c in rnd.dealer]},
        "status": "void" if void else "finished",
        "void_reason": rnd.void_reason if void else None,
        "total_staked": rnd.total_staked,
        "total_returned": rnd.total_returned,
        "started_at": started_at,
        "finished_at": finished_at,
        "service_version": version if version is not None else service_version(),
    } | ({} if mode is None else {"mode": mode}) | ({} if wallet is None else {"wallet": wallet})


def reveal_payload(shoe: Shoe) -> dict[str, Any]:
    """The reveal of a finished shoe's seed; ShoeNotFinished while it is in play."""
    seed = shoe.reveal()
    return {
        "schema": REVEAL_SCHEMA,
        "shoe_id": shoe.id,
        "commitment": shoe.commitment,
        "seed": seed.hex(),
        "client_seed": shoe.client_seed.hex(),
        "decks": shoe.decks,
    }


def rng_payload(*, draw_id: str, request: DrawRequest, client_seed: bytes, commitment: str,
                results: list[int], drawn_at: str, version: str | None = None) -> dict[str, Any]:
    """The record of one certified draw (see the module docstring): public facts, no seed."""
    return {
        "schema": RNG_SCHEMA,
        "draw_id": draw_id,
        "kind": request.kind,
        "parameters": dict(request.parameters),
        "client_seed": client_seed.hex(),
        "commitment": commitment,
        "results": list(results),
        "drawn_at": drawn_at,
        "service_version": version if version is not None else service_version(),
    }


def rng_reveal_payload(*, draw_id: str, commitment: str, seed: bytes) -> dict[str, Any]:
    """The reveal of a draw's seed, made once its values are drawn and recorded."""
    return {"schema": RNG_REVEAL_SCHEMA, "draw_id": draw_id, "commitment": commitment,
            "seed": seed.hex()}


def key_payload(*, key_id: str, jwk: dict[str, str], valid_from: str) -> dict[str, Any]:
    """A signing key as a log leaf (``fairshoe.key/v1``): its id, public JWK and the time from
    which it signs; signed by that same key, logged before the first leaf it signs."""
    return {"schema": KEY_SCHEMA, "key_id": key_id, "jwk": dict(jwk), "valid_from": valid_from}


def shoe_commitment_payload(*, shoe_id: str, commitment: str, game: str, rules_digest: str,
                            decks: int, mode: str, created_at: str) -> dict[str, Any]:
    """The commitment of a new shoe (``fairshoe.shoe-commitment/v1``), logged when the shoe is
    created, before any client seed is set or card dealt: public facts only, never the seed.
    ``mode`` (``DEMO`` or ``REAL``): the money the shoe's rounds are played for, so an auditor
    sees that demo play never dealt from a real-money shoe."""
    return {"schema": SHOE_COMMITMENT_SCHEMA, "shoe_id": shoe_id, "commitment": commitment,
            "game": game, "rules_digest": rules_digest, "decks": decks, "mode": mode,
            "created_at": created_at}


def write_file(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """``data`` to ``path`` atomically and durably (no reader sees half a record, and a crash
    after return loses nothing): the key store's writer, with a world-readable mode.
    ``sync_dir=False``: the caller syncs the directory (``fsync_dir``) before relying on it."""
    atomic_write(path, data, 0o644, sync_dir=sync_dir)


def write_envelope(path: Path, envelope: dict[str, Any]) -> None:
    """The envelope's JCS bytes to ``path`` (atomically, see :func:`write_file`)."""
    write_file(path, encode_envelope(envelope))


class RecordWriter:
    """Signs payloads with one key and files them under a collection directory."""

    def __init__(self, out_dir: Path, key: SigningKey) -> None:
        self.out_dir = out_dir
        self.key = key
        self.rounds_dir = out_dir / ROUNDS_SUBDIR
        self.reveals_dir = out_dir / REVEALS_SUBDIR
        self.rules_dir = out_dir / RULES_SUBDIR
        for directory in (self.rounds_dir, self.reveals_dir, self.rules_dir):
            directory.mkdir(parents=True, exist_ok=True)
        self._rules_written: set[str] = set()
        self._rules_paths: dict[str, Path] = {}

    def write_rules(self, rules: Rules) -> Path:
        """``rules/<digest>.json``, written once per rule set by this writer."""
        digest = rules_digest(rules)
        path = self._rules_paths.get(digest)  # asked at every round: its path is made once
        if path is None:
            path = self._rules_paths[digest] = self.rules_dir / f"{digest}.json"
        if digest not in self._rules_written:
            write_file(path, rules_file_bytes(rules))
            self._rules_written.add(digest)
        return path

    def write_round(self, payload: dict[str, Any], rules: Rules) -> Path:
        """The signed record ``payload`` of a round played under ``rules``, whose rules document
        is written too if this writer has not written it yet."""
        self.check_rules(payload, rules)
        self.write_rules(rules)
        path = self.rounds_dir / f"{payload['round_id']}.json"
        write_file(path, sign_and_encode(payload, self.key))
        return path

    @staticmethod
    def check_rules(payload: dict[str, Any], rules: Rules) -> None:
        """ValueError unless the record ``payload`` names the digest of ``rules``."""
        if payload["rules_digest"] != rules_digest(rules):
            raise ValueError(f"round {payload['round_id']} names rules_digest "
                             f"{payload['rules_digest']}, not that of the rules given")

    def open_shoe(self, shoe: Shoe, rules: Rules) -> None:
        """A new shoe is opened for ``rules``: nothing to write here (a logged collection
        logs its commitment, :class:`rng_service.records.logged.LoggedRecordWriter`)."""

    def write_reveal(self, shoe: Shoe) -> Path:
        """Sign and write the seed reveal of a finished shoe; its path."""
        path = self.reveals_dir / f"{shoe.id}.json"
        write_file(path, sign_and_encode(reveal_payload(shoe), self.key))
        return path


# --- random realistic bets -----------------------------------------------------------------------

#: bet sizes as multiples of the table minimum, weighted towards the minimum as players bet
_BET_MULTIPLES: Final = (1, 1, 1, 1, 2, 2, 3, 4, 5, 10, 20, 50)
SIDE_BET_CHANCE: Final = 0.3


def _stake(rng: random.Random, lo: int, hi: int, step: int) -> int:
    """A realistic stake in [lo, hi] that is a multiple of ``step``; ValueError if none exists."""
    first = -(-lo // step) * step
    if first > hi:
        raise ValueError(f"no stake in {lo}..{hi} is a multiple of {step}")
    wanted = lo * rng.choice(_BET_MULTIPLES)
    return max(first, min(-(-wanted // step) * step, hi // step * step))


def _chip(level: StakeLevel) -> int:
    return min(level.chips) if level.chips else 1


def _side_bet_step(bet: SideBet, level: StakeLevel) -> int:
    return lcm(_chip(level), *(p.returns.denominator for _, p in bet.paytable))


@dataclass(frozen=True)
class Bets:
    """What one collected round stakes: the level, the hands' bets and the round's side bets."""
    level: str
    hands: tuple[HandBet, ...]
    side_bets: dict[str, int]


def random_bets(rules: Rules, rng: random.Random) -> Bets:
    """Bets a player might place: a level, a hand count, stakes within limits, some side bets."""
    level = rng.choice(rules.levels)
    n = rng.choice(rules.hands.counts)
    step = lcm(rules.bet_multiple, _chip(level))
    lo = level.min_bet * (rules.hands.multi_hand_min_multiple if n > 1 else 1)
    hands = []
    for _ in range(n):
        side = {
            b.name: _stake(rng, level.side_bet_min, level.side_bet_max, _side_bet_step(b, level))
            for b in rules.side_bets
            if b.scope == "hand" and rng.random() < SIDE_BET_CHANCE
        }
        hands.append(HandBet(_stake(rng, lo, level.max_bet, step), side))
    round_side = {
        b.name: _stake(rng, level.side_bet_min, level.side_bet_max, _side_bet_step(b, level))
        for b in rules.side_bets
        if b.scope == "round" and n == max(rules.hands.counts)
        and rng.random() < 2 * SIDE_BET_CHANCE
    }
    return Bets(level.name, tuple(hands), round_side)


# --- collection ----------------------------------------------------------------------------------

Player = Callable[[Round], Action]
#: share of insurance and even-money offers the collector's player accepts (basic strategy never
#: does; a lab's records should still hold insurance wagers and even-money settlements)
INSURANCE_RATE: Final = 0.25


def sometimes_insure(player: Player, rng: random.Random, rate: float) -> Player:
    """``player``, except that it accepts an insurance or even-money offer with chance ``rate``.

    Partial insurance (any amount up to half the bet) takes half or all of what is allowed.
    """
    def play(rnd: Round) -> Action:
        if rnd.turn.phase is Phase.INSURANCE and rng.random() < rate:
            offer = rnd.legal_actions()[0]
            if offer.action is ActionKind.EVEN_MONEY:
                return Action(ActionKind.EVEN_MONEY, accept=True)
            top = offer.max_stake
            amount = rng.choice((max(top // 2, offer.min_stake), top)) if offer.any_amount else top
            return Action(ActionKind.INSURANCE, amount)
        return player(rnd)

    return play


@dataclass
class CollectStats:
    """Running totals of a collection: rounds, shoes, void rounds, money staked and returned."""
    rounds: int = 0
    shoes: int = 0
    void: int = 0
    staked: int = 0
    returned: int = 0


def _shoes(rules: Rules, client_seed: bytes, writer: RecordWriter,
           stats: CollectStats) -> Generator[Shoe, None, None]:
    """The shoe for each round: fresh per round, or a cut-card shoe until the cut card comes out.

    A finished shoe's seed is revealed before the next shoe is opened; the shoe still open when
    the caller stops is closed early and revealed, so every collected round can be audited.
    """
    cut = rules.shuffle.cut_card if rules.shuffle.policy is ShufflePolicy.CUT_CARD else None
    shoe: Shoe | None = None
    try:
        while True:
            if shoe is None or not shoe.start_round():
                if shoe is not None:
                    writer.write_reveal(shoe)
                shoe = Shoe.new(rules.decks, cut=cut)
                writer.open_shoe(shoe, rules)  # committed before its client seed or a card
                shoe.set_client_seed(client_seed)
                stats.shoes += 1
                shoe.start_round()
            yield shoe
            if shoe.finished:
                writer.write_reveal(shoe)
                shoe = None
    finally:
        if shoe is not None:
            shoe.finish()
            writer.write_reveal(shoe)


def play_round(rules: Rules, shoe: Shoe, bets: Bets, player: Player) -> Round:
    """One round from ``shoe``'s current position, played to the end; the shoe moves past it."""
    rnd = Round(rules, shoe.cards, bets.hands, bets.side_bets, start=shoe.position,
                level=bets.level)
    while not rnd.finished:
        rnd.act(player(rnd))
    shoe.take(rnd.position - rnd.start)
    if rnd.phase is Phase.VOID:
        shoe.finish()  # a game fault: no further round is dealt from this shoe
    else:
        shoe.end_round()
    return rnd


def collect_rounds(
    rules: Rules,
    count: int,
    writer: RecordWriter,
    player: Player,
    *,
    client_seed: bytes = b"",
    rng: random.Random | None = None,
    insurance_rate: float = INSURANCE_RATE,
    on_round: Callable[[], None] | None = None,
    whole_shoes: bool = False,
) -> CollectStats:
    """``count`` rounds from OS-seeded shoes, played by ``player``, signed and filed by
    ``writer``; every shoe used is revealed by the time this returns. The last shoe is closed
    early after the ``count``-th round, or with ``whole_shoes`` played on to its cut card (then
    more rounds than ``count`` may be played: ``CollectStats.rounds`` says how many)."""
    rng = rng or random.Random(secrets.randbits(64))
    if insurance_rate > 0:
        player = sometimes_insure(player, rng, insurance_rate)
    stats = CollectStats()
    shoes = _shoes(rules, client_seed, writer, stats)
    shoe: Shoe | None = None
    try:
        while stats.rounds < count or (whole_shoes and shoe is not None and not shoe.finished):
            shoe = next(shoes)
            started = rfc3339_now()
            rnd = play_round(rules, shoe, random_bets(rules, rng), player)
            writer.write_round(round_payload(
                rnd, round_id=new_round_id(), shoe=ShoeRef.of(shoe), started_at=started,
                finished_at=rfc3339_now()), rules)
            stats.rounds += 1
            stats.void += rnd.phase is Phase.VOID
            stats.staked += rnd.total_staked
            stats.returned += rnd.total_returned
            if on_round is not None:
                on_round()
    finally:
        shoes.close()
    return stats


