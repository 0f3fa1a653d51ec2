"""Each step of the interceptor's chain alone, on a stand-in for gRPC's ServicerContext (no
server): status mapping (``rpc_status``), metrics on a registry of the test's own
(``rpc_metrics``), the log line (``rpc_log``), authorization (``authorization``), decoding
(``decoding.decoded``); then the chain (``interceptors``) assembled from them, in process.
The same behaviour over real gRPC: test_grpc_metrics, test_status_table, test_server,
test_lifecycle, test_tenant_attacks."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client import CollectorRegistry

from rng_service.api.admission import Drain
from rng_service.api.authorization import Authorization
from rng_service.api.caller import Access, AuditorGrants
from rng_service.api.decoding import Undecodable, decoded
from rng_service.api.errors import INTERNAL_MESSAGE
from rng_service.api.interceptors import ServiceInterceptor
from rng_service.api.metrics import grpc_series
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_types_pb2
from rng_service.api.rpc_call import Call
from rng_service.api.rpc_log import RpcLog, ids_of
from rng_service.api.rpc_metrics import MethodMetrics
from rng_service.api.rpc_status import failure, settled
from rng_service.core.errors import InvalidInput, NotFound, PermissionDenied
from rng_service.service.ports import DEFAULT_OPERATOR

ACT = "/fairshoe.round.v1.RoundService/Act"
EXPORT = "/fairshoe.audit.v1.AuditService/ExportRecords"
HEALTH = "/grpc.health.v1.Health/Check"


class Aborted(Exception):
    """What gRPC's ``abort`` raises, here."""


@dataclass
class Context:
    """What the chain reads of a call's ServicerContext, and what it did to it."""

    active: bool = True
    remaining: float | None = None
    set_code: grpc.StatusCode | None = None
    pem: bytes | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    sent: list[Any] = field(default_factory=list)  # the statuses it aborted with
    auth_reads: int = 0

    def is_active(self) -> bool:
        return self.active

    def time_remaining(self) -> float | None:
        return self.remaining

    def code(self) -> grpc.StatusCode | None:
        return self.set_code

    def peer(self) -> str:
        return "ipv4:10.0.0.1:5000"

    def auth_context(self) -> dict[str, list[bytes]]:
        self.auth_reads += 1
        return {"x509_pem_cert": [self.pem]} if self.pem is not None else {}

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.set_code = code
        self.sent.append((code, details))
        raise Aborted(details)

    def abort_with_status(self, status: grpc.Status) -> None:
        self.sent.append(status)
        raise Aborted(status.details)


