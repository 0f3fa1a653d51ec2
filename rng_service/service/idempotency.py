"""Idempotent requests: a retried request id returns its first answer and changes nothing.

The first answer is stored in the same transaction as the change it describes, so either both
are committed or neither is, and a retry after any crash sees one or the other. A request id is
bound to a hash of the operation and its parameters: the same id with different content is
``InvalidInput(field="request_id")``. A refused request stores nothing (it changed nothing), so
its retry is evaluated afresh.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from rng_service.core.errors import InvalidInput
from rng_service.service.ports import Storage, StoredResponse, UnitOfWork

T = TypeVar("T")


def request_hash(operation: str, params: Mapping[str, Any]) -> str:
    """SHA-256 of the operation and its parameters as canonical JSON (sorted keys)."""
    doc = json.dumps({"operation": operation, "params": params}, sort_keys=True,
                     separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


def run(
    storage: Storage,
    *,
    operator: Callable[[UnitOfWork], str],
    request_id: str,
    operation: str,
    params: Mapping[str, Any],
    work: Callable[[UnitOfWork, str], T],
    encode: Callable[[T], bytes],
    decode: Callable[[bytes], T],
) -> T:
    """``work(uow, operator)`` once per request id, in one write transaction with its answer.

    ``operator`` validates the operator inside the transaction (it must exist) and returns it.
    """
    digest = request_hash(operation, params)
    with storage.transaction() as uow:
        op = operator(uow)
        stored = uow.get_response(op, request_id)
        if stored is not None:
            if (stored.operation, stored.request_hash) != (operation, digest):
                raise InvalidInput("request_id", "already used for a different request")
            return decode(stored.response)
        result = work(uow, op)
        uow.put_response(op, request_id, StoredResponse(operation, digest, encode(result)))
    return result
