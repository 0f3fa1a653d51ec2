"""Key validity periods: `fairshoe keys export` carries valid_from/valid_until in each JWK, and
the exported file still loads as trusted keys (unknown JWK members are ignored)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli_helpers import run

from rng_service.crypto.keys import (
    KeyInfo,
    KeyStore,
    KeyStoreError,
    SigningKey,
    export_jwk,
    key_validity,
    load_trusted_keys,
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


def test_trusted_keys_carry_their_validity(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys")
    first = store.create().key_id
    second = store.rotate()[0].key_id
    out = tmp_path / "trusted.jwks.json"
    assert run(["keys", "export", "--dir", str(store.root), "--out", str(out)]) == 0
    keys = load_trusted_keys(out)
    old, new = keys[first].validity, keys[second].validity
    assert old.valid_from is not None and old.valid_until is not None
    assert new.valid_until is None and new.covers(datetime.now(UTC))
    assert not old.covers(old.valid_until + timedelta(seconds=1))
    assert old.covers(old.valid_until + timedelta(milliseconds=999))  # the ring keeps seconds
    assert not old.covers(old.valid_from - timedelta(seconds=1))
    assert "until now" in new.describe()


@pytest.mark.parametrize(("members", "message"), [
    ({"valid_from": "2024-05-01"}, "member valid_from '2024-05-01' is not an RFC 3339 time"),
    ({"valid_until": 5}, "member valid_until must be a string, got 5"),
    ({"valid_from": "2024-05-02T00:00:00Z", "valid_until": "2024-05-01T00:00:00Z"},
     "valid_until is before valid_from"),
])
def test_bad_validity_members_are_refused(tmp_path: Path, members: dict[str, object],
                                          message: str) -> None:
    jwk = json.loads(export_jwk({"k": SigningKey.generate().public_key}, as_set=False))
    jwk.pop("kid")
    path = tmp_path / "k.jwk"
    path.write_text(json.dumps(jwk | members))
    with pytest.raises(KeyStoreError, match=re.escape(message)):
        load_trusted_keys(path)
