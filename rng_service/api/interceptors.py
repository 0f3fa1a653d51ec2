"""What every RPC goes through, whatever its service: one explicit chain of steps, each a concern
in a module of its own, owned by the server that made it (no process global):

1. metrics (``api/rpc_metrics.py``): the call is counted as started;
2. drain (``api/admission.py``, :class:`Drain`): once a shutdown closes the gate, UNAVAILABLE;
3. stream limits (``api/admission.py``, :class:`StreamLimit`; server-streaming and bidirectional
   calls only): RESOURCE_EXHAUSTED past a caller's share or the server's limit;
4. for each request message: metrics (received), logging (the first one is kept: its round
   and request ids go into the line, ``api/rpc_log.py``), authorization
   (``api/authorization.py``, once per call, before decoding errors: whoever may not call a
   method may not probe it either), decoding (``api/decoding.py``: a request that does not
   decode is INVALID_ARGUMENT, never INTERNAL);
5. the handler;
6. status mapping (``api/rpc_status.py``): the code the client receives, and the status a failure
   sends; then metrics (handled, timed) and logging (the call's one JSON line) at that code.

A gate's refusal or a handler's failure ends the call there, through step 6.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent import futures
from functools import partial
from typing import Any, NoReturn

import grpc

from rng_service.api.admission import Drain, StreamLimit, is_probe, share
from rng_service.api.authorization import Authorization
from rng_service.api.caller import Access, caller_of
from rng_service.api.decoding import Undecodable, tolerant
from rng_service.api.metrics import GrpcSeries
from rng_service.api.rpc_call import Call
from rng_service.api.rpc_log import RpcLog
from rng_service.api.rpc_metrics import MethodMetrics
from rng_service.api.rpc_status import abandoned, failure, settled

Behavior = Callable[[Any, grpc.ServicerContext], Any]


class ServiceInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Wraps every method handler (all four arities) in the chain of :class:`Chain` and a
    tolerant deserializer.

    ``access`` (default: no auditor granted) decides who may call what (``api/caller.py``).
    ``drain`` (default: one of its own) is the gate a shutdown closes: once it drains, new calls
    are refused UNAVAILABLE, health excepted, and the server's owner waits on it for the calls
    admitted.

    Server-streaming and bidirectional calls are limited (:class:`StreamLimit`) in two pools:
    the project's own (exports) to ``max_streams`` open at once, half of them at most per
    caller, on the server's workers; health watches and reflection (``/grpc.*``, open to any
    peer) to ``probe_streams``, a quarter of them (at least 2) per peer, on threads of their own
    (``probe_pool``, gRPC's per-method thread pool) when given: watches a load balancer (or
    anyone) holds open then never take an export's slot or a worker from the calls.

    ``log`` (default: structlog's ``fairshoe.server``) writes each call's line; ``series``
    (default: the process's, ``metrics.GRPC``) counts them.

    gRPC asks the interceptor for every call; the wrapped handler of a method is made once and
    kept as long as ``continuation`` gives the same handler for it (the methods a server
    registered: a fixed set)."""

    def __init__(self, access: Access | None = None, *, max_streams: int | None = None,
                 probe_streams: int | None = None,
                 probe_pool: futures.ThreadPoolExecutor | None = None,
                 drain: Drain | None = None, log: RpcLog | None = None,
                 series: GrpcSeries | None = None) -> None:
        self.access = access if access is not None else Access()
        self.drain = drain if drain is not None else Drain()
        self.streams = StreamLimit(max_streams, per_caller=share(max_streams, 2, least=1))
        self.probes = StreamLimit(probe_streams, per_caller=share(probe_streams, 4, least=2),
                                  what="health watches or reflection streams")
        self.probe_pool = probe_pool
        self.log = log if log is not None else RpcLog()
        self.series = series
        self._wrapped: dict[str, tuple[Any, Any]] = {}  # method -> (its handler, wrapped)

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        """The handler ``continuation`` gives for ``details.method``, wrapped."""
        handler = continuation(details)
        if handler is None:
            return None
        method = details.method
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        probe = is_probe(method)
        wrapped = _wrap(handler, method, lambda grpc_type: self.chain(method, grpc_type),
                        self.probe_pool if probe else None)
        self._wrapped[method] = (handler, wrapped)  # a race only makes one twice
        return wrapped

    def chain(self, method: str, grpc_type: str) -> Chain:
        """The steps of ``method``'s calls (of gRPC type ``grpc_type``)."""
        return Chain(method, grpc_type, access=self.access, drain=self.drain,
                     streams=self.probes if is_probe(method) else self.streams,
                     log=self.log, series=self.series)


