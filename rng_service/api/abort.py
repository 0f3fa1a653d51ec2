"""Reports a servicer's deliberate errors as gRPC status codes (interim).

The errors interceptor being written for ``build_server`` maps every ``FairshoeError`` kind to a
status code in one table, with ``google.rpc`` rich details; until it is in place, servicers
report their errors through this module, with the same mapping: MathService and the typed
ReplayRound call :func:`answer`; the round and wallet servicers just raise, and
:class:`InterimErrorInterceptor` (installed once, in ``build_server``) reports what escapes
them. The field is in the message (``field: detail``); the reason code, which the rich details
will carry as a ``google.rpc.ErrorInfo``, goes meanwhile in the trailing metadata
``fairshoe-reason``. Once the errors interceptor is in, this module goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar

import grpc

from rng_service.core.errors import ErrorKind, kind_of

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

#: the trailing metadata key carrying an error's reason code (interim: ErrorInfo.reason later)
REASON_KEY: Final = "fairshoe-reason"

CODES: Final = {
    ErrorKind.INVALID_INPUT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.ILLEGAL_STATE: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.CONFLICT: grpc.StatusCode.ABORTED,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.INTEGRITY: grpc.StatusCode.DATA_LOSS,
}


def report(context: grpc.ServicerContext, exc: Exception) -> NoReturn:
    """Abort the call with ``exc``'s status if it is a deliberate error; re-raise it otherwise
    (a bug: the client sees UNKNOWN, never its text)."""
    kind = kind_of(exc)
    if kind is None:
        raise exc
    reason = getattr(exc, "reason", None)
    if reason:
        context.set_trailing_metadata(((REASON_KEY, str(reason)),))
    context.abort(CODES[kind], str(exc))
    raise exc  # unreachable: abort raises


def answer(context: grpc.ServicerContext, func: Callable[[_Req], _Resp], request: _Req) -> _Resp:
    """``func(request)``, its deliberate errors aborting the call with their status code and
    message (``field: detail``); anything else propagates (a bug: INTERNAL/UNKNOWN)."""
    try:
        return func(request)
    except Exception as exc:
        report(context, exc)


class InterimErrorInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Reports every deliberate error a unary handler raises as its status (:func:`report`)."""

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        """The handler for ``details.method``, its errors reported."""
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        def reported(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                return inner(request, context)
            except Exception as exc:
                report(context, exc)

        return grpc.unary_unary_rpc_method_handler(
            reported, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
