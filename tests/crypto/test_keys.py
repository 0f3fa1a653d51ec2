"""Key store, key ids, export and the trusted-key loader an auditor uses."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import pickle
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from rng_service.cli import keys as keys_command
from rng_service.cli import main as cli
from rng_service.crypto.keys import (
    KeyStore,
    KeyStoreError,
    SigningKey,
    export_jwk,
    export_pem,
    jwk_to_public_key,
    key_id,
    load_signing_key,
    load_trusted_public_keys,
    public_key_jwk,
)
from rng_service.crypto.signing import sign_payload, verify_envelope

# RFC 8032 section 7.1, test 1; RFC 8037 appendix A.2 gives this public key as a JWK.
RFC8032_SECRET = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "keys")


@pytest.fixture
def umask_zero() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


# --- ids and the signing key -------------------------------------------------------------------


def test_key_id_is_the_documented_hash_of_the_raw_public_key() -> None:
    public = Ed25519PrivateKey.from_private_bytes(RFC8032_SECRET).public_key()
    raw = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    assert key_id(public) == "ed25519:" + hashlib.sha256(raw).hexdigest()[:32]


def test_jwk_matches_rfc8037_example() -> None:
    public = Ed25519PrivateKey.from_private_bytes(RFC8032_SECRET).public_key()
    jwk = public_key_jwk(public)
    assert jwk["kty"] == "OKP"
    assert jwk["crv"] == "Ed25519"
    assert jwk["x"] == RFC8037_X
    assert jwk["kid"] == key_id(public)


def test_signing_key_never_shows_private_material() -> None:
    private = Ed25519PrivateKey.from_private_bytes(RFC8032_SECRET)
    key = SigningKey(private)
    secret_forms = [
        RFC8032_SECRET.hex(),
        base64.b64encode(RFC8032_SECRET).decode(),
        base64.urlsafe_b64encode(RFC8032_SECRET).decode().rstrip("="),
        key._private_pem().decode().splitlines()[1][:20],
    ]
    for shown in (repr(key), str(key), f"{key}", f"{key!r}"):
        assert key.key_id in shown
        for secret in secret_forms:
            assert secret not in shown
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(key)


# --- the store ---------------------------------------------------------------------------------


def test_create_writes_private_0600_public_0644_dir_0700(store: KeyStore, umask_zero: None) -> None:
    info = store.create()
    assert mode_of(store.root) == 0o700
    assert mode_of(store.private_path(info.key_id)) == 0o600
    assert mode_of(store.public_path(info.key_id)) == 0o644
    assert store.active_key_id() == info.key_id
    assert not [p for p in store.root.iterdir() if p.name.endswith(".tmp")]


def test_existing_loose_directory_is_tightened(store: KeyStore) -> None:
    store.root.mkdir(mode=0o755)
    os.chmod(store.root, 0o755)
    store.create()
    assert mode_of(store.root) == 0o700


def test_private_key_file_is_pkcs8_pem_of_the_key(store: KeyStore) -> None:
    info = store.create()
    private = serialization.load_pem_private_key(
        store.private_path(info.key_id).read_bytes(), password=None
    )
    assert isinstance(private, Ed25519PrivateKey)
    assert key_id(private.public_key()) == info.key_id


def test_create_refuses_when_a_key_is_active_unless_forced(store: KeyStore) -> None:
    first = store.create()
    with pytest.raises(KeyStoreError, match="already exists"):
        store.create()
    second = store.create(force=True)
    assert store.active_key_id() == second.key_id
    assert {k.key_id: k.status for k in store.list_keys()} == {
        first.key_id: "retired",
        second.key_id: "active",
    }


def test_rotate_keeps_old_keys_verifiable(store: KeyStore) -> None:
    store.create()
    old_key = store.load_signing_key()
    old_envelope = sign_payload({"schema": "test/v1", "n": 1}, old_key)

    new_info, retired = store.rotate()
    assert retired == old_key.key_id
    assert store.load_signing_key().key_id == new_info.key_id != old_key.key_id
    infos = {k.key_id: k for k in store.list_keys()}
    assert infos[old_key.key_id].status == "retired"
    assert infos[old_key.key_id].retired_at is not None
    assert infos[new_info.key_id].retired_at is None

    trusted = store.public_keys()
    assert set(trusted) == {old_key.key_id, new_info.key_id}
    assert verify_envelope(old_envelope, trusted) == {"schema": "test/v1", "n": 1}
    # The retired private key is kept too, readable by id.
    assert store.load_signing_key(old_key.key_id).key_id == old_key.key_id


def test_rotate_without_a_store_fails_and_creates_nothing(store: KeyStore) -> None:
    with pytest.raises(KeyStoreError, match="keys create"):
        store.rotate()
    assert not store.root.exists()


def test_load_signing_key_uses_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRSHOE_DATA_DIR", str(tmp_path / "data"))
    info = KeyStore(tmp_path / "data" / "keys").create()
    assert load_signing_key().key_id == info.key_id


def test_load_without_active_key_says_what_to_do(store: KeyStore) -> None:
    with pytest.raises(KeyStoreError, match="fairshoe keys create"):
        store.load_signing_key()


def test_malformed_key_ring_is_reported(store: KeyStore) -> None:
    store.create()
    (store.root / "keyring.toml").write_text('active = "x"\n[[keys]]\nkey_id = 7\n')
    with pytest.raises(KeyStoreError, match="is malformed"):
        store.list_keys()


def test_private_key_readable_by_others_is_refused(store: KeyStore) -> None:
    info = store.create()
    os.chmod(store.private_path(info.key_id), 0o644)
    with pytest.raises(KeyStoreError, match="mode 0644"):
        store.load_signing_key()


def test_private_key_file_holding_another_key_is_refused(store: KeyStore) -> None:
    first = store.create()
    second = store.create(force=True)
    store.private_path(second.key_id).write_bytes(store.private_path(first.key_id).read_bytes())
    with pytest.raises(KeyStoreError, match=f"holds key {first.key_id}, not {second.key_id}"):
        store.load_signing_key()


def test_unreadable_private_key_error_does_not_echo_the_file(store: KeyStore) -> None:
    info = store.create()
    path = store.private_path(info.key_id)
    pem = path.read_text()
    body = pem.splitlines()[1]
    path.write_text(pem.replace(body, body[:-8]))  # still base64, but truncated DER
    with pytest.raises(KeyStoreError, match="not an unencrypted PEM key") as caught:
        store.load_signing_key()
    assert body[:12] not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


# --- export and the trusted loader -------------------------------------------------------------


@pytest.fixture
def rotated(store: KeyStore) -> dict[str, Ed25519PublicKey]:
    store.create()
    store.rotate()
    return store.public_keys()


def test_pem_set_round_trips(tmp_path: Path, rotated: dict[str, Ed25519PublicKey]) -> None:
    path = tmp_path / "trusted.pem"
    path.write_text(export_pem(rotated))
    loaded = load_trusted_public_keys(path)
    assert set(loaded) == set(rotated)
    for kid, key in loaded.items():
        assert key.public_bytes_raw() == rotated[kid].public_bytes_raw()


def test_jwk_set_round_trips(tmp_path: Path, rotated: dict[str, Ed25519PublicKey]) -> None:
    path = tmp_path / "trusted.jwks"
    path.write_text(export_jwk(rotated))
    doc = json.loads(path.read_text())
    assert sorted(k["kid"] for k in doc["keys"]) == sorted(rotated)
    loaded = load_trusted_public_keys(path)
    assert {k: v.public_bytes_raw() for k, v in loaded.items()} == {
        k: v.public_bytes_raw() for k, v in rotated.items()
    }


def test_single_jwk_round_trips(tmp_path: Path, rotated: dict[str, Ed25519PublicKey]) -> None:
    kid = sorted(rotated)[0]
    path = tmp_path / "one.jwk"
    path.write_text(export_jwk({kid: rotated[kid]}, as_set=False))
    assert "keys" not in json.loads(path.read_text())
    assert list(load_trusted_public_keys(path)) == [kid]


def test_directory_of_mixed_files(tmp_path: Path, rotated: dict[str, Ed25519PublicKey]) -> None:
    first, second = sorted(rotated)
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "a.pem").write_text(export_pem({first: rotated[first]}))
    (trusted / "b.jwk").write_text(export_jwk({second: rotated[second]}, as_set=False))
    (trusted / "README.txt").write_text("not a key, not read")
    assert set(load_trusted_public_keys(trusted)) == {first, second}


def test_directory_with_a_broken_key_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"keys": [{"kty": "RSA"}]}')
    with pytest.raises(KeyStoreError, match=r"a\.json key #0: not an Ed25519 key"):
        load_trusted_public_keys(tmp_path)


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KeyStoreError, match="no key files"):
        load_trusted_public_keys(tmp_path)


def test_jwk_kid_that_lies_is_refused() -> None:
    jwk = public_key_jwk(Ed25519PrivateKey.generate().public_key())
    jwk["kid"] = key_id(Ed25519PrivateKey.generate().public_key())
    with pytest.raises(KeyStoreError, match="does not match its key"):
        jwk_to_public_key(jwk)


def test_jwk_with_non_canonical_x_is_refused() -> None:
    jwk = public_key_jwk(Ed25519PrivateKey.generate().public_key())
    jwk["x"] += "="
    with pytest.raises(KeyStoreError, match="member x"):
        jwk_to_public_key(jwk)


def test_private_keys_are_refused_as_trusted_keys(store: KeyStore, tmp_path: Path) -> None:
    info = store.create()
    with pytest.raises(KeyStoreError, match="private key"):
        load_trusted_public_keys(store.private_path(info.key_id))
    private_jwk = dict(public_key_jwk(store.public_keys()[info.key_id]), d="AAAA")
    path = tmp_path / "private.jwk"
    path.write_text(json.dumps(private_jwk))
    with pytest.raises(KeyStoreError, match="private key") as caught:
        load_trusted_public_keys(path)
    assert "AAAA" not in str(caught.value)


def test_non_ed25519_pem_is_refused(tmp_path: Path) -> None:
    ec_public = generate_private_key(SECP256R1()).public_key()
    path = tmp_path / "ec.pem"
    path.write_bytes(
        ec_public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(KeyStoreError, match="not Ed25519"):
        load_trusted_public_keys(path)


# --- the command line --------------------------------------------------------------------------


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fairshoe")
    keys_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_keys_command_is_registered() -> None:
    assert "rng_service.cli.keys" in cli.COMMAND_MODULES


def test_cli_create_rotate_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], umask_zero: None
) -> None:
    key_dir = tmp_path / "k"
    assert run(["keys", "create", "--dir", str(key_dir)]) == 0
    with pytest.raises(cli.CommandError, match="already exists"):
        run(["keys", "create", "--dir", str(key_dir)])
    assert run(["keys", "rotate", "--dir", str(key_dir)]) == 0
    store = KeyStore(key_dir)
    assert len(store.list_keys()) == 2
    for info in store.list_keys():
        assert mode_of(store.private_path(info.key_id)) == 0o600
    capsys.readouterr()

    assert run(["keys", "export", "--dir", str(key_dir), "--format", "pem"]) == 0
    pem = tmp_path / "all.pem"
    pem.write_text(capsys.readouterr().out)
    assert set(load_trusted_public_keys(pem)) == {k.key_id for k in store.list_keys()}

    out = tmp_path / "active.jwk"
    assert run(["keys", "export", "--dir", str(key_dir), "--active", "--out", str(out)]) == 0
    assert mode_of(out) == 0o644
    assert json.loads(out.read_text())["kid"] == store.active_key_id()


def test_cli_export_of_unknown_key_is_a_one_line_error(store: KeyStore) -> None:
    store.create()
    with pytest.raises(cli.CommandError, match="no key ed25519:00"):
        run(["keys", "export", "--dir", str(store.root), "--key-id", "ed25519:00"])
