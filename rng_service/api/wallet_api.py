"""WalletService over gRPC (fairshoe.wallet.v1): deposits, withdrawals, balances, the ledger.

Each RPC checks its request once, here, under the proto's field names (``account.player_id``,
``amount_minor``), calls one use case of
:class:`rng_service.service.wallet.WalletService` and renders the answer; errors are raised and
reported by one interceptor. Deposits and withdrawals move real money only: demo balances are
funded by the service itself and take neither.
"""

from __future__ import annotations

from typing import Final, Protocol

import grpc

from rng_service.api import calls
from rng_service.api.caller import operator_of
from rng_service.api.operator_wallet_grpc import PURPOSES
from rng_service.api.proto_gen.fairshoe.operator.v1 import wallet_pb2 as operator_pb2
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from rng_service.core.errors import InvalidInput
from rng_service.service import validate
from rng_service.service.operator_wallet import Purpose
from rng_service.service.ports import Mode, MovementKind, MovementState
from rng_service.service.reconcile import Unsettled
from rng_service.service.views import TransactionView
from rng_service.service.wallet import WalletService

MAX_TRANSACTIONS_PAGE: Final = validate.MAX_TRANSACTIONS_PAGE

_KINDS: Final = {
    "deposit": wallet_pb2.TRANSACTION_KIND_DEPOSIT,
    "withdrawal": wallet_pb2.TRANSACTION_KIND_WITHDRAWAL,
    "stake": wallet_pb2.TRANSACTION_KIND_STAKE,
    "return": wallet_pb2.TRANSACTION_KIND_RETURN,
    # play money credited to a demo account: a deposit the service makes itself
    "demo_credit": wallet_pb2.TRANSACTION_KIND_DEPOSIT,
}


class WalletApi(wallet_pb2_grpc.WalletServiceServicer):  # type: ignore[misc]
    """The WalletService servicer."""

    def __init__(self, wallet: WalletService) -> None:
        self._wallet = wallet

    def Deposit(self, request: wallet_pb2.DepositRequest, context: grpc.ServicerContext
                ) -> wallet_pb2.DepositResponse:
        """Credit real money to the player."""
        account, entry = self._move(request, context, self._wallet.deposit)
        return wallet_pb2.DepositResponse(transaction=transaction(entry, account))

    def Withdraw(self, request: wallet_pb2.WithdrawRequest, context: grpc.ServicerContext
                 ) -> wallet_pb2.WithdrawResponse:
        """Debit real money from the player; more than the balance is refused."""
        account, entry = self._move(request, context, self._wallet.withdraw)
        return wallet_pb2.WithdrawResponse(transaction=transaction(entry, account))

    def GetBalance(self, request: wallet_pb2.GetBalanceRequest, context: grpc.ServicerContext
                   ) -> wallet_pb2.GetBalanceResponse:
        """The balance, and the part of it staked in open rounds."""
        op = operator_of(context)
        player, currency, mode = _account(request)
        balance = self._wallet.get_balance(op, player, currency, mode)
        return wallet_pb2.GetBalanceResponse(account=request.account,
                                             balance_minor=balance.balance,
                                             in_play_minor=balance.in_play)

    def ListTransactions(self, request: wallet_pb2.ListTransactionsRequest,
                         context: grpc.ServicerContext) -> wallet_pb2.ListTransactionsResponse:
        """The player's ledger entries, newest first, a page at a time."""
        op = operator_of(context)
        player, currency, mode = _account(request)
        round_id = validate.round_id(request.round_id) if request.round_id else ""
        size = calls.page_size("page_size", request.page_size, MAX_TRANSACTIONS_PAGE)
        token = calls.page_token("page_token", request.page_token)
        page = self._wallet.list_transactions(op, player, currency, mode, page_size=size,
                                              page_token=token, round_id=round_id)
        return wallet_pb2.ListTransactionsResponse(
            transactions=[transaction(t, request.account) for t in page.transactions],
            next_page_token=page.next_page_token)

    def ListUnsettledMovements(self, request: wallet_pb2.ListUnsettledMovementsRequest,
                               context: grpc.ServicerContext
                               ) -> wallet_pb2.ListUnsettledMovementsResponse:
        """The caller's seamless-wallet movements not yet settled with its wallet, oldest
        first, with their age."""
        op = operator_of(context)
        size = calls.page_size("page_size", request.page_size, MAX_TRANSACTIONS_PAGE)
        token = calls.page_token("page_token", request.page_token)
        page = self._wallet.unsettled(op, page_size=size, page_token=token)
        return wallet_pb2.ListUnsettledMovementsResponse(
            movements=[unsettled_movement(u) for u in page.movements],
            next_page_token=page.next_page_token, total_unsettled=page.total,
            oldest_age_seconds=page.oldest_age_seconds)

    def _move(self, request: wallet_pb2.DepositRequest | wallet_pb2.WithdrawRequest,
              context: grpc.ServicerContext, use_case: _MoveUseCase
              ) -> tuple[wallet_pb2.Account, TransactionView]:
        """A deposit or a withdrawal: the request checked, then the use case, once."""
        op = operator_of(context)
        player, currency, mode = _account(request)
        if mode is not Mode.REAL:
            raise InvalidInput("account.mode", "deposits and withdrawals move real money only "
                               "(MODE_REAL); demo balances are funded automatically")
        amount = validate.amount(request.amount_minor, "amount_minor")
        reference = validate.reference(request.reference)
        request_id = validate.request_id(request.request_id)
        calls.require_time(context)
        entry = use_case(op, player, currency, amount, request_id=request_id, reference=reference)
        return request.account, entry


