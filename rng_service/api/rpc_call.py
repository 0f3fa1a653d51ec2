"""One call as the interceptor's steps see it (``api/interceptors.py``): what the steps record
while it runs (who called, which round and request it names) and its log line reads at its end.
"""

from __future__ import annotations

import time
from typing import Any

import grpc


class Call:
    """One call of ``method`` on ``context``, from the moment its handler is invoked.

    ``operator`` and ``auditor`` are set by authorization (``api/authorization.py``);
    ``request`` is the first request message that arrived (None until one did), whose ids the
    log line names (``api/rpc_log.py``); ``started`` times the call for the metrics and the log
    line. Slots: one is made per call, on every call's path."""

    __slots__ = ("auditor", "authorized", "context", "method", "operator", "request", "started")

    def __init__(self, method: str, context: grpc.ServicerContext) -> None:
        self.method = method
        self.context = context
        self.started = time.perf_counter()
        # the operator of the project's own services (health and reflection act for none), and
        # the auditor acting for it: known once authorized
        self.operator: str | None = None
        self.auditor: str | None = None
        self.authorized = False
        self.request: Any = None
