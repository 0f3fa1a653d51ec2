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

from rng_service.api.audit_api import log_inclusion
from rng_service.api.caller import operator_of
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.records.schema import RNG_REVEAL_SCHEMA, RNG_SCHEMA
from rng_service.service.audit import AuditService
from rng_service.service.ports import LeafKind
from rng_service.service.rng_draws import Draw, RngDrawService
from rng_service.service.translog import LeafProof


def proof(result: Draw, log: LeafProof | None = None) -> rng_pb2.DrawProof:
    """The commitment and both signed envelopes of a draw, and the record's leaf and inclusion
    proof when ``log`` is given."""
    return rng_pb2.DrawProof(
        log=log_inclusion(log),
        commitment=result.commitment,
        record=common_pb2.SignedRecord(schema=RNG_SCHEMA, key_id=result.key_id,
                                       envelope=result.record),
        reveal=common_pb2.SignedRecord(schema=RNG_REVEAL_SCHEMA, key_id=result.key_id,
                                       envelope=result.reveal))


class RngApi(rng_pb2_grpc.RngServiceServicer):  # type: ignore[misc]
    """fairshoe.rng.v1.RngService over :class:`RngDrawService`."""

    def __init__(self, service: RngDrawService, audit: AuditService | None = None) -> None:
        """``audit``: where each draw's record's leaf and inclusion proof are read (absent: the
        answers carry none)."""
        self._service = service
        self._audit = audit

    def _proof(self, operator: str, result: Draw) -> rng_pb2.DrawProof:
        log = None if self._audit is None else \
            self._audit.leaf_proof(operator, LeafKind.RNG, result.draw_id)
        return proof(result, log)

    def GenerateIntegers(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``count`` integers uniform in ``[min, max]``, with their signed proof."""
        def generate(req: Any) -> rng_pb2.GenerateIntegersResponse:
            operator = operator_of(context)
            result = self._service.generate_integers(
                operator, count=req.count, minimum=req.min, maximum=req.max,
                client_seed=req.client_seed, request_id=req.request_id)
            return rng_pb2.GenerateIntegersResponse(values=result.results,
                                                    proof=self._proof(operator, result))

        return generate(request)

    def Shuffle(self, request: Any, context: grpc.ServicerContext) -> Any:
        """A uniform permutation of ``0..n-1``, with its signed proof."""
        def shuffle(req: Any) -> rng_pb2.ShuffleResponse:
            operator = operator_of(context)
            result = self._service.shuffle(operator, n=req.n,
                                           client_seed=req.client_seed,
                                           request_id=req.request_id)
            return rng_pb2.ShuffleResponse(permutation=result.results,
                                           proof=self._proof(operator, result))

        return shuffle(request)
