"""Request decoding that cannot crash a call.

gRPC deserializes a request before any interceptor or handler runs, and a request that does not
decode would end as INTERNAL with a server traceback. :func:`tolerant` wraps a method's
deserializer so a decoding failure becomes an :class:`Undecodable`, which the interceptor reports
as INVALID_ARGUMENT like any other bad input, counted like any other RPC.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rng_service.core.errors import InvalidInput


@dataclass(frozen=True)
class Undecodable:
    """Stands in for a request whose bytes are not a valid ``message_type``."""

    message_type: str

    def error(self) -> InvalidInput:
        """The error reported for it: the request as a whole is invalid."""
        return InvalidInput(None, f"the request is not a valid {self.message_type}: it does not "
                                  "decode (truncated, or invalid UTF-8 in a string field)")


def tolerant(deserializer: Callable[[bytes], Any] | None, method: str
             ) -> Callable[[bytes], Any] | None:
    """``deserializer`` (of ``method``'s requests) answering :class:`Undecodable` instead of
    raising; None stays None (a method without a request message)."""
    if deserializer is None:
        return None
    message_class = getattr(deserializer, "__self__", None)  # e.g. ReplayRoundRequest.FromString
    descriptor = getattr(message_class, "DESCRIPTOR", None)
    undecodable = Undecodable(getattr(descriptor, "full_name", f"request of {method}"))

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception:  # protobuf's DecodeError, or whatever a custom deserializer raises
            return undecodable

    return deserialize


def decoded(request: Any) -> Any:
    """``request``, or the InvalidInput of a request that did not decode (:class:`Undecodable`,
    which :func:`tolerant` answered for it)."""
    if isinstance(request, Undecodable):
        raise request.error()
    return request
