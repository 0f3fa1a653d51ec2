"""What the use cases tell an observer (metrics) once a transaction has committed.

The service layer knows the facts operations want counted: a round started, a round finished
with its final stakes and returns, a shoe opened or revealed, how long a database transaction
took. It knows them inside a transaction, though, and a transaction may still roll back, and an
idempotent retry replays a stored answer without doing anything. So the use cases collect
:class:`Event` objects while they work and hand them to the :class:`Observer` only after the
transaction committed (:class:`Pending`); a rolled-back transaction's events are dropped, and so
are those of a retry whose work ran before its stored answer was found (``discard``): a replayed
answer emits nothing. Each round's money is therefore reported
exactly once, on the transition that finishes it, from its final totals.

The observer is a Protocol implemented above (``rng_service/api/metrics.py``: Prometheus); the
service layer imports nothing of it. :class:`TimedStorage` wraps any :class:`Storage` to time its
transactions (begin to commit or rollback) for the same observer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol

from rng_service.core.frozen import quick_init
from rng_service.service.ports import Storage, UnitOfWork


@quick_init
@dataclass(frozen=True)
class WagerTotals:
    """The wagers of one kind in a finished round: how many, staked and returned (minor units)."""

    count: int
    staked: int
    returned: int


@quick_init
@dataclass(frozen=True)
class RoundStarted:
    """A round was dealt (its opening stakes are committed)."""

    game: str
    mode: str


@quick_init
@dataclass(frozen=True)
class RoundFinished:
    """A round ended (``status`` ``finished`` or ``void``) with these final totals per wager kind
    (``main``, ``split``, ``double``, ``insurance`` or a side bet's name)."""

    game: str
    mode: str
    status: str
    wagers: Mapping[str, WagerTotals] = field(default_factory=dict)


@quick_init
@dataclass(frozen=True)
class ShoeOpened:
    """A new shoe was drawn, sealed and committed."""

    game: str


@quick_init
@dataclass(frozen=True)
class ShoeRevealed:
    """A finished shoe's signed reveal was stored."""

    game: str


Event = RoundStarted | RoundFinished | ShoeOpened | ShoeRevealed


class Observer(Protocol):
    """Receives the events of committed transactions, and transaction timings."""

    def committed(self, events: Sequence[Event]) -> None:
        """``events`` happened in one transaction that has committed. Must not raise."""
        ...

    def transaction(self, kind: str, seconds: float, outcome: str) -> None:
        """A ``kind`` (``write`` or ``read``) transaction ended after ``seconds``, ``ok``
        (committed, or a snapshot read to its end) or ``error`` (rolled back by an exception).
        Must not raise."""
        ...


class NullObserver:
    """Observes nothing (the default)."""

    def committed(self, events: Sequence[Event]) -> None:
        """Nothing."""

    def transaction(self, kind: str, seconds: float, outcome: str) -> None:
        """Nothing."""


class Pending:
    """The events of one use case's transaction, delivered only if it commits, and what is to
    be done only then (keeping its state in a cache)::

        pending = Pending()
        result = idempotency.run(..., work=lambda uow, op: self._work(uow, pending))
        pending.deliver(observer)  # reached only after the commit
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.actions: list[Callable[[], None]] = []

    def add(self, event: Event) -> None:
        """Note ``event`` (a fact of the transaction in progress)."""
        self.events.append(event)

    def then(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the transaction has committed (never if it rolls back)."""
        self.actions.append(action)

    def discard(self) -> None:
        """Forget the events and actions noted so far: their transaction rolled back (an
        idempotent retry's work, whose stored answer is returned instead)."""
        self.events.clear()
        self.actions.clear()

    def deliver(self, observer: Observer) -> None:
        """Run the actions, hand the events to ``observer`` (once each) and forget both."""
        actions, self.actions = self.actions, []
        for action in actions:
            action()
        events, self.events = self.events, []
        if events:
            observer.committed(events)


class TimedStorage:
    """``storage`` with each transaction and snapshot timed for ``observer``: from before
    ``BEGIN`` to after ``COMMIT`` (or the rollback), so lock waits and the commit's fsync count."""

    def __init__(self, storage: Storage, observer: Observer) -> None:
        self.inner = storage
        self._observer = observer

    def transaction(self) -> AbstractContextManager[UnitOfWork]:
        """The inner storage's write transaction, timed as ``write``."""
        return _Timed(self._observer, "write", self.inner.transaction)

    def snapshot(self) -> AbstractContextManager[UnitOfWork]:
        """The inner storage's snapshot, timed as ``read``."""
        return _Timed(self._observer, "read", self.inner.snapshot)

    def close(self) -> None:
        """Closes the inner storage."""
        self.inner.close()

    def ping(self, timeout: float = 2.0) -> None:
        """The inner storage's health check (not timed: it is no transaction)."""
        self.inner.ping(timeout)

    def describe(self) -> str:
        """What the logs say about the inner storage."""
        return self.inner.describe()

    def integrate_log(self, operator: str | None = None) -> int:
        """The inner storage's (its transactions are its own, not timed here)."""
        return self.inner.integrate_log(operator)

class _Opener(Protocol):
    def __call__(self) -> AbstractContextManager[UnitOfWork]: ...


class _Timed:
    """One transaction ``open_()`` opens, timed for ``observer`` as ``kind`` from before it is
    opened to after it has ended: ``ok`` if it ended without an exception (or its storage
    suppressed it), ``error`` otherwise. A class, not a ``contextmanager`` generator: every
    transaction and snapshot of a served call enters one."""

    __slots__ = ("_kind", "_observer", "_open", "_opened", "_started")

    def __init__(self, observer: Observer, kind: str, open_: _Opener) -> None:
        self._observer = observer
        self._kind = kind
        self._open = open_
        self._opened: AbstractContextManager[UnitOfWork] | None = None
        self._started = 0.0

    def __enter__(self) -> UnitOfWork:
        self._started = time.perf_counter()
        try:
            self._opened = self._open()
            return self._opened.__enter__()
        except BaseException:
            self._ended("error")
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> bool | None:
        assert self._opened is not None
        try:
            suppressed = self._opened.__exit__(exc_type, exc, traceback)
        except BaseException:
            self._ended("error")
            raise
        # _ended's, inline: every transaction of a served call ends here
        self._observer.transaction(self._kind, time.perf_counter() - self._started,
                                   "ok" if exc_type is None or suppressed else "error")
        return suppressed

    def _ended(self, outcome: str) -> None:
        self._observer.transaction(self._kind, time.perf_counter() - self._started, outcome)
