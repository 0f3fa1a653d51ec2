"""The one table from error kind to gRPC status, decoded the way a client does."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from prometheus_client import REGISTRY

from game_math.errors import BetError, IllegalAction
from rng_service.api.errors import STATUS_CODES
from rng_service.api.interceptors import ServiceInterceptor
from rng_service.api.metrics import grpc_code
from rng_service.core.errors import (
    Conflict,
    ErrorKind,
    IllegalState,
    IntegrityFailure,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Unavailable,
)

RAISE = "/test.Errors/Raise"

ERRORS: dict[bytes, Exception] = {
    b"invalid": InvalidInput("hands[0].bet", "must be positive"),
    b"not_found": NotFound("game", "no game 'baccarat'"),
    b"illegal": IllegalState("cannot split", reason="ROUND_FINISHED", field="actions[0]"),
    b"conflict": Conflict("stale version"),
    b"unavailable": Unavailable("RNG self-test failed", reason="RNG_SELF_TEST_FAILED"),
    b"integrity": IntegrityFailure("bad signature", reason="BAD_SIGNATURE"),
    b"denied": PermissionDenied("auditors may not write", reason="AUDITOR_READ_ONLY"),
    b"bet": BetError("hands[1].bet", "1 is outside the limits"),
    b"action": IllegalAction("cannot double"),
    b"bug": ZeroDivisionError("division by zero in internals"),
}


def _raise(request: bytes, context: grpc.ServicerContext) -> bytes:
    raise ERRORS[request]


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         interceptors=[ServiceInterceptor()])
    handler = grpc.method_handlers_generic_handler(
        "test.Errors", {"Raise": grpc.unary_unary_rpc_method_handler(_raise)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield ch
    server.stop(grace=None)


def _call(channel: grpc.Channel, name: bytes) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(RAISE)(name, timeout=10)
    return err.value


def _details(err: grpc.RpcError) -> dict[str, object]:
    status = rpc_status.from_call(err)
    assert status is not None
    out: dict[str, object] = {}
    for packed in status.details:
        for message in (error_details_pb2.BadRequest(), error_details_pb2.ErrorInfo()):
            if packed.Is(message.DESCRIPTOR):
                packed.Unpack(message)
                out[message.DESCRIPTOR.name] = message
    return out


def test_the_table_covers_every_kind() -> None:
    assert set(STATUS_CODES) == set(ErrorKind)


@pytest.mark.parametrize(("name", "code"), [
    (b"invalid", grpc.StatusCode.INVALID_ARGUMENT),
    (b"not_found", grpc.StatusCode.NOT_FOUND),
    (b"illegal", grpc.StatusCode.FAILED_PRECONDITION),
    (b"conflict", grpc.StatusCode.ABORTED),
    (b"unavailable", grpc.StatusCode.UNAVAILABLE),
    (b"integrity", grpc.StatusCode.DATA_LOSS),
    (b"denied", grpc.StatusCode.PERMISSION_DENIED),
    (b"bet", grpc.StatusCode.INVALID_ARGUMENT),
    (b"action", grpc.StatusCode.FAILED_PRECONDITION),
    (b"bug", grpc.StatusCode.INTERNAL),
])
def test_each_kind_gets_its_code_and_is_counted_at_it(
    channel: grpc.Channel, name: bytes, code: grpc.StatusCode
) -> None:
    labels = {"grpc_type": "unary", "grpc_service": "test.Errors", "grpc_method": "Raise",
              "grpc_code": grpc_code(code.name)}
    before = REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0
    err = _call(channel, name)
    assert err.code() is code
    assert REGISTRY.get_sample_value("grpc_server_handled_total", labels) == before + 1


def test_invalid_input_names_the_field_in_a_bad_request(channel: grpc.Channel) -> None:
    err = _call(channel, b"invalid")
    assert err.details() == "hands[0].bet: must be positive"
    violation = _details(err)["BadRequest"].field_violations[0]  # type: ignore[attr-defined]
    assert (violation.field, violation.description) == ("hands[0].bet", "must be positive")
    bet = _details(_call(channel, b"bet"))["BadRequest"]
    assert bet.field_violations[0].field == "hands[1].bet"  # type: ignore[attr-defined]


def test_illegal_state_carries_its_reason_in_error_info(channel: grpc.Channel) -> None:
    info = _details(_call(channel, b"illegal"))["ErrorInfo"]
    assert (info.reason, info.domain) == ("ROUND_FINISHED", "fairshoe")  # type: ignore[attr-defined]
    assert info.metadata["field"] == "actions[0]"  # type: ignore[attr-defined]
    action = _details(_call(channel, b"action"))["ErrorInfo"]
    assert action.reason == "ACTION_REFUSED"  # type: ignore[attr-defined]
    assert "BadRequest" not in _details(_call(channel, b"illegal"))


@pytest.mark.parametrize(("name", "reason"), [
    (b"unavailable", "RNG_SELF_TEST_FAILED"), (b"integrity", "BAD_SIGNATURE"),
    (b"conflict", "CONFLICT"), (b"denied", "AUDITOR_READ_ONLY"),
])
def test_other_kinds_carry_their_reason(channel: grpc.Channel, name: bytes, reason: str) -> None:
    assert _details(_call(channel, name))["ErrorInfo"].reason == reason  # type: ignore[attr-defined]


def test_a_bug_is_internal_and_its_text_stays_on_the_server(channel: grpc.Channel) -> None:
    err = _call(channel, b"bug")
    assert "division" not in (err.details() or "")
    assert _details(err) == {}
