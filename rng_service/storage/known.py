"""What a storage has learnt for good from committed transactions, so as not to read it again.

Only facts that no write of the service ever makes false are kept: an operator exists (operator
rows are never deleted, and every table refers to them), a leaf is in an operator's log (leaf rows
are never deleted), an account exists (account rows are never deleted either; its balance is no
such fact: :class:`Balance` is a balance a committed transaction left, which a posting may
start from only where its own write checks it, ``UPDATE ... WHERE balance``), an operator's log
at some size had some compact range (:class:`LogHead`: the log is append-only; that it is still
of that size is no such fact, and is checked by the write relying on it). A unit of work notes the
facts it saw in the database or wrote (:attr:`seen`); the storage adds them to its
:class:`Committed` only once that transaction's COMMIT has returned (a read-only snapshot sees
committed rows only), so nothing a transaction that rolls back saw or wrote is ever taken as known.
Another replica's writes are not known until a transaction here has seen them: an unknown fact is
read from the database, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Hashable
from dataclasses import dataclass
from typing import Final, NamedTuple

#: the most facts a storage keeps (a few per operator; past it, it starts over)
LIMIT: Final = 100_000


@dataclass(frozen=True, slots=True)
class LogHead:
    """An operator's log as a committed transaction left it: ``size`` leaves, whose compact
    range is ``state``. A fact no write makes false (the log is append-only: at ``size`` its
    state is this one for good); whether the log is *still* of ``size`` is not known, and is
    checked by the write that relies on it (``UPDATE ... WHERE size``)."""

    operator: str
    size: int
    state: bytes


class Balance(NamedTuple):  # a tuple: made twice a posting, cheaper than a frozen dataclass
    """An account's balance as a committed transaction left it, and the account's kind (fixed
    when it is opened). Not a fact that stays true: a posting that starts from it writes the
    account ``WHERE balance`` is this one, and reads the account when that matches no row
    (another process posted, or a transaction of the same group commit). A balance that moved
    away and back is no harm: the posting needs the current balance, which it then is."""

    key: tuple[str, str, str, str]  # operator, holder, currency, mode (as stored)
    kind: str
    balance: int


class Committed:
    """Facts seen by committed transactions of one storage; shared by its threads. Of the
    :class:`LogHead` facts, each operator's largest is kept (:meth:`log_head`); of the
    :class:`Balance` facts, each account's last added (:meth:`balance`: checked by its use)."""

    def __init__(self) -> None:
        self._known: set[Hashable] = set()
        self._heads: dict[str, LogHead] = {}
        self._balances: dict[tuple[str, str, str, str], Balance] = {}
        self._lock = threading.Lock()

    def __contains__(self, fact: Hashable) -> bool:
        return fact in self._known

    def log_head(self, operator: str) -> LogHead | None:
        """The largest state of ``operator``'s log that a committed transaction here wrote or
        read, or None."""
        return self._heads.get(operator)

    def balance(self, key: tuple[str, str, str, str]) -> Balance | None:
        """The balance of the account ``key`` as a committed transaction here left it (not
        necessarily the last one to commit: its use checks it), or None."""
        return self._balances.get(key)

    def add(self, facts: Collection[Hashable]) -> None:
        """Keep ``facts``: only once the COMMIT of the transaction that saw them returned."""
        if not facts:
            return
        with self._lock:
            if len(self._known) + len(self._balances) >= LIMIT:
                self._known = set()
                self._heads = {}
                self._balances = {}
            for fact in facts:
                if isinstance(fact, Balance):
                    self._balances[fact.key] = fact
                elif isinstance(fact, LogHead):  # transactions commit in any order: the largest
                    there = self._heads.get(fact.operator)
                    if there is None or there.size < fact.size:
                        self._heads[fact.operator] = fact
                else:
                    self._known.add(fact)
