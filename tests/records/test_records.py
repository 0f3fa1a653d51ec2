"""Round records, shoe reveals, realistic bets and the collector's shoe lifecycle."""

from __future__ import annotations

import json
import random
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.engine_helpers import deal, stack

from game_math.cards import card_codes, ordered_shoe
from game_math.games import game_rules
from game_math.round import Action, Round
from game_math.rules import GAME_IDS, Rules, rules_from_dict
from rng_service.crypto.keys import SigningKey, key_id
from rng_service.crypto.signing import decode_envelope, sign_payload, verify_envelope
from rng_service.records.schema import (
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    RULES_SCHEMA,
    RecordWriter,
    ShoeRef,
    collect_rounds,
    new_round_id,
    random_bets,
    reveal_payload,
    rfc3339_now,
    round_payload,
    sometimes_insure,
)
from rng_service.rng.shoe import Shoe, ShoeNotFinished, seed_commitment, shoe_cards

REF = ShoeRef("shoe-1", "c" * 64, 2, b"player")


def payload_of(rnd: Round) -> dict[str, Any]:
    return round_payload(rnd, round_id="r1", shoe=REF, started_at="2024-05-01T12:00:00.000Z",
                         finished_at="2024-05-01T12:00:01.000Z", version="9.9")


def test_record_of_a_split_and_double_round() -> None:
    shoe = stack("snap", [["8S", "8H"]], ["6D", "TC", "TH"], ["3S", "TD", "2D", "9S"])
    rnd = deal("snap", shoe, [1000])
    for step in (Action("split"), Action("double", 1000), Action("hit"), Action("stand")):
        rnd.act(step)
    assert rnd.finished
    p = payload_of(rnd)
    assert p["schema"] == RECORD_SCHEMA and p["game"] == "snap"
    assert "rules" not in p  # named by digest; the rules travel in their own document
    assert p["rules_digest"] == game_rules("snap").digest()
    assert p["shoe"] == {"id": "shoe-1", "commitment": "c" * 64, "decks": 2,
                         "client_seed": b"player".hex(), "start": 0, "end": rnd.position}
    assert p["cards"] == shoe[: rnd.position]
    assert p["level"] == "medium"  # the default level, resolved
    assert p["bets"] == {"hands": [{"bet": 1000, "side_bets": {}}], "side_bets": {}}
    # each decision with the cards its hand received: the split gives hand 0 its second card
    # (hand 1 gets its own when play reaches it), the double one card, a stand none
    assert p["actions"] == [
        {"hand": 0, "action": "split", "cards": ["3S"]},
        {"hand": 0, "action": {"action": "double", "amount": 1000}, "cards": ["TD"]},
        {"hand": 1, "action": "hit", "cards": ["9S"]},
        {"hand": 1, "action": "stand", "cards": []},
    ]
    assert [(w["kind"], w["staked"], w["returned"]) for w in p["wagers"]] == [
        ("main", 1000, 2000), ("split", 1000, 2000), ("double", 1000, 2000)]
    assert [h["cards"] for h in p["hands"]] == [["8S", "3S", "TD"], ["8H", "2D", "9S"]]
    assert p["dealer"] == {"cards": ["6D", "TC", "TH"]}
    assert p["status"] == "finished" and p["void_reason"] is None
    assert (p["total_staked"], p["total_returned"]) == (3000, 6000)
    assert p["service_version"] == "9.9"


def test_dealer_draws_are_not_the_players() -> None:
    rnd = deal("snap", stack("snap", [["TS", "6H"]], ["6D", "TC", "5C"]), [1000])
    rnd.act(Action("stand"))
    p = payload_of(rnd)
    assert p["actions"] == [{"hand": 0, "action": "stand", "cards": []}]
    assert p["dealer"]["cards"] == ["6D", "TC", "5C"] and p["cards"][-1] == "5C"


def test_void_round_record() -> None:
    rnd = deal("snap", stack("snap", [["TS", "6H"]], ["6D", "TC"]), [1000])
    rnd.void("table malfunction")
    p = payload_of(rnd)
    assert (p["status"], p["void_reason"]) == ("void", "table malfunction")
    assert p["total_returned"] == p["total_staked"] == 1000


def test_unfinished_round_is_refused() -> None:
    rnd = deal("snap", stack("snap", [["TS", "6H"]], ["6D", "TC"]), [1000])
    with pytest.raises(ValueError, match="finished"):
        payload_of(rnd)


