"""A live round's message (``fill_live_round_view``, built in place from the service's view) is
the replay's rendering of the same round (``round_view``, from the engine's summary), field for
field, at every transition of rounds of every game and every event kind; and a view read back
from its stored JSON (a retried request's answer) renders to the same bytes."""

from __future__ import annotations

import dataclasses
from collections import Counter

from support.engine_helpers import random_play

from game_math.round import Round
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.round_messages import fill_live_round_view, live_round_view, round_view
from rng_service.service import views

SEEDS = range(300)
#: what the replay's message has that a live view shows otherwise (or not at all)
NOT_COMPARED = ("level", "balance_after_minor", "cards_used", "rules_digest")
CTX = views.RoundContext("r" * 32, "default", "p-1", "", "d" * 64, "1-500", "REAL", "EUR", 3,
                         "2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:06.000000Z")


def _view(rnd: Round) -> views.RoundView:
    shoe = views.ShoeRefView("s" * 32, "c" * 64, rnd.rules.decks, "00ff", rnd.start,
                             rnd.position)
    ctx = dataclasses.replace(CTX, game=rnd.rules.game)
    return views.round_view(ctx, rnd, shoe, balance=12_345)


def _comparable(message: rt.RoundView) -> rt.RoundView:
    out = rt.RoundView()
    out.CopyFrom(message)
    for name in (*NOT_COMPARED, "round_id", "version", "mode", "currency", "shoe", "started_at",
                 "finished_at", "game"):
        out.ClearField(name)
    return out


def test_live_view_is_the_replay_rendering_at_every_transition() -> None:
    for seed in SEEDS:
        for rnd in random_play(seed):
            live = live_round_view(_view(rnd))
            assert _comparable(live) == _comparable(round_view(rnd)), (seed, rnd.summary())
            assert live.game == rnd.rules.game and live.round_id == CTX.round_id


def test_every_event_kind_is_covered() -> None:
    kinds: Counter[str] = Counter()
    for seed in SEEDS:
        *_, rnd = random_play(seed)
        kinds.update(str(e.kind) for e in rnd.events)
    assert all(kinds[k] for k in ("card", "reveal", "decision", "split", "peek", "settle",
                                  "alert", "void")), kinds


def test_a_response_filled_in_place_is_the_copied_message() -> None:
    for seed in SEEDS[:60]:
        for rnd in random_play(seed):
            view = _view(rnd)
            filled = round_pb2.ActResponse()
            fill_live_round_view(filled.round, view)
            copied = round_pb2.ActResponse(round=live_round_view(view))
            assert filled.SerializeToString(deterministic=True) == copied.SerializeToString(
                deterministic=True)
            assert filled.HasField("round")


def test_a_stored_answer_renders_to_the_same_bytes() -> None:
    for seed in SEEDS[:60]:
        for rnd in random_play(seed):
            view = _view(rnd)
            stored = views.from_json(views.RoundView, views.to_json(view))
            assert stored == view
            assert live_round_view(stored).SerializeToString(deterministic=True) == (
                live_round_view(view).SerializeToString(deterministic=True))
