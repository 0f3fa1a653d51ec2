"""``collect rounds`` over worker processes: batches of whole shoes, logged in a fixed order.

A collection is cut into batches of about ``BATCH_ROUNDS`` rounds. A worker plays a batch with
:func:`rng_service.records.schema.collect_rounds`, the one collection loop (shoes committed,
rounds played and signed, shoes revealed), into a :class:`~rng_service.records.logged.BatchWriter`:
it signs every envelope and writes its file, and returns the batch's leaves. The parent appends
each batch's leaves to the collection's log in the order the batches were planned, whichever
worker finishes first, so the log is the batches' envelopes one batch after another, each shoe's
commitment, rounds and reveal in order inside its batch. The workers' files are not synced one
by one: ``LoggedRecordWriter.finish`` makes the whole collection durable, then writes ``log/``
(see :mod:`rng_service.records.logged`).

Shoes are never split between batches: a batch plays whole shoes (a cut-card shoe to its cut
card) until it has its rounds. For a one-round shoe that is exactly its rounds; a cut-card batch
may play a few more. The plan therefore hands out whole-shoe batches while even their most
rounds (the batch and the rest of the longest shoe) cannot pass the count asked for, and the
last few rounds as one batch of exact size, whose last shoe is closed early as a single
collection's last shoe always was: the collection holds exactly the rounds asked for, and at
most one shoe closed early.

Workers are forked (they inherit the signing key and the analysed strategy; nothing secret is
pickled); where ``fork`` is unavailable, or with one worker, the batches run in this process.
They end with the collection's process (:func:`rng_service.core.pools.worker_pool`): killed, it
leaves no worker writing on. A worker ends within moments of its death, and looks before each
file it begins: after the death, each worker writes at most the one file it had in hand (which
its end may cut short, as the kill may cut the process's own).
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.pool import AsyncResult
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Final, Protocol

from game_math.rules import Rules
from rng_service.core.cpus import available_cores
from rng_service.core.pools import forked, result_of, stop_if_orphaned, worker_pool
from rng_service.crypto.keys import SigningKey
from rng_service.records.logged import BatchWriter, LoggedRecordWriter
from rng_service.records.schema import INSURANCE_RATE, CollectStats, Player, collect_rounds

#: rounds a batch plays: enough that a batch's pickled leaves and the hand-off cost nothing
#: beside its signatures, few enough that the exact tail is short
BATCH_ROUNDS: Final = 200
#: fewest cards a round deals (two to a hand, one to the dealer), bounding a cut-card shoe's rounds
_FEWEST_CARDS_PER_ROUND: Final = 3


@dataclass(frozen=True)
class Batch:
    """One share of a collection: its rounds and whether its last shoe is played to its cut."""

    rounds: int
    whole_shoes: bool


@dataclass(frozen=True)
class BatchResult:
    """What a batch wrote: its leaves (path, leaf hash) in order, and its totals."""

    leaves: list[tuple[str, bytes]]
    stats: CollectStats


@dataclass(frozen=True)
class _Collector:
    """Everything a batch needs besides its size (a worker process's one instance)."""

    rules: Rules
    player: Player
    key: SigningKey
    out_dir: Path
    client_seed: bytes
    insurance_rate: float

    def writer(self) -> BatchWriter:
        return BatchWriter(self.out_dir, self.key, rules_written=[self.rules.digest()])

    def play(self, writer: BatchWriter, batch: Batch) -> BatchResult:
        stats = collect_rounds(self.rules, batch.rounds, writer, self.player,
                               client_seed=self.client_seed, insurance_rate=self.insurance_rate,
                               whole_shoes=batch.whole_shoes)
        return BatchResult(writer.drain(), stats)


_WORKER: tuple[_Collector, BatchWriter] | None = None


def _init_worker(collector: _Collector) -> None:
    global _WORKER  # noqa: PLW0603  (one collector and writer per worker process)
    _WORKER = (collector, collector.writer())


def _play_batch(batch: Batch) -> BatchResult:
    assert _WORKER is not None, "worker not initialised"
    stop_if_orphaned()  # no batch begun for a collection whose process has died (nor a file)
    collector, writer = _WORKER
    return collector.play(writer, batch)


class _Pending(Protocol):
    def get(self) -> BatchResult: ...


class _Done:
    """A batch already played in this process (the one-worker path's pending result)."""

    def __init__(self, result: BatchResult) -> None:
        self._result = result

    def get(self) -> BatchResult:
        return self._result


class _Awaited:
    """A batch a worker plays: its result, or WorkerDied if a worker ends before it comes (the
    pool would replace the worker but lose the batch, and a plain ``get`` wait for ever)."""

    def __init__(self, result: AsyncResult[BatchResult],
                 processes: tuple[BaseProcess, ...]) -> None:
        self._result = result
        self._processes = processes

    def get(self) -> BatchResult:
        return result_of(self._result, self._processes, "the collection")


def longest_shoe(rules: Rules) -> int:
    """The most rounds one shoe of ``rules`` can deal: 1 without a cut card."""
    cut = rules.cut_position
    return 1 if cut is None else cut // _FEWEST_CARDS_PER_ROUND + 1


def plan_batches(count: int, done: int, in_flight: int, batch_rounds: int,
                 overshoot: int) -> Batch | None:
    """The next batch to hand out, or None to wait for those in flight.

    ``done``: rounds of the batches finished; ``in_flight``: the most rounds the batches still
    playing may add; ``overshoot``: the most rounds one shoe deals. A whole-shoe batch goes out
    while even its most rounds (its size and the rest of a shoe) leave the count unpassed; the
    last few rounds, once nothing is in flight, go out as an exact batch.

    >>> plan_batches(1000, 0, 0, 200, 1)  # one-round shoes: whole shoes are exact
    Batch(rounds=200, whole_shoes=True)
    >>> plan_batches(1000, 0, 900, 200, 1)
    Batch(rounds=100, whole_shoes=True)
    >>> plan_batches(1000, 0, 960, 200, 53) is None  # cut-card shoes: wait for those in flight
    True
    >>> plan_batches(1000, 960, 0, 200, 53)  # then exactly what is left
    Batch(rounds=40, whole_shoes=False)
    """
    left = count - done - in_flight
    extra = overshoot - 1  # rounds a whole-shoe batch may play beyond its size
    if left - extra >= 1:
        return Batch(min(batch_rounds, left - extra), whole_shoes=True)
    if in_flight or left <= 0:
        return None
    return Batch(left, whole_shoes=False)


def collect_in_workers(
    rules: Rules,
    count: int,
    writer: LoggedRecordWriter,
    player: Player,
    *,
    client_seed: bytes = b"",
    insurance_rate: float = INSURANCE_RATE,
    workers: int | None = None,
    batch_rounds: int = BATCH_ROUNDS,
    on_rounds: Callable[[int], object] | None = None,
) -> CollectStats:
    """``count`` rounds as :func:`~rng_service.records.schema.collect_rounds` collects them,
    played in batches by ``workers`` processes (default: the CPU count) and logged by
    ``writer`` in plan order (see the module docstring). ``on_rounds(n)``: a batch of ``n``
    rounds is logged."""
    if count < 1:
        raise ValueError(f"collect at least 1 round, got {count}")
    workers = workers or available_cores()
    writer.write_rules(rules)
    collector = _Collector(rules, player, writer.key, writer.out_dir, client_seed, insurance_rate)
    total = CollectStats()
    for result in _results(collector, count, workers, batch_rounds):
        writer.add_leaves(result.leaves)
        for name in ("rounds", "shoes", "void", "staked", "returned"):
            setattr(total, name, getattr(total, name) + getattr(result.stats, name))
        if on_rounds is not None:
            on_rounds(result.stats.rounds)
    return total


def _results(collector: _Collector, count: int, workers: int,
             batch_rounds: int) -> Iterator[BatchResult]:
    """Each batch's result in plan order, the batches played by ``workers`` processes."""
    overshoot = longest_shoe(collector.rules)
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        local = collector.writer()
        yield from _scheduled(count, batch_rounds, overshoot, 1,
                              lambda batch: _Done(collector.play(local, batch)))
        return
    with worker_pool(workers, _init_worker, (collector,)) as pool:
        processes = forked(pool)
        yield from _scheduled(count, batch_rounds, overshoot, 2 * workers,
                              lambda batch: _Awaited(pool.apply_async(_play_batch, (batch,)),
                                                     processes))


def _scheduled(count: int, batch_rounds: int, overshoot: int, depth: int,
               submit: Callable[[Batch], _Pending]) -> Iterator[BatchResult]:
    """Hands out batches by :func:`plan_batches`, at most ``depth`` at once, and yields their
    results in the order handed out."""
    in_flight: deque[tuple[_Pending, int]] = deque()
    done = 0
    while True:
        while len(in_flight) < depth:
            most = sum(m for _, m in in_flight)
            batch = plan_batches(count, done, most, batch_rounds, overshoot)
            if batch is None:
                break
            in_flight.append((submit(batch),
                              batch.rounds + (overshoot - 1 if batch.whole_shoes else 0)))
        if not in_flight:
            return
        pending, _ = in_flight.popleft()
        result = pending.get()
        done += result.stats.rounds
        yield result
