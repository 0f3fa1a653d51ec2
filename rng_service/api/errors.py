"""How an error is reported over gRPC: ONE table from error kind to status code, with rich details.

Every error the service raises on purpose has a kind (``rng_service.core.errors``); this module
alone turns it into a ``google.rpc.Status``: the code from :data:`STATUS_CODES`, the message cut
and made printable, and details a client can decode with ``grpc_status.rpc_status.from_call``:

* INVALID_INPUT -> INVALID_ARGUMENT with a ``google.rpc.BadRequest`` FieldViolation naming
  the field;
* any kind with a ``reason`` (ILLEGAL_STATE always) -> a ``google.rpc.ErrorInfo`` in domain
  ``fairshoe`` whose ``reason`` a client can switch on, and whose ``metadata`` holds the field
  (``field``) and the error's values (``stake_minor``, ``balance_minor``, ``hand_id``...: see
  ``FairshoeError.metadata``), so a client renders them in its own units and names.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from rng_service.core.errors import ErrorKind, kind_of

DOMAIN: Final = "fairshoe"
# gRPC metadata (which carries the message twice: grpc-message, percent-encoded past ASCII, and
# grpc-status-details-bin) is limited to 16 KiB in all; a short message also keeps logs and
# client UIs readable. In bytes of UTF-8: 400 characters of emoji are 1,600
MAX_MESSAGE_BYTES: Final = 400
MAX_FIELD_BYTES: Final = 120
MAX_METADATA_ITEMS: Final = 16
INTERNAL_MESSAGE: Final = "internal error; it has been logged"

STATUS_CODES: Final[Mapping[ErrorKind, grpc.StatusCode]] = MappingProxyType({
    ErrorKind.INVALID_INPUT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.ILLEGAL_STATE: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.CONFLICT: grpc.StatusCode.ABORTED,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.INTEGRITY: grpc.StatusCode.DATA_LOSS,
    ErrorKind.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
})


def printable(text: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """``text`` with every unprintable character (controls, lone surrogates, which UTF-8 cannot
    encode) escaped as in a Python literal, cut to ``limit`` bytes of UTF-8 (whole characters):
    a message echoing a client's wide characters is as short on the wire as one of ASCII.

    >>> printable("bad\\ud800\\n")
    'bad\\\\ud800\\\\n'
    >>> printable("x" * 10, limit=4)
    'x...'
    >>> len(printable("\\U0001f0a1" * 3, limit=10).encode())  # one card of 4 bytes, and "..."
    7
    """
    if len(text) <= limit and text.isprintable() and len(text.encode()) <= limit:
        return text  # the usual case (ids, messages), in C
    shown = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text[: limit + 1])
    encoded = shown.encode()
    if len(encoded) <= limit:
        return shown
    return encoded[: limit - 3].decode(errors="ignore") + "..."


def status_proto(exc: BaseException) -> status_pb2.Status:
    """The ``google.rpc.Status`` reporting ``exc``; INTERNAL with a generic message for anything
    that is not a deliberate error (its text may hold anything, so it never reaches a client)."""
    kind = kind_of(exc)
    if kind is None:
        return status_pb2.Status(code=code_pb2.INTERNAL, message=INTERNAL_MESSAGE)
    code = STATUS_CODES[kind]
    field = getattr(exc, "field", None)
    reason = getattr(exc, "reason", None)
    status = status_pb2.Status(code=code.value[0], message=printable(str(exc)))
    if kind is ErrorKind.INVALID_INPUT:
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=printable(field or "", MAX_FIELD_BYTES),
            description=printable(getattr(exc, "detail", str(exc))))
        status.details.append(_packed(error_details_pb2.BadRequest(field_violations=[violation])))
    if reason or kind is ErrorKind.ILLEGAL_STATE:
        info = error_details_pb2.ErrorInfo(reason=reason or "ILLEGAL_STATE", domain=DOMAIN)
        for key, value in list(getattr(exc, "metadata", {}).items())[:MAX_METADATA_ITEMS]:
            info.metadata[printable(key, MAX_FIELD_BYTES)] = printable(value, MAX_FIELD_BYTES)
        if field:
            info.metadata["field"] = printable(field, MAX_FIELD_BYTES)
        status.details.append(_packed(info))
    return status


def grpc_status(exc: BaseException) -> grpc.Status:
    """``exc`` as the status ``ServicerContext.abort_with_status`` sends (code, message and the
    details in the ``grpc-status-details-bin`` trailer)."""
    return rpc_status.to_status(status_proto(exc))


def code_name(status: status_pb2.Status) -> str:
    """The name of a status's code (``INVALID_ARGUMENT``), as the metrics label it."""
    return str(code_pb2.Code.Name(status.code))


def _packed(message: error_details_pb2.BadRequest | error_details_pb2.ErrorInfo) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
