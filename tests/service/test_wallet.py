"""Wallet use cases: deposits, withdrawals, balances and the paginated history."""

from __future__ import annotations

import pytest
from service_helpers import EUR, OP, Harness, ledger_invariants

from rng_service.core.errors import IllegalState, InvalidInput, NotFound
from rng_service.service.ports import Mode


def test_deposit_withdraw_and_history_newest_first(harness: Harness) -> None:
    w = harness.wallet
    assert w.get_balance(OP, "ann", EUR).balance == 0
    first = w.deposit(OP, "ann", EUR, 5000, request_id="d1")
    assert (first.kind, first.amount, first.balance_after) == ("deposit", 5000, 5000)
    out = w.withdraw(OP, "ann", EUR, 1200, request_id="w1")
    assert (out.kind, out.amount, out.balance_after) == ("withdrawal", -1200, 3800)
    with pytest.raises(IllegalState) as info:
        w.withdraw(OP, "ann", EUR, 3801, request_id="w2")
    assert info.value.reason == "INSUFFICIENT_FUNDS"
    for n in range(3):
        w.deposit(OP, "ann", EUR, 100, request_id=f"more-{n}")
    page = w.list_transactions(OP, "ann", EUR, page_size=3)
    assert [t.request_id for t in page.transactions] == ["more-2", "more-1", "more-0"]
    rest = w.list_transactions(OP, "ann", EUR, page_size=3, page_token=page.next_page_token)
    assert [t.request_id for t in rest.transactions] == ["w1", "d1"]
    assert rest.next_page_token == ""
    assert w.get_balance(OP, "ann", EUR).balance == 4100
    assert w.get_balance(OP, "ann", EUR, Mode.DEMO).balance == 100_000
    ledger_invariants(harness)


def test_wallet_input_is_checked(harness: Harness) -> None:
    w = harness.wallet
    with pytest.raises(InvalidInput) as info:
        w.deposit(OP, "ann", EUR, 0, request_id="d1")
    assert info.value.field == "amount"
    with pytest.raises(InvalidInput) as info:
        w.deposit(OP, "@house", EUR, 10, request_id="d1")
    assert info.value.field == "player"
    with pytest.raises(InvalidInput) as info:
        w.deposit(OP, "ann", "euro", 10, request_id="d1")
    assert info.value.field == "currency"
    with pytest.raises(NotFound) as info:
        w.deposit("nobody", "ann", EUR, 10, request_id="d1")
    assert info.value.field == "operator"
    with pytest.raises(InvalidInput) as info:
        w.list_transactions(OP, "ann", EUR, page_token="zz")
    assert info.value.field == "page_token"
