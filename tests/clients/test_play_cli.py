"""`fairshoe play` driven as a newcomer would: a real `fairshoe play` process against a real
stacked server process (tests/support/live_server.py), its input scripted on stdin line by line, its
output read as the player sees it.

Each stacked round's cards are queued before the client starts (``server.stack``): a player's
next shoe is created when the client shows its commitment between rounds, so stacks are taken
in the order the rounds are played. A stacked shoe's cards are not its seed's, so its
verification says MISMATCH (the check is real); a round on a genuine shoe says VERIFIED.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest
from play_run import play
from support.engine_helpers import stack
from support.live_server import DEMO, FAIRSHOE, REAL, Client, ServerProcess

from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

COMMITMENT = re.compile(r"commitment [0-9a-f]{64}\b")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("play")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Client:
    return server.client()


def test_choose_snap_in_demo_and_win(server: ServerProcess, client: Client) -> None:
    stacked = stack("snap", [["TS", "9H"]], ["7D", "TC"])  # 19 against 7+10
    server.stack(stacked)
    out = play(server, "newcomer", ["snap", "", "", "10", "deal", "stand", "quit"])
    assert "Game [snap / double-deck / double-exposure / multi-hand] (snap): snap" in out
    assert "Mode [demo / real] (demo):" in out
    assert "medium 5.00-500.00 (default)" in out
    assert "[DEAL] [REBET] [REBET & DEAL] [DOUBLE & DEAL]" in out
    assert "Dealer  7♦ ??" in out  # the hole card is hidden
    assert "Right: [HIT] [STAND] [DOUBLE] 10.00" in out
    assert "Dealer  7♦ 10♣  17" in out
    assert re.search(r"Right\s+10♠ 9♥\s+19\s+10.00\s+WIN", out)
    assert "BALANCE 1,010.00 EUR   BET 10.00   WIN 20.00" in out
    assert len(COMMITMENT.findall(out)) >= 3  # the next shoe's, then the round's
    # the first stacked card that differs from the seed's own shoe: usually position 0, but
    # the seed's shoe may start with the same card (1 time in 52), so the position is read back
    mismatch = re.search(r"MISMATCH shoe [0-9a-f]{32}: round [0-9a-f]{32} dealt (..) at shoe "
                         r"position (\d); the shoe recomputed from the revealed seed has (..)"
                         r" there", out)
    assert mismatch is not None, out
    dealt, position, seeded = mismatch.group(1), int(mismatch.group(2)), mismatch.group(3)
    assert dealt == stacked[position] and seeded != dealt
    assert out.rstrip().endswith("Goodbye.")
    assert client.balance("newcomer", DEMO) == 101_000


def test_a_table_in_yen_shows_and_takes_whole_yen(server: ServerProcess, client: Client
                                                  ) -> None:
    # JPY has no minor unit below the yen: amounts are whole, on the table and in what is typed
    server.stack(stack("snap", [["TS", "9H"]], ["7D", "TC"]))
    out = play(server, "yen", ["10.50", "1000", "deal", "stand", "quit"], "--game", "snap",
               "--mode", "demo", "--level", "", "--currency", "JPY")
    assert "medium 500-50,000 (default)" in out
    assert "'10.50' is not an amount (e.g. 10)" in out
    assert "Bets: 1,000 (press DEAL)" in out
    assert "Right: [HIT] [STAND] [DOUBLE] 1,000" in out
    assert "BALANCE 101,000 JPY   BET 1,000   WIN 2,000" in out
    assert client.balance("yen", DEMO, currency="JPY") == 101_000


def test_split_and_double(server: ServerProcess, client: Client) -> None:
    # 8-8 against 6: split; 8+3 doubles and draws 10; 8+9 stands; the dealer's 6+10 draws 10
    server.stack(stack("double-deck", [["8S", "8H"]], ["6D", "TC", "TH"], ["3C", "TD", "9S"]))
    out = play(server, "splitter", ["10", "deal", "split", "double", "stand", "quit"],
               "--game", "double-deck", "--mode", "demo", "--level", "")
    assert "Hand 1: [HIT] [STAND] [SPLIT] 10.00" in out
    assert "Hand 1 (split 1): [HIT] [STAND] [DOUBLE] 0.01 to 10.00" in out
    assert re.search(r"Hand 1 \(split 1\)\s+8♠ 3♣ 10♦\s+21\s+20.00\s+WIN", out)  # doubled
    assert re.search(r"Hand 1 \(split 2\)\s+8♥ 9♠\s+17\s+10.00\s+WIN", out)
    assert re.search(r"split\s+Hand 1 \(split 2\)\s+10.00\s+20.00\s+WIN", out)
    assert re.search(r"double\s+Hand 1 \(split 1\)\s+10.00\s+20.00\s+WIN", out)
    assert "BET 30.00   WIN 60.00" in out
    assert client.balance("splitter", DEMO) == 103_000


def test_insurance_for_an_amount(server: ServerProcess, client: Client) -> None:
    # 16 against an ace: insure for 2.00; no dealer blackjack; hit 5: 21 beats 20
    server.stack(["TS", "AD", "6H", "9C", "5D"])
    out = play(server, "insurer", ["10", "deal", "yes 2", "hit", "quit"],
               "--game", "double-deck", "--mode", "demo", "--level", "")
    assert "Insurance for Hand 1? [YES] insure 0.00 to 5.00 [NO]" in out
    assert re.search(r"insurance\s+Hand 1\s+2.00\s+0.00\s+LOSE", out)
    assert "BET 12.00   WIN 20.00" in out
    assert client.balance("insurer", DEMO) == 100_800


def test_even_money(server: ServerProcess, client: Client) -> None:
    server.stack(["AS", "AD", "KH", "7C"])  # a blackjack against an ace
    out = play(server, "evens", ["10", "deal", "even money", "quit"],
               "--game", "snap", "--mode", "demo", "--level", "medium")
    assert "Even money for Right's blackjack? [YES] even money [NO]" in out
    assert re.search(r"Right\s+A♠ K♥\s+Blackjack\s+10.00\s+EVEN MONEY", out)
    assert "BET 10.00   WIN 20.00" in out
    assert client.balance("evens", DEMO) == 101_000


def test_multi_hand_side_bet_alert_and_rebet(server: ServerProcess, client: Client) -> None:
    # round 1: a perfect pair (1.00 pays 25:1), stand, stand, double 5+6 draws 10
    server.stack(stack("multi-hand", [["8S", "8S"], ["TH", "9H"], ["5C", "6D"]], ["7D", "TD"],
                       ["TC"]))
    # round 2 (REBET & DEAL): 19, 18 stand; 17 hits (an alert) and draws 4: 21; dealer 17
    server.stack(stack("multi-hand", [["TS", "9S"], ["TH", "8H"], ["TC", "7C"]], ["9D", "8D"],
                       ["4C"]))
    out = play(server, "multi", ["10,pp=1 10 10", "deal", "stand", "stand", "double",
                                 "rebet & deal", "stand", "stand", "hit", "quit"],
               "--game", "multi-hand", "--mode", "demo", "--level", "1-500")
    assert "Bets: 10.00,perfect_pairs=1.00 10.00 10.00 (press DEAL)" in out
    assert re.search(r"side bet perfect_pairs \(perfect_pair\)\s+Hand 1\s+1.00\s+26.00\s+WIN",
                     out)
    assert "BET 41.00   WIN 86.00" in out
    assert "Bets: 10.00,perfect_pairs=1.00 10.00 10.00\n" in out  # the rebet
    assert "[HIT] (alert: hitting a hard 17 to 20) [STAND]" in out
    assert "Alert: hitting a hard 17 to 20" in out
    assert re.search(r"Hand 3\s+10♣ 7♣ 4♣\s+21\s+10.00\s+WIN", out)
    assert "BET 31.00   WIN 60.00" in out
    assert client.balance("multi", DEMO) == 100_000 - 4100 + 8600 - 3100 + 6000


def test_double_exposure_waits_for_its_cut_card_shoe(server: ServerProcess,
                                                     client: Client) -> None:
    server.stack(stack("double-exposure", [["TS", "9H"]], ["7D", "TC"]))
    out = play(server, "exposed", ["10", "deal", "stand", "quit"],
               "--game", "double-exposure", "--mode", "demo", "--level", "")
    assert "Dealer  7♦ 10♣  17" in out  # both dealer cards face up from the start
    assert "BET 10.00   WIN 20.00" in out
    assert re.search(r"Shoe [0-9a-f]{32} is still in play \(its seed is revealed once the cut "
                     r"card comes out\): verified when it finishes\.", out)
    assert "VERIFIED" not in out and "MISMATCH" not in out


def test_a_genuine_shoe_is_verified(server: ServerProcess, client: Client) -> None:
    """No stack: the seed's own cards, with the player's client seed mixed in. Whatever comes,
    decline and stand until it is over."""
    out = play(server, "verifier", ["10", "deal", *["no", "stand"] * 4, "quit"],
               "--game", "snap", "--mode", "demo", "--level", "", "--client-seed", "lucky 7")
    assert re.search(r"VERIFIED shoe [0-9a-f]{32}: the revealed seed matches commitment "
                     r"[0-9a-f]{16}…; \d+ cards of 1 round\(s\) match the shoe recomputed from "
                     r"it", out), out
    views = list(client.list_all(round_pb2.ListRoundsRequest(player_id="verifier")))
    assert len(views) == 1 and views[0].status == rt.ROUND_STATUS_FINISHED
    assert views[0].shoe.commitment in out and views[0].shoe.client_seed == b"lucky 7"


def test_an_open_round_resumes(server: ServerProcess, client: Client) -> None:
    server.stack(stack("double-deck", [["TS", "6H"]], ["9D", "7C"], ["2D"]))
    view = client.start("resumer", "double-deck", [1000], mode=DEMO)
    out = play(server, "resumer", ["stand", "quit"], "--game", "double-deck", "--mode", "demo",
               "--level", "")
    assert "You have a round in progress: it continues where you left it." in out
    assert view.round_id in out
    assert client.get("resumer", view.round_id).status == rt.ROUND_STATUS_FINISHED


def test_errors_are_one_line_and_the_session_goes_on(server: ServerProcess,
                                                     client: Client) -> None:
    out = play(server, "broke", ["1", "deal", "10", "deal", "deposit 50", "hit", "x,pp=1",
                                 "quit"], "--game", "snap", "--mode", "real", "--level", "")
    assert "bet 1.00 is outside the limits 5.00 to 500.00 (level medium): not placed" in out
    assert "Server: FAILED_PRECONDITION INSUFFICIENT_FUNDS: the stake 10.00 EUR exceeds the " \
           "balance 0.00 EUR" in out
    assert "Deposited 50.00 EUR." in out
    assert "'hit' is not an amount (e.g. 10 or 2.50)" in out
    assert "'x' is not an amount" in out
    assert "[DEPOSIT] AMOUNT" in out
    assert client.balance("broke", REAL) == 5000


def test_an_unreachable_server_is_one_line() -> None:
    done = subprocess.run([str(FAIRSHOE), "play", "--address", "127.0.0.1:1", "--timeout", "2"],
                          input="", capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "fairshoe play: cannot play at 127.0.0.1:1: UNAVAILABLE"), done.stderr
