"""What pass 1 makes of a file it read (rng_service/audit/pieces.py, claims.py, log_lines.py):
a round record's claims, read inline, are what the claim readers give; an envelope's leaf, kept
in the scratch store as a plain tuple, comes back as the LeafFile it was; a queued round goes to
a worker and back as it was queued."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from rng_service.audit.claims import ROUND_CLAIMS, claimed_int, claimed_str, label, leaf_file
from rng_service.audit.file_checks import FileCase, FileReadable
from rng_service.audit.log_lines import LeafFile
from rng_service.audit.pieces import claims_of, pending_round
from rng_service.audit.round_checks import Pending
from rng_service.audit.walk import Entry
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import decode_spanned, payload_span
from rng_service.log import leaf_hash
from rng_service.records.schema import (
    KEY_SCHEMA,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    SHOE_COMMITMENT_SCHEMA,
    RecordWriter,
    collect_rounds,
)


def _claims_as_read_by_the_claim_readers(path: Path, payload: object) -> tuple[Any, ...]:
    """The reference: claims_of as it was written, member by member through the readers."""
    shoe = payload.get("shoe") if isinstance(payload, dict) else None
    shoe_id = shoe.get("id") if isinstance(shoe, dict) else None
    return (label(payload, "round_id", path), shoe_id if isinstance(shoe_id, str) else "",
            claimed_int(shoe, "start"), claimed_int(shoe, "end"),
            claimed_str(payload, "finished_at"), claimed_str(payload, "status") == "void")


#: members as a hostile record may hold them: any JSON type, and the ones that read as claims
_ANY = (st.none() | st.booleans() | st.integers(-3, 3)
        | st.sampled_from(["", "void", "finished", "r1", "2026-12-07T11:13:38.747Z"])
        | st.lists(st.integers(), max_size=2))
_SHOE = st.dictionaries(st.sampled_from(["id", "start", "end", "decks"]), _ANY) | _ANY
_PAYLOAD = st.dictionaries(
    st.sampled_from(["round_id", "finished_at", "status", "schema", "x"]), _ANY
).flatmap(lambda members: st.builds(lambda shoe: {**members, "shoe": shoe}, _SHOE)
          | st.just(members)) | _ANY


@settings(max_examples=400, deadline=None)
@given(_PAYLOAD)
def test_a_rounds_claims_are_what_the_claim_readers_read(payload: object) -> None:
    path = Path("/collection/rounds/f.json")
    assert claims_of(path, payload) == _claims_as_read_by_the_claim_readers(path, payload)


def test_a_real_rounds_claims() -> None:
    payload = {"round_id": "r1", "finished_at": "t", "status": "void",
               "shoe": {"id": "s1", "start": 4, "end": 9}}
    assert claims_of(Path("a/b.json"), payload) == ("r1", "s1", 4, 9, "t", True)
    assert claims_of(Path("a/b.json"), {"round_id": "", "shoe": {"start": True}}) == (
        "b.json", "", -1, -1, "", False)


def _leaf_as_read_before(data: bytes, envelope: dict[str, Any]) -> LeafFile:
    """The reference: leaf_file as it was written, the subject found through two tables."""
    payload = envelope.get("payload")
    schema = claimed_str(payload, "schema")
    subject_of = {KEY_SCHEMA: payload, REVEAL_SCHEMA: payload, SHOE_COMMITMENT_SCHEMA: payload,
                  RECORD_SCHEMA: payload.get("shoe") if isinstance(payload, dict) else None}
    member = {KEY_SCHEMA: "key_id", RECORD_SCHEMA: "id"}.get(schema, "shoe_id")
    subject = claimed_str(subject_of.get(schema), member)
    signer = claimed_str(envelope.get("signature"), "key_id")
    return LeafFile(leaf_hash(data), schema or None, signer or None, subject or None)


_SCHEMAS = st.sampled_from([KEY_SCHEMA, RECORD_SCHEMA, REVEAL_SCHEMA, SHOE_COMMITMENT_SCHEMA,
                            "fairshoe.rules/v1", "", 3, None])
_ENVELOPE = st.fixed_dictionaries({}, optional={
    "payload": st.fixed_dictionaries({}, optional={
        "schema": _SCHEMAS, "key_id": _ANY, "shoe_id": _ANY, "id": _ANY, "shoe": _SHOE,
    }) | _ANY,
    "signature": st.fixed_dictionaries({}, optional={"key_id": _ANY}) | _ANY,
})


@settings(max_examples=400, deadline=None)
@given(_ENVELOPE, st.binary(max_size=40))
def test_a_leaf_is_what_it_was_and_comes_back_from_the_store_as_it(envelope: dict[str, Any],
                                                                   data: bytes) -> None:
    leaf = leaf_file(data, envelope)
    assert type(leaf) is LeafFile and leaf == _leaf_as_read_before(data, envelope)
    row = pickle.loads(pickle.dumps(tuple(leaf), pickle.HIGHEST_PROTOCOL))
    assert type(row) is tuple  # what the store keeps: no class named in its pickle
    assert LeafFile(*row) == leaf and LeafFile(*row).subject == leaf.subject


def test_a_queued_round_goes_to_a_worker_and_back_as_it_was_queued() -> None:
    path = Path("/collection/rounds/r1.json")
    payload = {"round_id": "r1", "finished_at": "t", "shoe": {"id": "s1", "start": 0, "end": 9}}
    item = pending_round(path, payload, data=b"{}")
    assert item == Pending(path, "r1", "s1", 0, 9, "t", False, False, b"{}", None)
    again = pickle.loads(pickle.dumps(item, pickle.HIGHEST_PROTOCOL))
    assert again.where == str(path)  # the path travels as text, made a Path when asked
    assert again.path == path and again.text == str(path) and item.text == str(path)
    assert (again.round_id, again.shoe_id, again.start, again.end, again.finished_at,
            again.void, again.follow, again.data, again.span) == (
        "r1", "s1", 0, 9, "t", False, False, b"{}", None)


class _Watched(dict[str, Any]):
    """A payload that notes the members read of it."""

    def __init__(self, members: dict[str, Any], read: set[str]) -> None:
        super().__init__(members)
        self.read = read

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


@settings(max_examples=200, deadline=None)
@given(_PAYLOAD)
def test_pass_one_reads_no_member_of_a_round_it_does_not_decode(payload: object) -> None:
    """Pass 1 decodes a round record's payload to ROUND_CLAIMS' members only: its claims and
    its leaf read none but those."""
    read: set[str] = set()
    watched = _Watched(payload, read) if isinstance(payload, dict) else payload
    if isinstance(watched, _Watched):
        watched["schema"] = RECORD_SCHEMA
    path = Path("/collection/rounds/f.json")
    claims_of(path, watched)
    leaf_file(b"{}", {"format": "fairshoe.signed/v1", "payload": watched, "signature": {}})
    assert read <= set(ROUND_CLAIMS.names)


def test_the_member_watch_catches_a_member_left_out() -> None:
    read: set[str] = set()
    claims_of(Path("f.json"), _Watched({"round_id": "r"}, read))
    assert "finished_at" in read and "x" not in read


def test_a_round_read_by_pass_one_claims_what_it_claims_whole(tmp_path: Path) -> None:
    """Real rounds and reveals as FileReadable reads them: a round's payload cut to its claimed
    members, the same claims, leaf and span as its whole decoding gives; any other file whole."""
    rules = game_rules("snap")
    basic_strategy(rules)
    collect_rounds(rules, 6, RecordWriter(tmp_path, SigningKey.generate()),
                   basic_strategy_action)
    files = sorted(tmp_path.rglob("*.json"))
    rounds = 0
    for path in files:
        case = FileCase(Entry(path, strict=True))
        FileReadable().check(case)
        whole, is_sorted, middle = decode_spanned(case.data)
        assert (case.sorted, case.middle) == (is_sorted, middle)
        payload = whole.get("payload")
        if isinstance(payload, dict) and payload.get("schema") == RECORD_SCHEMA:
            rounds += 1
            assert case.envelope["payload"] == {
                name: payload[name] for name in ROUND_CLAIMS.names if name in payload}
            assert claims_of(path, case.envelope["payload"]) == claims_of(path, payload)
            assert payload_span(case.data, case.envelope, case.middle) == payload_span(
                case.data, whole)
        else:
            assert case.envelope == whole
        assert leaf_file(case.data, case.envelope) == leaf_file(case.data, whole)
    assert rounds == 6 and len(files) > rounds
