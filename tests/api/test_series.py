"""The direct updates of a labelled series (``api/series.py``) count what prometheus_client's
public ``inc`` and ``observe`` count: the same samples, bucket by bucket, amount by amount."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from rng_service.api.series import incrementer, observer, summer, tally, timing

# every bucket bound hit exactly, between two bounds, past the last finite one, zero, a
# negative amount and NaN (which prometheus_client puts in no bucket)
AMOUNTS = (0.0, 0.005, 0.0051, 0.01, 0.3, 2.5, 10.0, 11.0, 1e9, math.inf, -0.5, math.nan)


def _samples(registry: CollectorRegistry) -> list[tuple[str, tuple[tuple[str, str], ...], str]]:
    # NaN compares unequal to itself: compared as text. A ``_created`` sample is when its child
    # was made, not what it counted (and exists only until api/metrics.py is imported, which
    # disables them: this module alone, or first on an xdist worker, sees them)
    return sorted((s.name, tuple(sorted(s.labels.items())), repr(s.value))
                  for metric in registry.collect() for s in metric.samples
                  if not s.name.endswith("_created"))


def test_an_observer_fills_the_same_buckets_and_sum_as_observe() -> None:
    public, direct = CollectorRegistry(), CollectorRegistry()
    by_observe = Histogram("t_seconds", "t", ("m",), registry=public).labels("a")
    by_observer = observer(Histogram("t_seconds", "t", ("m",), registry=direct).labels("a"))
    assert by_observer != by_observe.observe  # the direct path, not the public method
    for amount in AMOUNTS:
        by_observe.observe(amount)
        by_observer(amount)
        assert _samples(direct) == _samples(public), amount


def test_an_incrementer_counts_as_inc() -> None:
    public, direct = CollectorRegistry(), CollectorRegistry()
    counter = Counter("t", "t", ("m",), registry=public).labels("a")
    increment = incrementer(Counter("t", "t", ("m",), registry=direct).labels("a"))
    for amount in (1, 1, 0, 250, 0.5):
        counter.inc(amount)
        increment(amount)
    assert _samples(direct) == _samples(public)
    assert direct.get_sample_value("t_total", {"m": "a"}) == 252.5


class _Bare:
    """A child from a prometheus_client whose value objects are named otherwise."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def inc(self, amount: float = 1) -> None:
        self.seen.append(amount)

    def observe(self, amount: float) -> None:
        self.seen.append(-amount)


@pytest.mark.parametrize("make", [incrementer, observer])
def test_without_the_value_objects_the_public_methods_are_used(make: object) -> None:
    child = _Bare()
    make(child)(2.0)  # type: ignore[operator]
    assert child.seen == ([2.0] if make is incrementer else [-2.0])


def test_a_tally_observes_and_counts_as_observe_and_inc() -> None:
    """A call's end in one update (``tally``): the time observed, each counter added 1."""
    public, direct = CollectorRegistry(), CollectorRegistry()

    def series(registry: CollectorRegistry) -> tuple[object, list[object]]:
        seconds = Histogram("t_seconds", "t", ("m",), registry=registry).labels("a")
        counters = [Counter(f"c{i}", "c", ("m",), registry=registry).labels("a") for i in (1, 2)]
        return seconds, counters

    by_methods, by_tally = series(public), series(direct)
    ended = tally(timing(by_tally[0]), by_tally[1])
    for amount in AMOUNTS:
        by_methods[0].observe(amount)  # type: ignore[attr-defined]
        for counter in by_methods[1]:
            counter.inc()  # type: ignore[attr-defined]
        ended(amount)
        assert _samples(direct) == _samples(public), amount
    assert direct.get_sample_value("c2_total", {"m": "a"}) == len(AMOUNTS)


def test_a_summer_adds_each_amount_to_its_series_as_inc() -> None:
    public, direct = CollectorRegistry(), CollectorRegistry()
    names = ("wagers", "staked", "returned")
    by_inc = [Counter(n, n, ("m",), registry=public).labels("a") for n in names]
    add = summer([Counter(n, n, ("m",), registry=direct).labels("a") for n in names])
    for amounts in ((1, 100, 250), (2, 0, 0), (1, 10**12, 10**12 + 1), (0, 0.5, 7)):
        for counter, amount in zip(by_inc, amounts, strict=True):
            counter.inc(amount)
        add(*amounts)
        assert _samples(direct) == _samples(public), amounts
    assert direct.get_sample_value("returned_total", {"m": "a"}) == 10**12 + 258


