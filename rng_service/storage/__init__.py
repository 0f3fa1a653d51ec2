"""Databases behind the service's storage ports, chosen by configuration.

>>> backend_of("postgresql://fairshoe@db:5432/fairshoe")
'postgresql'
>>> backend_of("sqlite:///var/lib/fairshoe/fairshoe.db"), backend_of("var/fairshoe.db")
('sqlite', 'sqlite')

:func:`open_storage` opens either; each backend module is imported only when it is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from rng_service.core import config
from rng_service.core.config import ConfigError
from rng_service.service.ports import Storage
from rng_service.storage.schema import Dialect

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
SQLITE_SCHEME: Final = "sqlite://"


def backend_of(url_or_path: str | Path) -> Dialect:
    """Which database ``url_or_path`` names: a ``postgresql://`` (or ``postgres://``) URL, else
    SQLite (``sqlite:///absolute/path`` or a plain path). Other URL schemes are refused."""
    text = str(url_or_path)
    if text.startswith(POSTGRES_SCHEMES):
        return "postgresql"
    scheme, sep, _ = text.partition("://")
    if sep and scheme != "sqlite" and scheme.isalnum():
        raise ConfigError(f"unsupported database URL scheme {scheme!r} "
                          "(use postgresql://..., sqlite:///path or a file path)")
    return "sqlite"


def sqlite_path(url_or_path: str | Path) -> Path:
    """The file of a SQLite URL or path (``sqlite:///abs/file.db`` is ``/abs/file.db``)."""
    text = str(url_or_path)
    return Path(text.removeprefix(SQLITE_SCHEME)) if text.startswith(SQLITE_SCHEME) else Path(text)


def open_storage(url_or_path: str | Path | None = None, *, read_only: bool = False,
                 pool_size: int | None = None) -> Storage:
    """Open (and migrate) the database named by ``url_or_path``, by default the configured one
    (``FAIRSHOE_DATABASE_URL``, else ``FAIRSHOE_DATABASE``, else ``<data dir>/fairshoe.db``).

    ``read_only``: an existing database with this code's schema, for snapshots only (nothing
    created, migrated or written). ``pool_size``: PostgreSQL's most connections at once (a
    server passes its worker count); SQLite has one connection per thread."""
    target = config.database_url() if url_or_path is None else url_or_path
    if backend_of(target) == "postgresql":
        from rng_service.storage.postgres import PostgresStorage  # noqa: PLC0415  (psycopg)

        if pool_size is None:
            return PostgresStorage(str(target), read_only=read_only)
        return PostgresStorage(str(target), read_only=read_only, max_size=pool_size)
    from rng_service.storage.sqlite import SqliteStorage  # noqa: PLC0415

    return SqliteStorage(sqlite_path(target), read_only=read_only)


def describe(url_or_path: str | Path) -> str:
    """The database named by ``url_or_path`` as logs and messages show it: a path, or a URL
    without its password."""
    text = str(url_or_path)
    if backend_of(text) == "sqlite":
        return str(sqlite_path(text))
    parts = urlsplit(text)
    if parts.password is None:
        return text
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))

#: what is meant for use outside this package: the functions above and the PostgreSQL driver's
#: module (its errors); the other modules (known, schema, sql, sqlite) are its internals
__all__ = ["backend_of", "describe", "open_storage", "postgres", "sqlite_path"]
