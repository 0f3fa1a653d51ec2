"""Who is calling: the operator every request is scoped to.

The operator is the authenticated caller (its client certificate or credentials), never a request
field (``fairshoe.common.v1``). Until authentication is wired into the server, every call is the
default operator's; this is the one place that changes when it is.
"""

from __future__ import annotations

import grpc

from rng_service.service.ports import DEFAULT_OPERATOR


def operator_of(context: grpc.ServicerContext) -> str:
    """The operator the call acts for."""
    return DEFAULT_OPERATOR
