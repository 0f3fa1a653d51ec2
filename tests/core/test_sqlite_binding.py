"""The identity adapters change nothing that is bound or stored, and are found first."""

from __future__ import annotations

import sqlite3

import pytest

from rng_service.audit import spill  # noqa: F401  (registers at import, as the audit does)
from rng_service.core import sqlite_binding
from rng_service.storage import sqlite as storage_sqlite  # noqa: F401  (the same, as serve does)


class _Blob(bytes):
    """A bytes subclass, which the exact-type adapter does not match."""


def test_registered_for_exactly_bytes_and_none() -> None:
    sqlite_binding.bind_as_they_are()
    adapters = sqlite3.adapters
    assert adapters[(bytes, sqlite3.PrepareProtocol)] is bytes
    assert adapters[(type(None), sqlite3.PrepareProtocol)](None) is None
    assert (bytearray, sqlite3.PrepareProtocol) not in adapters


@pytest.mark.parametrize("value", [b"", b"\x00\xffab", None, bytearray(b"xy")])
def test_bound_and_stored_unchanged(value: bytes | bytearray | None) -> None:
    sqlite_binding.bind_as_they_are()
    sqlite_binding.bind_as_they_are()  # idempotent
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (v)")
    con.execute("INSERT INTO t VALUES (?)", (value,))
    stored, kind = con.execute("SELECT v, typeof(v) FROM t").fetchone()
    if value is None:
        assert (stored, kind) == (None, "null")
    else:
        assert (stored, kind) == (bytes(value), "blob")
        assert type(stored) is bytes


def test_a_subclass_is_bound_as_before() -> None:
    """The adapters key on the exact type: a subclass takes sqlite3's own path, as a blob."""
    sqlite_binding.bind_as_they_are()
    con = sqlite3.connect(":memory:")
    assert con.execute("SELECT ?, typeof(?)", (_Blob(b"x"), _Blob(b"x"))).fetchone() == (
        b"x",
        "blob",
    )
