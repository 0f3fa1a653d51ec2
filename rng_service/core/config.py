"""Where the service keeps its files, read from the environment at call time.

* ``FAIRSHOE_DATA_DIR``: the data directory, default ``./var`` (relative to the working directory).
* ``<data dir>/keys``: key material (signing keys, the seed-vault key), directory mode 0700.
* ``FAIRSHOE_SEED_KEY``: the seed vault's AES-256 key as 64 hex digits. Without it the vault uses
  ``<data dir>/keys/seed-vault.key``, generated on first run (a dev key; production sets the env).
* ``FAIRSHOE_DATABASE``: the SQLite database file, default ``<data dir>/fairshoe.db``.
* ``FAIRSHOE_DATABASE_URL``: the database to use, overriding ``FAIRSHOE_DATABASE``: a
  ``postgresql://user@host:port/db`` URL (several replicas share it), or ``sqlite:///path`` or a
  plain file path (SQLite, the embedded default).
* ``FAIRSHOE_ENV``: ``production`` refuses everything meant for tests (e.g. stacked shoes).
* ``FAIRSHOE_TEST_SHOES``: ``1`` lets a service deal from a shoe source that is not the OS CSPRNG
  (test code stacks cards that way); refused outright when ``FAIRSHOE_ENV`` is ``production``.
* ``FAIRSHOE_TEST_SELF_TEST``: ``1`` lets test code point the RNG self-test at known answers of
  its own (to make it fail in a running server); refused outright in production too.
* ``FAIRSHOE_LOG_ORIGIN``: the base of the transparency logs' origins (each operator's log is
  ``<base>/<operator>``), default ``rng_service.log.DEFAULT_ORIGIN``.
* ``FAIRSHOE_WITNESSES``: the witnesses (C2SP tlog-witness) each new checkpoint is submitted to,
  comma-separated ``<submission prefix URL> <cosignature/v1 vkey>`` entries, each for every
  operator's log, or ``operator=<id> <URL> <vkey>`` for that operator's only; none by default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rng_service.core.errors import ErrorKind, FairshoeError

DATA_DIR_ENV: Final = "FAIRSHOE_DATA_DIR"
SEED_KEY_ENV: Final = "FAIRSHOE_SEED_KEY"
DEFAULT_DATA_DIR: Final = "var"
KEYS_SUBDIR: Final = "keys"
SEED_KEY_FILE: Final = "seed-vault.key"
DATABASE_ENV: Final = "FAIRSHOE_DATABASE"
DATABASE_FILE: Final = "fairshoe.db"
DATABASE_URL_ENV: Final = "FAIRSHOE_DATABASE_URL"
ENVIRONMENT_ENV: Final = "FAIRSHOE_ENV"
PRODUCTION: Final = "production"
TEST_SHOES_ENV: Final = "FAIRSHOE_TEST_SHOES"
TEST_SELF_TEST_ENV: Final = "FAIRSHOE_TEST_SELF_TEST"
LOG_ORIGIN_ENV: Final = "FAIRSHOE_LOG_ORIGIN"
WITNESSES_ENV: Final = "FAIRSHOE_WITNESSES"
_OPERATOR_SCOPE: Final = "operator="  # an entry of FAIRSHOE_WITNESSES for one operator's log


class ConfigError(FairshoeError):
    """A configuration that must not run (e.g. a test-only switch in production): input of the
    operator's, so a command that meets it prints one line and exits 2 like any other."""

    kind = ErrorKind.INVALID_INPUT
    reason_code = "CONFIGURATION"


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The data directory: ``FAIRSHOE_DATA_DIR``, default ``./var``."""
    return Path(_env(environ).get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def keys_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where key material lives: ``<data dir>/keys``."""
    return data_dir(environ) / KEYS_SUBDIR


def seed_key_file(environ: Mapping[str, str] | None = None) -> Path:
    """The seed vault's key file, used when ``FAIRSHOE_SEED_KEY`` is not set."""
    return keys_dir(environ) / SEED_KEY_FILE


