"""Idempotent requests: a retried request id returns its first answer and changes nothing.

The first answer is stored in the same transaction as the change it describes, so either both
are committed or neither is, and a retry after any crash sees one or the other. A request id is
bound to a hash of the operation and its parameters: the same id with different content is
``InvalidInput(field="request_id")``. A refused request stores nothing (it changed nothing), so
its retry is evaluated afresh.

The stored answer is looked for only when it can matter. A new request (nearly every one) runs
its work and stores its answer with ``INSERT ... ON CONFLICT DO NOTHING``, one statement instead
of a read before the work and an insert after it. When that insert finds an answer already
stored (a retry whose work could run again: a round that ended at once, a seed set again) or the
work raises (a retry's work usually fails: its round moved on, its version is stale), the
transaction is rolled back, so nothing of this run is kept, and the stored answer is read in a
snapshot: if there is one, it is the answer (or the id's different-content error); if not, the
work's error stands. Either way no request changes anything twice and each id has one answer,
as when the answer was read first. A concurrent duplicate (another thread, another replica) is
caught by the same insert: the database makes it wait for the first one's COMMIT, then finds the
stored answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson

from rng_service.core.errors import Conflict, InvalidInput
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


class _Answered(Exception):  # a signal inside run(), never raised out of it
    """The request's answer was already stored: roll this run's transaction back."""


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
    discard: Callable[[], None] | None = None,
) -> T:
    """``work(uow, operator)`` once per request id, in one write transaction with its answer.

    ``operator`` validates the operator inside the transaction (it must exist) and returns it.
    ``discard`` is called when ``work`` ran but its transaction rolled back and a stored answer
    is returned instead (see the module docstring): whatever the caller noted for after the
    commit (observer events, cache entries) is to be dropped.
    """
    digest = request_hash(operation, params)
    op: str | None = None
    try:
        with storage.transaction() as uow:
            op = operator(uow)
            result = work(uow, op)
            if not uow.put_response(op, request_id,
                                    StoredResponse(operation, digest, encode(result))):
                raise _Answered
        return result
    except Exception as exc:
        if op is None:  # the operator was refused: no answer can be stored under it
            raise
        stored = _stored(storage, op, request_id, exc)
        if stored is None:
            if isinstance(exc, _Answered):  # not reached: an answer is never deleted
                raise Conflict(f"request {request_id} changed while it was answered",
                               reason="CONCURRENT_UPDATE") from None
            raise
    if discard is not None:
        discard()
    if (stored.operation, stored.request_hash) != (operation, digest):
        raise InvalidInput("request_id", "already used for a different request")
    return decode(stored.response)


def _stored(storage: Storage, operator: str, request_id: str, error: Exception
            ) -> StoredResponse | None:
    """The answer stored for ``request_id``, read after the transaction that raised ``error``
    rolled back; ``error`` itself if it cannot be read (the database failing)."""
    try:
        with storage.snapshot() as uow:
            return uow.get_response(operator, request_id)
    except Exception:
        if isinstance(error, _Answered):  # the signal never leaves run(): the read's error
            raise
        raise error from None
