"""Reports a servicer's deliberate errors as gRPC status codes (interim).

The errors interceptor being written for ``build_server`` maps every ``FairshoeError`` kind to a
status code in one table; until it is in place, the servicers added here (MathService, the typed
ReplayRound) report their errors through :func:`answer`, with the same mapping for the kinds they
raise. Once the interceptor is in, ``answer`` can become a plain call and this module go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

import grpc

from rng_service.core.errors import ErrorKind, FairshoeError

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

CODES: Final = {
    ErrorKind.INVALID_INPUT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.ILLEGAL_STATE: grpc.StatusCode.FAILED_PRECONDITION,
}


def answer(context: grpc.ServicerContext, func: Callable[[_Req], _Resp], request: _Req) -> _Resp:
    """``func(request)``, its deliberate errors aborting the call with their status code and
    message (``field: detail``); anything else propagates (a bug: INTERNAL/UNKNOWN)."""
    try:
        return func(request)
    except FairshoeError as exc:
        code = CODES.get(exc.kind)
        if code is None:
            raise
        context.abort(code, str(exc))
        raise  # unreachable: abort raises
