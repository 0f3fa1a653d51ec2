"""Counting into one labelled Prometheus series at the cost of its value's own update.

Every RPC counts five series and every transition a few more (``api/rpc_metrics.py``,
``api/metrics.py``'s observer). prometheus_client's ``Counter.inc`` and ``Histogram.observe``
check on each call what is settled once a labelled child exists (that it is a child, no
exemplar) and the histogram walks its buckets in Python: together about as much as the update
itself. :func:`incrementer` and :func:`observer` take a child's value objects once, the very
objects its ``inc`` and ``observe`` update (``_value``; ``_sum`` and ``_buckets``), so a series
counts exactly what the public methods would, in this process's memory or in the files of
prometheus_client's multiprocess mode alike (the value class decides where a value lives, not
the method that adds to it). A prometheus_client whose children lack those objects gets the
public methods.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Any

#: adds its argument to a series (a counter's increment, a histogram's observation)
Update = Callable[[float], None]


def incrementer(child: Any) -> Update:
    """What adds to ``child`` (a labelled ``Counter``'s child, ``counter.labels(...)``): its
    value's ``inc``. Only for amounts known not negative: the public ``inc`` refuses those."""
    inc = getattr(getattr(child, "_value", None), "inc", None)
    return inc if callable(inc) else child.inc  # type: ignore[no-any-return]


def observer(child: Any) -> Update:
    """What observes an amount in ``child`` (a labelled ``Histogram``'s child): the sum, and the
    first bucket whose upper bound is at least the amount (none for NaN), as ``observe``."""
    try:
        add_to_sum = child._sum.inc
        bounds = tuple(child._upper_bounds)
        buckets = tuple(bucket.inc for bucket in child._buckets)
    except AttributeError:
        return child.observe  # type: ignore[no-any-return]
    if len(bounds) != len(buckets):
        return child.observe  # type: ignore[no-any-return]
    count = len(bounds)

    def observe(amount: float) -> None:
        add_to_sum(amount)
        i = bisect_left(bounds, amount)  # the first bound >= amount, in C
        if i < count and amount <= bounds[i]:  # NaN is <= no bound
            buckets[i](1)

    return observe
