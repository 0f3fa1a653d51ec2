"""The services over stored signed records: AuditService and RngService, added to a server that
has storage (``build_server(..., storage=...)``)."""

from __future__ import annotations

import grpc

from rng_service.api.audit_api import AuditApi
from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.rng.v1 import rng_pb2, rng_pb2_grpc
from rng_service.api.rng_api import RngApi
from rng_service.crypto.keys import KeyStore, KeyStoreError, rfc3339
from rng_service.service.audit import AuditService
from rng_service.service.ports import Storage
from rng_service.service.rng_draws import RngDrawService


def key_valid_from(keys: KeyStore, kid: str) -> str | None:
    """When key ``kid`` began to sign (its key ring entry, RFC 3339), for its log leaf."""
    try:
        info = next((k for k in keys.list_keys() if k.key_id == kid), None)
        return None if info is None else rfc3339(info.created_at)
    except KeyStoreError:
        return None


def add_record_services(server: grpc.Server, storage: Storage, keys: KeyStore) -> list[str]:
    """Register AuditService and RngService (signing with the store's active key); returns their
    full names for reflection and health."""
    audit_pb2_grpc.add_AuditServiceServicer_to_server(AuditApi(AuditService(storage, keys)),
                                                      server)
    signer = keys.load_signing_key()
    valid_from = key_valid_from(keys, signer.key_id)
    rng_pb2_grpc.add_RngServiceServicer_to_server(
        RngApi(RngDrawService(storage, signer=signer, key_valid_from=valid_from)), server)
    return [audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name,
            rng_pb2.DESCRIPTOR.services_by_name["RngService"].full_name]
