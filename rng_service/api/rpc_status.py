"""The status mapping step of every call: the status code a call ends with, as the client
receives it, and what a call whose handler raised sends (the error-to-status table is
``api/errors.py``'s).

* a handler that returned: the code it set (health's NOT_FOUND), OK if none;
* a handler that raised an error of the service: the code of its kind, with its details;
  anything else is a bug: INTERNAL, with a generic message (the log has the cause);
* a handler that aborted with a code of its own (a gate's UNAVAILABLE or RESOURCE_EXHAUSTED
  included): that code;
* whatever the handler did, a call the client no longer waits for (it cancelled, its deadline
  passed, its connection went) is CANCELLED or DEADLINE_EXCEEDED.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import grpc
from grpc_status import rpc_status

from rng_service.api.errors import MAX_FIELD_BYTES, code_name, printable, status_proto
from rng_service.core.errors import kind_of


def abandoned(context: grpc.ServicerContext) -> str:
    """The status of a call the client no longer waits for: DEADLINE_EXCEEDED if its deadline
    has passed, else CANCELLED (the client cancelled, or its connection went)."""
    remaining = context.time_remaining()
    return "DEADLINE_EXCEEDED" if remaining is not None and remaining <= 0 else "CANCELLED"


def settled(context: grpc.ServicerContext) -> str:
    """The status of a call whose handler returned (or whose stream ended): the code the
    handler set (OK if none), unless the client has gone (:func:`abandoned`)."""
    if not context.is_active():  # the client no longer waits for an answer
        return abandoned(context)
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "OK"


class Failure(NamedTuple):  # a tuple: made on every failed call's path, at a tuple's cost
    """How a call whose handler raised ends: its ``code``, what its log line says of the
    failure (``fields``), and the ``status`` to abort it with (None: the status is decided
    already, and the exception goes on to gRPC as it is)."""

    code: str
    fields: dict[str, Any]
    status: grpc.Status | None = None


def failure(exc: Exception, context: grpc.ServicerContext) -> Failure:
    """How the call of ``context`` ends, its handler (or a gate) having raised ``exc``."""
    if isinstance(exc, grpc.RpcError) and not context.is_active():
        # reading the requests of a call the client has left (cancelled, or its deadline
        # passed) raises gRPC's own error: the client's doing, nothing to report to it
        return Failure(abandoned(context), {})
    set_code = context.code()
    if isinstance(set_code, grpc.StatusCode) and set_code is not grpc.StatusCode.OK:
        # the handler aborted with a code of its own: the status is already decided
        return Failure(set_code.name, {})
    status = status_proto(exc)
    kind = kind_of(exc)
    if kind is None:
        # a bug, whatever the request: the client sees a generic message, the log the cause
        return Failure(code_name(status), {"error": type(exc).__name__, "exc_info": exc},
                       rpc_status.to_status(status))
    field = getattr(exc, "field", None)
    return Failure(code_name(status),
                   {"kind": str(kind),
                    "field": None if field is None else printable(field, MAX_FIELD_BYTES)},
                   rpc_status.to_status(status))
