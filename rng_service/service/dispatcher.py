"""The outbox's dispatcher: sends every due movement to its operator's wallet and records the
answer, again and again under the same transaction id, until it is acknowledged.

It runs in a thread of each server (:meth:`OutboxDispatcher.start`), woken when a round commits
a movement and otherwise every :data:`IDLE_SECONDS`; its first pass at start-up resumes whatever
the outbox holds (a SIGKILL loses nothing: every movement was durable before it was sent). Due
are the pending credits and rollbacks whose backoff has passed, and the pending debits past
their grace (their call died before recording the answer): those are taken as uncertain and
rolled back.

With several replicas, each due movement is claimed before it is sent (a compare-and-set
pushing its next attempt :data:`~.outbox.CLAIM_SECONDS` ahead): the replicas' passes spread
the movements between them, and one is sent by one replica at a time. A replica that dies
holding a claim leaves the movement pending, due again once the claim runs out, to whichever
replica passes next. Should two ever send one movement (a claim outlived by a slow call), both
send it under its one stored id, which the wallet treats as idempotent, and the compare-and-set
that records the answer lets one of them win.

A pass sends up to :data:`SENDERS` movements at once, one round's movements in their order
(a round's rollback before its credit, as written): a wallet answering in 50 ms would otherwise
take at most 20 credits a second, fewer than one server finishes rounds, and the outbox would
fall behind without bound (``bench/bench_wallet.py`` measures it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import structlog

from rng_service.core.errors import FairshoeError
from rng_service.service import outbox
from rng_service.service.operator_wallet import OperatorWallet, WalletDirectory
from rng_service.service.ports import Movement, MovementKind, Storage, utc_stamp

log = structlog.get_logger("fairshoe.wallet")

#: seconds between passes when nothing wakes the dispatcher
IDLE_SECONDS: Final = 1.0
#: movements handled per pass at most
BATCH: Final = 100
#: movements a pass sends at once (rounds, each its movements in order)
SENDERS: Final = 32


class OutboxDispatcher:
    """Sends the outbox's due movements; thread-safe, one thread of its own once started."""

    def __init__(self, storage: Storage, wallets: WalletDirectory, *,
                 idle: float = IDLE_SECONDS, senders: int = SENDERS,
                 on_pass: Callable[[int], None] | None = None,
                 clock: Callable[[], int] = time.time_ns) -> None:
        """``on_pass`` is told how many movements each pass handled (metrics, tests);
        ``clock`` (nanoseconds since the epoch) says which movements are due and when the next
        attempt of one that failed is: a test runs hours of backoff through it in a second."""
        self._storage = storage
        self._wallets = wallets
        self._idle = idle
        self._senders = max(1, senders)
        self._pool: ThreadPoolExecutor | None = None  # made by the first pass sending two
        self._pool_lock = threading.Lock()
        self._on_pass = on_pass
        self._clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Run passes in a daemon thread until :meth:`stop`; the first one at once."""
        self._thread = threading.Thread(target=self._run, name="fairshoe-outbox", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Run a pass soon (a movement was committed)."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread after its current pass."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                handled = self.run_once()
            except FairshoeError as exc:  # the database is down: the next pass tries again
                log.warning("outbox_pass_failed", error=str(exc))
                handled = 0
            except Exception:  # never let the thread die: money waits on it
                log.exception("outbox_pass_crashed")
                handled = 0
            if self._on_pass is not None:
                self._on_pass(handled)
            if handled < BATCH:  # more due at once: no wait
                self._wake.wait(self._idle)
            self._wake.clear()

    def run_once(self) -> int:
        """One pass over the due movements; how many it claimed and handled (a movement
        another replica claimed first is left to it)."""
        with self._storage.snapshot() as uow:
            due = uow.due_movements(utc_stamp(self._clock()), BATCH)
            configs = {op: uow.wallet_config(op) for op in {m.operator for m in due}}
        rounds: dict[str, tuple[OperatorWallet, list[Movement]]] = {}
        for movement in due:
            config = configs.get(movement.operator)
            if config is None or not config.seamless:
                log.error("outbox_no_wallet", operator=movement.operator,
                          transaction_id=movement.transaction_id)
                continue
            key = f"{movement.operator}/{movement.round_id}"
            rounds.setdefault(key, (self._wallets.client(config), []))[1].append(movement)
        jobs = list(rounds.values())
        if len(jobs) <= 1 or self._senders == 1:
            return sum(self._handle_round(job) for job in jobs)
        return sum(self._executor().map(self._handle_round, jobs))

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._senders,
                                                thread_name_prefix="fairshoe-outbox-send")
            return self._pool

    def _handle_round(self, job: tuple[OperatorWallet, Sequence[Movement]]) -> int:
        """Send one round's due movements in order; how many were sent."""
        wallet, movements = job
        return sum(self._handle(wallet, m) for m in movements)

    def _handle(self, wallet: OperatorWallet, m: Movement) -> bool:
        """Send ``m`` and record the answer, unless another replica has it; True if sent."""
        now = self._clock()
        with self._storage.transaction() as uow:
            if m.kind is MovementKind.DEBIT:  # its call died: the stake's fate is unknown
                # the rollback written is this replica's (claimed as written)
                claimed = outbox.cancel_debit(uow, m, "the call that sent it ended unanswered",
                                              now_ns=now)
                if claimed is not None:
                    log.warning("wallet_orphan_debit", operator=m.operator,
                                transaction_id=m.transaction_id, round_id=m.round_id)
            else:
                claimed = outbox.claim(uow, m, now_ns=now)
        if claimed is None:
            return False
        answer = outbox.send(wallet, claimed)
        with self._storage.transaction() as uow:
            outbox.record_sent(uow, claimed, answer, now_ns=self._clock())
        return True