class Lines:
    """A logger keeping each line: (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event, fields))

    def error(self, event: str, **fields: Any) -> None:
        self.lines.append(("error", event, fields))


def pem_of(uri: str) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)]),
                           critical=False)
            .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))


# ----- status mapping -------------------------------------------------------------------------


@pytest.mark.parametrize(("context", "code"), [
    (Context(), "OK"),
    (Context(set_code=grpc.StatusCode.NOT_FOUND), "NOT_FOUND"),  # health's, set by the handler
    (Context(active=False), "CANCELLED"),
    (Context(active=False, remaining=3.0), "CANCELLED"),
    (Context(active=False, remaining=0.0), "DEADLINE_EXCEEDED"),
    # the client has gone: whatever the handler set, it receives nothing of it
    (Context(active=False, remaining=-1.0, set_code=grpc.StatusCode.NOT_FOUND),
     "DEADLINE_EXCEEDED"),
])
def test_a_call_that_returned_ends_at_what_the_client_receives(context: Context,
                                                               code: str) -> None:
    assert settled(context) == code  # type: ignore[arg-type]


def test_a_service_error_maps_to_its_kind_with_its_field() -> None:
    failed = failure(InvalidInput("cards[1]", "XX is not a card"), Context())  # type: ignore[arg-type]
    assert (failed.code, failed.fields) == ("INVALID_ARGUMENT",
                                            {"kind": "invalid_input", "field": "cards[1]"})
    assert failed.status is not None and failed.status.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "XX is not a card" in failed.status.details
    assert failure(NotFound(None, "no round r-1"), Context()).fields == {  # type: ignore[arg-type]
        "kind": "not_found", "field": None}


def test_a_bug_is_internal_its_text_for_the_log_only() -> None:
    bug = KeyError("seed=00ff")
    failed = failure(bug, Context())  # type: ignore[arg-type]
    assert (failed.code, failed.fields) == ("INTERNAL", {"error": "KeyError", "exc_info": bug})
    assert failed.status is not None and failed.status.details == INTERNAL_MESSAGE


def test_a_code_the_handler_aborted_with_is_kept_and_nothing_more_is_sent() -> None:
    failed = failure(Aborted("shutting down"),
                     Context(set_code=grpc.StatusCode.UNAVAILABLE))  # type: ignore[arg-type]
    assert (failed.code, failed.fields, failed.status) == ("UNAVAILABLE", {}, None)


class ReadFailed(grpc.RpcError):  # type: ignore[misc]
    """What reading the requests of a call its client has left raises."""


@pytest.mark.parametrize(("remaining", "code"), [(None, "CANCELLED"), (0.0, "DEADLINE_EXCEEDED")])
def test_grpcs_error_on_a_call_the_client_left_is_the_clients_doing(remaining: float | None,
                                                                     code: str) -> None:
    failed = failure(ReadFailed(), Context(active=False, remaining=remaining))  # type: ignore[arg-type]
    assert (failed.code, failed.status) == (code, None)
    # the same error while the client waits is no client's doing: a bug
    assert failure(ReadFailed(), Context()).code == "INTERNAL"  # type: ignore[arg-type]


# ----- metrics --------------------------------------------------------------------------------


def test_a_methods_series_are_labelled_by_it_and_codes_spelt_as_go_does() -> None:
    registry = CollectorRegistry()
    series = MethodMetrics(ACT, "unary", grpc_series(registry))
    series.started(1)
    series.received(1)
    series.sent(1)
    series.handled("OK", 0.002)
    series.handled("INVALID_ARGUMENT", 0.001)
    series.handled("INVALID_ARGUMENT", 0.001)
    labels = {"grpc_type": "unary", "grpc_service": "fairshoe.round.v1.RoundService",
              "grpc_method": "Act"}

    def value(name: str, **extra: str) -> float | None:
        return registry.get_sample_value(name, {**labels, **extra})

    assert (value("grpc_server_started_total"), value("grpc_server_msg_received_total"),
            value("grpc_server_msg_sent_total")) == (1, 1, 1)
    assert value("grpc_server_handled_total", grpc_code="OK") == 1
    assert value("grpc_server_handled_total", grpc_code="InvalidArgument") == 2
    assert value("grpc_server_handling_seconds_count") == 3


# ----- logging --------------------------------------------------------------------------------


def test_the_line_names_the_requests_ids_and_whom_the_call_acted_for() -> None:
    lines = Lines()
    call = Call(ACT, Context())  # type: ignore[arg-type]
    call.request = round_pb2.ActRequest(round_id="r-1", request_id="q-1", hand_id=0)
    call.operator, call.auditor = "op-a", "aud-1"
    RpcLog(lines).write(call, "OK", 0.0123456, {})
    [(level, event, fields)] = lines.lines
    assert (level, event) == ("info", "rpc")
    assert fields == {"method": ACT, "code": "OK", "latency_ms": 12.346, "operator": "op-a",
                      "auditor": "aud-1", "round_id": "r-1", "request_id": "q-1"}


def test_a_new_rounds_line_names_it_and_a_bug_is_logged_at_error() -> None:
    lines = Lines()
    log = RpcLog(lines)
    call = Call("/fairshoe.round.v1.RoundService/StartRound", Context())  # type: ignore[arg-type]
    call.request = round_pb2.StartRoundRequest(request_id="q-9")
    answer = round_pb2.StartRoundResponse(round=round_types_pb2.RoundView(round_id="r-7"))
    log.write(call, "INTERNAL", 0.001, {"error": "KeyError"}, answer)
    [(level, _, fields)] = lines.lines
    assert level == "error"
    assert (fields["round_id"], fields["request_id"], fields["error"]) == ("r-7", "q-9",
                                                                          "KeyError")
    assert "operator" not in fields and "auditor" not in fields  # known for none: not named
    call.request = round_pb2.ActRequest(round_id="r-1")
    log.write(call, "OK", 0.001, {}, answer)  # a request naming its round: that one
    assert lines.lines[-1][2]["round_id"] == "r-1"


def test_ids_are_printable_and_bounded_and_undecodable_requests_have_none() -> None:
    ids = ids_of(round_pb2.ActRequest(round_id="r\n" + "x" * 500))
    assert ids["round_id"].startswith("r\\n") and len(ids["round_id"]) <= 120
    assert ids_of(Undecodable("fairshoe.round.v1.ActRequest")) == {}
    assert ids_of(round_pb2.ActRequest()) == {}  # empty ids are named by no line


# ----- authorization --------------------------------------------------------------------------


def test_a_call_without_a_certificate_acts_for_the_default_operator_once_checked() -> None:
    context = Context()
    call = Call(ACT, context)  # type: ignore[arg-type]
    step = Authorization(Access(), ACT)
    step.check(call)
    assert (call.operator, call.auditor) == (DEFAULT_OPERATOR, None)
    context.metadata = (("x-fairshoe-operator", "someone-else"),)  # would be refused now
    step.check(call)  # once per call: not asked again


def test_health_acts_for_no_operator() -> None:
    call = Call(HEALTH, Context(metadata=(("x-fairshoe-operator", "whoever"),)))  # type: ignore[arg-type]
    Authorization(Access(), HEALTH).check(call)
    assert (call.operator, call.auditor) == (None, None)


def test_a_refused_auditor_is_named_for_the_log_and_acts_for_no_one() -> None:
    context = Context(pem=pem_of("fairshoe://auditor/aud-1"),
                      metadata=(("x-fairshoe-operator", "op-a"),))
    access = Access(AuditorGrants.parse("aud-1=op-a"))
    call = Call(ACT, context)  # type: ignore[arg-type]
    with pytest.raises(PermissionDenied, match="read"):
        Authorization(access, ACT).check(call)
    assert (call.operator, call.auditor) == (None, "aud-1")
    granted = Call(EXPORT, Context(pem=context.pem, metadata=context.metadata))  # type: ignore[arg-type]
    Authorization(access, EXPORT).check(granted)
    assert (granted.operator, granted.auditor) == ("op-a", "aud-1")


def test_an_ended_call_is_forgotten_by_its_thread() -> None:
    context = Context()
    call = Call(ACT, context)  # type: ignore[arg-type]
    step = Authorization(Access(), ACT)
    step.check(call)
    reads = context.auth_reads
    Authorization.end(call.context)  # type: ignore[arg-type]
    step.check(Call(ACT, context))  # type: ignore[arg-type]
    assert context.auth_reads == reads + 1  # read again: nothing of it was kept


# ----- decoding -------------------------------------------------------------------------------


def test_an_undecodable_request_is_invalid_input_of_the_whole_request() -> None:
    request = round_pb2.ActRequest(round_id="r-1")
    assert decoded(request) is request
    with pytest.raises(InvalidInput, match=r"not a valid fairshoe\.round\.v1\.ActRequest") as info:
        decoded(Undecodable("fairshoe.round.v1.ActRequest"))
    assert info.value.field is None


# ----- the chain ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Details:
    method: str


class Chained:
    """A ServiceInterceptor with a registry and a log of the test's own."""

    def __init__(self, **options: Any) -> None:
        self.registry = CollectorRegistry()
        self.lines = Lines()
        self.interceptor = ServiceInterceptor(series=grpc_series(self.registry),
                                              log=RpcLog(self.lines), **options)

    def handled(self, method: str, grpc_type: str, code: str) -> float:
        service, _, name = method.lstrip("/").rpartition("/")
        return self.registry.get_sample_value("grpc_server_handled_total", {
            "grpc_type": grpc_type, "grpc_service": service, "grpc_method": name,
            "grpc_code": code}) or 0.0

    def unary(self, method: str, behavior: Any) -> Any:
        handler = grpc.unary_unary_rpc_method_handler(
            behavior, round_pb2.ActRequest.FromString, round_pb2.ActResponse.SerializeToString)
        return self.interceptor.intercept_service(lambda _: handler, Details(method))

    def stream(self, method: str, behavior: Any) -> Any:
        handler = grpc.unary_stream_rpc_method_handler(
            behavior, round_pb2.ActRequest.FromString, round_pb2.ActResponse.SerializeToString)
        return self.interceptor.intercept_service(lambda _: handler, Details(method))


