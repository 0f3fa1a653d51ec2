"""AuditService over gRPC (fairshoe.audit.v1): signing keys, one round's record, a finished
shoe's reveal, and the export stream of every signed envelope in a time range.

The servicer only translates: requests into :class:`rng_service.service.audit.AuditService`
calls, stored envelopes into ``SignedRecord`` messages (their bytes exactly as signed). Errors are
the service's kinds, reported by the errors interceptor (:mod:`rng_service.api.errors`):
INVALID_ARGUMENT for a malformed id or an empty time range, NOT_FOUND for an unknown round or
shoe (or a round still open), FAILED_PRECONDITION (reason SHOE_NOT_FINISHED) for the reveal of a
shoe in play. ExportRecords checks its range before the first item and then streams page by page
(:data:`rng_service.service.audit.DEFAULT_BATCH` envelopes per read), so neither side holds the
whole export. With ``leaf_range`` it streams a range of the caller's log instead: one
``log_start`` (the checkpoint and the frontier of the leaves before the range), then every leaf in
index order, each with its ``log`` (leaf index, tree size, inclusion proof; the checkpoint is
log_start's, not repeated).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from rng_service.api.caller import operator_of
from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.core.errors import InvalidInput
from rng_service.log import parse_checkpoint
from rng_service.service.audit import AuditService, PublicKeyView, SignedEnvelope
from rng_service.service.ports import EnvelopeKind, LeafKind, StoredEnvelope
from rng_service.service.translog import LeafProof

#: a Timestamp's valid range (google/protobuf/timestamp.proto): 0001-01-01 to 9999-12-31
MIN_SECONDS: Final = -62_135_596_800
MAX_SECONDS: Final = 253_402_300_799
_LEAF_KINDS: Final = {
    audit_pb2.LeafRef.KIND_KEY: LeafKind.KEY,
    audit_pb2.LeafRef.KIND_SHOE_COMMITMENT: LeafKind.SHOE_COMMITMENT,
    audit_pb2.LeafRef.KIND_ROUND: LeafKind.ROUND,
    audit_pb2.LeafRef.KIND_SHOE_REVEAL: LeafKind.SHOE_REVEAL,
    audit_pb2.LeafRef.KIND_RNG: LeafKind.RNG,
    audit_pb2.LeafRef.KIND_RNG_REVEAL: LeafKind.RNG_REVEAL,
}
_ITEM_FIELD: Final = {
    EnvelopeKind.ROUND: "round_record",
    EnvelopeKind.SHOE_REVEAL: "shoe_reveal",
    EnvelopeKind.RNG: "rng_record",
    EnvelopeKind.RNG_REVEAL: "rng_reveal",
}
#: the ExportRecordsResponse field of each kind of leaf (a leaf-range export)
LEAF_ITEM_FIELD: Final = {
    LeafKind.KEY: "key_record",
    LeafKind.SHOE_COMMITMENT: "shoe_commitment",
    **{LeafKind(str(kind)): name for kind, name in _ITEM_FIELD.items()},
}


def signed_record(item: SignedEnvelope) -> common_pb2.SignedRecord:
    """A stored signed envelope as the API's ``SignedRecord`` (its bytes exactly as signed)."""
    return common_pb2.SignedRecord(schema=item.schema, key_id=item.key_id,
                                   envelope=item.envelope)


