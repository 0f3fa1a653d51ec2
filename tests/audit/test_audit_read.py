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

from rng_service.audit.claims import claimed_int, claimed_str, label, leaf_file
from rng_service.audit.log_lines import LeafFile
from rng_service.audit.pieces import claims_of, pending_round
from rng_service.audit.round_checks import Pending
from rng_service.log import leaf_hash
from rng_service.records.schema import (
    KEY_SCHEMA,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    SHOE_COMMITMENT_SCHEMA,
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
