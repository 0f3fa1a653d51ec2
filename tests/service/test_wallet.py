"""Wallet use cases: deposits, withdrawals, balances and the paginated history."""

from __future__ import annotations

import re

import pytest
from support.service_helpers import EUR, OP, Harness, ledger_invariants

from rng_service.core.errors import IllegalState, InvalidInput, NotFound
from rng_service.service import validate
from rng_service.service.operators import add_operator
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
    """The form of a request's values is checked once, at the API's edge, by the shared checks
    under the request's names (tests/api/test_rounds_e2e.py sends them over gRPC); the use
    cases check what only they can know (the operator, a page token), and the ledger still
    refuses a posting that is no movement of money."""
    for check, value, field in ((validate.amount, 0, "amount_minor"),
                                (validate.player, "@house", "account.player_id"),
                                (validate.currency, "euro", "account.currency"),
                                (validate.request_id, "a b", "request_id")):
        with pytest.raises(InvalidInput) as info:
            check(value, field)
        assert info.value.field == field
    w = harness.wallet
    with pytest.raises(ValueError, match="positive integer"):
        w.deposit(OP, "ann", EUR, 0, request_id="d1")
    assert w.get_balance(OP, "ann", EUR).balance == 0
    with pytest.raises(NotFound) as info:
        w.deposit("nobody", "ann", EUR, 10, request_id="d1")
    assert info.value.field == "operator"
    with pytest.raises(InvalidInput) as info:
        w.list_transactions(OP, "ann", EUR, page_token="zz")
    assert info.value.field == "page_token"


def test_what_an_operator_sees_tells_nothing_of_another_operators_volume(
        harness: Harness) -> None:
    # found by a hostile test: transaction ids and page tokens were ledger_entries.entry_id, one
    # counter shared by every operator, so operator B's ids counted operator A's postings
    w = harness.wallet
    add_operator(harness.storage, "op-b")
    seen = [w.deposit("op-b", "bea", EUR, 100, request_id="b1").transaction_id]
    for n in range(5):
        w.deposit(OP, "ann", EUR, 100, request_id=f"a{n}")
    seen.append(w.deposit("op-b", "bea", EUR, 100, request_id="b2").transaction_id)
    seen.append(w.withdraw("op-b", "bea", EUR, 50, request_id="b3").transaction_id)
    for tid in seen:  # random 128-bit ids, not positions in any sequence
        assert re.fullmatch(r"[0-9a-f]{32}", tid), tid
    assert len(set(seen)) == 3
    page = w.list_transactions("op-b", "bea", EUR, page_size=1)
    tokens = [page.next_page_token]
    while page.next_page_token:
        page = w.list_transactions("op-b", "bea", EUR, page_size=1,
                                   page_token=page.next_page_token)
        tokens.append(page.next_page_token)
    # a page token is the id of the last transaction shown: nothing the client did not see
    assert tokens == [seen[2], seen[1], ""]
    assert [t.transaction_id for t in
            w.list_transactions("op-b", "bea", EUR).transactions] == seen[::-1]
    # a retried deposit answers the same id
    assert w.deposit("op-b", "bea", EUR, 100, request_id="b1").transaction_id == seen[0]
    # another operator's token (or another listing's) is no token of this listing
    theirs = w.list_transactions(OP, "ann", EUR, page_size=1).next_page_token
    for foreign in (theirs, "0" * 32):
        with pytest.raises(InvalidInput) as info:
            w.list_transactions("op-b", "bea", EUR, page_token=foreign)
        assert info.value.field == "page_token"
