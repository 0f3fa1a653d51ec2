"""The metrics step of every call: the standard gRPC server series (``api/metrics.py`` defines
them) of one method, counted at the status code the client receives (``api/rpc_status.py``
decides it)."""

from __future__ import annotations

from rng_service.api import metrics
from rng_service.api.metrics import GrpcSeries, grpc_code
from rng_service.api.series import Update, incrementer, tally, timing


class MethodMetrics:
    """The series of one method (``/fairshoe.round.v1.RoundService/Act``) of gRPC type
    ``grpc_type`` (``unary``, ``server_stream``...), its label values (grpc_type, grpc_service,
    grpc_method). Each series is looked up once, here (``labels()`` takes a lock and builds a
    key on every call, and every RPC counts five of them), and updated through its value
    (``api/series.py``)."""

    __slots__ = ("_answered", "_handled", "_series", "_timing", "labels", "received", "sent",
                 "started")

    def __init__(self, method: str, grpc_type: str, series: GrpcSeries | None = None) -> None:
        self._series = series if series is not None else metrics.GRPC
        service, _, name = method.lstrip("/").rpartition("/")
        self.labels = (grpc_type, service, name)
        # calls started, request messages received and response messages handed to gRPC: the
        # chain adds to each (``started(1)``) as it happens
        self.started = incrementer(self._series.started.labels(*self.labels))
        self.received = incrementer(self._series.received.labels(*self.labels))
        self.sent = incrementer(self._series.sent.labels(*self.labels))
        # by code, what a call's end updates (``series.tally``): the time, the code's count,
        # and for a unary call's answer (``answered``) the message sent
        self._handled: dict[str, Update] = {}
        self._answered: dict[str, Update] = {}
        self._timing = timing(self._series.seconds.labels(*self.labels))

    def handled(self, code: str, seconds: float, *, answered: bool = False) -> None:
        """The call ended with ``code`` (a Python status name) after ``seconds``; ``answered``:
        a unary call, whose one response message is handed to gRPC if it ended OK (counted
        as ``sent(1)`` counts it)."""
        ended = (self._answered if answered else self._handled).get(code)
        if ended is None:
            ended = self._ended(code, answered=answered)
        ended(seconds)

    def _ended(self, code: str, *, answered: bool) -> Update:
        """What :meth:`handled` updates for a call ending with ``code``, made and kept."""
        counters = [self._series.handled.labels(*self.labels, grpc_code(code))]
        if answered and code == "OK":
            counters.append(self._series.sent.labels(*self.labels))
        ended = tally(self._timing, counters)
        (self._answered if answered else self._handled)[code] = ended
        return ended
