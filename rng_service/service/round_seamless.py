"""Rounds whose real money is in the operator's own (seamless) wallet: each stake is debited
through the outbox before the transition it pays for is stored, in the transaction that records
the acceptance, and a round's end writes its credit (``docs/wallet.md``). A mixin of
:class:`~rng_service.service.rounds.RoundService`, which supplies storage, shoes and its commit.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from game_math.cards import ordered_shoe
from game_math.round import Round
from game_math.rules import Rules
from rng_service.core.errors import FairshoeError, IntegrityFailure, InvalidInput, Unavailable
from rng_service.records.schema import rules_digest
from rng_service.rng.shoe import Shoe
from rng_service.service import idempotency, ledger, outbox
from rng_service.service.observe import Pending
from rng_service.service.operator_wallet import (
    Accepted,
    OperatorWallet,
    Purpose,
    Rejected,
    WalletConfig,
    WalletDirectory,
)
from rng_service.service.ports import (
    Mode,
    Movement,
    MovementKind,
    MovementState,
    MovementUpdate,
    RoundRow,
    RoundStatus,
    RoundWallet,
    ShoeRow,
    Storage,
    UnitOfWork,
    utc_now,
)
from rng_service.service.round_parts import Live, StartRequest, deal, decode_round, no_open_round
from rng_service.service.shoes import ShoeSource
from rng_service.service.views import RoundView, to_json

log = structlog.get_logger("fairshoe.rounds")


#: the purpose of the debit of an action's further stake
PURPOSES: dict[str, Purpose] = {"double": Purpose.DOUBLE, "split": Purpose.SPLIT,
                                 "insurance": Purpose.INSURANCE}


class NeedsDebit(Exception):  # a signal inside the service, never raised out of it
    """Raised inside an Act's transaction (rolling it back) when the action stakes more on a
    seamless round than the wallet has been debited for under this request."""

    def __init__(self, row: RoundRow, request_id: str, amount: int, purpose: Purpose,
                 config: WalletConfig | None) -> None:
        super().__init__(row.round_id)
        self.row, self.request_id, self.amount = row, request_id, amount
        self.purpose, self.config = purpose, config


class SeamlessRounds:
    """The seamless-wallet paths of the round use cases."""

    # supplied by RoundService
    _storage: Storage
    _shoes: ShoeSource
    _wallets: WalletDirectory | None
    _on_outbox: Callable[[], None]
    _debit_grace: float

    def _commit(self, uow: UnitOfWork, live: Live, request_id: str | None, pending: Pending
                ) -> RoundView:
        raise NotImplementedError  # RoundService's

    def _shoe_for_round(self, uow: UnitOfWork, operator: str, player: str, rules: Rules,
                        pending: Pending, *, mode: Mode) -> tuple[ShoeRow, Shoe, bool]:
        raise NotImplementedError  # RoundService's

    def _act_seamless(self, needed: NeedsDebit, params: Mapping[str, Any],
                      work: Callable[[UnitOfWork, str], RoundView]) -> RoundView:
        """An action on a seamless round that stakes more (double, split, insurance): its debit
        is written, sent, and the action applied only in the transaction that records the
        acceptance. Refused (rejected, or uncertain and rolled back), the round still awaits the
        player as it did."""
        row, request_id = needed.row, needed.request_id
        wallet = self._seamless_wallet(row.operator, needed.config)
        digest = idempotency.request_hash("act", params)
        with self._storage.transaction() as uow:
            debit = uow.movement_for_request(row.operator, request_id)
            if debit is None:
                debit = outbox.new_debit(
                    operator=row.operator, round_id=row.round_id, player=row.player,
                    currency=row.currency, game=row.game, amount=needed.amount,
                    purpose=needed.purpose, request_id=request_id, request_hash=digest,
                    grace=self._debit_grace)
                uow.insert_movement(debit)
            elif debit.request_hash != digest:
                raise InvalidInput("request_id", "already used for a different request")

        def paid(answer: Accepted) -> RoundView:
            def acked_work(uow: UnitOfWork, op: str) -> RoundView:
                acknowledge(uow, debit, answer)
                return work(uow, op)  # finds the debit acknowledged: the stake is covered

            return idempotency.run(self._storage, operator=lambda _: row.operator,
                                   request_id=request_id, operation="act", params=params,
                                   work=acked_work, encode=to_json, decode=decode_round)

        return self._with_debit(wallet, debit, digest, paid)

    def _start_seamless(self, config: WalletConfig, start: StartRequest, pending: Pending
                        ) -> RoundView:
        """StartRound on the operator's wallet: the stake's debit is made durable (with the
        round id it is for), sent, and only once accepted is the round dealt, in the
        transaction that records the acceptance. A clean reject is FAILED_PRECONDITION with the
        wallet's reason; an uncertain answer rolls the debit back and is UNAVAILABLE; a retry
        with the same request id gets the same answer (the debit is found by its request)."""
        wallet = self._seamless_wallet(start.account.operator, config)
        digest = idempotency.request_hash("start_round", start.params)
        debit, stored = self._debit_intent(start, digest)
        if stored is not None:
            return stored
        return self._with_debit(wallet, debit, digest, lambda answer: idempotency.run(
            self._storage, operator=lambda _: start.account.operator,
            request_id=start.request_id, operation="start_round", params=start.params,
            encode=to_json, decode=decode_round,
            work=lambda uow, _: self._start_paid(uow, start, debit, answer, pending)))

    def _seamless_wallet(self, operator: str, config: WalletConfig | None) -> OperatorWallet:
        """The client of the operator's seamless wallet; Unavailable without one."""
        if self._wallets is None or config is None or not config.seamless:
            raise Unavailable(f"operator {operator} keeps real money in its own wallet, which "
                              "this server has no client for", reason="WALLET_NOT_CONFIGURED")
        return self._wallets.client(config)

    def _with_debit(self, wallet: OperatorWallet, debit: Movement, digest: str,
                    paid: Callable[[Accepted], RoundView]) -> RoundView:
        """Send the durable ``debit`` and act on its answer: accepted, ``paid`` stores the
        transition it pays for (recording the acceptance in its transaction); a clean reject
        is recorded and raised with the wallet's reason; uncertain, or ``paid`` failing, the
        debit is rolled back and the call is UNAVAILABLE."""
        if debit.state is not MovementState.PENDING:
            raise outbox.refusal(debit)
        answer = outbox.send(wallet, debit)
        if isinstance(answer, Rejected):
            with self._storage.transaction() as uow:
                if not uow.update_movement(debit, outbox.rejected(debit, answer)):
                    return self._settled_request(uow, debit, digest)
            log.info("wallet_rejected", operator=debit.operator, round_id=debit.round_id,
                     transaction_id=debit.transaction_id, reason=str(answer.reason))
            raise outbox.refusal(dataclasses.replace(debit, state=MovementState.REJECTED,
                                                     reason=str(answer.reason)))
        if isinstance(answer, Accepted):
            try:
                return paid(answer)
            except BaseException as exc:  # not stored: the stake goes back
                self._cancel_debit(wallet, debit,
                                   f"the transition was not stored: {type(exc).__name__}")
                raise
        log.warning("wallet_uncertain", operator=debit.operator, round_id=debit.round_id,
                    transaction_id=debit.transaction_id, cause=answer.cause)
        self._cancel_debit(wallet, debit, answer.cause)
        raise outbox.refusal(dataclasses.replace(debit, state=MovementState.UNCERTAIN))

    def _debit_intent(self, start: StartRequest, digest: str
                      ) -> tuple[Movement, RoundView | None]:
        """The request's debit, written now (pending, durable before it is sent) unless a
        previous try wrote it; or the stored answer of a try that finished."""
        account, rules, request_id = start.account, start.rules, start.request_id
        op, player = account.operator, account.holder
        with self._storage.transaction() as uow:
            stored = uow.get_response(op, request_id)
            debit = uow.movement_for_request(op, request_id)
            if (stored is not None and (stored.operation, stored.request_hash) != (
                    "start_round", digest)) or (debit is not None
                                                and debit.request_hash != digest):
                raise InvalidInput("request_id", "already used for a different request")
            if stored is not None:
                return debit or no_movement(op), decode_round(stored.response)
            if debit is None:
                no_open_round(uow, op, player, rules)
                # bets checked against the game's limits on any cards: none is dealt yet
                stake = deal(rules, ordered_shoe(rules.decks), start.bets, 0,
                              None).initial_stake
                debit = outbox.new_debit(
                    operator=op, round_id=uuid.uuid4().hex, player=player,
                    currency=account.currency, game=rules.game, amount=stake,
                    purpose=Purpose.BET, request_id=request_id, request_hash=digest,
                    grace=self._debit_grace)
                uow.insert_movement(debit)
        return debit, None

    def _start_paid(self, uow: UnitOfWork, start: StartRequest, debit: Movement,
                    accepted: Accepted, pending: Pending) -> RoundView:
        """Deal the round whose stake the wallet accepted, recording the acceptance with it."""
        account, rules, bets = start.account, start.rules, start.bets
        op, player = account.operator, account.holder
        no_open_round(uow, op, player, rules)
        acknowledge(uow, debit, accepted)
        shoe_row, shoe, stored = self._shoe_for_round(uow, op, player, rules, pending,
                                                      mode=account.mode)
        rnd = deal(rules, self._shoes.cards(shoe), bets, shoe.position, None)
        if rnd.initial_stake != debit.amount:
            raise IntegrityFailure(f"round {debit.round_id}: its stake {rnd.initial_stake} is "
                                   f"not the debit's {debit.amount}", reason="LEDGER_MISMATCH")
        now = utc_now()
        row = RoundRow(op, debit.round_id, player, rules.game, rules_digest(rules),
                       rules.level(bets.level).name, account.mode, account.currency,
                       RoundStatus.OPEN, 0, b"", shoe.id, now, now, RoundWallet.SEAMLESS)
        live = Live(row, shoe_row, shoe, rnd, posted={}, shoe_stored=stored)
        return self._commit(uow, live, start.request_id, pending)

    def _settled_request(self, uow: UnitOfWork, debit: Movement, digest: str) -> RoundView:
        """The answer of a start whose debit a racer settled first: its stored round, or the
        refusal its debit's state says."""
        stored = uow.get_response(debit.operator, debit.request_id or "")
        if stored is not None and stored.request_hash == digest:
            return decode_round(stored.response)
        now = uow.get_movement(debit.operator, debit.transaction_id)
        raise outbox.refusal(now if now is not None else debit)

    def _cancel_debit(self, wallet: OperatorWallet, debit: Movement, cause: str) -> None:
        """Take ``debit`` as uncertain and send its rollback once; the dispatcher sends it
        again until acknowledged. If the database fails here, the debit stays pending and the
        dispatcher rolls it back after its grace."""
        try:
            with self._storage.transaction() as uow:
                rollback = outbox.cancel_debit(uow, debit, cause)
            if rollback is None:
                return
            answer = outbox.send(wallet, rollback)
            with self._storage.transaction() as uow:
                outbox.record_sent(uow, rollback, answer)
        except FairshoeError as exc:
            log.error("wallet_rollback_deferred", operator=debit.operator,
                      transaction_id=debit.transaction_id, error=str(exc))
        finally:
            self._on_outbox()

    def _seamless_money(self, uow: UnitOfWork, row: RoundRow, rnd: Round, pending: Pending
                        ) -> int | None:
        """A seamless round's money at a transition: every stake must already be debited;
        when the round ends, its credit (its returns, 0 included) enters the outbox, to be sent
        once this commits. Returns the wallet's last known balance."""
        movements = uow.round_movements(row.operator, row.round_id)
        debited = sum(m.amount for m in movements
                      if m.kind is MovementKind.DEBIT and m.state is MovementState.ACKED)
        if rnd.total_staked != debited:
            raise IntegrityFailure(f"round {row.round_id}: staked {rnd.total_staked}, debited "
                                   f"{debited}", reason="LEDGER_MISMATCH")
        if rnd.finished and not any(m.kind is MovementKind.CREDIT for m in movements):
            uow.insert_movement(outbox.new_credit(
                operator=row.operator, round_id=row.round_id, player=row.player,
                currency=row.currency, game=row.game,
                amount=sum(ledger.credited(rnd, w) for w in rnd.wagers),
                debits=outbox.debit_ids(movements)))
            pending.then(self._on_outbox)
        return outbox.last_balance(movements)