def test_record_signs_and_verifies() -> None:
    rnd = deal("multi-hand", ["TS", "6H", "9D", "5C", "4D"], [1000])
    rnd.act(Action("stand"))
    key = SigningKey.generate()
    env = sign_payload(payload_of(rnd), key)
    trusted = {key.key_id: key.public_key}
    assert verify_envelope(env, trusted, schema=RECORD_SCHEMA) == env["payload"]


def custom_snap() -> Rules:
    data = game_rules("snap").to_dict()
    data["payouts"]["blackjack"] = "6:5"
    return rules_from_dict(data)


def test_writer_files_each_rule_set_once_as_a_rules_document(tmp_path: Path) -> None:
    key = SigningKey.generate()
    writer = RecordWriter(tmp_path, key)
    rnd = deal("snap", stack("snap", [["TS", "6H"]], ["6D", "TC", "5C"]), [1000])
    rnd.act(Action("stand"))
    rules = game_rules("snap")
    path = writer.write_round(payload_of(rnd), rules)
    doc_path = tmp_path / "rules" / f"{rules.digest()}.json"
    doc_path.write_text("overwritten?")  # proves the second round does not write it again
    other = round_payload(rnd, round_id="r2", shoe=REF, started_at="a", finished_at="b")
    writer.write_round(other, rules)
    assert doc_path.read_text() == "overwritten?"
    assert sorted(p.name for p in (tmp_path / "rounds").iterdir()) == ["r1.json", "r2.json"]
    writer.write_rules(custom_snap())
    assert len(list((tmp_path / "rules").iterdir())) == 2
    fresh = RecordWriter(tmp_path / "again", key).write_rules(rules)
    doc = json.loads(fresh.read_text(encoding="utf-8"))  # plain JSON, not an envelope
    assert doc == {"schema": RULES_SCHEMA, "rules": rules.to_dict()}
    assert rules_from_dict(doc["rules"]).digest() == rules.digest() == fresh.stem
    assert decode_envelope(path.read_bytes(), require_canonical=True)["payload"] == payload_of(rnd)


def test_writer_refuses_a_record_of_other_rules(tmp_path: Path) -> None:
    rnd = deal("snap", stack("snap", [["TS", "6H"]], ["6D", "TC", "5C"]), [1000])
    rnd.act(Action("stand"))
    writer = RecordWriter(tmp_path, SigningKey.generate())
    with pytest.raises(ValueError, match="rules_digest"):
        writer.write_round(payload_of(rnd), custom_snap())
    assert not list((tmp_path / "rounds").iterdir())
    assert not list((tmp_path / "rules").iterdir())


def test_reveal_only_after_the_shoe_is_finished() -> None:
    shoe = Shoe.new(2)
    shoe.set_client_seed(b"abc")
    assert shoe.start_round()
    with pytest.raises(ShoeNotFinished):
        reveal_payload(shoe)
    shoe.take(5)
    shoe.end_round()
    reveal = reveal_payload(shoe)
    assert reveal["schema"] == REVEAL_SCHEMA
    seed = bytes.fromhex(reveal["seed"])
    assert seed_commitment(seed) == reveal["commitment"] == shoe.commitment
    assert (reveal["shoe_id"], reveal["decks"], reveal["client_seed"]) == (shoe.id, 2, b"abc".hex())
    assert shoe_cards(seed, b"abc", 2) == list(shoe.cards)


@pytest.mark.parametrize("game", GAME_IDS)
def test_random_bets_are_accepted_and_varied(game: str) -> None:
    rules = game_rules(game)
    rng = random.Random(game)
    shoe = ordered_shoe(rules.decks)
    levels: set[str] = set()
    counts: set[int] = set()
    stakes: set[int] = set()
    side = 0
    for _ in range(400):
        bets = random_bets(rules, rng)
        Round(rules, shoe, bets.hands, bets.side_bets, level=bets.level)  # BetError if not
        levels.add(bets.level)
        counts.add(len(bets.hands))
        stakes.update(h.bet for h in bets.hands)
        side += bool(bets.side_bets) or any(h.side_bets for h in bets.hands)
    assert levels == {lv.name for lv in rules.levels}
    assert counts == set(rules.hands.counts)
    assert len(stakes) > 5
    assert (side > 0) == bool(rules.side_bets)


