"""Unrevealed seeds, encrypted at rest with AES-256-GCM.

A sealed seed is ``version (1 byte, 0x01) || nonce (12 random bytes) || ciphertext || tag (16)``.
The associated data is ``b"fairshoe/seed-vault/v1\\0" || version || shoe id (UTF-8)``, so a
ciphertext only opens for the shoe it was sealed for: swapping blobs between shoes fails
authentication like any other tampering. Each seal draws a fresh random 96-bit nonce, which NIST
SP 800-38D (8.3) allows for up to 2**32 seals under one key: rotate the key well before that.

The key comes from :mod:`rng_service.core.config`: ``FAIRSHOE_SEED_KEY`` (64 hex digits), else a dev
key
file generated on first run with mode 0600. Errors name the shoe and the problem, never the seed or
the key.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final, NoReturn

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from rng_service.core import config
from rng_service.core.errors import ErrorFamily, IntegrityFailure, Unavailable

KEY_BYTES: Final = 32
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
VERSION: Final = b"\x01"
AAD_DOMAIN: Final = b"fairshoe/seed-vault/v1\0"
KEY_FILE_MODE: Final = 0o600
KEY_DIR_MODE: Final = 0o700

_log = logging.getLogger(__name__)


class SeedVaultError(ErrorFamily):
    """A seed that cannot be sealed or opened, or a bad vault key. Never carries secrets."""


class SealedSeedRejected(SeedVaultError, IntegrityFailure):
    """A sealed seed that is truncated, of an unknown version, or fails authentication."""

    reason_code = "SEALED_SEED_REJECTED"


class VaultKeyError(SeedVaultError, Unavailable):
    """The configured vault key is unusable: no seed can be sealed or opened until it is fixed."""

    reason_code = "SEED_VAULT_KEY"


class SeedVault:
    """Seals and opens shoe seeds under one AES-256-GCM key."""

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise VaultKeyError(f"the seed-vault key must be {KEY_BYTES} bytes, got {len(key)}")
        self._aead = AESGCM(key)

    def __repr__(self) -> str:
        return "<SeedVault AES-256-GCM>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a SeedVault holds a secret key and is not pickled")

    @classmethod
    def from_config(cls, environ: Mapping[str, str] | None = None) -> SeedVault:
        """The vault with the configured key (``FAIRSHOE_SEED_KEY``, else the key file)."""
        return cls(load_key(environ))

    @staticmethod
    def _aad(shoe_id: str) -> bytes:
        return AAD_DOMAIN + VERSION + shoe_id.encode("utf-8")

    def seal(self, shoe_id: str, seed: bytes) -> bytes:
        """``seed`` encrypted under the vault key, bound to ``shoe_id`` (a fresh nonce each time).
        """
        nonce = os.urandom(NONCE_BYTES)
        return VERSION + nonce + self._aead.encrypt(nonce, seed, self._aad(shoe_id))

    def open(self, shoe_id: str, blob: bytes) -> bytes:
        """The seed sealed for ``shoe_id``; :class:`SealedSeedRejected` if it was sealed for
        another shoe, altered, truncated or of an unknown version.
        """
        if len(blob) < 1 + NONCE_BYTES + TAG_BYTES:
            raise SealedSeedRejected(f"sealed seed of shoe {shoe_id!r} is truncated")
        if blob[:1] != VERSION:
            raise SealedSeedRejected(
                f"sealed seed of shoe {shoe_id!r} has unknown version {blob[0]}")
        nonce, sealed = blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, sealed, self._aad(shoe_id))
        except InvalidTag:
            # Wrong key, wrong shoe or altered bytes look the same, by design of the AEAD.
            raise SealedSeedRejected(
                f"sealed seed of shoe {shoe_id!r} failed authentication "
                "(tampered, sealed for another shoe, or under another key)"
            ) from None


def load_key(environ: Mapping[str, str] | None = None) -> bytes:
    """The vault key: from ``FAIRSHOE_SEED_KEY``, else the dev key file (created if missing)."""
    configured = config.seed_key_hex(environ)
    if configured is not None:
        return _parse_key(configured, f"${config.SEED_KEY_ENV}")
    return _load_or_create_key_file(config.seed_key_file(environ))


def _parse_key(text: str, source: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise VaultKeyError(f"{source} is not hexadecimal") from None
    if len(key) != KEY_BYTES:
        raise VaultKeyError(f"{source} must hold {KEY_BYTES * 2} hex digits, got {len(key) * 2}")
    return key


def _load_or_create_key_file(path: Path) -> bytes:
    if not path.exists():
        _create_key_file(path)
    return _read_key_file(path)


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(mode=KEY_DIR_MODE, parents=True, exist_ok=True)
    # Written whole under a temporary name, then linked into place: a concurrent starter either
    # wins the link or reads the complete key the other one linked.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES).hex() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return
    finally:
        tmp.unlink()
    _log.warning(
        "generated a development seed-vault key at %s; set %s in production",
        path,
        config.SEED_KEY_ENV,
    )


def _read_key_file(path: Path) -> bytes:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise VaultKeyError(f"{path} is readable by others (mode {mode:04o}); chmod 600 it")
    return _parse_key(path.read_bytes().decode("ascii", errors="replace"), str(path))
