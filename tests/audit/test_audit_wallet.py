"""The audit's check of a seamless-wallet round's ``wallet`` member: the transaction ids and
amounts it names agree with the stakes and returns the replay finds, and each way of getting
them wrong is a FAIL naming the member. Records are dealt on the production path and signed with
the operator's key, as in test_audit_findings.py."""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import simple_player

from game_math.games import game_rules
from game_math.round import Action, HandBet, Round
from game_math.table import MAIN
from rng_service.audit.verifier import audit_paths
from rng_service.audit.wallet_checks import PURPOSE_OF
from rng_service.crypto.keys import KeyStore, SigningKey
from rng_service.records.schema import (
    Bets,
    RecordWriter,
    ShoeRef,
    play_round,
    random_bets,
    round_payload,
)
from rng_service.rng.shoe import Shoe
from rng_service.service.outbox import VOID_UNCONFIRMED

Wallet = dict[str, Any]


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> SigningKey:
    store = KeyStore(tmp_path_factory.mktemp("keystore"))
    store.create()
    return store.load_signing_key()


def txid() -> str:
    return uuid.uuid4().hex


def debit(purpose: str, amount: int) -> dict[str, Any]:
    return {"transaction_id": txid(), "purpose": purpose, "amount": amount}


def wallet_of(rnd: Round) -> Wallet:
    """The wallet member the service writes for ``rnd``: the start's bet and side-bet debits,
    one debit per further stake, the credit of its returns settling them all."""
    bet = sum(w.staked for w in rnd.wagers if w.kind == MAIN)
    side = sum(w.staked for w in rnd.wagers if w.kind not in PURPOSE_OF)
    debits = [debit("bet", bet)] + ([debit("side_bet", side)] if side else [])
    debits += [debit(PURPOSE_OF[w.kind], w.staked) for w in rnd.wagers
               if w.kind in PURPOSE_OF and w.kind != MAIN]
    return {"debits": debits, "cancelled": [], "rollbacks": [],
            "credit": {"transaction_id": txid(), "amount": rnd.total_returned,
                       "debits": [d["transaction_id"] for d in debits]}}


def snap_bets() -> Bets:
    return Bets(game_rules("snap").levels[0].name, (HandBet(1000),), {})


def played(game: str, bets: Bets, player: Callable[[Round], Action] = simple_player
           ) -> tuple[Round, Shoe]:
    rules = game_rules(game)
    shoe = Shoe.new(rules.decks)
    shoe.start_round()
    rnd = play_round(rules, shoe, bets, player)
    shoe.finish()
    return rnd, shoe


def audit(out: Path, key: SigningKey, rnd: Round, shoe: Shoe, wallet: Wallet | None, *,
          mode: str = "REAL") -> list[str]:
    """The audit's lines not OK for the one round signed with ``wallet``."""
    writer = RecordWriter(out, key)
    payload = round_payload(rnd, round_id=txid(), shoe=ShoeRef.of(shoe),
                            started_at="2024-05-01T12:00:00.000Z",
                            finished_at="2024-05-01T12:00:01.000Z", mode=mode, wallet=wallet)
    writer.write_round(payload, rnd.rules)
    writer.write_reveal(shoe)
    report = audit_paths([out], {key.key_id: key.public_key})
    assert report.count("round") == 1
    return [f.line() for f in report.findings if f.status.value != "OK"]


def standing(rnd: Round) -> Action:
    """Stands on every hand, declining insurance: the round stakes its bet only."""
    legal = {la.action for la in rnd.legal_actions()}
    if "even_money" in legal:
        return Action("even_money", accept=False)
    return Action("insurance", 0) if "insurance" in legal else Action("stand")


def doubled(rnd: Round) -> Action:
    legal = {la.action: la for la in rnd.legal_actions()}
    if "double" in legal:
        return Action("double", legal["double"].max_stake)
    return simple_player(rnd)


def test_a_round_with_side_bets_and_further_stakes_passes(tmp_path: Path, key: SigningKey
                                                         ) -> None:
    rules = game_rules("multi-hand")
    side = next(iter(rules.side_bets)).name
    kinds: set[str] = set()
    for i in range(30):  # rounds that double, split or insure, with side bets on
        rnd, shoe = played("multi-hand", Bets(rules.levels[0].name, (
            HandBet(1000, {side: 500}), HandBet(1000), HandBet(1000)), {}), doubled)
        assert audit(tmp_path / str(i), key, rnd, shoe, wallet_of(rnd)) == []
        kinds |= {w.kind for w in rnd.wagers}
    assert {"main", "double", side} <= kinds


def test_a_refused_double_is_named_cancelled_with_its_rollback(tmp_path: Path, key: SigningKey
                                                              ) -> None:
    rnd, shoe = played("snap", snap_bets())
    wallet = wallet_of(rnd)
    refused = debit("double", 1000)
    wallet["cancelled"] = [refused, debit("double", 1000)]  # one rejected, one rolled back
    wallet["rollbacks"] = [{"transaction_id": txid(), "debit": refused["transaction_id"],
                            "amount": 1000}]
    assert audit(tmp_path, key, rnd, shoe, wallet) == []


def unstarted() -> tuple[Round, Shoe]:
    rules = game_rules("snap")
    shoe = Shoe.new(rules.decks)
    shoe.start_round()
    rnd = Round(rules, shoe.cards, [HandBet(1000)] * 2, {"snap": 500}, start=0,
                void=VOID_UNCONFIRMED)
    shoe.finish()
    return rnd, shoe


def unstarted_wallet() -> Wallet:
    cancelled = [debit("bet", 2000), debit("side_bet", 500)]
    return {"debits": [], "cancelled": cancelled, "credit": None, "rollbacks": [
        {"transaction_id": txid(), "debit": d["transaction_id"], "amount": d["amount"]}
        for d in cancelled]}


