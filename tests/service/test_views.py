"""``round_view`` shows exactly what ``Round.summary()`` shows (the player's public view: no hole
card before it is turned), at every transition of rounds of every game and event kind, though it
reads the engine's public pieces directly and keeps the views of events it has seen."""

from __future__ import annotations

from typing import Any

import orjson
from support.engine_helpers import random_play

from game_math.round import Round
from rng_service.service import views

CTX = views.RoundContext("r" * 32, "default", "p-1", "snap", "d" * 64, "1-500", "REAL", "EUR",
                         3, "2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:06.000000Z")
SHOE = views.ShoeRefView("s" * 32, "c" * 64, 2, "00ff", 0, 10)


def from_summary(rnd: Round) -> views.RoundView:
    """The view as the summary has it (how ``round_view`` was first written)."""
    summary = rnd.summary()
    turn = rnd.turn
    dealer = summary["dealer"]
    return views.RoundView(
        round_id=CTX.round_id, operator=CTX.operator, player=CTX.player, game=CTX.game,
        rules_digest=CTX.rules_digest, level=CTX.level, mode=CTX.mode, currency=CTX.currency,
        status=views.round_status(rnd), version=CTX.version, phase=turn.phase,
        turn_hand=turn.hand, decision=turn.decision,
        legal_actions=tuple(views.LegalActionView(
            la.action, la.hand, la.min_stake, la.max_stake, la.any_amount, tuple(la.amounts),
            la.alert) for la in rnd.legal_actions()),
        dealer=views.DealerView(tuple(dealer["cards"]), len(rnd.dealer) - len(dealer["cards"]),
                                dealer["total"], dealer["soft"], dealer["blackjack"]),
        hands=tuple(views.HandView(h["id"], h["seat"], tuple(h["cards"]), h["total"], h["soft"],
                                   h["blackjack"], h["from_split"], h["outcome"])
                    for h in summary["hands"]),
        wagers=tuple(views.WagerView(w["id"], w["kind"], w.get("hand"), w["staked"],
                                     w["returned"], w["outcome"], w.get("line"))
                     for w in summary["wagers"]),
        total_staked=summary["total_staked"], total_returned=summary["total_returned"],
        balance_after=7, shoe=SHOE, events=tuple(_event(e) for e in summary["events"]),
        void_reason=rnd.void_reason, created_at=CTX.created_at, updated_at=CTX.updated_at,
    )


def _event(e: dict[str, Any]) -> views.EventView:
    hand = e.get("hand")
    return views.EventView(e["kind"], hand if isinstance(hand, int) else None, hand == "dealer",
                           e.get("card"), e.get("face_up"), e.get("action"), e.get("amount"),
                           e.get("wager"), e.get("outcome"), e.get("returned"), e.get("note"))


def test_round_view_is_the_summary_at_every_transition() -> None:
    hidden = 0
    for seed in range(300):
        for rnd in random_play(seed):
            view = views.round_view(CTX, rnd, SHOE, 7)
            assert view == from_summary(rnd), seed
            # and the very bytes an idempotent answer stores (a str where the summary has one)
            assert views.to_json(view) == views.to_json(from_summary(rnd)), seed
            # the events' kept bytes spliced in are orjson's own encoding of the whole view
            assert views.to_json(view) == orjson.dumps(view), seed
            hidden += view.dealer.hidden_cards
            # what the view shows of a hole card is what the summary shows: nothing until turned
            assert all(e.card is not None or (e.dealer and e.face_up is False)
                       for e in view.events if e.kind == "card")
    assert hidden, "no round was seen with its hole card down"


def test_a_hole_card_shows_once_turned_though_its_hidden_view_was_kept() -> None:
    for seed in range(300):
        seen_hidden = False
        for rnd in random_play(seed):
            view = views.round_view(CTX, rnd, SHOE, 7)
            hole = [e for e in view.events if e.kind == "card" and e.face_up is False]
            seen_hidden = seen_hidden or any(e.card is None for e in hole)
            if rnd.hole_revealed:
                assert all(e.card is not None for e in hole)
        if seen_hidden and rnd.hole_revealed:
            return
    raise AssertionError("no round turned a hole card it had shown hidden")
