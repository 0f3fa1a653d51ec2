"""The CPU the interceptor chain adds to one call (``api/interceptors.py``: the drain gate,
stream limits, authorization, decoding, metrics, the JSON log line, status mapping), in process,
against the bare call of the same handler in the same run.

    .venv/bin/python bench/bench_interceptor.py [--calls 20000] [--repeat 5]

No network and no gRPC server: gRPC's own cost is the same with any interceptor, and on a shared
machine it would drown the difference this measures. Each row runs the same request through

* ``bare``: what gRPC runs without an interceptor: decode the request, call the handler, encode
  the response;
* ``chain``: the same through the handler :class:`ServiceInterceptor` gives gRPC for it (no
  client certificate, so the default operator), the log line rendered as ``fairshoe serve``
  renders it (``core/logs.py``) and written to ``/dev/null``, the metrics counted in the
  process's Prometheus registry;

on a new stand-in for gRPC's ``ServicerContext`` per call. Rows:

* ``EvaluateHand``: ``MathService``'s cheapest unary call, the yardstick of ``bench_rpc_cpu.py``
  (its handler here computes what the service's does, with ``game_math.cards``);
* ``EvaluateHand refused``: the same with a card that is no card: an invalid input, reported as
  INVALID_ARGUMENT (the status mapping's path);
* ``server stream``: a server-streaming call answering one message (an export's shape).

``chain-bare µs`` is the chain's own CPU per call and ``/bare`` the chain's call against the bare
one; each figure is the best of ``--repeat`` runs (CPU time of this process). To compare two
versions of the chain, alternate them on ``PYTHONPATH`` and compare ``chain-bare µs``::

    for i in 1 2 3; do
      PYTHONPATH=/path/to/old/tree .venv/bin/python bench/bench_interceptor.py
      .venv/bin/python bench/bench_interceptor.py
    done
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from tables import print_table

from game_math.cards import VALUE_OF, hand_total, parse_cards
from rng_service.api.interceptors import ServiceInterceptor
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2
from rng_service.core.logs import configure_logging

COLUMNS = ("call", "bare µs", "chain µs", "chain-bare µs", "/bare")
EVALUATE = "/fairshoe.math.v1.MathService/EvaluateHand"
STREAM = "/fairshoe.math.v1.MathService/BenchStream"  # a name no real method has


class Aborted(Exception):
    """What gRPC's ``abort`` raises, here."""


class Context:
    """What the chain reads of gRPC's ``ServicerContext``: a live call with no client
    certificate and no metadata, whose status nobody set."""

    def is_active(self) -> bool:
        return True

    def code(self) -> grpc.StatusCode | None:
        return None

    def time_remaining(self) -> float | None:
        return None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(details)

    def abort_with_status(self, status: grpc.Status) -> None:
        raise Aborted(status.details)


@dataclass(frozen=True)
class Details:
    """What ``intercept_service`` reads of gRPC's ``HandlerCallDetails``."""

    method: str
    invocation_metadata: tuple[tuple[str, str], ...] = ()


def evaluate_hand(request: math_pb2.EvaluateHandRequest) -> math_pb2.EvaluateHandResponse:
    """What ``MathService.EvaluateHand`` answers."""
    cards = parse_cards(request.cards)
    total, soft = hand_total(cards)
    return math_pb2.EvaluateHandResponse(
        total=total, soft=soft, bust=total > 21, hard_total=sum(VALUE_OF[c] for c in cards),
        blackjack=len(cards) == 2 and total == 21 and not request.from_split)


def _evaluate(request: math_pb2.EvaluateHandRequest, context: Any
              ) -> math_pb2.EvaluateHandResponse:
    return evaluate_hand(request)


def _one_message(request: math_pb2.EvaluateHandRequest, context: Any
                 ) -> Iterator[math_pb2.EvaluateHandResponse]:
    yield evaluate_hand(request)


def _unary(interceptor: ServiceInterceptor, cards: list[str]
           ) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The bare and the intercepted call of EvaluateHand on ``cards``."""
    handler = grpc.unary_unary_rpc_method_handler(
        _evaluate, math_pb2.EvaluateHandRequest.FromString,
        math_pb2.EvaluateHandResponse.SerializeToString)
    wrapped = interceptor.intercept_service(lambda _details: handler, Details(EVALUATE))
    data = math_pb2.EvaluateHandRequest(cards=cards).SerializeToString()

    def bare() -> Any:
        request = handler.request_deserializer(data)
        try:
            return handler.response_serializer(handler.unary_unary(request, Context()))
        except Exception as exc:  # what the chain reports; gRPC itself would make it UNKNOWN
            return exc

    def chain() -> Any:
        request = wrapped.request_deserializer(data)
        try:
            return wrapped.response_serializer(wrapped.unary_unary(request, Context()))
        except Aborted as exc:
            return exc

    return bare, chain


def _stream(interceptor: ServiceInterceptor) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The bare and the intercepted call of a server stream answering one message."""
    handler = grpc.unary_stream_rpc_method_handler(
        _one_message, math_pb2.EvaluateHandRequest.FromString,
        math_pb2.EvaluateHandResponse.SerializeToString)
    wrapped = interceptor.intercept_service(lambda _details: handler, Details(STREAM))
    data = math_pb2.EvaluateHandRequest(cards=["AS", "TD"]).SerializeToString()

    def bare() -> Any:
        request = handler.request_deserializer(data)
        return [handler.response_serializer(r) for r in handler.unary_stream(request, Context())]

    def chain() -> Any:
        request = wrapped.request_deserializer(data)
        return [wrapped.response_serializer(r) for r in wrapped.unary_stream(request, Context())]

    return bare, chain


def cpu_per_call(call: Callable[[], Any], calls: int, repeat: int) -> float:
    """The best of ``repeat`` runs of ``calls`` calls: CPU seconds per call."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(calls):
            call()
        best = min(best, (time.process_time() - started) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    real_stderr = sys.stderr
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the log lines' sink for the whole run
    configure_logging("INFO")
    sys.stderr = real_stderr
    interceptor = ServiceInterceptor(max_streams=64, probe_streams=8)
    rows = []
    for name, (bare, chain) in (("EvaluateHand", _unary(interceptor, ["AS", "TD"])),
                                ("EvaluateHand refused", _unary(interceptor, ["AS", "XX"])),
                                ("server stream", _stream(interceptor))):
        bare(), chain()  # warm: the chain's per-method series and the logger are made once
        plain = cpu_per_call(bare, args.calls, args.repeat)
        wrapped = cpu_per_call(chain, args.calls, args.repeat)
        rows.append((name, f"{plain * 1e6:.1f}", f"{wrapped * 1e6:.1f}",
                     f"{(wrapped - plain) * 1e6:.1f}", f"{wrapped / plain:.2f}"))
    print_table(COLUMNS, rows)


if __name__ == "__main__":
    main()
