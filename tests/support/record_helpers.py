"""Rounds of every game dealt by the service from production shoes, and RNG draws, stored in a
real SQLite file: the material the audit and export tests read back."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from game_math.round import Action, HandBet
from rng_service.crypto.keys import SigningKey
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.ports import DEFAULT_OPERATOR, Mode, Storage
from rng_service.service.rounds import RoundService
from rng_service.service.shoes import OsShoeSource
from rng_service.service.views import RoundView
from rng_service.service.wallet import WalletService

OP = DEFAULT_OPERATOR
GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
BETS: dict[str, tuple[list[HandBet], dict[str, int]]] = {
    "snap": ([HandBet(1000), HandBet(1000)], {"snap": 500}),
    "double-deck": ([HandBet(1000)], {}),
    "double-exposure": ([HandBet(1000)], {}),
    "multi-hand": ([HandBet(1000, {"perfect_pairs": 100}), HandBet(1000), HandBet(1000)], {}),
}


def decide(view: RoundView) -> Action:
    """Declines insurance and even money, hits below 12, stands otherwise."""
    legal = {a.action for a in view.legal_actions}
    if "even_money" in legal:
        return Action("even_money", accept=False)
    if "insurance" in legal:
        return Action("insurance", 0)
    hand = next(h for h in view.hands if h.hand_id == view.turn_hand)
    return Action("hit" if hand.total < 12 else "stand")


@dataclass
class Dealer:
    """A RoundService with production (OS-seeded) shoes and a funded player."""

    storage: Storage
    signer: SigningKey
    vault: SeedVault
    player: str = "ann"
    rounds: RoundService = field(init=False)
    _ids: Iterator[int] = field(init=False, default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.rounds = RoundService(self.storage, vault=self.vault, signer=self.signer,
                                   shoe_source=OsShoeSource())
        WalletService(self.storage).deposit(OP, self.player, "EUR", 10_000_000,
                                            request_id=self.rid())

    def rid(self) -> str:
        return f"req-{next(self._ids)}"

    def start(self, game: str) -> RoundView:
        hands, side = BETS[game]
        return self.rounds.start_round(OP, self.player, game, mode=Mode.REAL, currency="EUR",
                                       hands=hands, side_bets=side, request_id=self.rid())

    def play(self, game: str) -> RoundView:
        view = self.start(game)
        while view.status == "awaiting":
            view = self.rounds.act(OP, view.round_id, decide(view), hand_id=view.turn_hand,
                                   expected_version=view.version, request_id=self.rid())
        return view

    def play_until_shoe_finished(self, game: str) -> list[RoundView]:
        """Rounds of ``game`` until the shoe they deal from is finished (and revealed)."""
        views = [self.play(game)]
        while self.rounds.get_next_shoe(OP, self.player, game, mode=Mode.REAL).shoe_id == (
                views[0].shoe.shoe_id):
            views.append(self.play(game))
        return views

    def play_every_game(self) -> list[RoundView]:
        """A round of each per-round-shoe game and a whole cut-card shoe: every shoe revealed."""
        views = []
        for game in GAMES:
            views += self.play_until_shoe_finished(game)
        return views


def payload(envelope: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(envelope)["payload"]
    return data