def seed_key_hex(environ: Mapping[str, str] | None = None) -> str | None:
    """The configured seed-vault key (secret: never log it), or None to use the key file."""
    value = _env(environ).get(SEED_KEY_ENV, "").strip()
    return value or None


def database_path(environ: Mapping[str, str] | None = None) -> Path:
    """The SQLite database file: ``FAIRSHOE_DATABASE``, default ``<data dir>/fairshoe.db``."""
    configured = _env(environ).get(DATABASE_ENV, "").strip()
    return Path(configured) if configured else data_dir(environ) / DATABASE_FILE


def database_url(environ: Mapping[str, str] | None = None) -> str:
    """The database to open: ``FAIRSHOE_DATABASE_URL`` if set, else the SQLite file of
    :func:`database_path` (``rng_service.storage.open_storage`` picks the backend from it)."""
    configured = _env(environ).get(DATABASE_URL_ENV, "").strip()
    return configured or str(database_path(environ))


def is_production(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``FAIRSHOE_ENV`` is ``production`` (any case, surrounding spaces ignored).

    >>> is_production({"FAIRSHOE_ENV": " Production "}), is_production({})
    (True, False)
    """
    return _env(environ).get(ENVIRONMENT_ENV, "").strip().lower() == PRODUCTION


def test_shoes_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a non-certified shoe source (stacked cards, for tests) may deal.

    Only with ``FAIRSHOE_TEST_SHOES=1``; that switch in production is a configuration error, so a
    deployment cannot enable it by accident and carry on.
    """
    return _test_switch(TEST_SHOES_ENV, environ)


def test_self_test_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether test code may replace the RNG self-test's known answers: only with
    ``FAIRSHOE_TEST_SELF_TEST=1``, a configuration error in production (as test shoes are).

    >>> test_self_test_allowed({"FAIRSHOE_TEST_SELF_TEST": "1"}), test_self_test_allowed({})
    (True, False)
    """
    return _test_switch(TEST_SELF_TEST_ENV, environ)


def _test_switch(name: str, environ: Mapping[str, str] | None) -> bool:
    wanted = _env(environ).get(name, "").strip() == "1"
    if wanted and is_production(environ):
        raise ConfigError(f"{name}=1 is refused when {ENVIRONMENT_ENV}={PRODUCTION}")
    return wanted


@dataclass(frozen=True)
class WitnessEntry:
    """One entry of ``FAIRSHOE_WITNESSES``: a witness, and the operator whose log it follows
    (None: every operator's)."""

    text: str
    operator: str | None
    url: str
    vkey: str


def witnesses(environ: Mapping[str, str] | None = None) -> list[WitnessEntry]:
    """The configured witnesses (``FAIRSHOE_WITNESSES``), comma-separated entries
    ``[operator=<id>] <submission prefix URL> <vkey>``, the URL an ``http://`` or ``https://``
    one (the operator id and the vkey are checked by their reader)."""
    text = _env(environ).get(WITNESSES_ENV, "").strip()
    entries = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        words = entry.split()
        operator = words.pop(0).removeprefix(_OPERATOR_SCOPE) \
            if words[0].startswith(_OPERATOR_SCOPE) else None
        if operator == "" or len(words) != 2 or not words[0].startswith(("http://", "https://")):
            raise ConfigError(f"{WITNESSES_ENV}: {entry[:200]!r} is not "
                              f"'[{_OPERATOR_SCOPE}<id>] <http(s) URL> <vkey>'")
        entries.append(WitnessEntry(entry, operator, words[0].rstrip("/"), words[1]))
    return entries


def log_base_origin(environ: Mapping[str, str] | None = None) -> str | None:
    """The configured base of the logs' origins (``FAIRSHOE_LOG_ORIGIN``), or None for the
    default."""
    value = _env(environ).get(LOG_ORIGIN_ENV, "").strip()
    return value or None
