"""The check of a seamless-wallet round's ``wallet`` member (:mod:`rng_service.records.schema`)
against the replayed round, so the record can be matched with the operator's wallet statement
(check 12 of :mod:`rng_service.audit.verifier`, the named check ``round.wallet``,
:class:`RoundWallet`):

- only a real-money round has one, and its members are exactly ``debits``, ``cancelled``,
  ``rollbacks`` and ``credit``; every transaction id is 32 lowercase hex, and no id is named twice;
- the debits the wallet accepted add up, purpose by purpose, to the replayed round's stakes: bet
  to its main wagers, double, split and insurance to those wagers, side_bet to its side bets';
- the credit pays the replayed ``total_returned`` and settles exactly those debits;
- every rollback cancels a debit listed as cancelled, for its amount;
- a round void before its deal (its stakes unconfirmed) took no debit and wrote no credit: each
  of its stakes was cancelled and rolled back, and together they are its ``total_staked``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from game_math.round import DOUBLE_WAGER, INSURANCE_WAGER, MAIN, SPLIT_WAGER, Round
from rng_service.audit.checks import Check
from rng_service.audit.failures import Doc, fail
from rng_service.audit.files import show
from rng_service.audit.round_checks import RoundCase, round_mode, unstarted
from rng_service.core.json_input import JsonObject

#: the members of a record's ``wallet``, and of each of its entries
MEMBERS: Final = frozenset({"debits", "cancelled", "rollbacks", "credit"})
_DEBIT: Final = frozenset({"transaction_id", "purpose", "amount"})
_ROLLBACK: Final = frozenset({"transaction_id", "debit", "amount"})
_CREDIT: Final = frozenset({"transaction_id", "amount", "debits"})
#: the debit purpose that pays each kind of wager (any other kind is a side bet)
PURPOSE_OF: Final = {MAIN: "bet", DOUBLE_WAGER: "double", SPLIT_WAGER: "split",
                     INSURANCE_WAGER: "insurance"}
PURPOSES: Final = frozenset({*PURPOSE_OF.values(), "side_bet"})
#: a transaction id as the service writes it (uuid4().hex)
_ID: Final = re.compile(r"[0-9a-f]{32}")


class RoundWallet(Check[RoundCase]):
    """12. A seamless-wallet round's ``wallet`` agrees with the replayed round (``wallet``,
    ``wallet.*``: see the module docstring)."""

    name = "round.wallet"

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        doc = subject.doc
        if not doc.has("wallet"):  # check_wallet's first test, before what it is handed is
            return  # worked out (each member that reads, the round's checks have read)
        check_wallet(doc, subject.need_round(), unstarted=unstarted(doc, subject.shoe),
                     mode=round_mode(doc))


def check_wallet(doc: JsonObject, rnd: Round, *, unstarted: bool, mode: str | None) -> None:
    """The record's ``wallet`` agrees with the replayed ``rnd`` (see the module docstring);
    ``unstarted``: the round was void before its deal."""
    if not doc.has("wallet"):
        return
    if mode != "REAL":
        fail("wallet", f"is recorded for a {mode or 'replayed'} round: only real money is "
              "kept in an operator's wallet")
    wallet = doc.get_obj("wallet")
    _members(wallet, MEMBERS, "a round's wallet")
    ids: Counter[str] = Counter()
    debits = [_debit(Doc(item, f"wallet.debits[{i}]"), ids)
              for i, item in enumerate(wallet.get_list("debits"))]
    cancelled = [_debit(Doc(item, f"wallet.cancelled[{i}]"), ids)
                 for i, item in enumerate(wallet.get_list("cancelled"))]
    rollbacks = [_rollback(Doc(item, f"wallet.rollbacks[{i}]"), ids)
                 for i, item in enumerate(wallet.get_list("rollbacks"))]
    credit = None if wallet.get("credit") is None else wallet.get_obj("credit")
    credit_debits = [] if credit is None else _credit(credit, ids)
    twice = sorted(i for i, n in ids.items() if n > 1)
    if twice:
        fail("wallet", f"names transaction {show(twice[0])} more than once")
    amounts = {txid: amount for txid, amount, _ in cancelled}
    for i, (debit, amount) in enumerate(rollbacks):
        if debit not in amounts:
            fail(f"wallet.rollbacks[{i}].debit", f"{show(debit)} is not a cancelled debit of "
                  "the round")
        if amount != amounts[debit]:
            fail(f"wallet.rollbacks[{i}].amount", f"is {amount}: the debit it cancels was "
                  f"{amounts[debit]}")
    if unstarted:
        _check_unstarted(rnd, debits, cancelled, rollbacks, credit)
        return
    _check_stakes(rnd, debits)
    if credit is None:
        fail("wallet.credit", f"is null: the round's returns ({rnd.total_returned}) must be "
              "credited")
    paid = credit.get_int("amount")
    if paid != rnd.total_returned:
        fail("wallet.credit.amount", f"is {paid}, the round returned {rnd.total_returned}")
    taken = [txid for txid, _, _ in debits]
    if sorted(credit_debits) != sorted(taken):
        fail("wallet.credit.debits", f"settle {show(credit_debits)}, the debits taken are "
              f"{show(taken)}")


def _members(entry: JsonObject, members: frozenset[str], what: str) -> None:
    """``entry`` has exactly ``members``: the first one missing or extra (sorted) fails."""
    for name in sorted(members):
        entry.get(name)  # missing: fails naming it
    extra = sorted(set(entry.data) - members)
    if extra:
        fail(entry.at(extra[0]), f"is not a member of {what}")


def _check_stakes(rnd: Round, debits: list[tuple[str, int, str]]) -> None:
    """The debits taken add up, purpose by purpose, to the replayed round's stakes."""
    staked: Counter[str] = Counter()
    for w in rnd.wagers:
        staked[PURPOSE_OF.get(w.kind, "side_bet")] += w.staked
    debited: Counter[str] = Counter()
    for _, amount, purpose in debits:
        debited[purpose] += amount
    for purpose in sorted(PURPOSES):
        if debited[purpose] != staked[purpose]:
            fail("wallet.debits", f"take {debited[purpose]} for {purpose}: the replayed round "
                  f"staked {staked[purpose]} on it")