def test_sometimes_insure_takes_the_offer() -> None:
    def never(rnd: Round) -> Action:
        return Action("insurance", 0)

    player = sometimes_insure(never, random.Random(1), 1.0)
    rnd = deal("snap", stack("snap", [["TS", "9H"]], ["AD", "7C"]), [1000])
    assert player(rnd) == Action("insurance", 500)
    rnd = deal("snap", stack("snap", [["AS", "KH"]], ["AD", "7C"]), [1000])
    assert player(rnd) == Action("even_money", accept=True)


def first_legal(rnd: Round) -> Action:
    """A cheap stand-in player: the lifecycle does not depend on the strategy."""
    la = rnd.legal_actions()[0]
    if la.action == "even_money":
        return Action("even_money", accept=False)
    if la.action == "insurance":
        return Action("insurance", 0)
    return Action("stand")


def read_dir(path: Path, trusted: dict[str, Any], schema: str) -> list[dict[str, Any]]:
    out = []
    for file in sorted(path.iterdir()):
        data = file.read_bytes()
        env = decode_envelope(data, require_canonical=True)  # one JCS envelope per file
        out.append(verify_envelope(env, trusted, schema=schema))
    return out


def test_cut_card_shoes_span_rounds_and_are_all_revealed(tmp_path: Path) -> None:
    rules = game_rules("double-exposure")
    key = SigningKey.generate()
    trusted = {key_id(key.public_key): key.public_key}
    stats = collect_rounds(rules, 40, RecordWriter(tmp_path, key), first_legal,
                           client_seed=b"lab", rng=random.Random(7))
    rounds = read_dir(tmp_path / "rounds", trusted, RECORD_SCHEMA)
    reveals = {r["shoe_id"]: r for r in read_dir(tmp_path / "reveals", trusted, REVEAL_SCHEMA)}
    assert stats.rounds == len(rounds) == 40
    assert stats.shoes == len(reveals) >= 2  # 40 rounds overrun a 156-card cut
    by_shoe: dict[str, list[dict[str, Any]]] = {}
    for r in rounds:
        by_shoe.setdefault(r["shoe"]["id"], []).append(r)
    assert set(by_shoe) == set(reveals)
    cut = 6 * 52 // 2
    for shoe_id, played in by_shoe.items():
        reveal = reveals[shoe_id]
        assert reveal["client_seed"] == b"lab".hex()
        cards = card_codes(shoe_cards(bytes.fromhex(reveal["seed"]), b"lab", 6))
        played.sort(key=lambda r: r["shoe"]["start"])
        position = 0
        for r in played:  # rounds tile the shoe from its first card; none starts past the cut
            assert r["shoe"]["start"] == position < cut
            assert r["shoe"]["commitment"] == reveal["commitment"]
            position = r["shoe"]["end"]
            assert r["cards"] == cards[r["shoe"]["start"]:position]


def test_per_round_shoes(tmp_path: Path) -> None:
    key = SigningKey.generate()
    stats = collect_rounds(game_rules("snap"), 5, RecordWriter(tmp_path, key), first_legal)
    rounds = read_dir(tmp_path / "rounds", {key.key_id: key.public_key}, RECORD_SCHEMA)
    assert stats.shoes == 5 and len(list((tmp_path / "reveals").iterdir())) == 5
    assert len({r["shoe"]["id"] for r in rounds}) == 5
    assert all(r["shoe"]["start"] == 0 for r in rounds)
    assert [p.name for p in (tmp_path / "rules").iterdir()] == [
        f"{game_rules('snap').digest()}.json"]
    assert not list(tmp_path.rglob(".*.tmp"))


def test_records_hold_no_seed(tmp_path: Path) -> None:
    key = SigningKey.generate()
    collect_rounds(game_rules("snap"), 3, RecordWriter(tmp_path, key), first_legal)
    seeds = [json.loads(f.read_bytes())["payload"]["seed"]
             for f in (tmp_path / "reveals").iterdir()]
    for file in (tmp_path / "rounds").iterdir():
        text = file.read_text()
        assert not any(seed in text for seed in seeds)


def test_record_times_are_the_clock_s_rfc3339_milliseconds() -> None:
    def reference() -> str:
        return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    for _ in range(200):  # across millisecond (and now and then second) boundaries
        before, now, after = reference(), rfc3339_now(), reference()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now)
        assert before <= now <= after


def test_round_ids_are_uuid4_hex() -> None:
    ids = [new_round_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for round_id in ids:
        parsed = uuid.UUID(hex=round_id)
        assert parsed.hex == round_id and parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