def test_without_the_value_objects_tally_and_summer_use_the_public_methods() -> None:
    seconds, first, second = _Bare(), _Bare(), _Bare()
    tally(timing(seconds), [first, second])(2.0)
    summer([first, second])(3.0, 4.0)
    assert (seconds.seen, first.seen, second.seen) == ([-2.0], [1, 3.0], [1, 4.0])


_PROCESSES = """
import math, os, random, sys, threading
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.multiprocess import MultiProcessCollector
from rng_service.api.series import incrementer, observer, summer, tally, timing
bounds = (0.001, 0.01, 0.1, 1.0)
public_h = Histogram("p_seconds", "p", ("m",), buckets=bounds).labels("a")
direct_h = observer(Histogram("d_seconds", "d", ("m",), buckets=bounds).labels("a"))
public_c = Counter("p", "p", ("m",)).labels("a")
direct_c = incrementer(Counter("d", "d", ("m",)).labels("a"))
public_t = Histogram("pt_seconds", "p", ("m",), buckets=bounds).labels("a")
public_n = [Counter(f"pn{i}", "p", ("m",)).labels("a") for i in range(2)]
direct_t = tally(timing(Histogram("dt_seconds", "d", ("m",), buckets=bounds).labels("a")),
                 [Counter(f"dn{i}", "d", ("m",)).labels("a") for i in range(2)])
direct_s = summer([Counter(f"ds{i}", "d", ("m",)).labels("a") for i in range(2)])
public_s = [Counter(f"ps{i}", "p", ("m",)).labels("a") for i in range(2)]
amounts = (0.0, 0.001, 0.0010001, 1.0, 1.5, math.inf, -0.5, -0.0, math.nan)
def count(seed):  # a worker's threads, each updating both pairs
    rng = random.Random(seed)
    for _ in range(500):
        amount = rng.choice(amounts) if rng.random() < 0.3 else rng.uniform(-0.01, 2)
        public_h.observe(amount); direct_h(amount); public_c.inc(1); direct_c(1)
        public_t.observe(amount); public_n[0].inc(); public_n[1].inc(); direct_t(amount)
        public_s[0].inc(2); public_s[1].inc(5); direct_s(2, 5)
pids = []
for worker in range(3):  # children made before the fork, as a server's are
    pid = os.fork()
    if pid == 0:
        threads = [threading.Thread(target=count, args=(worker * 10 + i,)) for i in range(3)]
        for t in threads: t.start()
        for t in threads: t.join()
        os._exit(0)
    pids.append(pid)
for pid in pids:
    assert os.waitpid(pid, 0)[1] == 0
registry = CollectorRegistry()
MultiProcessCollector(registry)
for metric in registry.collect():
    for s in metric.samples:
        print(s.name, sorted(s.labels.items()), repr(s.value))
"""


@pytest.mark.processes  # it starts a process (tests/support/tiers.py)
def test_across_processes_the_series_add_up_as_the_public_methods(tmp_path: object) -> None:
    """prometheus_client's multiprocess mode (``serve --processes N``): workers forked after
    the children were made, several threads each, count into the files exactly what the public
    methods count, bucket by bucket, the sum and +Inf included."""
    out = subprocess.run([sys.executable, "-c", _PROCESSES], capture_output=True, text=True,
                         check=True, env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
                         ).stdout.splitlines()
    public = sorted(line[1:] for line in out if line.startswith("p"))
    direct = sorted(line[1:] for line in out if line.startswith("d"))
    # each histogram's 5 buckets, count and sum, and the counters (one, the tally's two and
    # the summer's two)
    assert public == direct and len(public) == 7 + 1 + 7 + 2 + 2
    assert "_total [('m', 'a')] 4500.0" in public
    assert "s1_total [('m', 'a')] 22500.0" in public


def test_a_value_of_this_process_is_added_to_under_its_own_lock() -> None:
    """This process's values (not the multiprocess mode's) are added to without their ``inc``,
    under the very lock ``inc`` and a scrape take: an addition waits while it is held, and
    threads adding at once lose nothing."""
    import threading  # noqa: PLC0415

    counter = Counter("t", "t", ("m",), registry=CollectorRegistry()).labels("a")
    value = counter._value
    increment = incrementer(counter)
    assert increment != value.inc  # the direct path
    with value._lock:
        adding = threading.Thread(target=increment, args=(2.0,))
        adding.start()
        adding.join(0.2)
        assert adding.is_alive() and value._value == 0.0  # waits for the lock (held here)
    adding.join()
    assert value.get() == 2.0
    workers = [threading.Thread(target=lambda: [increment(1) for _ in range(20_000)])
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert value.get() == 80_002.0
