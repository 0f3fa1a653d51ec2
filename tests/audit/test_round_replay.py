"""A round's replay as the audit hands it to the engine (rng_service/audit/round_checks.py:
``deal``, ``replay_actions``, ``unstarted``): its bets and action entries read from the record
as they are, a reader (``Doc``) made only for what is wrong with them, and the hand awaited
found without a ``Turn``. Each is held to the reading it replaced (the references below, every
member read through a ``Doc`` and every bet through ``HandBet.from_json``) on real records of
several games, and on the same records with their bets and entries broken at random: the same
round replayed, or the same failure (field and message)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.cards import CODE_OF, Card, CardError
from game_math.errors import BetError, GameMathError, IllegalAction
from game_math.games import game_rules
from game_math.round import CardDealt, HandBet, Round, action_from_json
from game_math.rules import Rules
from rng_service.audit.failures import AuditFailure, Doc, fail
from rng_service.audit.files import show
from rng_service.audit.round_checks import _hand_bet, _side_stakes, deal, replay_actions, unstarted
from rng_service.core.json_input import JsonObject
from rng_service.crypto.keys import SigningKey
from rng_service.records.schema import RecordWriter, collect_rounds
from rng_service.rng.shoe import LazyShoe

# --- the reading replaced, as it was ------------------------------------------------------------


def _reference_unstarted(doc: JsonObject) -> bool:
    shoe = doc.get_obj("shoe")
    return (doc.get_str("status") == "void" and not doc.get_list("cards")
            and not doc.get_list("actions") and shoe.get_int("start") == shoe.get_int("end"))


def _reference_deal(doc: JsonObject, rules: Rules, cards: list[Card]) -> Round:
    bets = doc.get_obj("bets")
    items = bets.get_list("hands")
    shoe = doc.get_obj("shoe")
    try:
        hands = [HandBet.from_json(item, f"hands[{i}]") for i, item in enumerate(items)]
        return Round(rules, cards, hands, bets.get_int_map("side_bets"),
                     start=shoe.get_int("start"), level=doc.get_str("level"),
                     void=(doc.get_opt_str("void_reason") or "")
                     if _reference_unstarted(doc) else None)
    except BetError as exc:
        fail(f"bets.{exc.field}" if exc.field != "level" else "level",
              str(exc).removeprefix(f"{exc.field}: "))


def _reference_replay(doc: JsonObject, rnd: Round) -> None:
    entries = doc.get_list("actions")
    for i, item in enumerate(entries):
        entry = Doc(item, f"actions[{i}]")
        hand = entry.get_int("hand")
        turn = rnd.turn
        if rnd.finished:
            fail(entry.path, f"the replayed round was over after {i} actions")
        if turn.hand != hand:
            fail(entry.at("hand"), f"recorded {hand}, the replay awaits hand {turn.hand}")
        try:
            action = action_from_json(entry.get("action"))
            events = rnd.act(action)
        except (ValueError, CardError, IllegalAction) as exc:
            fail(entry.at("action"), f"{show(entry.get('action'))} is refused: {exc}")
        dealt = [CODE_OF[e.card] for e in events
                 if isinstance(e, CardDealt) and e.hand == hand and e.card is not None]
        recorded = entry.get_list("cards")
        if recorded != dealt:
            fail(entry.at("cards"), f"recorded {show(recorded)}, replay {show(dealt)}")
    if not rnd.finished and doc.get_str("status") != "void":
        fail("actions", f"end after {len(entries)} actions, but the replay awaits a "
              f"{rnd.turn.decision} decision on hand {rnd.turn.hand}")


# --- records to break ---------------------------------------------------------------------------

#: games whose rounds insure, split, double and bet on the side between them
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict[str, Any], Rules,
                                                                    tuple[bytes, bytes, int]]]:
    """(payload, rules, the shoe's seed, client seed and decks) of 40 rounds of each game."""
    out = []
    for game in GAMES:
        root = tmp_path_factory.mktemp(game)
        rules = game_rules(game)
        basic_strategy(rules)
        collect_rounds(rules, 40, RecordWriter(root, SigningKey.generate()),
                       basic_strategy_action, rng=random.Random(21))
        reveals = {}
        for path in (root / "reveals").glob("*.json"):
            payload = json.loads(path.read_text())["payload"]
            reveals[payload["shoe_id"]] = (bytes.fromhex(payload["seed"]),
                                           bytes.fromhex(payload["client_seed"]),
                                           payload["decks"])
        for path in sorted((root / "rounds").glob("*.json")):
            payload = json.loads(path.read_text())["payload"]
            out.append((payload, rules, reveals[payload["shoe"]["id"]]))
    return out


def _outcome(run: Any, payload: dict[str, Any], rules: Rules, cards: list[Card]) -> object:
    """What one reading makes of a record: the round it replayed, or how it failed."""
    doc = Doc(copy.deepcopy(payload), "")
    try:
        rnd = run(doc, rules, cards)
    except AuditFailure as exc:
        return ("fail", exc.field, exc.message)
    except (GameMathError, ValueError, TypeError, KeyError) as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("replayed", rnd.phase, rnd.position, rnd.total_staked, rnd.total_returned,
            [str(e) for e in rnd.events])


def _new(doc: JsonObject, rules: Rules, cards: list[Card]) -> Round:
    rnd = deal(doc, rules, cards, doc.get_obj("shoe") if isinstance(doc.data.get("shoe"), dict)
               else None)
    replay_actions(doc, rnd)
    return rnd


def _old(doc: JsonObject, rules: Rules, cards: list[Card]) -> Round:
    rnd = _reference_deal(doc, rules, cards)
    _reference_replay(doc, rnd)
    return rnd


def test_every_record_replays_as_before(records: list[Any]) -> None:
    for payload, rules, shoe in records:
        cards = LazyShoe(*shoe)[:]
        outcome = _outcome(_new, payload, rules, cards)
        assert outcome[0] == "replayed"
        assert outcome == _outcome(_old, payload, rules, cards)


#: what a member may be broken into
_ODD = st.sampled_from([None, True, False, 0, 1, -5, 2**60, "x", "hit", "stand", "AS", [], {},
                        ["AS"], [1], {"bet": 100}, {"action": "double", "amount": 100},
                        {"bet": True}, {"bet": 100, "side_bets": None},
                        {"bet": 100, "side_bets": {"snap": "1"}}, {"bet": 100, "x": 1}, 1.5])


def _break(payload: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """A copy of ``payload`` with one to three members of its bets, action entries or status
    removed, replaced by an odd value, or given an odd one beside them."""
    broken = copy.deepcopy(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        places: list[tuple[Any, Any]] = [(broken, "status"), (broken, "void_reason"),
                                         (broken, "bets"), (broken, "actions")]
        bets = broken.get("bets")
        if isinstance(bets, dict):
            places += [(bets, "hands"), (bets, "side_bets")]
        if isinstance(bets, dict) and isinstance(bets.get("hands"), list):
            for i, hand in enumerate(bets["hands"]):
                places.append((bets["hands"], i))
                if isinstance(hand, dict):
                    places += [(hand, "bet"), (hand, "side_bets"), (hand, "extra")]
        if isinstance(bets, dict) and isinstance(bets.get("side_bets"), dict):
            places += [(bets["side_bets"], name) for name in [*bets["side_bets"], "snap"]]
        if isinstance(broken.get("actions"), list):
            for i, entry in enumerate(broken["actions"]):
                places.append((broken["actions"], i))
                if isinstance(entry, dict):
                    places += [(entry, "hand"), (entry, "action"), (entry, "cards"),
                               (entry, "extra")]
        owner, key = data.draw(st.sampled_from(places))
        if isinstance(owner, dict) and key in owner and data.draw(st.booleans()):
            del owner[key]
        elif isinstance(owner, dict) or (isinstance(owner, list) and key < len(owner)):
            owner[key] = copy.deepcopy(data.draw(_ODD))  # its own: it may be broken next
    return broken


@settings(max_examples=800, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_broken_record_fails_as_before(records: list[Any], data: st.DataObject) -> None:
    payload, rules, shoe = records[data.draw(st.integers(0, len(records) - 1))]
    broken = _break(payload, data)
    cards = LazyShoe(*shoe)[:]
    assert _outcome(_new, broken, rules, cards) == _outcome(_old, broken, rules, cards)


@settings(max_examples=400, deadline=None)
@given(_ODD | st.dictionaries(st.sampled_from(["bet", "side_bets", "x"]), _ODD, max_size=3),
       st.integers(0, 3))
def test_a_hand_bet_is_read_as_from_json_reads_it(item: Any, index: int) -> None:
    try:
        expected: object = HandBet.from_json(item, f"hands[{index}]")
    except BetError as exc:
        expected = ("BetError", exc.field, str(exc))
    try:
        got: object = _hand_bet(item, index)
    except BetError as exc:
        got = ("BetError", exc.field, str(exc))
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(_ODD | st.dictionaries(st.sampled_from(["snap", "perfect_pairs"]), _ODD, max_size=2))
def test_side_stakes_are_read_as_an_int_map(side: Any) -> None:
    bets = Doc({"side_bets": side}, "bets")
    try:
        expected: object = bets.get_int_map("side_bets")
    except AuditFailure as exc:
        expected = (exc.field, exc.message)
    try:
        got: object = _side_stakes(bets)
    except AuditFailure as exc:
        got = (exc.field, exc.message)
    assert got == expected


def test_unstarted_is_read_as_before(records: list[Any]) -> None:
    for payload, _, _ in records[:20]:
        for status in ("void", "finished"):
            for cards, actions, end in (([], [], 0), (["AS"], [], 1), ([], [{}], 0)):
                doc = Doc({**payload, "status": status, "cards": cards, "actions": actions,
                           "shoe": {**payload["shoe"], "start": 0, "end": end}}, "")
                assert unstarted(doc) == unstarted(doc, doc.get_obj("shoe")) == (
                    _reference_unstarted(doc))

