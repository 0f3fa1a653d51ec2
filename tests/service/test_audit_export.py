"""Rounds dealt by the service from production shoes (OS seeds, certified shuffle) pass the
offline audit: signed records and reveals taken from the database verify, cards recomputed from
the revealed seeds, every round replayed, money included."""

from __future__ import annotations

from pathlib import Path

from support.service_helpers import EUR, OP, Harness, ledger_invariants

from game_math.round import Action, HandBet
from rng_service.audit.verifier import audit_paths
from rng_service.records.schema import REVEALS_SUBDIR, ROUNDS_SUBDIR, write_file
from rng_service.service.ports import Mode
from rng_service.service.rounds import RoundService
from rng_service.service.shoes import OsShoeSource
from rng_service.service.views import RoundView

BETS = {
    "snap": ([HandBet(1000), HandBet(1000)], {"snap": 500}),
    "double-deck": ([HandBet(1000)], {}),
    "double-exposure": ([HandBet(1000)], {}),
    "multi-hand": ([HandBet(1000, {"perfect_pairs": 100}), HandBet(1000), HandBet(1000)], {}),
}


def decide(view: RoundView) -> Action:
    """A simple player: declines insurance, doubles 10-11, splits 8s, hits below 12."""
    legal = {a.action: a for a in view.legal_actions}
    if "even_money" in legal:
        return Action("even_money", accept=False)
    if "insurance" in legal:
        return Action("insurance", 0)
    hand = next(h for h in view.hands if h.hand_id == view.turn_hand)
    if "split" in legal and hand.cards[0][0] == "8":
        return Action("split")
    if "double" in legal and hand.total in (10, 11):
        return Action("double", legal["double"].max_stake)
    return Action("hit" if hand.total < 12 else "stand")


def play(rounds: RoundService, h: Harness, game: str) -> RoundView:
    hands, side = BETS[game]
    view = rounds.start_round(OP, "ann", game, mode=Mode.REAL, currency=EUR, hands=hands,
                              side_bets=side, request_id=h.rid())
    while view.status == "awaiting":
        view = rounds.act(OP, view.round_id, decide(view), hand_id=view.turn_hand,
                          expected_version=view.version, request_id=h.rid())
    return view


def test_service_rounds_pass_the_offline_audit(harness: Harness, tmp_path: Path) -> None:
    h = harness
    rounds = RoundService(h.storage, vault=h.vault, signer=h.signer, shoe_source=OsShoeSource())
    h.deposit("ann", 10_000_000)
    for game in ("snap", "double-deck", "multi-hand"):
        for _ in range(4):
            play(rounds, h, game)
    first = play(rounds, h, "double-exposure")
    last = play(rounds, h, "double-exposure")
    while last.shoe.shoe_id == first.shoe.shoe_id:  # until the cut card finished the shoe
        last = play(rounds, h, "double-exposure")
    out = tmp_path / "collection"
    for sub in (ROUNDS_SUBDIR, REVEALS_SUBDIR):
        (out / sub).mkdir(parents=True)
    for round_id, envelope in h.sql("SELECT round_id, envelope FROM records"):
        write_file(out / ROUNDS_SUBDIR / f"{round_id}.json", envelope)
    for shoe_id, envelope in h.sql("SELECT shoe_id, envelope FROM reveals"):
        write_file(out / REVEALS_SUBDIR / f"{shoe_id}.json", envelope)
    report = audit_paths([out], {h.signer.key_id: h.signer.public_key})
    not_ok = [(f.status.value, f.ident) for f in report.findings if f.status.value != "OK"]
    # every round passes but the last, dealt from a new shoe that is still in play
    assert not_ok == [("UNREVEALED", last.round_id)]
    assert report.count("round") == len(h.sql("SELECT 1 FROM records")) > 20
    assert report.count("shoe") == len(h.sql("SELECT 1 FROM reveals"))
    ledger_invariants(h)
