"""Key validity periods: `fairshoe keys export` carries valid_from/valid_until in each JWK, and
the exported file still loads as trusted keys (unknown JWK members are ignored)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from cli_helpers import run

from rng_service.crypto.keys import (
    KeyInfo,
    KeyStore,
    KeyStoreError,
    key_validity,
    load_trusted_public_keys,
    rfc3339,
)


def test_keys_export_carries_validity_and_still_loads(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys")
    first = store.create().key_id
    second, retired = store.rotate()
    assert retired == first
    out = tmp_path / "trusted.jwks.json"
    assert run(["keys", "export", "--dir", str(store.root), "--out", str(out)]) == 0
    jwks = {k["kid"]: k for k in json.loads(out.read_text())["keys"]}
    assert set(jwks[first]) >= {"valid_from", "valid_until"}
    assert "valid_until" not in jwks[second.key_id]
    assert jwks[first]["valid_until"] <= jwks[second.key_id]["valid_from"]
    for member in ("valid_from", "valid_until"):
        assert datetime.fromisoformat(jwks[first][member]).utcoffset() is not None
    assert set(load_trusted_public_keys(out)) == {first, second.key_id}
    single = tmp_path / "one.jwk"
    assert run(["keys", "export", "--dir", str(store.root), "--key-id", first,
                "--out", str(single)]) == 0
    assert json.loads(single.read_text())["valid_until"] == jwks[first]["valid_until"]


def test_validity_members() -> None:
    info = KeyInfo("ed25519:" + "0" * 32, "2024-05-01T12:00:00+00:00", None, True)
    assert key_validity(info) == {"valid_from": "2024-05-01T12:00:00Z"}
    assert rfc3339("2024-05-01T12:00:00") == "2024-05-01T12:00:00Z"
    with pytest.raises(KeyStoreError):
        rfc3339("yesterday")
