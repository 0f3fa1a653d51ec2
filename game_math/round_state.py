"""A round as stored: the ``fairshoe.round-state/v1`` document behind ``Round.to_bytes`` and
``Round.from_bytes``.

A round is stored as its inputs, the cards dealt so far and its actions, and restored by replaying
them on its shoe: the engine is deterministic, so the replay reaches the same state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from game_math.actions import HandBet, action_from_json
from game_math.cards import Card
from game_math.rules import rules_from_stored
from game_math.turns import Phase

if TYPE_CHECKING:
    from game_math.round import Round

__all__ = ["FORMAT", "restore", "state_bytes"]

FORMAT: Final = "fairshoe.round-state/v1"

#: how a round's state is written: canonical JSON (``json.dumps(doc, separators=(",", ":"),
#: sort_keys=True)``, through one encoder made once rather than a new one each call)
_json_canonical: Final = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def _canonical(doc: dict[str, Any]) -> bytes:
    """``_json_canonical(doc)``'s bytes: orjson's (sorted keys) in a fraction of the time
    whenever they are ASCII without DEL, which is when the two agree for a state's values
    (str, int, bool, None and lists and dicts of them: both escape control characters alike,
    and ``json`` escapes everything outside printable ASCII, DEL included); ``json``'s
    otherwise (non-ASCII text, an integer past 64 bits). Every transition stores a state."""
    try:
        data = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return _json_canonical(doc).encode()
    if not data.isascii() or b"\x7f" in data:
        return _json_canonical(doc).encode()
    return data

_R = TypeVar("_R", bound="Round")


def state_bytes(rnd: Round) -> bytes:
    """``rnd``'s inputs, the cards dealt so far and its actions; ``restore`` replays them.

    Cards not yet dealt are not written: they are as secret as the shoe's seed, which is kept
    encrypted at rest. An unfinished round therefore continues only on its shoe, re-derived
    from the sealed seed and passed to ``restore``.
    """
    # the dealt cards by one slice (a lazy shoe's ``__getitem__`` is Python: one call, not one
    # a card), as a list whatever sequence the slice gives
    dealt = rnd.shoe[rnd.start:rnd.position]
    doc = {
        "format": FORMAT,
        "shoe_size": rnd.shoe_size,
        "dealt": dealt if type(dealt) is list else list(dealt),
        "finished": rnd.finished,
        "start": rnd.start,
        "level": rnd.level_name,
        "balance": rnd.balance,
        "hands": [hb.to_json() for hb in rnd.hand_bets],
        "side_bets": rnd.round_side_bets,
        "actions": [a.to_json() for a in rnd.actions],
        "void": rnd.void_reason if rnd.phase is Phase.VOID else None,
        # the rules' own canonical JSON, made once per rules object, in as it is
        "rules": orjson.Fragment(rnd.rules.canonical_json),
    }
    # canonical JSON (sorted keys) by one dump, the rules' JSON at its sorted place: the bytes of
    # ``json.dumps`` of the whole document whenever they are ASCII without DEL (see
    # ``_canonical``); tests/engine/test_round_api.py holds the two byte for byte equal. Two
    # dumps of the document's halves around the rules, cut by two comprehensions, cost each
    # stored transition some 25,000 instructions more (counted).
    try:
        data = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        data = b"\x80"  # what orjson refuses: json's, below
    if data.isascii() and b"\x7f" not in data:
        return data
    # json's bytes for the halves (non-ASCII text, DEL, a big integer), the rules spliced in
    before = _canonical({k: v for k, v in doc.items() if k < "rules"})
    after = _canonical({k: v for k, v in doc.items() if k > "rules"})
    return b"".join((before[:-1], b',"rules":', rnd.rules.canonical_json.encode(), b",",
                     after[1:]))


def restore(cls: type[_R], data: bytes, shoe: Sequence[Card] | None = None) -> _R:
    """The round of class ``cls`` that ``state_bytes`` wrote, replayed; an unfinished one needs
    ``shoe``, its whole shoe. (``cls`` is passed in, as ``Round.from_bytes`` does, so that this
    module does not import the engine it serves.)"""
    doc = json.loads(data)
    if doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    start, dealt = doc["start"], doc["dealt"]
    end = start + len(dealt)
    if shoe is None:
        if not doc["finished"]:
            raise ValueError("an unfinished round continues only on its shoe: pass shoe=")
        shoe = [-1] * start + dealt  # positions before the round are never read
    elif len(shoe) != doc["shoe_size"] or [shoe[i] for i in range(start, end)] != dealt:
        raise ValueError("this shoe is not the one the round was dealt from")
    # void with no card dealt: void before its deal (a shoe that ran out at its first card
    # leaves the same round, reason and all)
    unstarted = doc["void"] if not dealt and not doc["actions"] else None
    rnd = cls(
        rules_from_stored(doc["rules"]),
        shoe,
        [HandBet.from_json(h, f"hands[{i}]") for i, h in enumerate(doc["hands"])],
        doc["side_bets"],
        start=doc["start"],
        level=doc["level"],
        balance=doc["balance"],
        void=unstarted,
    )
    for a in doc["actions"]:
        rnd.act(action_from_json(a))
    if doc["void"] is not None:
        rnd.void(doc["void"])
    if rnd.position != end:
        raise ValueError(f"replay dealt to position {rnd.position}, the record to {end}")
    rnd.shoe_size = doc["shoe_size"]
    return rnd
