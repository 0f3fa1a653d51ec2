"""The direct updates of a labelled series (``api/series.py``) count what prometheus_client's
public ``inc`` and ``observe`` count: the same samples, bucket by bucket, amount by amount."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from rng_service.api.series import incrementer, observer

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
