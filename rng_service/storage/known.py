"""What a storage has learnt for good from committed transactions, so as not to read it again.

Only facts that no write of the service ever makes false are kept: an operator exists (operator
rows are never deleted, and every table refers to them), a leaf is in an operator's log (leaf rows
are never deleted), an account exists (account rows are never deleted either; its balance is no
such fact, and is always read). A unit of work notes the facts it saw in the database or wrote
(:attr:`seen`); the storage adds them to its :class:`Committed` only once that transaction's
COMMIT has returned (a read-only snapshot sees committed rows only), so nothing a transaction that
rolls back saw or wrote is ever taken as known. Another replica's writes are not known until a
transaction here has seen them: an unknown fact is read from the database, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Hashable
from typing import Final

#: the most facts a storage keeps (a few per operator; past it, it starts over)
LIMIT: Final = 100_000


class Committed:
    """Facts seen by committed transactions of one storage; shared by its threads."""

    def __init__(self) -> None:
        self._known: set[Hashable] = set()
        self._lock = threading.Lock()

    def __contains__(self, fact: Hashable) -> bool:
        return fact in self._known

    def add(self, facts: Collection[Hashable]) -> None:
        """Keep ``facts``: only once the COMMIT of the transaction that saw them returned."""
        if not facts:
            return
        with self._lock:
            if len(self._known) >= LIMIT:
                self._known = set()
            self._known.update(facts)
