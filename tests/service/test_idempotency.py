"""A request's hash is stored with its first answer, so its bytes never change: ``request_hash``
(orjson where it writes the same bytes) is SHA-256 of exactly what
``json.dumps(doc, sort_keys=True, separators=(",", ":"))`` writes, for every parameter shape."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.service.idempotency import request_hash


class Kind(StrEnum):
    DEPOSIT = "deposit"


def reference(operation: str, params: Any) -> str:
    doc = json.dumps({"operation": operation, "params": params}, sort_keys=True,
                     separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


ASCII = "".join(chr(c) for c in range(128))  # every control character, quote, backslash, DEL


@pytest.mark.parametrize("params", [
    {"player": "p-1", "game": "snap", "level": None, "mode": "REAL", "currency": "EUR",
     "side_bets": {"snap": 100}, "hands": [{"bet": 1000, "side_bets": {"perfect_pairs": 100}}]},
    {"round_id": "a" * 32, "action": {"action": "double", "amount": 1000}, "hand_id": None,
     "expected_version": 3, "player": "p-1"},
    {"round_id": "a" * 32, "action": "hit", "hand_id": 0, "expected_version": 1},
    {"text": ASCII, ASCII: ASCII[::-1]},
    {"text": "\x7f"},
    {"text": "lone \ud800 surrogate"},
    {"text": "café ☕ \U0001f600", "clé": "é"},
    {"big": 2**64, "small": -(2**63) - 1, "max": 2**63 - 1, "u64": 2**64 - 1},
    {"kind": Kind.DEPOSIT, Kind.DEPOSIT: True},
    {"nested": [[], {}, [None, True, False, 0, -1, ""]], "b": {"z": 1, "a": 2, "": 3}},
])
def test_the_bytes_hashed_are_jsons(params: dict[str, Any]) -> None:
    assert request_hash("op", params) == reference("op", params)


def test_keys_json_converts_are_hashed_as_json_writes_them() -> None:
    params = {"parameters": {1: "a", 2: "b"}}  # orjson refuses non-str keys
    assert request_hash("rng.integers", params) == reference("rng.integers", params)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(st.text(), st.dictionaries(st.text(), json_values, max_size=6))
def test_any_json_parameters(operation: str, params: dict[str, Any]) -> None:
    assert request_hash(operation, params) == reference(operation, params)
