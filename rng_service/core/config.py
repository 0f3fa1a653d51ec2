"""Where the service keeps its files, read from the environment at call time.

* ``FAIRSHOE_DATA_DIR``: the data directory, default ``./var`` (relative to the working directory).
* ``<data dir>/keys``: key material (signing keys, the seed-vault key), directory mode 0700.
* ``FAIRSHOE_SEED_KEY``: the seed vault's AES-256 key as 64 hex digits. Without it the vault uses
  ``<data dir>/keys/seed-vault.key``, generated on first run (a dev key; production sets the env).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

DATA_DIR_ENV: Final = "FAIRSHOE_DATA_DIR"
SEED_KEY_ENV: Final = "FAIRSHOE_SEED_KEY"
DEFAULT_DATA_DIR: Final = "var"
KEYS_SUBDIR: Final = "keys"
SEED_KEY_FILE: Final = "seed-vault.key"


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    return Path(_env(environ).get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def keys_dir(environ: Mapping[str, str] | None = None) -> Path:
    return data_dir(environ) / KEYS_SUBDIR


def seed_key_file(environ: Mapping[str, str] | None = None) -> Path:
    return keys_dir(environ) / SEED_KEY_FILE


def seed_key_hex(environ: Mapping[str, str] | None = None) -> str | None:
    """The configured seed-vault key (secret: never log it), or None to use the key file."""
    value = _env(environ).get(SEED_KEY_ENV, "").strip()
    return value or None