class _MoveUseCase(Protocol):
    """The shape of ``WalletService.deposit`` and ``withdraw`` (for type checking)."""

    def __call__(self, operator: str, player: str, currency: str, amount: int, *,
                 request_id: str, reference: str | None) -> TransactionView: ...


def _account(request: wallet_pb2.DepositRequest | wallet_pb2.WithdrawRequest
             | wallet_pb2.GetBalanceRequest | wallet_pb2.ListTransactionsRequest
             ) -> tuple[str, str, Mode]:
    """The request's account: player id, currency and mode, each required."""
    if not request.HasField("account"):
        raise InvalidInput("account", "required: player_id, currency and mode")
    account = request.account
    player = validate.player(account.player_id, "account.player_id")
    currency = validate.currency(account.currency, "account.currency")
    return player, currency, calls.mode("account.mode", account.mode)


def transaction(entry: TransactionView, account: wallet_pb2.Account) -> wallet_pb2.Transaction:
    """A ledger entry as the player sees it (signed amount, the balance after it)."""
    out = wallet_pb2.Transaction(
        transaction_id=entry.transaction_id, account=account, kind=_KINDS[entry.kind],
        amount_minor=entry.amount, balance_after_minor=entry.balance_after,
        round_id=entry.round_id or "", wager_id=entry.wager_id,
        request_id=entry.request_id or "", reference=entry.reference or "")
    calls.set_timestamp(out.created_at, entry.created_at)
    return out


_MOVEMENT_KINDS: Final = {
    MovementKind.DEBIT: wallet_pb2.MOVEMENT_KIND_DEBIT,
    MovementKind.CREDIT: wallet_pb2.MOVEMENT_KIND_CREDIT,
    MovementKind.ROLLBACK: wallet_pb2.MOVEMENT_KIND_ROLLBACK,
}
_MOVEMENT_STATES: Final = {
    MovementState.PENDING: wallet_pb2.MOVEMENT_STATE_PENDING,
    MovementState.UNCERTAIN: wallet_pb2.MOVEMENT_STATE_UNCERTAIN,
}


def unsettled_movement(row: Unsettled) -> wallet_pb2.UnsettledMovement:
    """An unsettled movement as the operator reconciles it."""
    m = row.movement
    out = wallet_pb2.UnsettledMovement(
        transaction_id=m.transaction_id, round_id=m.round_id, player_id=m.player,
        currency=m.currency, kind=_MOVEMENT_KINDS[m.kind],
        purpose=(PURPOSES[Purpose(m.purpose)] if m.purpose
                 else operator_pb2.DEBIT_PURPOSE_UNSPECIFIED),
        amount_minor=m.amount, state=_MOVEMENT_STATES[m.state], reference=m.reference,
        attempts=m.attempts, last_cause=m.reason, age_seconds=row.age_seconds)
    calls.set_timestamp(out.created_at, m.created_at)
    calls.set_timestamp(out.next_attempt_at, m.next_attempt_at)
    return out