def require_debit(uow: UnitOfWork, row: RoundRow, request_id: str, amount: int,
                   purpose: Purpose | None) -> None:
    """The further ``amount`` an action stakes on a seamless round must be this request's
    acknowledged debit: none yet, :class:`NeedsDebit`; one refused, its refusal."""
    debit = uow.movement_for_request(row.operator, request_id)
    if debit is None:
        raise NeedsDebit(row, request_id, amount, purpose or Purpose.BET,
                          uow.wallet_config(row.operator))
    if debit.round_id != row.round_id or debit.amount != amount:
        raise InvalidInput("request_id", "already used for a different request")
    if debit.state is not MovementState.ACKED:
        raise outbox.refusal(debit)


def acknowledge(uow: UnitOfWork, debit: Movement, accepted: Accepted) -> None:
    """Record the wallet's acceptance of ``debit`` in the transaction it pays for."""
    if not uow.update_movement(debit, MovementUpdate(
            MovementState.ACKED, "", accepted.balance_after, debit.attempts + 1)):
        # a racer (the dispatcher, after the debit's grace) took it as uncertain first
        raise outbox.refusal(dataclasses.replace(debit, state=MovementState.UNCERTAIN))


def no_movement(operator: str) -> Movement:
    """A stand-in for a start answered before the seamless wallet (its debit) existed."""
    return Movement(operator, "", "", "", "", "", MovementKind.DEBIT, "", 0, "", None, None,
                    MovementState.ACKED, "", None, 0, "", "", "")
