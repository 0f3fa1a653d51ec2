"""The metrics step of every call: the standard gRPC server series (``api/metrics.py`` defines
them) of one method, counted at the status code the client receives (``api/rpc_status.py``
decides it)."""

from __future__ import annotations

from rng_service.api import metrics
from rng_service.api.metrics import GrpcSeries, grpc_code
from rng_service.api.series import Update, incrementer, observer


class MethodMetrics:
    """The series of one method (``/fairshoe.round.v1.RoundService/Act``) of gRPC type
    ``grpc_type`` (``unary``, ``server_stream``...), its label values (grpc_type, grpc_service,
    grpc_method). Each series is looked up once, here (``labels()`` takes a lock and builds a
    key on every call, and every RPC counts five of them), and updated through its value
    (``api/series.py``)."""

    __slots__ = ("_handled", "_seconds", "_series", "labels", "received", "sent", "started")

    def __init__(self, method: str, grpc_type: str, series: GrpcSeries | None = None) -> None:
        self._series = series if series is not None else metrics.GRPC
        service, _, name = method.lstrip("/").rpartition("/")
        self.labels = (grpc_type, service, name)
        # calls started, request messages received and response messages handed to gRPC: the
        # chain adds to each (``started(1)``) as it happens
        self.started = incrementer(self._series.started.labels(*self.labels))
        self.received = incrementer(self._series.received.labels(*self.labels))
        self.sent = incrementer(self._series.sent.labels(*self.labels))
        self._seconds = observer(self._series.seconds.labels(*self.labels))
        self._handled: dict[str, Update] = {}

    def handled(self, code: str, seconds: float) -> None:
        """The call ended with ``code`` (a Python status name) after ``seconds``."""
        self._seconds(seconds)
        handled = self._handled.get(code)
        if handled is None:
            handled = incrementer(self._series.handled.labels(*self.labels, grpc_code(code)))
            self._handled[code] = handled
        handled(1)
