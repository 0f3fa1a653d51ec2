"""Certified draws outside blackjack: ``count`` integers in a range, or a shuffle of ``n`` items.

Each draw takes a fresh 48-byte seed from the OS CSPRNG (after the RNG self-test), fixes its
commitment before any value is drawn, draws by the convention of :mod:`rng_service.rng.draws`
(HMAC_DRBG, rejection sampling, forward Fisher-Yates; never reduction), and then signs two
envelopes: the record of the draw (``fairshoe.rng/v1``: parameters, client seed, commitment,
results, never the seed) and the reveal of its seed (``fairshoe.rng-reveal/v1``). Both are stored
in one transaction with the idempotent answer, and returned: a draw is revealed at once, since
nothing is dealt from it later. A retried request id returns the first draw, never a new one.

Errors: bad counts, ranges, client seeds or request ids are ``InvalidInput`` naming the request's
field (``count``, ``min``, ``max``, ``n``, ``client_seed``, ``request_id``); an unknown operator
``NotFound``; an RNG that failed its self-test ``Unavailable`` (reason ``RNG_SELF_TEST_FAILED``).
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from rng_service.core.errors import InvalidInput, Unavailable, quote
from rng_service.crypto.keys import ActiveKey, SigningKey
from rng_service.crypto.signing import decode_envelope, sign_and_encode
from rng_service.records.schema import rng_payload, rng_reveal_payload
from rng_service.rng.draws import (
    MAX_ABS_VALUE,
    MAX_COUNT,
    MAX_ITEMS,
    DrawRequest,
    draw,
    rng_commitment,
)
from rng_service.rng.selftest import SelfTestFailed, require_healthy_rng
from rng_service.rng.shoe import new_server_seed
from rng_service.service import idempotency, validate
from rng_service.service.ports import LeafKind, RngDrawRow, Storage, UnitOfWork, utc_now
from rng_service.service.translog import Signers

log = structlog.get_logger("fairshoe.rng")


@dataclass(frozen=True)
class Draw:
    """A draw as answered: its values and proof (the two signed envelopes, canonical bytes)."""

    draw_id: str
    kind: str
    results: tuple[int, ...]
    commitment: str
    key_id: str
    record: bytes
    reveal: bytes

    @classmethod
    def from_envelopes(cls, record: bytes, reveal: bytes) -> Draw:
        """The draw the two stored envelopes describe (an idempotent retry's answer)."""
        envelope = decode_envelope(record)
        payload: dict[str, Any] = envelope["payload"]
        return cls(payload["draw_id"], payload["kind"], tuple(payload["results"]),
                   payload["commitment"], envelope["signature"]["key_id"], record, reveal)


def _encode(result: Draw) -> bytes:
    return json.dumps({"record": base64.b64encode(result.record).decode("ascii"),
                       "reveal": base64.b64encode(result.reveal).decode("ascii")}).encode()


def _decode(data: bytes) -> Draw:
    doc = json.loads(data)
    return Draw.from_envelopes(base64.b64decode(doc["record"]), base64.b64decode(doc["reveal"]))


def _bounded(value: object, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidInput(field, f"must be an integer in {lo}..{hi}, got {quote(value)}")
    return value


def integers_request(count: object, minimum: object, maximum: object) -> DrawRequest:
    """The request for ``count`` integers in ``[minimum, maximum]``, checked field by field."""
    n = _bounded(count, "count", 1, MAX_COUNT)
    lo = _bounded(minimum, "min", -MAX_ABS_VALUE, MAX_ABS_VALUE)
    hi = _bounded(maximum, "max", -MAX_ABS_VALUE, MAX_ABS_VALUE)
    if hi < lo:
        raise InvalidInput("max", f"must be at least min ({lo}), got {hi}")
    return DrawRequest.integers(n, lo, hi)


def shuffle_request(n: object) -> DrawRequest:
    """The request to shuffle ``n`` items, checked."""
    return DrawRequest.shuffle(_bounded(n, "n", 1, MAX_ITEMS))


class RngDrawService:
    """The RngService use cases. Thread-safe: it holds no per-request state."""

    def __init__(self, storage: Storage, *, signer: SigningKey | ActiveKey,
                 key_valid_from: str | None = None) -> None:
        """``signer``: a fixed key, or the key store's active key followed through rotations;
        ``key_valid_from``: when a fixed key began to sign (for its key leaf in the log)."""
        self._storage = storage
        self._signers = Signers(signer, valid_from=key_valid_from)

    def generate_integers(self, operator: str, *, count: int, minimum: int, maximum: int,
                          client_seed: bytes = b"", request_id: str) -> Draw:
        """``count`` integers, each uniform in ``[minimum, maximum]``."""
        return self._draw(operator, integers_request(count, minimum, maximum), client_seed,
                          request_id)

    def shuffle(self, operator: str, *, n: int, client_seed: bytes = b"",
                request_id: str) -> Draw:
        """A uniform permutation of ``0..n-1``."""
        return self._draw(operator, shuffle_request(n), client_seed, request_id)

    def _draw(self, operator: str, request: DrawRequest, client_seed: object,
              request_id: object) -> Draw:
        seed_bytes, rid = validate.client_seed(client_seed), validate.request_id(request_id)
        try:
            require_healthy_rng()
        except SelfTestFailed as exc:
            raise Unavailable(str(exc), reason="RNG_SELF_TEST_FAILED") from None
        params = {"kind": request.kind, "parameters": dict(request.parameters),
                  "client_seed": seed_bytes.hex()}
        return idempotency.run(
            self._storage, operator=partial(validate.operator, operator), request_id=rid,
            operation=f"rng.{request.kind}", params=params, encode=_encode, decode=_decode,
            work=lambda uow, op: self._new_draw(uow, op, request, seed_bytes))

    def _new_draw(self, uow: UnitOfWork, operator: str, request: DrawRequest,
                  client_seed: bytes) -> Draw:
        """Seed, commitment, values, record, reveal; stored in the caller's transaction."""
        writer = self._signers.current()  # one key signs and logs the whole draw
        seed = new_server_seed()
        commitment = rng_commitment(seed)  # fixed before any value is drawn
        results = draw(seed, request, client_seed)
        draw_id, now = uuid.uuid4().hex, utc_now()
        record = sign_and_encode(rng_payload(
            draw_id=draw_id, request=request, client_seed=client_seed, commitment=commitment,
            results=results, drawn_at=now), writer.signer)
        # the seed leaves this function only inside the reveal, made after the draw
        reveal = sign_and_encode(rng_reveal_payload(draw_id=draw_id, commitment=commitment,
                                                    seed=seed), writer.signer)
        uow.put_rng_draw(RngDrawRow(operator, draw_id, request.kind, commitment, record, reveal,
                                    now))
        writer.append(uow, operator, LeafKind.RNG, draw_id, record)
        writer.append(uow, operator, LeafKind.RNG_REVEAL, draw_id, reveal)
        log.info("rng_draw", operator=operator, draw_id=draw_id, kind=request.kind,
                 values=len(results))
        return Draw(draw_id, request.kind, tuple(results), commitment, writer.signer.key_id,
                    record, reveal)
