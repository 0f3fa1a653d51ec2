"""StreamLimit and caller_of: each caller's share of the streams a server keeps open."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from rng_service.api.admission import StreamLimit
from rng_service.api.caller import caller_of
from rng_service.api.interceptors import ServiceInterceptor


class Refused(Exception):
    pass


class Context:
    """What StreamLimit and caller_of read of a call's context."""

    def __init__(self, peer: str = "ipv4:10.0.0.1:5000") -> None:
        self._peer = peer
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise Refused(details)

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}  # no client certificate


def refuse(limit: StreamLimit, caller: str) -> Context:
    """Open a stream of ``caller`` that ``limit`` must refuse; the refused call's context."""
    refused = Context()
    with pytest.raises(Refused):
        limit.enter(refused, caller)
    assert refused.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    return refused


def test_one_caller_holds_only_its_share_and_the_others_keep_theirs() -> None:
    limit = StreamLimit(4, per_caller=2)
    for _ in range(2):
        limit.enter(Context(), "op-a")
    assert "the most one caller may hold" in refuse(limit, "op-a").details
    for _ in range(2):  # op-b's streams still have slots
        limit.enter(Context(), "op-b")
    assert "4 streams are open" in refuse(limit, "op-c").details
    limit.leave("op-a")
    limit.enter(Context(), "op-c")  # a slot freed is a slot again
    assert (limit.held("op-a"), limit.held("op-b"), limit.held("op-c")) == (1, 2, 1)


def test_the_interceptor_shares_data_streams_by_half_and_watches_by_quarter() -> None:
    interceptor = ServiceInterceptor(max_streams=16, probe_streams=16)
    assert (interceptor.streams.limit, interceptor.streams.per_caller) == (16, 8)
    assert (interceptor.probes.limit, interceptor.probes.per_caller) == (16, 4)
    small = ServiceInterceptor(max_streams=1, probe_streams=2)
    assert (small.streams.per_caller, small.probes.per_caller) == (1, 2)


@pytest.mark.parametrize(("peer", "caller"), [
    ("ipv4:10.0.0.1:5000", "ipv4:10.0.0.1"),
    ("ipv6:[::1]:5000", "ipv6:[::1]"),
    ("unix:/tmp/sock", "unix:/tmp/sock"),
])
def test_a_caller_without_a_certificate_is_its_host(peer: str, caller: str) -> None:
    # every connection of a host counts as one caller: more connections gain it nothing
    assert caller_of(Context(peer)) == caller  # type: ignore[arg-type]


def test_a_stream_released_just_after_a_new_one_arrives_frees_its_slot_for_it() -> None:
    # A client that cancels a stream and opens the next one can arrive before the server's
    # handler of the first has ended: the slot it is about to free is waited for, briefly.
    limit = StreamLimit(2, per_caller=1, grace=2.0)
    limit.enter(Context(), "op-a")
    timer = threading.Timer(0.05, limit.leave, args=("op-a",))
    timer.start()
    limit.enter(Context(), "op-a")  # admitted once the first has left, not refused
    timer.join()
    assert limit.held("op-a") == 1


def test_a_stream_held_past_the_grace_is_still_refused() -> None:
    limit = StreamLimit(1, per_caller=1, grace=0.05)
    limit.enter(Context(), "op-a")
    assert "1 streams are open" in refuse(limit, "op-b").details
    assert (limit.held("op-a"), limit.held("op-b")) == (1, 0)


def test_a_caller_flooding_streams_has_one_waiting_the_rest_refused_at_once() -> None:
    # Each waiting stream holds a worker thread: a caller over its share may not tie up more
    # than one of them waiting, however many streams it opens.
    limit = StreamLimit(4, per_caller=1, grace=30.0)
    limit.enter(Context(), "op-a")
    waiter = threading.Thread(target=limit.enter, args=(Context(), "op-a"))
    waiter.start()
    while not limit.waiting("op-a"):
        time.sleep(0.001)
    flood = refuse(limit, "op-a")  # refused while the first still waits, not after its grace
    assert waiter.is_alive()
    assert "the most one caller may hold" in flood.details
    limit.enter(Context(), "op-b")  # another caller is not held up by op-a's waiter
    limit.leave("op-a")
    waiter.join()
    assert (limit.held("op-a"), limit.held("op-b"), limit.waiting("op-a")) == (1, 1, False)
