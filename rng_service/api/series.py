"""Counting into one labelled Prometheus series at the cost of its value's own update.

Every RPC counts five series and every transition a few more (``api/rpc_metrics.py``,
``api/metrics.py``'s observer). prometheus_client's ``Counter.inc`` and ``Histogram.observe``
check on each call what is settled once a labelled child exists (that it is a child, no
exemplar) and the histogram walks its buckets in Python: together about as much as the update
itself. :func:`incrementer` and :func:`observer` take a child's value objects once, the very
objects its ``inc`` and ``observe`` update (``_value``; ``_sum`` and ``_buckets``), so a series
counts exactly what the public methods would, in this process's memory or in the files of
prometheus_client's multiprocess mode alike (the value class decides where a value lives, not
the method that adds to it); a value of this process's memory is added to under its own lock
without its ``inc``'s ``with`` statement. A prometheus_client whose children lack those objects
gets the public methods.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from prometheus_client.values import MutexValue

#: adds its argument to a series (a counter's increment, a histogram's observation)
Update = Callable[[float], None]


def incrementer(child: Any) -> Update:
    """What adds to ``child`` (a labelled ``Counter``'s child, ``counter.labels(...)``): its
    value's ``inc`` (:func:`_adder`). Only for amounts known not negative: the public ``inc``
    refuses those."""
    value = getattr(child, "_value", None)
    if callable(getattr(value, "inc", None)):
        return _adder(value)
    return child.inc  # type: ignore[no-any-return]


def _adder(value: Any) -> Update:
    """What ``value.inc`` does. For this process's own value (``MutexValue``, outside the
    multiprocess mode) the same addition under the same lock, taken by ``acquire`` and
    ``release`` rather than a ``with`` statement (its special-method lookups and calls cost as
    much again: six a call); any other value class (the multiprocess mode's, which writes its
    file too) keeps its own ``inc``."""
    if type(value) is not MutexValue or not isinstance(getattr(value, "_value", None), float):
        return value.inc  # type: ignore[no-any-return]
    try:
        acquire, release = value._lock.acquire, value._lock.release
    except AttributeError:
        return value.inc

    def add(amount: float) -> None:
        acquire()
        try:
            value._value += amount
        finally:
            release()

    return add


def observer(child: Any) -> Update:
    """What observes an amount in ``child`` (a labelled ``Histogram``'s child): the sum, and the
    first bucket whose upper bound is at least the amount (none for NaN), as ``observe``; for
    this process's own values, each under its lock in the one call (:func:`tally`)."""
    return tally(timing(child), ())


def _by_adders(child: Any) -> Update:
    """:func:`observer` through :func:`_adder`'s functions (or the public ``observe``): for a
    histogram whose values are not all this process's own."""
    try:
        add_to_sum = _adder(child._sum)
        bounds = tuple(child._upper_bounds)
        buckets = tuple(_adder(bucket) for bucket in child._buckets)
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


#: a value of this process's memory, with its lock's ``acquire`` and ``release``
_Owned = tuple[Any, Callable[[], Any], Callable[[], Any]]


def _own(value: Any) -> _Owned | None:
    """``value``, its lock's ``acquire`` and ``release``, when :func:`_adder` adds to it under
    that lock itself (a ``MutexValue`` of this process's memory); None otherwise."""
    if type(value) is not MutexValue or not isinstance(getattr(value, "_value", None), float):
        return None
    try:
        return value, value._lock.acquire, value._lock.release
    except AttributeError:
        return None


class Timing(NamedTuple):
    """A labelled ``Histogram``'s child made ready for :func:`tally` (:func:`timing`)."""

    observe: Update  # by :func:`_adder`'s functions (or the public ``observe``)
    #: the sum's and each bucket's (value, acquire, release) (:func:`_own`), with the buckets'
    #: upper bounds; None unless every one of them is this process's own
    owned: tuple[_Owned, tuple[_Owned, ...], tuple[float, ...]] | None


def timing(histogram: Any) -> Timing:
    """``histogram`` (a labelled ``Histogram``'s child) made ready for :func:`tally`, once."""
    try:
        values = [histogram._sum, *histogram._buckets]
        bounds = tuple(histogram._upper_bounds)
    except AttributeError:
        return Timing(_by_adders(histogram), None)
    owns = [_own(value) for value in values]
    own = [found for found in owns if found is not None]
    if len(own) != len(owns) or len(bounds) != len(own) - 1:
        return Timing(_by_adders(histogram), None)
    return Timing(_by_adders(histogram), (own[0], tuple(own[1:]), bounds))


def tally(histogram: Timing, counters: Sequence[Any]) -> Update:
    """What observes an amount in ``histogram`` (as :func:`observer`) and adds 1 to each of
    ``counters`` (labelled ``Counter``'s children, as :func:`incrementer`), in one call: a
    call's end updates four values (the time's sum and bucket, its code's count, the answer
    sent), and each of :func:`observer`'s and :func:`_adder`'s functions is a Python call of its
    own. Each value is added to under its own lock, as they add; a series whose values are not
    all this process's own (``MutexValue``: the multiprocess mode's write their file) gets
    those functions, one after the other."""
    owns = [_own(getattr(child, "_value", None)) for child in counters]
    owned = tuple(found for found in owns if found is not None)
    if histogram.owned is None or len(owned) != len(owns):
        observe, adds = histogram.observe, [incrementer(child) for child in counters]

        def each(amount: float) -> None:
            observe(amount)
            for add in adds:
                add(1)

        return each
    (sum_value, sum_acquire, sum_release), buckets, bounds = histogram.owned
    count = len(bounds)

    def update(amount: float) -> None:
        sum_acquire()
        try:
            sum_value._value += amount
        finally:
            sum_release()
        i = bisect_left(bounds, amount)  # the first bound >= amount, in C
        if i < count and amount <= bounds[i]:  # NaN is <= no bound
            value, acquire, release = buckets[i]
            acquire()
            try:
                value._value += 1.0
            finally:
                release()
        for value, acquire, release in owned:
            acquire()
            try:
                value._value += 1.0
            finally:
                release()

    return update


def summer(children: Sequence[Any]) -> Callable[..., None]:
    """What adds its arguments, one to each of ``children`` (labelled ``Counter``'s children, as
    :func:`incrementer`; amounts known not negative), in one call: a finished round adds its
    count, stake and return of each wager kind to three series. Each value under its own lock,
    as :func:`_adder` adds; children whose values are not all this process's own get
    :func:`incrementer`'s functions, one after the other."""
    owns = [_own(getattr(child, "_value", None)) for child in children]
    owned = tuple(found for found in owns if found is not None)
    if len(owned) != len(owns):
        adds = [incrementer(child) for child in children]

        def each(*amounts: float) -> None:
            for i, add in enumerate(adds):
                add(amounts[i])

        return each

    def add(*amounts: float) -> None:
        # by index: a zip costs more than the loop it drives (strict=True parses a keyword)
        for i, (value, acquire, release) in enumerate(owned):
            acquire()
            try:
                value._value += amounts[i]
            finally:
                release()

    return add
