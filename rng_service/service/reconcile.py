"""Reconciliation of the seamless wallet: the outbox's movements not yet settled with the
operator's wallet (pending, or debits uncertain while their rollback is pending), per operator,
with their age, for `fairshoe wallet reconcile` and an operator's statement check."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rng_service.core.times import parse_rfc3339
from rng_service.service import validate
from rng_service.service.ports import Movement, Storage


@dataclass(frozen=True)
class Unsettled:
    """One movement still unsettled, and for how long (seconds since it was written)."""

    movement: Movement
    age_seconds: float


def unsettled(storage: Storage, operator: str | None = None, *,
              now: float | None = None) -> list[Unsettled]:
    """The movements still pending or uncertain (of ``operator`` if given), oldest first."""
    clock = time.time() if now is None else now
    with storage.snapshot() as uow:
        name = None if operator is None else validate.operator(operator, uow)
        rows = uow.unsettled_movements(name)
    out = []
    for m in rows:
        created = parse_rfc3339(m.created_at)
        age = 0.0 if created is None else max(0.0, clock - created.timestamp())
        out.append(Unsettled(m, age))
    return out


def outbox_gauges(storage: Storage) -> tuple[int, float]:
    """(movements unsettled, the oldest one's age in seconds; 0 when none), every operator."""
    rows = unsettled(storage)
    return len(rows), max((r.age_seconds for r in rows), default=0.0)