def _check_unstarted(rnd: Round, debits: list[tuple[str, int, str]],
                     cancelled: list[tuple[str, int, str]], rollbacks: list[tuple[str, int]],
                     credit: JsonObject | None) -> None:
    """A round void before its deal took nothing: its every stake cancelled and rolled back."""
    if debits:
        fail("wallet.debits", f"took {debits[0][0]}, but the round was void before its deal "
              "because its stakes were not confirmed: none was taken")
    if credit is not None:
        fail("wallet.credit", "is a credit, but a round void before its deal took no stake: "
              "its stakes are rolled back, not credited")
    rolled = {debit for debit, _ in rollbacks}
    for i, (txid, _, _) in enumerate(cancelled):
        if txid not in rolled:
            fail(f"wallet.cancelled[{i}]", f"debit {txid} has no rollback: a stake left "
                  "unconfirmed must be rolled back")
    total = sum(amount for _, amount, _ in cancelled)
    if total != rnd.total_staked:
        fail("wallet.cancelled", f"roll back {total}: the round staked {rnd.total_staked}")


def _txid(entry: JsonObject, name: str, ids: Counter[str] | None) -> str:
    value = entry.get_str(name)
    if not _ID.fullmatch(value):
        fail(entry.at(name), f"is {show(value)}, not a transaction id (32 lowercase hex)")
    if ids is not None:
        ids[value] += 1
    return value


def _amount(entry: JsonObject, *, zero: bool = False) -> int:
    amount = entry.get_int("amount")
    if amount < 0 or (amount == 0 and not zero):
        fail(entry.at("amount"), f"is {amount}: {'' if zero else 'positive '}minor units are "
              "moved")
    return amount


def _debit(entry: Doc, ids: Counter[str]) -> tuple[str, int, str]:
    _members(entry, _DEBIT, "a wallet debit")
    txid = _txid(entry, "transaction_id", ids)
    purpose = entry.get_str("purpose")
    if purpose not in PURPOSES:
        fail(entry.at("purpose"), f"is {show(purpose)}, not one of {', '.join(sorted(PURPOSES))}")
    return txid, _amount(entry), purpose


def _rollback(entry: Doc, ids: Counter[str]) -> tuple[str, int]:
    _members(entry, _ROLLBACK, "a wallet rollback")
    _txid(entry, "transaction_id", ids)
    return _txid(entry, "debit", None), _amount(entry)


def _credit(entry: JsonObject, ids: Counter[str]) -> list[str]:
    _members(entry, _CREDIT, "a wallet credit")
    _txid(entry, "transaction_id", ids)
    _amount(entry, zero=True)
    settled = entry.get_list("debits")
    for i, item in enumerate(settled):
        if not isinstance(item, str) or not _ID.fullmatch(item):
            fail(f"{entry.at('debits')}[{i}]", f"is {show(item)}, not a transaction id (32 "
                  "lowercase hex)")
    return list(settled)
