"""Rounds whose real money is in the operator's own (seamless) wallet: each stake is debited
through the outbox before the transition it pays for is stored, in the transaction that records
the acceptance, and a round's end writes its credit (``docs/wallet.md``). A mixin of
:class:`~rng_service.service.rounds.RoundService`, which supplies storage, shoes and its commit.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from game_math.cards import ordered_shoe
from game_math.rules import Rules
from rng_service.core.errors import (
    FairshoeError,
    IllegalState,
    IntegrityFailure,
    InvalidInput,
    Unavailable,
)
from rng_service.records.schema import rules_digest
from rng_service.rng.shoe import Shoe
from rng_service.service import idempotency, ledger, outbox
from rng_service.service.observe import Observer, Pending
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
from rng_service.service.views import CreditView, RoundView, to_json

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
    _observer: Observer

    def _commit(self, uow: UnitOfWork, live: Live, request_id: str | None, pending: Pending
                ) -> RoundView:
        raise NotImplementedError  # RoundService's

    def _shoe_for_round(self, uow: UnitOfWork, operator: str, player: str, rules: Rules,
                        pending: Pending, *, mode: Mode) -> tuple[ShoeRow, Shoe, bool]:
        raise NotImplementedError  # RoundService's

    def _act_seamless(self, needed: NeedsDebit, params: Mapping[str, Any],
                      work: Callable[[UnitOfWork, str], RoundView],
                      discard: Callable[[], None] | None = None) -> RoundView:
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

        def paid(answers: Sequence[Accepted]) -> RoundView:
            def acked_work(uow: UnitOfWork, op: str) -> RoundView:
                acknowledge(uow, debit, answers[0])
                return work(uow, op)  # finds the debit acknowledged: the stake is covered

            return idempotency.run(self._storage, operator=lambda _: row.operator,
                                   request_id=request_id, operation="act", params=params,
                                   work=acked_work, encode=to_json, decode=decode_round,
                                   discard=discard)

        return self._with_debits(wallet, [debit], digest, paid)

    def _start_seamless(self, config: WalletConfig, start: StartRequest, pending: Pending
                        ) -> RoundView:
        """StartRound on the operator's wallet: the stakes' debits (the bets', and the side
        bets' apart, purpose SIDE_BET) are made durable (with the round id they are for), sent,
        and only once all are accepted is the round dealt, in the transaction that records the
        acceptances. A clean reject of any is FAILED_PRECONDITION with the wallet's reason, an
        uncertain answer UNAVAILABLE, and either way the other debits are rolled back; a retry
        with the same request id gets the same answer (the debits are found by its request)."""
        wallet = self._seamless_wallet(start.account.operator, config)
        digest = idempotency.request_hash("start_round", start.params)
        debits, stored = self._debit_intent(start, digest)
        if stored is not None:
            return stored
        return self._with_debits(wallet, debits, digest, lambda answers: idempotency.run(
            self._storage, operator=lambda _: start.account.operator,
            request_id=start.request_id, operation="start_round", params=start.params,
            encode=to_json, decode=decode_round, discard=pending.discard,
            work=lambda uow, _: self._start_paid(uow, start, debits, answers, pending)),
            unsure=lambda: self._void_unstarted(start, debits[0].round_id))

    def _seamless_wallet(self, operator: str, config: WalletConfig | None) -> OperatorWallet:
        """The client of the operator's seamless wallet; Unavailable without one."""
        if self._wallets is None or config is None or not config.seamless:
            raise Unavailable(f"operator {operator} keeps real money in its own wallet, which "
                              "this server has no client for", reason="WALLET_NOT_CONFIGURED")
        return self._wallets.client(config)

    def _with_debits(self, wallet: OperatorWallet, debits: Sequence[Movement], digest: str,
                     paid: Callable[[Sequence[Accepted]], RoundView],
                     unsure: Callable[[], None] | None = None) -> RoundView:
        """Send the durable ``debits`` one by one and act on their answers: all accepted,
        ``paid`` stores the transition they pay for (recording the acceptances in its
        transaction); a clean reject is recorded and raised with the wallet's reason; an
        uncertain answer, or ``paid`` failing, is UNAVAILABLE (and, if this call rolled the
        debits back, ``unsure`` is called). Unless all are accepted and stored, every debit not
        rejected is rolled back, the unsent ones too."""
        if any(d.state is not MovementState.PENDING for d in debits):
            # an earlier try of this request settled one (its call then died, or this is its
            # retry): no transition can be paid now, so the rest go back too, and a start
            # whose stake went unconfirmed gets its void round if the earlier try died first
            refused = outbox.refused(debits)
            rest = [d for d in debits if d.state is MovementState.PENDING]
            if rest:
                self._cancel_debits(wallet, rest, f"the stake {refused.transaction_id} was "
                                    "not taken")
            if unsure is not None and refused.state is not MovementState.REJECTED:
                unsure()
            raise outbox.refusal(refused)
        accepted: list[Accepted] = []
        for debit in debits:
            answer = outbox.send(wallet, debit)
            if isinstance(answer, Accepted):
                accepted.append(answer)
                continue
            others = [d for d in debits if d is not debit]
            if isinstance(answer, Rejected):
                with self._storage.transaction() as uow:
                    if not uow.update_movement(debit, outbox.rejected(debit, answer)):
                        return self._settled_request(uow, debits, digest)
                log.info("wallet_rejected", operator=debit.operator, round_id=debit.round_id,
                         transaction_id=debit.transaction_id, reason=str(answer.reason))
                self._cancel_debits(wallet, others, f"the stake {debit.transaction_id} was "
                                    f"refused ({answer.reason})")
                raise outbox.refusal(dataclasses.replace(debit, state=MovementState.REJECTED,
                                                         reason=str(answer.reason)))
            log.warning("wallet_uncertain", operator=debit.operator, round_id=debit.round_id,
                        transaction_id=debit.transaction_id, cause=answer.cause)
            if self._cancel_debits(wallet, debits, answer.cause) and unsure is not None:
                unsure()
            raise outbox.refusal(dataclasses.replace(debit, state=MovementState.UNCERTAIN))
        try:
            return paid(accepted)
        except BaseException as exc:  # not stored: the stakes go back
            if self._cancel_debits(wallet, debits, f"the transition was not stored: "
                                   f"{type(exc).__name__}") and unsure is not None:
                unsure()
            raise

    def _debit_intent(self, start: StartRequest, digest: str
                      ) -> tuple[list[Movement], RoundView | None]:
        """The request's debits, written now (pending, durable before they are sent) unless a
        previous try wrote them; or the stored answer of a try that finished. The bets'
        debit carries the request (a retry finds it by that), the side bets' its round."""
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
                return [debit or no_movement(op)], decode_round(stored.response)
            if debit is not None:
                return start_debits(uow.round_movements(op, debit.round_id)), None
            no_open_round(uow, op, player, rules)
            # bets checked against the game's limits on any cards: none is dealt yet
            stake = deal(rules, ordered_shoe(rules.decks), start.bets, 0, None).initial_stake
            bet = sum(hb.bet for hb in start.bets.hands)
            round_id = uuid.uuid4().hex
            debits = [outbox.new_debit(
                operator=op, round_id=round_id, player=player, currency=account.currency,
                game=rules.game, amount=amount, purpose=purpose,
                request_id=request_id if purpose is Purpose.BET else None,
                request_hash=digest if purpose is Purpose.BET else None,
                grace=self._debit_grace)
                for purpose, amount in ((Purpose.BET, bet), (Purpose.SIDE_BET, stake - bet))
                if amount > 0 or purpose is Purpose.BET]
            for each in debits:
                uow.insert_movement(each)
        return debits, None

    def _start_paid(self, uow: UnitOfWork, start: StartRequest, debits: Sequence[Movement],
                    accepted: Sequence[Accepted], pending: Pending) -> RoundView:
        """Deal the round whose stakes the wallet accepted, recording the acceptances with
        it."""
        account, rules, bets = start.account, start.rules, start.bets
        op, player = account.operator, account.holder
        no_open_round(uow, op, player, rules)
        for debit, answer in zip(debits, accepted, strict=True):
            acknowledge(uow, debit, answer)
        shoe_row, shoe, stored = self._shoe_for_round(uow, op, player, rules, pending,
                                                      mode=account.mode)
        rnd = deal(rules, self._shoes.cards(shoe), bets, shoe.position, None)
        debited = sum(d.amount for d in debits)
        round_id = debits[0].round_id
        if rnd.initial_stake != debited:
            raise IntegrityFailure(f"round {round_id}: its stake {rnd.initial_stake} is "
                                   f"not the debits' {debited}", reason="LEDGER_MISMATCH")
        live = Live(seamless_row(start, round_id, shoe.id), shoe_row, shoe, rnd, posted={},
                    shoe_stored=stored)
        return self._commit(uow, live, start.request_id, pending)

    def _void_unstarted(self, start: StartRequest, round_id: str) -> None:
        """Record the round of a start whose stakes are being rolled back: void, with its bets
        and no card dealt, on the shoe it would have been dealt from (which a void round
        finishes, as any), so an auditor sees it. Best effort: if it cannot be stored (the
        database or the RNG failing, or the player has since started another round), the
        outbox's rolled-back debits are its only trace."""
        account, rules = start.account, start.rules
        op, player = account.operator, account.holder
        pending = Pending()
        try:
            with self._storage.transaction() as uow:
                if uow.get_round(op, round_id) is not None:  # an earlier try recorded it
                    return
                if uow.open_round(op, player, rules.game) is not None:
                    raise IllegalState("the player has started another round since",
                                       reason="ROUND_IN_PROGRESS")
                shoe_row, shoe, stored = self._shoe_for_round(uow, op, player, rules, pending,
                                                              mode=account.mode)
                rnd = deal(rules, self._shoes.cards(shoe), start.bets, shoe.position, None,
                           void=outbox.VOID_UNCONFIRMED)
                self._commit(uow, Live(seamless_row(start, round_id, shoe.id), shoe_row, shoe,
                                       rnd, posted={}, shoe_stored=stored, rolled_back=True),
                             start.request_id, pending)
        except FairshoeError as exc:
            log.error("wallet_void_round_not_recorded", operator=op, round_id=round_id,
                      error=str(exc))
            return
        pending.deliver(self._observer)

    def _settled_request(self, uow: UnitOfWork, debits: Sequence[Movement], digest: str
                         ) -> RoundView:
        """The answer of a call whose debits a racer settled first: its stored round, or the
        refusal their states say."""
        first = debits[0]
        stored = uow.get_response(first.operator, first.request_id or "")
        if stored is not None and stored.request_hash == digest:
            return decode_round(stored.response)
        now = [uow.get_movement(d.operator, d.transaction_id) or d for d in debits]
        raise outbox.refusal(outbox.refused(now))

    def _cancel_debits(self, wallet: OperatorWallet, debits: Sequence[Movement], cause: str
                       ) -> bool:
        """Take each of ``debits`` still pending as uncertain and write its rollback, all in
        one transaction (a crash then leaves all or none, never a sibling pending until the
        dispatcher's grace), then send each rollback once; the dispatcher sends them again
        until acknowledged. If the database fails here, the debits stay pending and the
        dispatcher rolls them back after their grace. True if this call wrote the first one's
        rollback (a racer, e.g. a retry, may have written it first), or could not tell."""
        try:
            try:
                with self._storage.transaction() as uow:
                    rollbacks = [outbox.cancel_debit(uow, debit, cause) for debit in debits]
            except FairshoeError as exc:
                log.error("wallet_rollback_deferred", operator=debits[0].operator,
                          round_id=debits[0].round_id, error=str(exc))
                return True
            for rollback in rollbacks:
                if rollback is not None:
                    self._send_rollback(wallet, rollback)
            return bool(rollbacks) and rollbacks[0] is not None
        finally:
            self._on_outbox()

    def _send_rollback(self, wallet: OperatorWallet, rollback: Movement) -> None:
        try:
            answer = outbox.send(wallet, rollback)
            with self._storage.transaction() as uow:
                outbox.record_sent(uow, rollback, answer)
        except FairshoeError as exc:
            log.error("wallet_rollback_deferred", operator=rollback.operator,
                      transaction_id=rollback.reference, error=str(exc))

    def _seamless_money(self, uow: UnitOfWork, row: RoundRow, live: Live, pending: Pending
                        ) -> tuple[int | None, CreditView | None, list[Movement]]:
        """A seamless round's money at a transition: every stake must already be debited;
        when the round ends, its credit (its returns, 0 included) enters the outbox, to be sent
        once this commits (none for a round void before its deal: its debits are rolled
        back). Returns the wallet's last known balance, the round's credit and its movements
        (the credit included), which its signed record names."""
        rnd = live.rnd
        movements = uow.round_movements(row.operator, row.round_id)
        if live.rolled_back:
            return outbox.last_balance(movements), None, movements
        debited = sum(m.amount for m in movements
                      if m.kind is MovementKind.DEBIT and m.state is MovementState.ACKED)
        if rnd.total_staked != debited:
            raise IntegrityFailure(f"round {row.round_id}: staked {rnd.total_staked}, debited "
                                   f"{debited}", reason="LEDGER_MISMATCH")
        if rnd.finished and not any(m.kind is MovementKind.CREDIT for m in movements):
            credit = outbox.new_credit(
                operator=row.operator, round_id=row.round_id, player=row.player,
                currency=row.currency, game=row.game,
                amount=sum(ledger.credited(rnd, w) for w in rnd.wagers),
                debits=outbox.debit_ids(movements))
            uow.insert_movement(credit)
            pending.then(self._on_outbox)
            movements = [*movements, credit]
        return outbox.last_balance(movements), credit_view(movements), movements


def require_debit(uow: UnitOfWork, row: RoundRow, request_id: str, amount: int,
                   purpose: Purpose | None) -> None:
    """The further ``amount`` an action stakes on a seamless round must be this request's
    acknowledged debit: none yet, or one still pending (the call that sent it died before it
    recorded the answer: this retry sends it again, under its id, as a StartRound's retry
    does), :class:`NeedsDebit`; one refused, its refusal."""
    debit = uow.movement_for_request(row.operator, request_id)
    if debit is not None and (debit.round_id != row.round_id or debit.amount != amount):
        raise InvalidInput("request_id", "already used for a different request")
    if debit is None or debit.state is MovementState.PENDING:
        raise NeedsDebit(row, request_id, amount, purpose or Purpose.BET,
                          uow.wallet_config(row.operator))
    if debit.state is not MovementState.ACKED:
        raise outbox.refusal(debit)


def wallet_record(movements: Sequence[Movement]) -> dict[str, Any]:
    """The ``wallet`` member of a seamless round's signed record
    (:mod:`rng_service.records.schema`): every movement of the round written by its end, under
    the transaction id the wallet is sent it with. A debit still pending then (an action racing
    the round's end) is cancelled: the round it was for has ended without it."""
    debits = [m for m in movements if m.kind is MovementKind.DEBIT]
    credit = next((m for m in movements if m.kind is MovementKind.CREDIT), None)
    return {
        "debits": [_debit_entry(m) for m in debits if m.state is MovementState.ACKED],
        "cancelled": [_debit_entry(m) for m in debits if m.state is not MovementState.ACKED],
        "rollbacks": [{"transaction_id": m.transaction_id, "debit": m.reference,
                       "amount": m.amount}
                      for m in movements if m.kind is MovementKind.ROLLBACK],
        "credit": None if credit is None else {
            "transaction_id": credit.transaction_id, "amount": credit.amount,
            "debits": [d for d in credit.reference.split(",") if d]},
    }


def _debit_entry(m: Movement) -> dict[str, Any]:
    return {"transaction_id": m.transaction_id, "purpose": m.purpose, "amount": m.amount}


def credit_view(movements: Sequence[Movement]) -> CreditView | None:
    """The round's credit among its movements as the player sees it, if it has one."""
    credit = next((m for m in movements if m.kind is MovementKind.CREDIT), None)
    if credit is None:
        return None
    state = "acknowledged" if credit.state is MovementState.ACKED else "pending"
    return CreditView(credit.transaction_id, credit.amount, state)


def seamless_row(start: StartRequest, round_id: str, shoe_id: str) -> RoundRow:
    """The new row of a seamless round ``start`` begins (version 0: ``_commit`` inserts it)."""
    account, rules = start.account, start.rules
    now = utc_now()
    return RoundRow(account.operator, round_id, account.holder, rules.game, rules_digest(rules),
                    rules.level(start.bets.level).name, account.mode, account.currency,
                    RoundStatus.OPEN, 0, b"", shoe_id, now, now, RoundWallet.SEAMLESS)


def start_debits(movements: Sequence[Movement]) -> list[Movement]:
    """A start's debits among its round's movements: the bets' first, then the side bets'."""
    order = (str(Purpose.BET), str(Purpose.SIDE_BET))
    return sorted((m for m in movements if m.kind is MovementKind.DEBIT and m.purpose in order),
                  key=lambda m: order.index(m.purpose))


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
