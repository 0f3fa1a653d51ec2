"""What every RPC goes through, whatever its service: request decoding that cannot crash, error
reporting by kind, Prometheus metrics and one JSON log line.

Metrics (defined in ``api/metrics.py``) are the standard gRPC server series, counted at the
status the client receives: a request that does not decode is INVALID_ARGUMENT, a code the
handler set (health's NOT_FOUND) is that code, and a call the client abandoned (cancelled, or its
deadline passed) is CANCELLED or DEADLINE_EXCEEDED whatever the handler did afterwards.

The concerns it chains, each in a module of its own: decoding (``api/decoding.py``: a request
that does not decode is INVALID_ARGUMENT, never INTERNAL), admission (``api/admission.py``: the
drain gate and the stream limits, owned by the server that made them, no process global),
authorization (``api/caller.py``), then the handler, with its status, metrics and log line
(:class:`_Rpc`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, NoReturn

import grpc
import structlog
from grpc_status import rpc_status

from rng_service.api import metrics
from rng_service.api.admission import Drain, StreamLimit, is_probe, share
from rng_service.api.caller import (
    Access,
    Role,
    caller_of,
    forget_call,
    identity_of,
    operator_of,
)
from rng_service.api.decoding import Undecodable, tolerant
from rng_service.api.errors import MAX_FIELD_BYTES, code_name, printable, status_proto
from rng_service.core.errors import kind_of

log = structlog.get_logger("fairshoe.server")

Behavior = Callable[[Any, grpc.ServicerContext], Any]


class ServiceInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Wraps every method handler (all four arities) with :class:`_Rpc` and a tolerant
    deserializer; each call passes ``access`` (who may call what, ``api/caller.py``) before its
    handler runs.

    ``drain`` (default: one of its own) is the gate a shutdown closes: once it drains, new calls
    are refused UNAVAILABLE, health excepted, and the server's owner waits on it for the calls
    admitted.

    Server-streaming and bidirectional calls are limited (:class:`StreamLimit`) in two pools:
    the project's own (exports) to ``max_streams`` open at once, half of them at most per
    caller, on the server's workers; health watches and reflection (``/grpc.*``, open to any
    peer) to ``probe_streams``, a quarter of them (at least 2) per peer, on threads of their own
    (``probe_pool``, gRPC's per-method thread pool) when given: watches a load balancer (or
    anyone) holds open then never take an export's slot or a worker from the calls.

    gRPC asks the interceptor for every call; the wrapped handler of a method is made once and
    kept as long as ``continuation`` gives the same handler for it (the methods a server
    registered: a fixed set)."""

    def __init__(self, access: Access | None = None, *, max_streams: int | None = None,
                 probe_streams: int | None = None,
                 probe_pool: futures.ThreadPoolExecutor | None = None,
                 drain: Drain | None = None) -> None:
        self.access = access if access is not None else Access()
        self.drain = drain if drain is not None else Drain()
        self.streams = StreamLimit(max_streams, per_caller=share(max_streams, 2, least=1))
        self.probes = StreamLimit(probe_streams, per_caller=share(probe_streams, 4, least=2),
                                  what="health watches or reflection streams")
        self.probe_pool = probe_pool
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
        gates = Gates(self.access, self.drain, self.probes if probe else self.streams)
        wrapped = _wrap(handler, method, gates, self.probe_pool if probe else None)
        self._wrapped[method] = (handler, wrapped)  # a race only makes one twice
        return wrapped


@dataclass(frozen=True)
class Gates:
    """What a call of one method passes before its handler runs, in this order: the drain gate,
    the stream limit (streaming responses only), then ``access`` (who may call it)."""

    access: Access = field(default_factory=Access)
    drain: Drain = field(default_factory=Drain)
    streams: StreamLimit = field(default_factory=StreamLimit)


def _wrap(handler: Any, method: str, gates: Gates,
          pool: futures.ThreadPoolExecutor | None = None) -> Any:
    """``handler`` of ``method`` wrapped (see :class:`ServiceInterceptor`); its streams run on
    ``pool`` when given."""
    deserialize = tolerant(handler.request_deserializer, method)
    serialize = handler.response_serializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _unary_response(_Method(method, "unary", gates), handler.unary_unary,
                            _one),
            deserialize, serialize)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            _unary_response(_Method(method, "client_stream", gates),
                            handler.stream_unary, _each),
            deserialize, serialize)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _on_pool(_stream_response(_Method(method, "server_stream", gates),
                                      handler.unary_stream, _one), pool),
            deserialize, serialize)
    return grpc.stream_stream_rpc_method_handler(
        _on_pool(_stream_response(_Method(method, "bidi_stream", gates),
                                  handler.stream_stream, _each), pool),
        deserialize, serialize)


