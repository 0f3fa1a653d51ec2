"""RngService over gRPC (fairshoe.rng.v1): certified integers and shuffles with their proof.

Each answer carries the values, the commitment fixed before drawing, the signed record of the draw
and the signed reveal of its seed (:mod:`rng_service.service.rng_draws`; the byte convention that
recomputes the values from the seed is :mod:`rng_service.rng.draws`). Errors are the service's
kinds, mapped by the errors interceptor (:mod:`rng_service.api.errors`): INVALID_ARGUMENT naming
``count``, ``min``, ``max``, ``n``, ``client_seed`` or ``request_id``.
"""

from __future__ import annotations

from typing import Any

import grpc

from rng_service.api.caller import operator_of
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.records.schema import RNG_REVEAL_SCHEMA, RNG_SCHEMA
from rng_service.service.rng_draws import Draw, RngDrawService


def proof(result: Draw) -> rng_pb2.DrawProof:
    """The commitment and both signed envelopes of a draw."""
    return rng_pb2.DrawProof(
        commitment=result.commitment,
        record=common_pb2.SignedRecord(schema=RNG_SCHEMA, key_id=result.key_id,
                                       envelope=result.record),
        reveal=common_pb2.SignedRecord(schema=RNG_REVEAL_SCHEMA, key_id=result.key_id,
                                       envelope=result.reveal))


class RngApi(rng_pb2_grpc.RngServiceServicer):  # type: ignore[misc]
    """fairshoe.rng.v1.RngService over :class:`RngDrawService`."""

    def __init__(self, service: RngDrawService) -> None:
        self._service = service

    def GenerateIntegers(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``count`` integers uniform in ``[min, max]``, with their signed proof."""
        def generate(req: Any) -> rng_pb2.GenerateIntegersResponse:
            result = self._service.generate_integers(
                operator_of(context), count=req.count, minimum=req.min, maximum=req.max,
                client_seed=req.client_seed, request_id=req.request_id)
            return rng_pb2.GenerateIntegersResponse(values=result.results, proof=proof(result))

        return generate(request)

    def Shuffle(self, request: Any, context: grpc.ServicerContext) -> Any:
        """A uniform permutation of ``0..n-1``, with its signed proof."""
        def shuffle(req: Any) -> rng_pb2.ShuffleResponse:
            result = self._service.shuffle(operator_of(context), n=req.n,
                                           client_seed=req.client_seed,
                                           request_id=req.request_id)
            return rng_pb2.ShuffleResponse(permutation=result.results, proof=proof(result))

        return shuffle(request)
