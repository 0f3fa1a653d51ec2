"""`fairshoe play` at the table as a new player met it (issue 20): bets the rules refuse are refused
before anything is sent, stake levels by the names the games use, the buttons in `help`, the
BALANCE meter after a deposit, the last game as the default, a cut-card shoe that continues, and
a screen of 110 columns. A real `fairshoe play` process against a real stacked server process, as
in tests/clients/test_play_cli.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from play_run import play
from rich.cells import cell_len
from support.engine_helpers import stack
from support.live_server import DEMO, REAL, Client, ServerProcess

from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("table")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Client:
    return server.client()


def rounds_of(client: Client, player: str) -> list[object]:
    return list(client.list_all(round_pb2.ListRoundsRequest(player_id=player)))


# ----- bets checked against the game's rules ---------------------------------------------------


def test_bets_outside_the_limits_are_refused_before_the_deal(server: ServerProcess,
                                                             client: Client) -> None:
    out = play(server, "limits", ["0.5", "300", "10.001", "deal", "6 6 6 6 6 6", "quit"],
               "--game", "double-exposure", "--mode", "demo", "--level", "")
    assert "bet 0.50 is outside the limits 1.00 to 200.00 (level table): not placed" in out
    assert "bet 300.00 is outside the limits 1.00 to 200.00 (level table): not placed" in out
    assert "'10.001' is not an amount" in out
    assert "Place a bet first" in out  # nothing was placed, so DEAL has nothing to deal
    assert ("6 hands bet: Double Exposure Blackjack plays 1, 2, 3, 4 or 5 hands: not placed"
            in out)
    assert "press DEAL" not in out
    assert rounds_of(client, "limits") == []


def test_hand_counts_chips_and_side_bets_are_the_games(server: ServerProcess,
                                                       client: Client) -> None:
    out = play(server, "counts", ["10 10", "2.50", "10,pp=60 10 10", "10,snap=1", "deal",
                                  "quit"], "--game", "multi-hand", "--mode", "demo", "--level", "")
    assert "2 hands bet: Multi-hand Blackjack plays 1, 3 or 5 hands: not placed" in out
    assert ("bet 2.50 is not made of chips: bets are multiples of 1.00 (level 1-500): not placed"
            in out)
    assert ("side bet perfect_pairs 60.00 is outside the limits 1.00 to 50.00 (level 1-500): "
            "not placed" in out)
    assert "no side bet 'snap' (side bets: perfect_pairs, twenty_one_plus_three)" in out
    assert "press DEAL" not in out
    deck = play(server, "counts", ["10 snap=5", "5 5", "10 12", "quit"],
                "--game", "double-deck", "--mode", "demo", "--level", "")
    assert "no side bet 'snap' (side bets: none in this game)" in deck
    # two hands at double-deck need twice the table minimum each
    assert ("with 2 hands, each bet 5.00 is outside the limits 10.00 to 1,000.00 (level table): "
            "not placed" in deck)
    assert "Bets: 10.00 12.00 (press DEAL)" in deck
    assert rounds_of(client, "counts") == []


def test_a_round_side_bet_needs_every_hand(server: ServerProcess, client: Client) -> None:
    out = play(server, "snapper", ["10 snap=5", "10.01", "8 8", "quit"],
               "--game", "snap", "--mode", "demo", "--level", "low")
    assert "side bet snap needs a bet on every hand (2 hands): not placed" in out
    assert "bet 10.01 must be a multiple of 0.02 so that every payout is whole: not placed" in out
    assert "Bets: 8.00 8.00 (press DEAL)" in out
    assert rounds_of(client, "snapper") == []


def test_double_and_deal_past_the_maximum_is_refused(server: ServerProcess,
                                                     client: Client) -> None:
    server.stack(stack("double-deck", [["TS", "9H"]], ["7D", "TC"]))  # 19 against 17
    out = play(server, "doubler", ["600", "deal", "stand", "double & deal", "quit"],
               "--game", "double-deck", "--mode", "demo", "--level", "")
    assert ("bet 1,200.00 is outside the limits 5.00 to 1,000.00 (level table): not placed"
            in out)
    assert len(rounds_of(client, "doubler")) == 1
    assert client.balance("doubler", DEMO) == 100_000 + 60_000


# ----- stake levels ----------------------------------------------------------------------------


def test_stake_levels_by_name_or_limits(server: ServerProcess) -> None:
    out = play(server, "levels", ["5-1,000", "quit"],
               "--game", "double-deck", "--mode", "demo", "--level", "low")
    assert ("'low' is not a stake level of double-deck: choose table 5.00-1,000.00 (a name or "
            "its limits, e.g. 5-1000)" in out)
    assert "Double Deck (land-based rules) (double-deck), DEMO mode, level table." in out
    multi = play(server, "levels", ["quit"], "--game", "multi-hand", "--mode", "demo",
                 "--level", "5-1,500")
    assert "Multi-hand Blackjack (multi-hand), DEMO mode, level 5-1500." in multi
    snap = play(server, "levels", ["quit"], "--game", "snap", "--mode", "demo",
                "--level", "25.00-2,500.00")
    assert "level high." in snap
    exposed = play(server, "levels", ["quit"], "--game", "double-exposure", "--mode", "demo",
                   "--level", "1-200")
    assert "level table." in exposed


# ----- the table between rounds ----------------------------------------------------------------


def test_deposit_redraws_the_balance(server: ServerProcess, client: Client) -> None:
    out = play(server, "depositor", ["deposit 50", "deposit 25.50", "quit"],
               "--game", "snap", "--mode", "real", "--level", "")
    assert "Deposited 50.00 EUR.   BALANCE 50.00 EUR" in out
    assert "Deposited 25.50 EUR.   BALANCE 75.50 EUR" in out
    assert client.balance("depositor", REAL) == 7550


def test_help_shows_the_buttons(server: ServerProcess) -> None:
    server.stack(stack("snap", [["TS", "9H"]], ["7D", "TC"]))
    out = play(server, "helper", ["deposit 100", "help", "10", "deal", "help", "stand", "quit"],
               "--game", "snap", "--mode", "real", "--level", "")
    assert "Between rounds: [DEAL] [REBET] [REBET & DEAL] [DOUBLE & DEAL] [CLEAR] [GAME] [QUIT] " \
           "[DEPOSIT] AMOUNT" in out
    assert out.count("In a round: [HIT] [STAND] [DOUBLE] [SPLIT]; insurance and even money: " \
                     "[YES] [NO] [YES TO ALL] [NO TO ALL]") == 2  # between rounds and in one


def test_the_game_prompt_defaults_to_the_last_game(server: ServerProcess) -> None:
    out = play(server, "chooser", ["game", "", "", "", "quit"],
               "--game", "double-deck", "--mode", "demo", "--level", "")
    assert "Game [snap / double-deck / double-exposure / multi-hand] (double-deck): " in out
    assert out.count("Double Deck (land-based rules) (double-deck), DEMO mode") == 2


def test_a_cut_card_shoe_continues(server: ServerProcess) -> None:
    server.stack(stack("double-exposure", [["TS", "9H"]], ["7D", "TC"]))
    out = play(server, "continuer", ["10", "deal", "stand", "quit"],
               "--game", "double-exposure", "--mode", "demo", "--level", "")
    first = re.findall(r"Next shoe ([0-9a-f]{32}) commitment ([0-9a-f]{64})", out)
    assert len(first) == 1, out
    shoe, commitment = first[0]
    assert f"Shoe {shoe} continues, commitment {commitment}" in out


def test_the_snap_side_bet_is_on_the_table(server: ServerProcess) -> None:
    server.stack(stack("snap", [["TS", "9H"], ["TC", "8D"]], ["7D", "TH"]))  # 19, 18; 17
    out = play(server, "sider", ["10 10 snap=5", "deal", "stand", "stand", "quit"],
               "--game", "snap", "--mode", "demo", "--level", "")
    # settled at the deal: on the table at the deal, after the first stand and at the end
    tables = out.split("wager")[0]
    assert len(re.findall(r"^\s*Snap\s+5\.00\s+LOSE\s*$", tables, re.MULTILINE)) == 3, out


# ----- the width of the screen -----------------------------------------------------------------


def test_110_columns_wrap_between_words(server: ServerProcess) -> None:
    """A genuine shoe (no stack): its VERIFIED line is longer than the screen."""
    out = play(server, "narrow", ["10", "deal", *["no", "stand"] * 4, "quit"],
               "--game", "snap", "--mode", "demo", "--level", "", columns=110)
    lines = out.splitlines()
    assert max(cell_len(line) for line in lines) <= 110
    # every hash whole: the commitment (64), shoe and round ids (32), a commitment's prefix (16)
    assert {len(h) for h in re.findall(r"[0-9a-f]{8,}", out)} <= {16, 32, 64}, out
    assert len(re.findall(r"\b[0-9a-f]{64}\b", out)) >= 2
    assert re.search(r"VERIFIED shoe [0-9a-f]{32}: the revealed seed matches commitment "
                     r"[0-9a-f]{16}…; \d+ cards of 1 round\(s\) match the shoe recomputed from it",
                     re.sub(r"\s+", " ", out)), out
