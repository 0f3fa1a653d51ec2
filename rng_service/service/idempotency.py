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

import orjson

from rng_service.core.errors import InvalidInput
from rng_service.service.ports import Storage, StoredResponse, UnitOfWork

T = TypeVar("T")

#: sorted keys; what json would write otherwise or refuse (str and int subclasses, dataclasses,
#: dates) is passed on to the missing ``default``, so orjson refuses it and json decides
_ORJSON_OPTIONS = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS
                   | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME)


def request_hash(operation: str, params: Mapping[str, Any]) -> str:
    """SHA-256 of the operation and its parameters as canonical JSON (sorted keys, ASCII).

    The hashes are stored with the answers, so the bytes hashed never change: those of
    ``json.dumps(doc, sort_keys=True, separators=(",", ":"))``. For the parameters the use cases
    build (str, int, bool, None, lists and dicts of them) orjson writes the same bytes, in a
    fifth of the time, whenever its output is ASCII without DEL (both escape control characters
    alike; ``json`` escapes everything else outside printable ASCII); otherwise (non-ASCII text,
    DEL, an integer past 64 bits, a type orjson passes on) they come from ``json`` itself
    (tests/service/test_idempotency.py). A float could differ in form, but none is ever stored:
    stakes, versions and amounts are refused unless integers.
    """
    doc = {"operation": operation, "params": params}
    try:
        data = orjson.dumps(doc, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:  # a big integer, a non-str key, a type passed on: json's
        data = b"\x80"
    if not data.isascii() or b"\x7f" in data:
        data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()


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
