"""The seamless wallet's outbox: every money movement is written here, under the transaction id it
is sent with, before it is sent, and its answer is recorded here once known.

Life of a movement (:class:`~rng_service.service.ports.MovementState`):

* a **debit** (a stake) is written ``pending`` by the call that needs it, which then sends it:
  accepted, it becomes ``acked`` in the transaction that stores the round it paid for; rejected,
  ``rejected``; uncertain (or the round could not be stored), ``uncertain``, and a **rollback**
  of it is written in the same transaction. A pending debit still pending after its grace
  (the call that wrote it died) is taken as uncertain by the dispatcher;
* a **credit** (a round's returns) is written ``pending`` in the transaction that finishes the
  round, and a **rollback** ``pending`` as said: both are sent by the dispatcher
  (:mod:`.dispatcher`), again and again under the same id with a growing backoff, until the
  wallet accepts them (``acked``; the rolled-back debit becomes ``rolled_back``).

Every change of state is a compare-and-set (``UnitOfWork.update_movement``), so of the racers
(the call, its retry, every replica's dispatcher) one records an answer and the others see it.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Sequence
from typing import Final

from rng_service.core.errors import FairshoeError, IllegalState, Unavailable
from rng_service.service.operator_wallet import (
    Accepted,
    Answer,
    Credit,
    Debit,
    OperatorWallet,
    Purpose,
    Rejected,
    Rollback,
    Uncertain,
)
from rng_service.service.ports import (
    Movement,
    MovementKind,
    MovementState,
    MovementUpdate,
    UnitOfWork,
    utc_now,
    utc_stamp,
)

#: a pending debit older than this is one whose call died before it recorded the answer: the
#: dispatcher then rolls it back (well past any call's wallet timeout, at most MAX_TIMEOUT_MS)
DEBIT_GRACE_SECONDS: Final = 60.0
#: how long a movement claimed for sending is left to its sender (a dispatcher, or the call that
#: wrote a rollback): past any call's timeout (at most MAX_TIMEOUT_MS, 10 s), so another replica
#: sends it only once its sender has died or failed to record the answer
CLAIM_SECONDS: Final = 15.0
#: the first retry of a credit or rollback after this, doubling up to BACKOFF_MAX_SECONDS
BACKOFF_FIRST_SECONDS: Final = 0.2
BACKOFF_MAX_SECONDS: Final = 30.0
#: the reason a StartRound whose stake's fate is unknown answers (UNAVAILABLE: retry the round)
WALLET_UNCERTAIN: Final = "WALLET_UNCERTAIN"
#: the void reason in the signed record of that round, void without a card dealt (fixed text:
#: the wallet's own answer, which may say anything, never enters a signed record)
VOID_UNCONFIRMED: Final = ("the operator's wallet did not confirm the stakes; they were rolled "
                           "back before any card was dealt")


def _later(seconds: float, now_ns: int | None = None) -> str:
    """The stored stamp ``seconds`` after ``now_ns`` (nanoseconds since the epoch; by default
    the system clock's now)."""
    return utc_stamp((time.time_ns() if now_ns is None else now_ns) + int(seconds * 1e9))


def backoff(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones.

    >>> [backoff(n) for n in (1, 2, 3)], backoff(100)
    ([0.2, 0.4, 0.8], 30.0)
    """
    doubled: float = BACKOFF_FIRST_SECONDS * 2 ** min(max(attempts - 1, 0), 30)
    return min(doubled, BACKOFF_MAX_SECONDS)


def new_debit(*, operator: str, round_id: str, player: str, currency: str, game: str,
              amount: int, purpose: Purpose, request_id: str | None, request_hash: str | None,
              grace: float = DEBIT_GRACE_SECONDS) -> Movement:
    """A pending debit, due to the dispatcher only once ``grace`` seconds have passed."""
    now = utc_now()
    return Movement(operator, uuid.uuid4().hex, round_id, player, currency, game,
                    MovementKind.DEBIT, str(purpose), amount, "", request_id, request_hash,
                    MovementState.PENDING, "", None, 0, _later(grace), now, now)


def new_credit(*, operator: str, round_id: str, player: str, currency: str, game: str,
               amount: int, debits: Sequence[str]) -> Movement:
    """A pending credit, due at once."""
    now = utc_now()
    return Movement(operator, uuid.uuid4().hex, round_id, player, currency, game,
                    MovementKind.CREDIT, "", amount, ",".join(debits), None, None,
                    MovementState.PENDING, "", None, 0, now, now, now)


def new_rollback(debit: Movement, *, now_ns: int | None = None) -> Movement:
    """A pending rollback of ``debit``, claimed by its writer, which sends it at once: due to
    the dispatchers only after :data:`CLAIM_SECONDS` (or its first failed attempt's backoff)."""
    now = utc_now() if now_ns is None else utc_stamp(now_ns)
    return Movement(debit.operator, uuid.uuid4().hex, debit.round_id, debit.player,
                    debit.currency, debit.game, MovementKind.ROLLBACK, "", debit.amount,
                    debit.transaction_id, None, None, MovementState.PENDING, "", None, 0,
                    _later(CLAIM_SECONDS, now_ns), now, now)


def claim(uow: UnitOfWork, m: Movement, *, now_ns: int | None = None) -> Movement | None:
    """``m`` claimed for sending for :data:`CLAIM_SECONDS` from ``now_ns`` (as it now stands),
    or None if another sender claimed or recorded it first."""
    until = _later(CLAIM_SECONDS, now_ns)
    if not uow.claim_movement(m, until):
        return None
    return dataclasses.replace(m, next_attempt_at=until)


def send(wallet: OperatorWallet, m: Movement) -> Answer:
    """Send ``m`` as it is stored (same id, same content, every time)."""
    if m.kind is MovementKind.DEBIT:
        return wallet.debit(Debit(m.transaction_id, m.round_id, m.player, m.currency, m.amount,
                                  Purpose(m.purpose), m.game))
    if m.kind is MovementKind.CREDIT:
        debits = tuple(d for d in m.reference.split(",") if d)
        return wallet.credit(Credit(m.transaction_id, m.round_id, m.player, m.currency,
                                    m.amount, debits, m.game))
    return wallet.rollback(Rollback(m.transaction_id, m.reference, m.round_id, m.player,
                                    m.currency, m.amount))


def cancel_debit(uow: UnitOfWork, debit: Movement, cause: str, *, now_ns: int | None = None
                 ) -> Movement | None:
    """Mark a pending ``debit`` uncertain and write its rollback; the rollback, or None if the
    debit is no longer pending (another racer recorded its answer first)."""
    if not uow.update_movement(debit, MovementUpdate(MovementState.UNCERTAIN, cause[:200],
                                                     attempts=debit.attempts)):
        return None
    rollback = new_rollback(debit, now_ns=now_ns)
    uow.insert_movement(rollback)
    return rollback


def record_sent(uow: UnitOfWork, m: Movement, answer: Answer, *, now_ns: int | None = None
                ) -> bool:
    """Record the answer to a pending credit or rollback: acknowledged (for a rollback, its debit
    rolled back too) or due again :func:`backoff` seconds after ``now_ns``. False if ``m`` was
    no longer as read."""
    if isinstance(answer, Accepted):
        if not uow.update_movement(m, MovementUpdate(MovementState.ACKED, "",
                                                     answer.balance_after, m.attempts + 1)):
            return False
        if m.kind is MovementKind.ROLLBACK:
            debit = uow.get_movement(m.operator, m.reference)
            if debit is not None and debit.state is MovementState.UNCERTAIN:
                uow.update_movement(debit, MovementUpdate(MovementState.ROLLED_BACK,
                                                          debit.reason, None, debit.attempts))
        return True
    cause = answer.cause if isinstance(answer, Uncertain) else (
        f"rejected ({answer.reason}), which a {m.kind} may not be")
    attempts = m.attempts + 1
    return uow.update_movement(m, MovementUpdate(MovementState.PENDING, cause[:200], None,
                                                 attempts, _later(backoff(attempts), now_ns)))


def refusal(debit: Movement) -> FairshoeError:
    """The error a call whose stake is ``debit`` answers once the debit is not accepted: the
    same for its every retry."""
    if debit.state is MovementState.REJECTED:
        return IllegalState(f"the operator's wallet refused the stake of {debit.amount}: "
                            f"{debit.reason}", reason=debit.reason)
    return Unavailable("the operator's wallet did not answer the stake; it is being rolled "
                       "back and nothing was dealt for it: try again with a new request id",
                       reason=WALLET_UNCERTAIN)


def refused(debits: Sequence[Movement]) -> Movement:
    """Of one call's debits, the one its refusal names: a rejected one (its reason is the
    wallet's), else one not accepted, else the first."""
    rejected = [d for d in debits if d.state is MovementState.REJECTED]
    unsure = [d for d in debits if d.state is not MovementState.ACKED]
    return (rejected or unsure or list(debits))[0]


def debit_ids(movements: Sequence[Movement]) -> list[str]:
    """The acknowledged debits among a round's movements, oldest first."""
    return [m.transaction_id for m in movements
            if m.kind is MovementKind.DEBIT and m.state is MovementState.ACKED]


def last_balance(movements: Sequence[Movement]) -> int | None:
    """The wallet's balance after the latest acknowledged movement of these, if any (of two
    debits acknowledged within one stamp, the later is the one with less left)."""
    known = [(m.updated_at, -m.balance_after) for m in movements
             if m.state is MovementState.ACKED and m.balance_after is not None]
    return -max(known)[1] if known else None


def rejected(debit: Movement, answer: Rejected) -> MovementUpdate:
    """The update recording a clean reject of ``debit``."""
    return MovementUpdate(MovementState.REJECTED, str(answer.reason), None, debit.attempts + 1)
