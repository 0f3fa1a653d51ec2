"""The seed vault: AES-256-GCM bound to the shoe id, and where its key comes from."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import pytest

from rng_service.core import config
from rng_service.rng.seed_vault import SeedVault, SeedVaultError, load_key

KEY = bytes(range(32))
SEED = bytes(range(200, 232))


def test_a_sealed_seed_opens_for_its_shoe() -> None:
    vault = SeedVault(KEY)
    blob = vault.seal("shoe-a", SEED)
    assert vault.open("shoe-a", blob) == SEED
    assert SEED not in blob
    assert len(blob) == 1 + 12 + len(SEED) + 16


def test_each_seal_uses_a_fresh_nonce() -> None:
    vault = SeedVault(KEY)
    first, second = vault.seal("shoe-a", SEED), vault.seal("shoe-a", SEED)
    assert first[1:13] != second[1:13]
    assert first != second


def test_every_altered_byte_is_caught_without_leaking_the_seed() -> None:
    vault = SeedVault(KEY)
    blob = vault.seal("shoe-a", SEED)
    for index in range(len(blob)):  # version, nonce, ciphertext and tag
        altered = bytearray(blob)
        altered[index] ^= 0x01
        with pytest.raises(SeedVaultError) as caught:
            vault.open("shoe-a", bytes(altered))
        assert SEED.hex() not in str(caught.value)


def test_a_blob_cannot_be_moved_to_another_shoe() -> None:
    vault = SeedVault(KEY)
    blob = vault.seal("shoe-a", SEED)
    with pytest.raises(SeedVaultError, match="shoe-b"):
        vault.open("shoe-b", blob)


def test_another_key_cannot_open_it() -> None:
    blob = SeedVault(KEY).seal("shoe-a", SEED)
    with pytest.raises(SeedVaultError):
        SeedVault(bytes(32)).open("shoe-a", blob)


def test_truncated_blobs_are_refused() -> None:
    blob = SeedVault(KEY).seal("shoe-a", SEED)
    with pytest.raises(SeedVaultError, match="truncated"):
        SeedVault(KEY).open("shoe-a", blob[:20])


def test_keys_must_be_256_bits() -> None:
    with pytest.raises(SeedVaultError):
        SeedVault(KEY[:16])


def test_the_vault_never_shows_its_key() -> None:
    vault = SeedVault(KEY)
    assert KEY.hex() not in repr(vault)
    with pytest.raises(TypeError):
        pickle.dumps(vault)


def test_config_paths_follow_the_data_dir() -> None:
    assert config.data_dir({}) == Path("var")
    env = {"FAIRSHOE_DATA_DIR": "/srv/fairshoe"}
    assert config.keys_dir(env) == Path("/srv/fairshoe/keys")
    assert config.seed_key_file(env) == Path("/srv/fairshoe/keys/seed-vault.key")


def test_the_key_comes_from_the_environment_first(tmp_path: Path) -> None:
    env = {"FAIRSHOE_DATA_DIR": str(tmp_path), "FAIRSHOE_SEED_KEY": KEY.hex()}
    assert load_key(env) == KEY
    blob = SeedVault(KEY).seal("shoe-a", SEED)
    assert SeedVault.from_config(env).open("shoe-a", blob) == SEED
    assert not (tmp_path / "keys").exists()


@pytest.mark.parametrize("value", ["not hex at all", "ab" * 16, "ab" * 33])
def test_a_bad_environment_key_is_refused_without_echoing_it(tmp_path: Path, value: str) -> None:
    env = {"FAIRSHOE_DATA_DIR": str(tmp_path), "FAIRSHOE_SEED_KEY": value}
    with pytest.raises(SeedVaultError, match="FAIRSHOE_SEED_KEY") as caught:
        load_key(env)
    assert value not in str(caught.value)


def test_a_dev_key_file_is_made_once_with_mode_0600(tmp_path: Path) -> None:
    env = {"FAIRSHOE_DATA_DIR": str(tmp_path / "data")}
    key = load_key(env)
    path = tmp_path / "data" / "keys" / "seed-vault.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(key) == 32
    assert load_key(env) == key
    assert [p.name for p in path.parent.iterdir()] == ["seed-vault.key"]


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    env = {"FAIRSHOE_DATA_DIR": str(tmp_path)}
    load_key(env)
    path = config.seed_key_file(env)
    os.chmod(path, 0o644)
    with pytest.raises(SeedVaultError, match="chmod 600"):
        load_key(env)
