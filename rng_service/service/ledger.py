"""Money of rounds and wallets as double-entry postings (integer minor units only).

Every posting moves an amount between two accounts of one operator, currency and mode: a stake
from the player to the house, a return from the house to the player (the house is sixteen
accounts, a round's money on one: ``ports.house_of``), a deposit from the
operator's cash account to the player, a withdrawal back, demo funding from the demo account.
So the balances of each (operator, currency, mode) always sum to zero, a player's balance is the
sum of the entries that touch it, and a round's house result is its stakes minus its returns.

A round's postings are derived, not accumulated: after each transition the ledger is brought up
to what the round says is owed (:func:`post_round_money` posts the difference between each
wager's stake and credited return and what the round's entries already hold). A transition
therefore posts exactly its own money, and recovery can complete a round's money after a crash
without double-posting anything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Final

from game_math.round import Round, Wager
from rng_service.core.errors import IntegrityFailure
from rng_service.service.ports import (
    DEMO_FUNDS,
    AccountKey,
    AccountKind,
    EntryKind,
    MissingAccount,
    Mode,
    Posting,
    UnitOfWork,
    house_of,
)

#: play money credited to a demo account on first use, and topped back up to when a demo player
#: cannot cover a round's opening stake
DEMO_FUNDING: Final = 100_000


def open_player_account(uow: UnitOfWork, account: AccountKey, *, demo_funding: int,
                        request_id: str | None) -> int:
    """The player's balance, opening the account if needed (a demo account is funded)."""
    balance = uow.get_balance(account)  # one read when the account exists (the usual case)
    if balance is not None:
        return balance
    created = uow.open_account(account, AccountKind.PLAYER)
    if created and account.mode is Mode.DEMO:
        top_up_demo(uow, account, demo_funding, request_id)
    balance = uow.get_balance(account)
    assert balance is not None
    return balance


def top_up_demo(uow: UnitOfWork, account: AccountKey, target: int, request_id: str | None
                ) -> None:
    """Bring a demo balance up to ``target`` from the demo funds (nothing if already there)."""
    balance = uow.get_balance(account) or 0
    if account.mode is Mode.DEMO and balance < target:
        funds = account.other(DEMO_FUNDS)
        uow.open_account(funds, AccountKind.SYSTEM)
        uow.post(Posting(funds, account, target - balance, EntryKind.DEMO_CREDIT,
                         request_id=request_id))


def credited(rnd: Round, wager: Wager) -> int:
    """What the player has been paid for ``wager`` so far.

    A settled wager's return is credited at once, except side bets under
    ``side_bets_credited_at_round_end``: the engine holds those back from what the player may
    stake until the round ends, and so does the ledger.
    """
    if wager.returned is None:
        return 0
    held = rnd.rules.side_bets_credited_at_round_end and rnd.rules.side_bet(wager.kind)
    return 0 if held and not rnd.finished else wager.returned


def owed(rnd: Round) -> dict[int, tuple[int, int]]:
    """What ``rnd`` owes the ledger now: wager id -> (staked, credited return)."""
    return {w.id: (w.staked, credited(rnd, w)) for w in rnd.wagers}


def post_round_money(uow: UnitOfWork, account: AccountKey, rnd: Round, round_id: str,
                     request_id: str | None, *,
                     posted: Mapping[int, tuple[int, int]] | None = None) -> int | None:
    """Post what ``rnd`` owes beyond the round's entries so far: stakes first (a stake is
    covered before its card is dealt), then returns. A player who cannot cover a stake gets
    ``IllegalState(reason="INSUFFICIENT_FUNDS")`` and the caller's transaction rolls back.

    ``posted`` is what the round's entries hold (wager id -> (staked, returned)) when the caller
    knows it without reading them: ``{}`` for a round being dealt, or :func:`owed` of the
    round's state as this process committed it, if that state is still the stored one (every
    transition commits its entries with its state, so the two agree). Without it the entries are
    read. Returns the player's balance after the last posting that touched it, or None if none
    did."""
    staked: dict[int, int] = defaultdict(int)
    returned: dict[int, int] = defaultdict(int)
    house = account.other(house_of(round_id))
    new_house = posted == {}  # a round being dealt: its first posting
    if posted is None:
        for entry in uow.round_entries(account.operator, round_id):
            assert entry.wager_id is not None
            book = staked if entry.kind is EntryKind.STAKE else returned
            book[entry.wager_id] += entry.amount
            new_house = new_house or house.holder not in (entry.source, entry.target)
    else:
        for wager_id, (stake, paid) in posted.items():
            staked[wager_id], returned[wager_id] = stake, paid
    if new_house:
        _open_house(uow, house)
    # the differences first, a posting made only for one that is not zero (most are: a
    # transition posts its own money, a wager or two of the round's): stakes, then returns
    wagers = rnd.wagers
    owing = [(EntryKind.STAKE, w.id, w.staked - staked[w.id]) for w in wagers]
    owing += [(EntryKind.RETURN, w.id, credited(rnd, w) - returned[w.id]) for w in wagers]
    balance = None
    for kind, wager_id, amount in owing:
        if not _check_delta(round_id, wager_id, kind, amount):
            continue
        posting = (Posting(account, house, amount, kind, round_id, wager_id, request_id)
                   if kind is EntryKind.STAKE else
                   Posting(house, account, amount, kind, round_id, wager_id, request_id))
        try:
            entry = uow.post(posting)
        except MissingAccount:  # not reached: _open_house opened it (kept as a backstop)
            uow.open_account(house, AccountKind.SYSTEM)
            entry = uow.post(posting)
        balance = (entry.source_balance_after if kind is EntryKind.STAKE  # from the player
                   else entry.target_balance_after)
    return balance


def _open_house(uow: UnitOfWork, house: AccountKey) -> None:
    """Open the round's house account unless it exists, before any posting locks a row.

    A posting to a missing account has already locked the other (the player's) row when it
    finds out; opening and posting then locks the house row after the player's, against the
    holder order, and on PostgreSQL deadlocks with a round of the same player holding that
    house row and waiting for the player's (each of the sixteen accounts is new once per
    operator, currency and mode, so every deployment and new currency met it). Done for a
    round's first posting (its opening stake) and for a round begun on another house account
    (before the split), whose next posting may be the first to its own: one ``INSERT ... ON
    CONFLICT DO NOTHING``, which locks no existing row.
    """
    uow.open_account(house, AccountKind.SYSTEM)


def _check_delta(round_id: str, wager_id: int, kind: EntryKind, amount: int) -> bool:
    """Whether a difference is to be posted (not zero). A negative one means the ledger holds
    more than the round owes, which no transition can cause: refuse rather than "correct"
    money."""
    if amount < 0:
        raise IntegrityFailure(f"round {round_id} wager {wager_id}: the ledger "
                               f"holds more {kind} than the round state",
                               reason="LEDGER_MISMATCH")
    return amount > 0
