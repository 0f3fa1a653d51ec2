"""The rich error details of a refusal (google.rpc.Status in the call's trailers), as the tests
read them."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The refusal's google.rpc.ErrorInfo (its reason, domain and metadata); an assertion error
    if it has none."""
    status = rpc_status.from_call(err)
    assert status is not None, err
    for packed in status.details:
        if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            packed.Unpack(info)
            return info
    raise AssertionError(f"no ErrorInfo in {err}")


def reason_of(err: grpc.RpcError) -> str:
    """The reason code of a refusal (its google.rpc.ErrorInfo's), or "" if it has none."""
    status = rpc_status.from_call(err)
    for packed in status.details if status is not None else ():
        if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            packed.Unpack(info)
            return str(info.reason)
    return ""