def test_the_chain_runs_each_step_once_per_call() -> None:
    chained = Chained()
    seen: list[round_pb2.ActRequest] = []

    def act(request: round_pb2.ActRequest, context: Any) -> round_pb2.ActResponse:
        seen.append(request)
        return round_pb2.ActResponse(round=round_types_pb2.RoundView(round_id=request.round_id))

    wrapped = chained.unary(ACT, act)
    assert chained.unary(ACT, act) is not wrapped  # another handler: wrapped anew
    request = wrapped.request_deserializer(round_pb2.ActRequest(round_id="r-1").SerializeToString())
    context = Context()
    wrapped.unary_unary(request, context)
    assert context.auth_reads == 1
    Authorization(Access(), ACT).check(Call(ACT, context))  # type: ignore[arg-type]
    assert context.auth_reads == 2  # the ended call's identity was forgotten
    with pytest.raises(Aborted):  # bytes that are no ActRequest: INVALID_ARGUMENT, no handler
        wrapped.unary_unary(wrapped.request_deserializer(b"\xff"), Context())
    assert len(seen) == 1
    assert [(line[2]["code"], line[2].get("round_id")) for line in chained.lines.lines] == [
        ("OK", "r-1"), ("INVALID_ARGUMENT", None)]
    assert chained.handled(ACT, "unary", "OK") == chained.handled(ACT, "unary",
                                                                  "InvalidArgument") == 1