class Chain:
    """The steps one method's calls pass, made once per method: each call's :class:`Call`
    carries what they record. Its methods are the chain's links, in the order of the module's
    docstring; :meth:`finish` and :meth:`fail` end a call (exactly once)."""

    __slots__ = ("authorization", "drain", "log", "method", "metrics", "streams")

    def __init__(self, method: str, grpc_type: str, *, access: Access, drain: Drain,
                 streams: StreamLimit, log: RpcLog, series: GrpcSeries | None = None) -> None:
        self.method = method
        self.metrics = MethodMetrics(method, grpc_type, series)
        self.drain = drain
        self.streams = streams
        self.authorization = Authorization(access, method)
        self.log = log

    def enter_drain(self, call: Call) -> None:
        """Admit ``call`` through the drain gate (the caller leaves it when the call ends), or
        end it refused. (A unary response's call does the same inline: one Python call less.)"""
        try:
            self.drain.enter(self.method, call.context)
        except Exception as exc:
            self.fail(call, exc)

    def enter_streams(self, call: Call, caller: str) -> None:
        """Admit the stream ``call`` opens for ``caller`` (the caller leaves it when the call
        ends), or end it refused."""
        try:
            self.streams.enter(call.context, caller)
        except Exception as exc:
            self.fail(call, exc)

    def request(self, request: Any, call: Call) -> Any:
        """A request message of ``call`` arrived (decoded or not): counted, kept if the first
        (its ids go into the log line), the call authorized (before decoding errors: whoever
        may not call, may not probe it either), and ``request`` given on if it decoded."""
        self.metrics.received(1)
        if call.request is None:
            call.request = request
        self.authorization.check(call)
        if type(request) is Undecodable:  # decoding.decoded's, inline: every call's request
            raise request.error()
        return request

    def requests(self, requests: Iterator[Any], call: Call) -> Iterator[Any]:
        """The request stream of ``call``, each message through :meth:`request`; the call is
        authorized now, before its handler runs, whether or not it reads a message."""
        self.authorization.check(call)
        return self._each(requests, call)

    def _each(self, requests: Iterator[Any], call: Call) -> Iterator[Any]:
        for request in requests:
            yield self.request(request, call)

    def finish(self, call: Call, code: str | None = None,
               fields: dict[str, Any] | None = None, answer: Any = None,
               answered: bool = False) -> str:
        """End ``call``: its code (default: what it settled on, ``rpc_status.settled``)
        counted and logged with ``fields`` (and the round of its unary ``answer``); returns
        the code. ``answered``: a unary call that returned ``answer``, counted as sent when it
        ends OK."""
        self.authorization.end(call.context)
        if code is None:
            code = settled(call.context)
        seconds = time.perf_counter() - call.started
        self.metrics.handled(code, seconds, answered=answered)
        self.log.write(call, code, seconds, fields if fields is not None else {}, answer)
        return code

    def fail(self, call: Call, exc: Exception) -> NoReturn:
        """End ``call``, which raised ``exc``, at the status it maps to, and report that status
        (raises, as ``abort`` does)."""
        failed = failure(exc, call.context)
        self.finish(call, failed.code, failed.fields)
        if failed.status is None:
            raise exc
        call.context.abort_with_status(failed.status)
        raise AssertionError("abort_with_status returned")  # pragma: no cover


#: how a method takes its requests in: one message (:meth:`Chain.request`) or a stream
#: (:meth:`Chain.requests`); either way the call is authorized when it returns
Requests = Callable[[Chain, Any, Call], Any]


def _wrap(handler: Any, method: str, chain: Callable[[str], Chain],
          pool: futures.ThreadPoolExecutor | None = None) -> Any:
    """``handler`` of ``method`` wrapped in the :class:`Chain` that ``chain`` makes for its gRPC
    type; its streams run on ``pool`` when given."""
    deserialize = tolerant(handler.request_deserializer, method)
    serialize = handler.response_serializer
    one, each = Chain.request, Chain.requests
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _unary_response(chain("unary"), handler.unary_unary, one), deserialize, serialize)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            _unary_response(chain("client_stream"), handler.stream_unary, each),
            deserialize, serialize)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _on_pool(_stream_response(chain("server_stream"), handler.unary_stream, one), pool),
            deserialize, serialize)
    return grpc.stream_stream_rpc_method_handler(
        _on_pool(_stream_response(chain("bidi_stream"), handler.stream_stream, each), pool),
        deserialize, serialize)


def _on_pool(behavior: Behavior, pool: futures.ThreadPoolExecutor | None) -> Behavior:
    """``behavior``, run by gRPC on ``pool`` instead of the server's workers when given (grpcio
    reads a handler's ``experimental_thread_pool``)."""
    if pool is not None:
        behavior.experimental_thread_pool = pool  # type: ignore[attr-defined]
    return behavior


def _unary_response(chain: Chain, inner: Behavior, requests: Requests) -> Behavior:
    def behavior(request: Any, context: grpc.ServicerContext) -> Any:
        call = Call(chain.method, context)
        chain.metrics.started(1)
        try:  # chain.enter_drain's, inline: every unary call passes here
            chain.drain.enter(chain.method, context)
        except Exception as exc:
            chain.fail(call, exc)
        try:
            try:
                response = inner(requests(chain, request, call), context)
            except Exception as exc:
                chain.fail(call, exc)
        finally:
            chain.drain.leave()
        chain.finish(call, answer=response, answered=True)  # sent(1) counted if OK
        return response

    return behavior


def _stream_response(chain: Chain, inner: Behavior, requests: Requests) -> Behavior:
    def behavior(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        call = Call(chain.method, context)
        chain.metrics.started(1)
        chain.enter_drain(call)
        try:
            caller = caller_of(context)
            chain.enter_streams(call, caller)
            try:
                yield from _streamed(chain, call,
                                     partial(_called, inner, chain, requests, request, call))
            finally:
                chain.streams.leave(caller)
        finally:
            chain.drain.leave()

    return behavior


def _called(inner: Behavior, chain: Chain, requests: Requests, request: Any, call: Call) -> Any:
    """``inner``'s answer to ``request``."""
    return inner(requests(chain, request, call), call.context)


def _streamed(chain: Chain, call: Call, responses: Callable[[], Iterator[Any]]
              ) -> Iterator[Any]:
    # the handler is called inside the try: a request that does not decode fails in ``requests``
    try:
        for response in responses():
            chain.metrics.sent(1)  # as handed to gRPC: a cancel may close us at the yield
            yield response
    except GeneratorExit:  # the client went away (cancelled, deadline): nothing to report
        chain.finish(call, abandoned(call.context))
        raise
    except Exception as exc:
        chain.fail(call, exc)
    chain.finish(call)
