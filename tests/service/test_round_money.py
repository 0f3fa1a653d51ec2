"""A round's money: ``ledger.post_round_money`` posts each wager's difference from what the
round's entries hold, stakes before returns, nothing for a difference of zero, and refuses a
ledger that holds more than the round owes before posting anything."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from game_math.cards import parse_cards
from game_math.games import game_rules
from game_math.round import Action, HandBet, Round
from rng_service.core.errors import IntegrityFailure
from rng_service.service import ledger
from rng_service.service.ports import AccountKey, EntryKind, Mode, Posting, house_of

ACCOUNT = AccountKey("op", "alice", "EUR", Mode.REAL)
ROUND_ID = "0123456789abcdef0123456789abcdef"
HOUSE = ACCOUNT.other(house_of(ROUND_ID))


class _Uow:
    """Records the postings and accounts opened; each posting's balances after are counted."""

    def __init__(self) -> None:
        self.postings: list[Posting] = []
        self.opened: list[AccountKey] = []

    def post(self, posting: Posting) -> Any:
        self.postings.append(posting)
        n = len(self.postings)
        return SimpleNamespace(source_balance_after=100 * n, target_balance_after=100 * n + 1)

    def open_account(self, account: AccountKey, kind: object) -> bool:
        self.opened.append(account)
        return True


def _split_round() -> Round:
    """Snap, eights split and both hands stood: two main wagers and a split stake, settled."""
    rnd = Round(
        game_rules("snap"), parse_cards(["8S", "6D", "8H", "TD", "3C", "2C", "9C"]), [HandBet(1000)]
    )
    rnd.fund(10_000)
    rnd.act(Action("split", 1000))
    while not rnd.finished:
        rnd.act(Action("stand"))
    return rnd


def test_a_new_round_posts_its_stake_and_opens_its_house_account() -> None:
    rnd = Round(
        game_rules("snap"), parse_cards(["TS", "6D", "5H", "TD", "8C", "9C"]), [HandBet(1000)]
    )
    uow = _Uow()
    balance = ledger.post_round_money(uow, ACCOUNT, rnd, ROUND_ID, "req", posted={})  # type: ignore[arg-type]
    assert uow.opened == [HOUSE]
    assert uow.postings == [Posting(ACCOUNT, HOUSE, 1000, EntryKind.STAKE, ROUND_ID, 0, "req")]
    assert balance == 100  # the source's balance after: the player paid


def test_stakes_come_before_returns_and_zero_differences_post_nothing() -> None:
    rnd = _split_round()
    owed = ledger.owed(rnd)
    assert len(owed) >= 2 and all(staked > 0 for staked, _ in owed.values())
    first = min(owed)  # its stake already posted: only the others' stakes, then the returns
    uow = _Uow()
    balance = ledger.post_round_money(
        uow,
        ACCOUNT,
        rnd,
        ROUND_ID,
        "req",  # type: ignore[arg-type]
        posted={first: (owed[first][0], 0)},
    )
    stakes = [
        Posting(ACCOUNT, HOUSE, staked, EntryKind.STAKE, ROUND_ID, wager, "req")
        for wager, (staked, _) in owed.items()
        if wager != first
    ]
    returns = [
        Posting(HOUSE, ACCOUNT, paid, EntryKind.RETURN, ROUND_ID, wager, "req")
        for wager, (_, paid) in owed.items()
        if paid > 0
    ]
    assert uow.postings == stakes + returns
    assert uow.opened == []
    # the player's balance after the last posting touching it: a return's target
    assert balance == (100 * len(uow.postings) + 1 if returns else 100 * len(uow.postings))


def test_nothing_owed_posts_nothing() -> None:
    rnd = _split_round()
    uow = _Uow()
    assert (
        ledger.post_round_money(
            uow,
            ACCOUNT,
            rnd,
            ROUND_ID,
            "req",  # type: ignore[arg-type]
            posted=ledger.owed(rnd),
        )
        is None
    )
    assert uow.postings == []


@pytest.mark.parametrize("which", ["stake", "return"])
def test_a_ledger_holding_more_than_owed_is_refused(which: str) -> None:
    rnd = _split_round()
    owed = ledger.owed(rnd)
    wager = max(w for w, (_, paid) in owed.items() if paid > 0)
    staked, paid = owed[wager]
    posted = dict(owed)  # every other wager posted as owed
    posted[wager] = (staked + 1, paid) if which == "stake" else (staked, paid + 1)
    uow = _Uow()
    with pytest.raises(IntegrityFailure) as raised:
        ledger.post_round_money(
            uow,
            ACCOUNT,
            rnd,
            ROUND_ID,
            "req",  # type: ignore[arg-type]
            posted=posted,
        )
    assert raised.value.reason == "LEDGER_MISMATCH"
    kind = "stake" if which == "stake" else "return"
    assert str(raised.value) == (
        f"round {ROUND_ID} wager {wager}: the ledger holds more {kind} than the round state"
    )
    assert uow.postings == []