def test_a_round_void_before_its_deal_rolled_back_every_stake(tmp_path: Path, key: SigningKey
                                                             ) -> None:
    rnd, shoe = unstarted()
    assert audit(tmp_path, key, rnd, shoe, unstarted_wallet()) == []


def _set(path: str, value: Any) -> Callable[[Wallet], None]:
    def change(wallet: Wallet) -> None:
        *parents, last = path.split(".")
        target: Any = wallet
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return change


def _extra_debit(wallet: Wallet) -> None:
    wallet["debits"].append(debit("bet", 500))


def _same_id(wallet: Wallet) -> None:
    wallet["credit"]["transaction_id"] = wallet["debits"][0]["transaction_id"]


def _unsettled(wallet: Wallet) -> None:
    wallet["credit"]["debits"] = []


def _rollback_of_nothing(wallet: Wallet) -> None:
    wallet["rollbacks"] = [{"transaction_id": txid(), "debit": txid(), "amount": 1000}]


#: a tampering of a finished round's wallet, and how its FAIL line reads
TAMPERED: dict[str, tuple[Callable[[Wallet], None], str]] = {
    "stake": (_set("debits.0.amount", 999), "wallet.debits take 999 for bet: the replayed "
              "round staked 1000 on it"),
    "purpose": (_set("debits.0.purpose", "double"), "wallet.debits take 0 for bet"),
    "unknown purpose": (_set("debits.0.purpose", "tip"), 'wallet.debits[0].purpose is "tip", '
                        "not one of bet, double"),
    "extra debit": (_extra_debit, "wallet.debits take 1500 for bet"),
    "credit": (_set("credit.amount", 1), "wallet.credit.amount is 1, the round returned"),
    "no credit": (_set("credit", None), "wallet.credit is null"),
    "settles": (_unsettled, "wallet.credit.debits settle [], the debits taken are"),
    "same id": (_same_id, "wallet names transaction"),
    "bad id": (_set("debits.0.transaction_id", "X" * 32), "wallet.debits[0].transaction_id is "
               '"XXXX'),
    "negative": (_set("debits.0.amount", -5), "wallet.debits[0].amount is -5"),
    "string amount": (_set("debits.0.amount", "1000"), "wallet.debits[0].amount must be an "
                      "integer"),
    "member": (_set("debits.0.note", "x"), "wallet.debits[0].note is not a member of a wallet "
               "debit"),
    "missing": (_set("rollbacks", None), "wallet.rollbacks must be"),
    "top member": (_set("balance", 5), "wallet.balance is not a member of a round's wallet"),
    "rollback": (_rollback_of_nothing, "wallet.rollbacks[0].debit"),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_wallet_that_does_not_agree_with_the_round_fails(tmp_path: Path, key: SigningKey,
                                                           case: str) -> None:
    change, expected = TAMPERED[case]
    rnd, shoe = played("snap", snap_bets(), standing)
    wallet = wallet_of(rnd)
    tampered = copy.deepcopy(wallet)
    change(tampered)
    lines = audit(tmp_path, key, rnd, shoe, tampered)
    assert len(lines) == 1 and lines[0].startswith("FAIL round "), lines
    assert expected in lines[0], lines


def _taken(wallet: Wallet) -> None:
    wallet["debits"] = [wallet["cancelled"].pop(0)]
    wallet["rollbacks"].pop(0)


def _credited(wallet: Wallet) -> None:
    wallet["credit"] = {"transaction_id": txid(), "amount": 1200, "debits": []}


UNSTARTED: dict[str, tuple[Callable[[Wallet], None], str]] = {
    "taken": (_taken, "wallet.debits took"),
    "credited": (_credited, "wallet.credit is a credit, but a round void before its deal"),
    "not rolled back": (lambda w: w["rollbacks"].pop(), "wallet.cancelled[1] debit"),
    "short": (lambda w: w["cancelled"].pop() and w["rollbacks"].pop(),
              "wallet.cancelled roll back 2000: the round staked 2500"),
    "amount": (_set("rollbacks.0.amount", 10), "wallet.rollbacks[0].amount is 10: the debit it "
               "cancels was 2000"),
}


@pytest.mark.parametrize("case", sorted(UNSTARTED))
def test_a_round_void_before_its_deal_that_kept_a_stake_fails(tmp_path: Path, key: SigningKey,
                                                              case: str) -> None:
    change, expected = UNSTARTED[case]
    rnd, shoe = unstarted()
    wallet = unstarted_wallet()
    change(wallet)
    lines = audit(tmp_path, key, rnd, shoe, wallet)
    assert len(lines) == 1 and expected in lines[0], lines


def test_only_a_real_money_round_has_a_wallet(tmp_path: Path, key: SigningKey) -> None:
    rnd, shoe = played("snap", snap_bets())
    lines = audit(tmp_path, key, rnd, shoe, wallet_of(rnd), mode="DEMO")
    assert len(lines) == 1 and "wallet is recorded for a DEMO round" in lines[0], lines


def test_an_internal_ledger_round_needs_no_wallet(tmp_path: Path, key: SigningKey) -> None:
    rnd, shoe = played("snap", snap_bets())
    assert audit(tmp_path, key, rnd, shoe, None) == []


def test_random_rounds_of_every_game_pass_with_the_wallet_the_service_writes(
        tmp_path: Path, key: SigningKey) -> None:
    rng = random.Random(7)
    for game in ("snap", "double-deck", "double-exposure", "multi-hand"):
        rules = game_rules(game)
        for i in range(10):
            rnd, shoe = played(game, random_bets(rules, rng))
            assert audit(tmp_path / f"{game}-{i}", key, rnd, shoe, wallet_of(rnd)) == []