def _on_pool(behavior: Behavior, pool: futures.ThreadPoolExecutor | None) -> Behavior:
    """``behavior``, run by gRPC on ``pool`` instead of the server's workers when given (grpcio
    reads a handler's ``experimental_thread_pool``)."""
    if pool is not None:
        behavior.experimental_thread_pool = pool  # type: ignore[attr-defined]
    return behavior


class _Method:
    """A method's full name (``/fairshoe.round.v1.RoundService/Act``) and gRPC type, the label
    values of its metrics, (grpc_type, grpc_service, grpc_method), and its series (looked up
    once: ``labels()`` takes a lock and builds a key on every call), and the :class:`Gates` its
    calls pass."""

    def __init__(self, full: str, grpc_type: str, gates: Gates | None = None) -> None:
        self.full = full
        self.grpc_type = grpc_type
        gates = gates if gates is not None else Gates()
        self.access, self.drain, self.streams = gates.access, gates.drain, gates.streams
        service, _, name = full.lstrip("/").rpartition("/")
        self.labels = (grpc_type, service, name)
        self.started = metrics.GRPC_STARTED.labels(*self.labels)
        self.received = metrics.GRPC_MSG_RECEIVED.labels(*self.labels)
        self.sent = metrics.GRPC_MSG_SENT.labels(*self.labels)
        self.seconds = metrics.GRPC_HANDLING_SECONDS.labels(*self.labels)
        self._handled: dict[str, Any] = {}

    def handled(self, code: str) -> Any:
        """The ``grpc_server_handled_total`` series of ``code`` (a Python status name)."""
        series = self._handled.get(code)
        if series is None:
            series = metrics.GRPC_HANDLED.labels(*self.labels, metrics.grpc_code(code))
            self._handled[code] = series
        return series


def _one(request: Any, rpc: _Rpc) -> Any:
    rpc.received(request)
    rpc.authorize()  # before decoding errors: whoever may not call, may not probe it either
    if isinstance(request, Undecodable):
        raise request.error()
    return request


def _each(requests: Iterator[Any], rpc: _Rpc) -> Iterator[Any]:
    for request in requests:
        yield _one(request, rpc)


Check = Callable[[Any, "_Rpc"], Any]

#: request fields an RPC's log line names (identifiers only: never a seed, key or card)
_LOGGED_IDS = ("round_id", "request_id")


def _ids_of(request: Any) -> dict[str, str]:
    """The round and request ids a request message carries, printable and bounded."""
    descriptor = getattr(request, "DESCRIPTOR", None)
    fields = getattr(descriptor, "fields_by_name", {})
    found = {}
    for name in _LOGGED_IDS:
        field = fields.get(name)
        if field is None or field.type != field.TYPE_STRING:
            continue
        value = getattr(request, name, "")
        if value:
            found[name] = printable(value, MAX_FIELD_BYTES)
    return found


def _answered_round(response: Any) -> str | None:
    """The round a response is about when its request named none (StartRound answers the new
    round's view): ``round.round_id`` of the answer, printable and bounded."""
    view = getattr(response, "round", None)
    round_id = getattr(view, "round_id", None)
    return printable(round_id, MAX_FIELD_BYTES) if isinstance(round_id, str) and round_id else None


def _unary_response(method: _Method, inner: Behavior, check: Check) -> Behavior:
    def behavior(request: Any, context: grpc.ServicerContext) -> Any:
        rpc = _Rpc(method, context)
        _admit(rpc, lambda: method.drain.enter(method.full, context))
        try:
            try:
                response = inner(rpc.authorized(check(request, rpc)), context)
            except Exception as exc:
                rpc.fail(exc)
        finally:
            method.drain.leave()
        if "round_id" not in rpc.ids and (answered := _answered_round(response)):
            rpc.ids["round_id"] = answered  # the log line of StartRound names its new round
        if rpc.done() == "OK":
            rpc.sent()
        return response

    return behavior