def _timestamp(when: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(when)
    return stamp


def instant(message: Any, name: str) -> datetime | None:
    """The optional Timestamp ``name`` of ``message`` as a UTC datetime, rounded up to the
    microsecond (stored times have microseconds: rounding up keeps "at or after" and "before"
    exact); InvalidInput naming the field outside the Timestamp's range."""
    if not message.HasField(name):
        return None
    stamp = getattr(message, name)
    if not MIN_SECONDS <= stamp.seconds <= MAX_SECONDS or not 0 <= stamp.nanos < 10**9:
        raise InvalidInput(name, "is not a valid timestamp (0001-01-01 to 9999-12-31)")
    micros = -(-stamp.nanos // 1000)
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=stamp.seconds,
                                                             microseconds=micros)
    except OverflowError:  # 9999-12-31T23:59:59.999999999 rounds past the last datetime
        raise InvalidInput(name, "is not a valid timestamp (0001-01-01 to 9999-12-31)") from None


def _key(view: PublicKeyView) -> audit_pb2.SigningKey:
    key = audit_pb2.SigningKey(key_id=view.key_id, jwk_json=json.dumps(view.jwk),
                               valid_from=_timestamp(view.valid_from))
    if view.valid_until is not None:
        key.valid_until.CopyFrom(_timestamp(view.valid_until))
    return key


def _item(item: StoredEnvelope) -> audit_pb2.ExportRecordsResponse:
    return _response(_ITEM_FIELD[item.kind], signed_record(SignedEnvelope.parse(item.envelope)))


def _response(name: str, record: common_pb2.SignedRecord,
              log: audit_pb2.LogInclusion | None = None) -> audit_pb2.ExportRecordsResponse:
    """An export item holding ``record`` in its field ``name`` (and ``log`` if given)."""
    response = audit_pb2.ExportRecordsResponse(log=log)
    getattr(response, name).CopyFrom(record)
    return response


class AuditApi(audit_pb2_grpc.AuditServiceServicer):  # type: ignore[misc]
    """fairshoe.audit.v1.AuditService over :class:`AuditService`."""

    def __init__(self, service: AuditService) -> None:
        self._service = service

    def GetSigningKeys(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The key store's public keys with their validity periods, and the same as a JWKS."""
        def keys(_: Any) -> audit_pb2.GetSigningKeysResponse:
            found = self._service.signing_keys()
            return audit_pb2.GetSigningKeysResponse(keys=[_key(k) for k in found.keys],
                                                    jwks_json=found.jwks_json)

        return keys(request)

    def GetRoundRecord(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The signed record of one finished round (NOT_FOUND while it is open)."""
        def record(req: Any) -> audit_pb2.GetRoundRecordResponse:
            operator = operator_of(context)
            found = self._service.round_record(operator, req.round_id)
            proof = self._service.leaf_proof(operator, LeafKind.ROUND, req.round_id)
            return audit_pb2.GetRoundRecordResponse(record=signed_record(found),
                                                    log=log_inclusion(proof))

        return record(request)

    def GetShoeReveal(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The signed seed reveal of a finished shoe (FAILED_PRECONDITION while it is in play)."""
        def reveal(req: Any) -> audit_pb2.GetShoeRevealResponse:
            operator = operator_of(context)
            found = self._service.shoe_reveal(operator, req.shoe_id)
            proof = self._service.leaf_proof(operator, LeafKind.SHOE_REVEAL, req.shoe_id)
            return audit_pb2.GetShoeRevealResponse(reveal=signed_record(found),
                                                   log=log_inclusion(proof))

        return reveal(request)

    def ExportRecords(self, request: Any, context: grpc.ServicerContext
                      ) -> Iterator[audit_pb2.ExportRecordsResponse]:
        """Every signed envelope stored in ``[start_time, end_time)``, oldest first, page by page
        (the range is checked before the first item).
        """
        def start(req: Any) -> Iterator[StoredEnvelope]:
            return self._service.export(operator_of(context), instant(req, "start_time"),
                                        instant(req, "end_time"))

        if request.HasField("leaf_range"):
            yield from self._leaf_range(request, context)
            return
        for item in start(request):  # range errors before the first item
            yield _item(item)

    def _leaf_range(self, request: Any, context: grpc.ServicerContext
                    ) -> Iterator[audit_pb2.ExportRecordsResponse]:
        """log_start, then every leaf of the range with its inclusion proof."""
        if request.HasField("start_time") or request.HasField("end_time"):
            raise InvalidInput("leaf_range", "exports a range of the log: give no start_time "
                               "or end_time with it")
        found = self._service.export_leaves(operator_of(context),
                                            request.leaf_range.from_tree_size)
        tree_size = parse_checkpoint(found.checkpoint).checkpoint.size
        yield audit_pb2.ExportRecordsResponse(log_start=audit_pb2.LogRangeStart(
            checkpoint=found.checkpoint, from_tree_size=found.first,
            frontier_hashes=list(found.frontier.hashes)))
        for leaf, proof in found.leaves:
            record = signed_record(SignedEnvelope.parse(leaf.entry or b""))
            log = audit_pb2.LogInclusion(leaf_index=leaf.index, tree_size=tree_size,
                                         hashes=list(proof))
            yield _response(LEAF_ITEM_FIELD[leaf.kind], record, log)

    def GetCheckpoint(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The latest signed checkpoint of the caller's operator log."""
        operator = operator_of(context)
        found = self._service.checkpoint(operator)
        parsed = parse_checkpoint(found.note).checkpoint
        return audit_pb2.GetCheckpointResponse(checkpoint=found.note, origin=parsed.origin,
                                               tree_size=parsed.size,
                                               root_hash=parsed.root_hash)

    def GetInclusionProof(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The inclusion proof of a leaf (by index, or by kind and id) in a tree size."""
        found = self._service.inclusion_proof(operator_of(context), _leaf(request),
                                              request.tree_size)
        return audit_pb2.GetInclusionProofResponse(
            leaf_index=found.leaf_index, tree_size=found.tree_size, hashes=list(found.hashes),
            checkpoint=found.checkpoint)

    def GetConsistencyProof(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The consistency proof between two tree sizes (to_size 0: the latest checkpoint's)."""
        found = self._service.consistency_proof(operator_of(context), request.from_size,
                                                request.to_size)
        return audit_pb2.GetConsistencyProofResponse(
            from_size=found.leaf_index, to_size=found.tree_size, hashes=list(found.hashes),
            checkpoint=found.checkpoint)


def log_inclusion(proof: LeafProof | None) -> audit_pb2.LogInclusion | None:
    """A leaf's index and inclusion proof with its checkpoint as the API's ``LogInclusion``
    (None: the envelope predates the log)."""
    if proof is None:
        return None
    return audit_pb2.LogInclusion(leaf_index=proof.leaf_index, tree_size=proof.tree_size,
                                  hashes=list(proof.hashes), checkpoint=proof.checkpoint)


def _leaf(request: Any) -> int | tuple[LeafKind, str]:
    """The leaf a GetInclusionProofRequest names: its index, or (kind, id)."""
    which = request.WhichOneof("leaf")
    if which == "leaf_index":
        return int(request.leaf_index)
    if which != "leaf_ref":
        raise InvalidInput("leaf", "give leaf_index or leaf_ref")
    kind = _LEAF_KINDS.get(request.leaf_ref.kind)
    if kind is None:
        raise InvalidInput("leaf_ref.kind", "must name what the leaf logs")
    return kind, request.leaf_ref.id
