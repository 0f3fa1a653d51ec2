"""sqlite3 binds our blobs and NULLs as they are, without its adaptation protocol.

Python's sqlite3 binds an exact int, float, str or bytearray as it is, but runs the adaptation
protocol for every other parameter, bytes and None included: a failed look-up in the adapters,
then of ``__adapt__`` and ``__conform__`` (about 2,900 instructions each, counted; a transition
binds some thirteen blobs and NULLs, a snap record's audit about a dozen). An adapter registered
for exactly these two types is found at the first look-up and returns the very value
(``bytes(b)`` is ``b`` for an exact bytes), so what is bound, and stored, is unchanged; a
subclass of either is still adapted as before.

The registration is process-wide, and both the service's storage and the audit's scratch store
(which do not import each other) ask for it here, so there is one place that says what it does.
"""

from __future__ import annotations

import sqlite3


def _same(value: None) -> None:
    return value


def bind_as_they_are() -> None:
    """Register the identity adapters for exactly ``bytes`` and ``None``; idempotent."""
    sqlite3.register_adapter(bytes, bytes)
    sqlite3.register_adapter(type(None), _same)