def _stream_response(method: _Method, inner: Behavior, check: Check) -> Behavior:
    def behavior(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        rpc = _Rpc(method, context)
        _admit(rpc, lambda: method.drain.enter(method.full, context))
        try:
            caller = caller_of(context)
            _admit(rpc, lambda: method.streams.enter(context, caller))
            try:
                yield from _streamed(rpc, lambda: inner(rpc.authorized(check(request, rpc)),
                                                        context), context)
            finally:
                method.streams.leave(caller)
        finally:
            method.drain.leave()

    return behavior


def _admit(rpc: _Rpc, enter: Callable[[], None]) -> None:
    """Pass a gate (``enter`` aborts the call if it may not pass), the refusal reported."""
    try:
        enter()
    except Exception as exc:
        rpc.fail(exc)


def _streamed(rpc: _Rpc, responses: Callable[[], Iterator[Any]],
              context: grpc.ServicerContext) -> Iterator[Any]:
    # the handler is called inside the try: a request that does not decode fails in ``check``
    try:
        for response in responses():
            rpc.sent()  # counted as handed to gRPC: a cancel may close us at the yield
            yield response
    except GeneratorExit:  # the client went away (cancelled, deadline): nothing to report
        rpc.done(_abandoned(context))
        raise
    except Exception as exc:
        rpc.fail(exc)
    rpc.done()


def _abandoned(context: grpc.ServicerContext) -> str:
    """The status of a call the client no longer waits for: DEADLINE_EXCEEDED if its deadline
    has passed, else CANCELLED (the client cancelled, or its connection went)."""
    remaining = context.time_remaining()
    return "DEADLINE_EXCEEDED" if remaining is not None and remaining <= 0 else "CANCELLED"


class _Rpc:
    """One call: counts and logs it exactly once, at the status code the client receives."""

    def __init__(self, method: _Method, context: grpc.ServicerContext) -> None:
        self.method = method.full
        self.series = method
        self.access = method.access
        self.context = context
        self.started = time.perf_counter()
        # the operator of the project's own services (health and reflection act for none), and
        # the auditor acting for it: known once authorized
        self.operator: str | None = None
        self.auditor: str | None = None
        self.authorized_once = False
        self.ids_read = False
        self.ids: dict[str, str] = {}
        method.started.inc()

    def authorize(self) -> None:
        """Let the call through to its handler only if its caller may make it (raises
        PermissionDenied, or InvalidInput for an auditor naming no operator); once per call."""
        if self.authorized_once:
            return
        self.authorized_once = True
        if not self.method.startswith("/fairshoe."):
            self.access.authorize(self.method, self.context)
            return
        identity = identity_of(self.context)  # the log names who was refused too
        if identity is not None and identity.role is Role.AUDITOR:
            self.auditor = identity.name
        self.access.authorize(self.method, self.context)
        self.operator = operator_of(self.context)

    def authorized(self, request: Any) -> Any:
        """``request``, once :meth:`authorize` let the call through."""
        self.authorize()
        return request

    def received(self, request: Any = None) -> None:
        """A request message arrived (whether or not it decodes): the first one's round and
        request ids, if it has such fields, go into the call's log line."""
        self.series.received.inc()
        if not self.ids_read:
            self.ids_read = True
            self.ids = _ids_of(request)

    def sent(self) -> None:
        """A response message was handed to gRPC."""
        self.series.sent.inc()

    def done(self, code: str | None = None, **fields: Any) -> str:
        """Count and log the call, and return its code: ``code`` defaults to what the handler
        set (OK if nothing), unless the client has gone (:func:`_abandoned`)."""
        forget_call(self.context)  # nothing reads its identity any more
        if code is None:
            if not self.context.is_active():  # the client no longer waits for an answer
                code = _abandoned(self.context)
            else:
                set_code = self.context.code()
                code = set_code.name if isinstance(set_code, grpc.StatusCode) else "OK"
        elapsed = time.perf_counter() - self.started
        self.series.seconds.observe(elapsed)
        self.series.handled(code).inc()
        level = log.error if code == "INTERNAL" else log.info
        if self.operator is not None:
            fields.setdefault("operator", self.operator)
        if self.auditor is not None:
            fields.setdefault("auditor", self.auditor)
        for name, value in self.ids.items():
            fields.setdefault(name, value)
        level("rpc", method=self.method, code=code, latency_ms=round(elapsed * 1000, 3),
              **fields)
        return code

    def fail(self, exc: Exception) -> NoReturn:
        """Report ``exc`` as its status (raises, as ``abort`` does)."""
        if isinstance(exc, grpc.RpcError) and not self.context.is_active():
            # reading the requests of a call the client has left (cancelled, or its deadline
            # passed) raises gRPC's own error: the client's doing, nothing to report to it
            remaining = self.context.time_remaining()
            expired = remaining is not None and remaining <= 0
            self.done("DEADLINE_EXCEEDED" if expired else "CANCELLED")
            raise exc
        set_code = self.context.code()
        if isinstance(set_code, grpc.StatusCode) and set_code is not grpc.StatusCode.OK:
            # the handler aborted with a code of its own: the status is already decided
            self.done(set_code.name)
            raise exc
        status = status_proto(exc)
        kind = kind_of(exc)
        if kind is None:
            # a bug, whatever the request: the client sees a generic message, the log the cause
            self.done(code_name(status), error=type(exc).__name__, exc_info=exc)
        else:
            field = getattr(exc, "field", None)
            self.done(code_name(status), kind=str(kind),
                      field=None if field is None else printable(field, MAX_FIELD_BYTES))
        self.context.abort_with_status(rpc_status.to_status(status))
        raise AssertionError("abort_with_status returned")  # pragma: no cover
