"""The player's wallet: deposits, withdrawals, balances and transaction history.

Real money enters and leaves through the operator's cash account (``@cash``), so every movement
is a double-entry posting like the stakes and returns of rounds. Deposits and withdrawals carry a
request id and are idempotent (:mod:`rng_service.service.idempotency`). Demo accounts are funded
automatically on first use (:data:`rng_service.service.ledger.DEMO_FUNDING`) and take no
deposits or withdrawals.

The use cases take their arguments as checked (the API checks each once, under its request's
names, with :mod:`.validate`) and check what only they can know: the operator, the balance, a
page token, a request id's earlier use.
"""

from __future__ import annotations

import re
from functools import partial

from rng_service.core.errors import InvalidInput
from rng_service.service import idempotency, ledger, reconcile, validate
from rng_service.service.ports import (
    CASH,
    AccountKey,
    AccountKind,
    EntryKind,
    LedgerEntry,
    Mode,
    Posting,
    Storage,
    UnitOfWork,
)
from rng_service.service.views import (
    BalanceView,
    TransactionPage,
    TransactionView,
    from_json,
    to_json,
)

#: a ledger entry's public id (rng_service.storage.sql.ledger.new_public_id): 32 lowercase hex
#: digits
_PUBLIC_ID = re.compile(r"[0-9a-f]{32}")


def _decode_transaction(data: bytes) -> TransactionView:
    return from_json(TransactionView, data)


def transaction_view(entry: LedgerEntry, holder: str) -> TransactionView:
    """``entry`` as ``holder`` sees it: money in is positive, money out negative."""
    incoming = entry.target == holder
    return TransactionView(
        transaction_id=entry.public_id, kind=str(entry.kind),
        amount=entry.amount if incoming else -entry.amount,
        balance_after=entry.target_balance_after if incoming else entry.source_balance_after,
        round_id=entry.round_id, wager_id=entry.wager_id, request_id=entry.request_id,
        created_at=entry.created_at, reference=entry.reference,
    )


class WalletService:
    """Wallet use cases for the gRPC layer. Thread-safe."""

    def __init__(self, storage: Storage, *, demo_funding: int = ledger.DEMO_FUNDING) -> None:
        self._storage = storage
        self._demo_funding = demo_funding

    def deposit(self, operator: str, player: str, currency: str, amount: int, *,
                request_id: str, reference: str | None = None) -> TransactionView:
        """Credit ``amount`` (minor units) of real money to the player; ``reference`` (the
        operator's own, optional) is stored with the entry."""
        return self._move(EntryKind.DEPOSIT, operator, player, currency, amount,
                          request_id=request_id, reference=reference)

    def withdraw(self, operator: str, player: str, currency: str, amount: int, *,
                 request_id: str, reference: str | None = None) -> TransactionView:
        """Debit ``amount``; ``IllegalState(reason="INSUFFICIENT_FUNDS")`` if not covered."""
        return self._move(EntryKind.WITHDRAWAL, operator, player, currency, amount,
                          request_id=request_id, reference=reference)

    def get_balance(self, operator: str, player: str, currency: str,
                    mode: Mode | str = Mode.REAL) -> BalanceView:
        """The balance (0 for a real account never used; a demo account is funded on first
        use, so asking opens it)."""
        who, cur, how = player, currency, validate.mode(mode)
        begin = self._storage.transaction if how is Mode.DEMO else self._storage.snapshot
        with begin() as uow:
            op = validate.operator(operator, uow)
            account = AccountKey(op, who, cur, how)
            if how is Mode.DEMO:
                balance = ledger.open_player_account(uow, account,
                                                     demo_funding=self._demo_funding,
                                                     request_id=None)
            else:
                balance = uow.get_balance(account) or 0
            in_play = uow.in_play(account)
        return BalanceView(op, who, cur, str(how), balance, in_play)

    def list_transactions(self, operator: str, player: str, currency: str,
                          mode: Mode | str = Mode.REAL, *, page_size: int = 0,
                          page_token: str = "", round_id: str = "") -> TransactionPage:
        """The player's ledger entries in one currency and mode, newest first (only those of
        ``round_id`` if given)."""
        of_round = round_id or None
        who, cur, how = player, currency, validate.mode(mode)
        size = page_size or validate.DEFAULT_TRANSACTIONS_PAGE
        after = _decode_token(page_token)
        with self._storage.snapshot() as uow:
            op = validate.operator(operator, uow)
            account = AccountKey(op, who, cur, how)
            before = None if after is None else uow.entry_position(account, after)
            if after is not None and before is None:
                raise InvalidInput("page_token", "not a page token of this listing")
            entries = uow.list_entries(account, size + 1, before, round_id=of_round)
        views = tuple(transaction_view(e, who) for e in entries[:size])
        token = entries[size - 1].public_id if len(entries) > size else ""
        return TransactionPage(views, token)

    def _move(self, kind: EntryKind, operator: str, player: str, currency: str, amount: int,
              *, request_id: str, reference: str | None) -> TransactionView:
        who, cur, value, rid, ref = player, currency, amount, request_id, reference or None

        def work(uow: UnitOfWork, op: str) -> TransactionView:
            account = AccountKey(op, who, cur, Mode.REAL)
            cash = account.other(CASH)
            uow.open_account(account, AccountKind.PLAYER)
            uow.open_account(cash, AccountKind.SYSTEM)
            source, target = (cash, account) if kind is EntryKind.DEPOSIT else (account, cash)
            entry = uow.post(Posting(source, target, value, kind, request_id=rid, reference=ref))
            return transaction_view(entry, who)

        params: dict[str, object] = {"player": who, "currency": cur, "amount": value}
        if ref is not None:  # only when given, so the hash of a request without one is unchanged
            params["reference"] = ref
        return idempotency.run(self._storage, operator=partial(validate.operator, operator),
                               request_id=rid, operation=str(kind), params=params, work=work,
                               encode=to_json, decode=_decode_transaction)

    def unsettled(self, operator: str, *, page_size: int = 0, page_token: str = ""
                  ) -> reconcile.UnsettledPage:
        """The operator's seamless-wallet movements not yet settled, oldest first, a page at a
        time (:func:`rng_service.service.reconcile.unsettled_page`)."""
        return reconcile.unsettled_page(self._storage, operator, page_size=page_size,
                                        page_token=page_token)


def _decode_token(token: object) -> str | None:
    """A page token is the public id of the last entry shown: stable under new entries, and it
    tells the client nothing it has not seen (the position it stands for, the shared
    ``entry_id``, would count other operators' postings). Resolved within the listing's
    account, so another operator's or player's id is no token here."""
    if token == "":
        return None
    if not isinstance(token, str) or not _PUBLIC_ID.fullmatch(token):
        raise InvalidInput("page_token", "not a page token of this listing")
    return token