def test_a_drained_chain_refuses_before_the_handler_and_counts_the_refusal() -> None:
    drain = Drain()
    chained = Chained(drain=drain)
    wrapped = chained.unary(ACT, lambda request, context: pytest.fail("handler ran"))
    drain.begin()
    context = Context()
    with pytest.raises(Aborted, match="shutting down"):
        wrapped.unary_unary(round_pb2.ActRequest(), context)
    assert context.sent == [(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")]
    assert chained.handled(ACT, "unary", "Unavailable") == 1
    assert drain.in_flight == 0


def test_a_drain_waits_until_the_last_admitted_call_has_left() -> None:
    drain = Drain()
    for _ in range(2):
        drain.enter(ACT, Context())  # type: ignore[arg-type]
    drain.begin()
    assert not drain.wait_idle(0.01)  # two in flight
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(drain.wait_idle(30)))
    waiter.start()
    while not drain._waiting:  # the waiter is in wait_idle before the calls leave
        time.sleep(0.001)
    drain.leave()
    drain.leave()  # the last: the waiter is woken (not left to its 30 s timeout)
    waiter.join(30)
    assert waited == [True] and drain.in_flight == 0
    with pytest.raises(Aborted, match="shutting down"):
        drain.enter(ACT, Context())  # type: ignore[arg-type]
    drain.enter(HEALTH, Context())  # type: ignore[arg-type]  # health still answers


def test_a_stream_past_the_limit_is_refused_and_an_open_one_counts_until_it_ends() -> None:
    chained = Chained(max_streams=1)
    chained.interceptor.streams.grace = 0.0  # refused at once: nothing frees the slot here

    def export(request: Any, context: Any) -> Iterator[round_pb2.ActResponse]:
        yield round_pb2.ActResponse()
        yield round_pb2.ActResponse()

    wrapped = chained.stream(EXPORT, export)
    held = wrapped.unary_stream(round_pb2.ActRequest(), Context())
    next(held)  # open, and holding the one slot
    with pytest.raises(Aborted):
        next(wrapped.unary_stream(round_pb2.ActRequest(), Context()))
    assert chained.handled(EXPORT, "server_stream", "ResourceExhausted") == 1
    assert list(held) == [round_pb2.ActResponse()]
    assert chained.handled(EXPORT, "server_stream", "OK") == 1
    next(wrapped.unary_stream(round_pb2.ActRequest(), Context()))  # the slot is free again


def test_a_request_streams_call_is_refused_before_a_handler_that_reads_no_request() -> None:
    chained = Chained()
    handler = grpc.stream_unary_rpc_method_handler(
        lambda requests, context: pytest.fail("handler ran"),
        round_pb2.ActRequest.FromString, round_pb2.ActResponse.SerializeToString)
    wrapped = chained.interceptor.intercept_service(lambda _: handler, Details(ACT))
    auditor = Context(pem=pem_of("fairshoe://auditor/aud-1"),
                      metadata=(("x-fairshoe-operator", "op-a"),))
    with pytest.raises(Aborted, match="read"):
        wrapped.stream_unary(iter([round_pb2.ActRequest(round_id="r-1")]), auditor)
    [(_, _, fields)] = chained.lines.lines
    assert (fields["code"], fields["auditor"], "round_id" in fields) == (
        "PERMISSION_DENIED", "aud-1", False)  # no request was read
    assert chained.handled(ACT, "client_stream", "PermissionDenied") == 1


def test_a_request_streams_line_names_its_first_requests_ids() -> None:
    chained = Chained()
    handler = grpc.stream_unary_rpc_method_handler(
        lambda requests, context: round_pb2.ActResponse(
            round=round_types_pb2.RoundView(round_id=",".join(r.round_id for r in requests))),
        round_pb2.ActRequest.FromString, round_pb2.ActResponse.SerializeToString)
    wrapped = chained.interceptor.intercept_service(lambda _: handler, Details(ACT))
    answer = wrapped.stream_unary(iter([round_pb2.ActRequest(round_id="r-1"),
                                        round_pb2.ActRequest(round_id="r-2")]), Context())
    assert answer.round.round_id == "r-1,r-2"
    [(_, _, fields)] = chained.lines.lines
    assert (fields["code"], fields["round_id"]) == ("OK", "r-1")
    assert chained.handled(ACT, "client_stream", "OK") == 1
