"""What `fairshoe play`'s table shows (issue 20), without a server: a doubled hand's stake, a bust
dealer, the side bets, a hash on a screen narrower than it; and the stake levels a player may type.
tests/clients/test_play_table.py drives the same through the real client and server."""

from __future__ import annotations

import io
import re

from rich.console import Console
from support.play_views import info, snap_view, text_of

from game_math.games import game_rules
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.cli import play_render as render
from rng_service.cli.play import ConsoleScreen
from rng_service.cli.play_bets import level_named, unknown_level


def card(code: str) -> rt.Card:
    return rt.Card(code=code)


def test_a_doubled_hand_shows_its_whole_stake() -> None:
    view = snap_view(
        status=rt.ROUND_STATUS_FINISHED,
        hands=[rt.HandView(hand_id=0, seat=0, bet_minor=1000, total=21,
                           cards=[card("5S"), card("6H"), card("TD")], outcome=rt.OUTCOME_WIN)],
        wagers=[rt.Wager(wager_id=0, kind=rt.WAGER_KIND_MAIN, hand_id=0, staked_minor=1000),
                rt.Wager(wager_id=1, kind=rt.WAGER_KIND_DOUBLE, hand_id=0, staked_minor=1000)])
    shown = text_of(render.table(view, info("snap")))
    assert re.search(r"Right\s+5♠ 6♥ 10♦\s+21\s+20\.00\s+WIN", shown), shown


def test_a_bust_dealer_says_bust() -> None:
    view = snap_view(status=rt.ROUND_STATUS_FINISHED,
                     dealer=rt.DealerView(cards=[card("6D"), card("TC"), card("KH")], total=26))
    assert re.search(r"Dealer\s+6♦ 10♣ K♥\s+26\s+BUST", text_of(render.table(view, info("snap"))))
    standing = snap_view(status=rt.ROUND_STATUS_FINISHED,
                         dealer=rt.DealerView(cards=[card("7D"), card("TC")], total=17))
    assert "BUST" not in text_of(render.table(standing, info("snap")))


def test_side_bets_are_rows_of_the_table() -> None:
    view = snap_view(wagers=[
        rt.Wager(wager_id=0, kind=rt.WAGER_KIND_MAIN, hand_id=0, staked_minor=1000),
        rt.Wager(wager_id=1, kind=rt.WAGER_KIND_SIDE_BET, side_bet="snap", staked_minor=500,
                 returned_minor=0, outcome=rt.OUTCOME_LOSE)])
    assert re.search(r"^\s*Snap\s+5\.00\s+LOSE\s*$", text_of(render.table(view, info("snap"))),
                     re.MULTILINE)
    multi = snap_view(wagers=[
        rt.Wager(wager_id=0, kind=rt.WAGER_KIND_SIDE_BET, side_bet="perfect_pairs", hand_id=0,
                 staked_minor=100)])
    assert re.search(r"^\s*Hand 1 perfect_pairs\s+1\.00\s*$",
                     text_of(render.table(multi, info("multi-hand"))), re.MULTILINE)


def test_a_hash_wider_than_the_screen_is_shortened_not_split() -> None:
    out = io.StringIO()
    screen = ConsoleScreen(Console(file=out, width=40, color_system=None, highlight=False))
    commitment = "ab" * 32
    screen.show(render.next_shoe_line("cd" * 16, commitment, continues=False))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert all(len(line) <= 40 for line in lines), lines
    assert lines == ["Next shoe", "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd", "commitment",
                     f"{commitment[:39]}…"]


def test_stake_levels_by_their_names_or_limits() -> None:
    multi, deck, snap = (game_rules(g) for g in ("multi-hand", "double-deck", "snap"))
    assert [level_named(multi, t) for t in ("5-1,500", "5-1500", "10.00-3,000.00", "", "1-50")] \
        == ["5-1500", "5-1500", "10-3000", "1-500", None]
    assert [level_named(deck, t) for t in ("TABLE", "5-1000", "5.00 - 1,000.00", "low")] == [
        "table", "table", "table", None]
    assert level_named(snap, "Low") == "low" and level_named(snap, "25-2,500") == "high"
    assert unknown_level(snap, "table") == (
        "'table' is not a stake level of snap: choose low 1.00-100.00 / medium 5.00-500.00 / "
        "high 25.00-2,500.00 (a name or its limits, e.g. 1-100)")
