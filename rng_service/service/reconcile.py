"""Reconciliation of the seamless wallet: the outbox's movements not yet settled with the
operator's wallet (pending, or debits uncertain while their rollback is pending), per operator,
with their age, for `fairshoe wallet reconcile` and an operator's statement check."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Final

from rng_service.core.errors import InvalidInput
from rng_service.core.times import parse_rfc3339
from rng_service.service import validate
from rng_service.service.ports import Movement, Storage

#: a page's movements when the request names no size
DEFAULT_PAGE: Final = 50
#: a page token: the transaction id of the last movement shown (32 lowercase hex)
_TOKEN: Final = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Unsettled:
    """One movement still unsettled, and for how long (seconds since it was written)."""

    movement: Movement
    age_seconds: float


@dataclass(frozen=True)
class UnsettledPage:
    """A page of one operator's unsettled movements, and the whole list's count and oldest
    age (seconds; 0 when none)."""

    movements: tuple[Unsettled, ...]
    next_page_token: str
    total: int
    oldest_age_seconds: float


def unsettled_page(storage: Storage, operator: str, *, page_size: int = 0,
                   page_token: str = "", now: float | None = None) -> UnsettledPage:
    """The operator's unsettled movements, oldest first, ``page_size`` at a time (0: the
    default). The token is the last movement shown: it stays valid once that one settles, and
    names nothing the caller has not seen."""
    clock = time.time() if now is None else now
    size = page_size or DEFAULT_PAGE
    if page_token and not _TOKEN.fullmatch(page_token):
        raise InvalidInput("page_token", "not a page token of this listing")
    with storage.snapshot() as uow:
        name = validate.operator(operator, uow)
        after = ("", "")
        if page_token:
            last = uow.get_movement(name, page_token)
            if last is None:
                raise InvalidInput("page_token", "not a page token of this listing")
            after = (last.created_at, last.transaction_id)
        rows = uow.unsettled_page(name, after, size + 1)
        total, oldest = uow.unsettled_count(name)
    shown = tuple(Unsettled(m, _age(m.created_at, clock)) for m in rows[:size])
    return UnsettledPage(shown, shown[-1].movement.transaction_id if len(rows) > size else "",
                         total, 0.0 if oldest is None else _age(oldest, clock))


def _age(stamp: str, clock: float) -> float:
    created = parse_rfc3339(stamp)
    return 0.0 if created is None else max(0.0, clock - created.timestamp())


def unsettled(storage: Storage, operator: str | None = None, *,
              now: float | None = None) -> list[Unsettled]:
    """The movements still pending or uncertain (of ``operator`` if given), oldest first."""
    clock = time.time() if now is None else now
    with storage.snapshot() as uow:
        name = None if operator is None else validate.operator(operator, uow)
        rows = uow.unsettled_movements(name)
    return [Unsettled(m, _age(m.created_at, clock)) for m in rows]


def outbox_gauges(storage: Storage) -> tuple[int, float]:
    """(movements unsettled, the oldest one's age in seconds; 0 when none), every operator."""
    rows = unsettled(storage)
    return len(rows), max((r.age_seconds for r in rows), default=0.0)
