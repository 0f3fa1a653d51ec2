"""Whether a call may start: the drain gate a shutdown closes (:class:`Drain`) and the limits on
streams held open at once (:class:`StreamLimit`). Each server owns its own instances, made by
``api/server.py`` and handed to the interceptor; `fairshoe serve` drains the one it made."""

from __future__ import annotations

import threading

import grpc


class Drain:
    """Counts calls in flight and, once draining, refuses new ones with UNAVAILABLE (health
    excepted), so a shutdown waits for the calls it accepted instead of cancelling those gRPC
    had queued but not yet started (grpcio's ``stop(grace)`` cancels those)."""

    def __init__(self) -> None:
        # every call enters and leaves: a plain lock (taken in C), and the condition is told only
        # when the last call leaves while someone waits for that (:meth:`wait_idle`)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._waiting = 0
        self._in_flight = 0
        self.draining = False

    # enter and leave take the lock by acquire and release, not a with statement: its
    # special-method lookups and calls cost as much as the count itself, on every call

    def enter(self, method: str, context: grpc.ServicerContext) -> None:
        """Admit a call (counted until :meth:`leave`), or refuse it while draining."""
        lock = self._lock
        lock.acquire()
        try:
            if self.draining and not method.startswith("/grpc.health."):
                context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
            self._in_flight += 1
        finally:
            lock.release()

    def leave(self) -> None:
        """A call admitted by :meth:`enter` has ended."""
        lock = self._lock
        lock.acquire()
        try:
            self._in_flight -= 1
            if self._waiting and not self._in_flight:
                self._idle.notify_all()
        finally:
            lock.release()

    def begin(self) -> None:
        """From now on new calls are refused."""
        with self._lock:
            self.draining = True

    @property
    def in_flight(self) -> int:
        """How many admitted calls have not ended."""
        with self._lock:
            return self._in_flight

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no admitted call is in flight; False if ``timeout`` passed first."""
        with self._lock:
            self._waiting += 1
            try:
                return self._idle.wait_for(lambda: self._in_flight == 0, timeout)
            finally:
                self._waiting -= 1


class StreamLimit:
    """At most ``limit`` streaming calls open at once (None: no limit), and at most
    ``per_caller`` of them held by any one caller (:func:`caller_of`); more are refused with
    RESOURCE_EXHAUSTED. Each open stream holds a thread (a health watch, a reflection session,
    an export a client reads slowly), so without a limit one peer holding as many streams as
    there are threads leaves none for anyone's other calls, and without a share one caller
    holding every slot leaves none for the other callers' streams."""

    def __init__(self, limit: int | None = None, *, per_caller: int | None = None,
                 what: str = "streams", grace: float = 0.25) -> None:
        self.limit = limit
        self.per_caller = per_caller
        self.what = what
        # A client that cancels a stream and opens its next one at once is often ahead of the
        # server's handler of the first, which frees its slot a moment later: a stream that
        # would be refused waits up to ``grace`` seconds for a slot first. A waiting stream
        # holds a worker thread, so the grace is short and each caller has at most one waiting.
        self.grace = grace
        self._state = threading.Condition()
        self._open = 0
        self._held: dict[str, int] = {}
        self._waiting: set[str] = set()

    def _refusal(self, caller: str) -> str | None:
        """Why a stream of ``caller`` cannot be admitted now (None: it can)."""
        held = self._held.get(caller, 0)
        if self.per_caller is not None and held >= self.per_caller:
            return (f"this caller holds {held} {self.what}, the most one caller may "
                    f"hold of the {self.limit} this server keeps open: retry later")
        if self.limit is not None and self._open >= self.limit:
            return (f"{self.limit} {self.what} are open, the most this server keeps "
                    "at once (each holds a thread): retry later")
        return None

    def enter(self, context: grpc.ServicerContext, caller: str) -> None:
        """Admit a stream of ``caller`` (counted until :meth:`leave`), or refuse it if
        ``limit`` are open or the caller holds its share and no slot frees within the grace."""
        with self._state:
            refusal = self._refusal(caller)
            if refusal is not None and caller not in self._waiting:
                self._waiting.add(caller)
                try:
                    if self._state.wait_for(lambda: self._refusal(caller) is None, self.grace):
                        refusal = None
                finally:
                    self._waiting.discard(caller)
            if refusal is None:
                self._open += 1
                self._held[caller] = self._held.get(caller, 0) + 1
                return
            refusal = self._refusal(caller) or refusal  # the counts now, not before the wait
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)

    def leave(self, caller: str) -> None:
        """A stream of ``caller`` admitted by :meth:`enter` has ended."""
        with self._state:
            self._open -= 1
            left = self._held[caller] - 1
            if left:
                self._held[caller] = left
            else:
                del self._held[caller]  # callers gone leave nothing behind
            self._state.notify_all()

    def waiting(self, caller: str) -> bool:
        """Whether a stream of ``caller`` is waiting for a slot now."""
        with self._state:
            return caller in self._waiting

    def held(self, caller: str) -> int:
        """Streams ``caller`` holds open now."""
        with self._state:
            return self._held.get(caller, 0)


def is_probe(method: str) -> bool:
    """Health and reflection (``/grpc.*``): any peer may call them, no tenant's data behind."""
    return method.startswith("/grpc.")


def share(limit: int | None, part: int, *, least: int) -> int | None:
    """One caller's share of ``limit`` streams: ``limit // part``, at least ``least`` (and at
    most the limit)."""
    return None if limit is None else min(limit, max(least, limit // part))
