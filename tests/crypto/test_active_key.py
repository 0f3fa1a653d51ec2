"""ActiveKey follows the key store's rotations, and a key ring broken by hand does not stop a
service that already signs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rng_service.crypto.keys import KEYRING_FILE, ActiveKey, KeyFileError, KeyStore, rfc3339


def test_it_follows_a_rotation_and_says_when_each_key_began(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    first = store.create()
    active = ActiveKey(store)
    assert active.current().key.key_id == first.key_id
    assert active.current().valid_from == rfc3339(first.created_at)
    second, retired = store.rotate()
    assert retired == first.key_id
    now = active.current()
    assert now.key.key_id == second.key_id != first.key_id
    assert now.valid_from == rfc3339(second.created_at)


def test_a_broken_ring_keeps_the_loaded_key_until_it_is_mended(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    first = store.create()
    active = ActiveKey(store)
    assert active.current().key.key_id == first.key_id
    ring = tmp_path / KEYRING_FILE
    good = ring.read_bytes()
    ring.write_bytes(b"active = [not toml")
    assert active.current().key.key_id == first.key_id
    ring.write_bytes(good)
    second, _ = store.rotate()
    assert active.current().key.key_id == second.key_id


def test_without_a_usable_key_it_refuses(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="no usable active key"):
        ActiveKey(KeyStore(tmp_path)).current()
