"""The services over stored signed records: AuditService and RngService, added to a server that
has storage (``build_server(..., storage=...)``)."""

from __future__ import annotations

import grpc

from rng_service.api.audit_api import AuditApi
from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.api.rng_api import RngApi
from rng_service.crypto.keys import ActiveKey, KeyStore
from rng_service.service.audit import AuditService
from rng_service.service.ports import Storage
from rng_service.service.rng_draws import RngDrawService


def add_record_services(server: grpc.Server, storage: Storage, keys: KeyStore) -> list[str]:
    """Register AuditService and RngService (signing with the store's active key); returns their
    full names for reflection and health."""
    audit = AuditService(storage, keys)
    audit_pb2_grpc.add_AuditServiceServicer_to_server(AuditApi(audit), server)
    signer = ActiveKey(keys)  # a key rotated while serving signs from the moment it is active
    signer.current()  # no usable key: refuse to start rather than fail the first draw
    rng_pb2_grpc.add_RngServiceServicer_to_server(RngApi(RngDrawService(storage, signer=signer),
                                                         audit), server)
    return [audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name,
            rng_pb2.DESCRIPTOR.services_by_name["RngService"].full_name]
