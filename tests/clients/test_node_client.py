"""The published protos are usable as published: clients/node/play.js (Node.js, @grpc/grpc-js and
@grpc/proto-loader loading proto/ at run time, no generated code) plays one round of each game
against a real stacked server process, and its JSON lines agree with the server's own answers.

Node.js and npm are required, as for buf (scripts/setup-tests installs the client's packages with
``npm ci`` from the committed lock); this fails rather than skips without them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.engine_helpers import stack
from support.live_server import DEMO, ServerProcess

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

ROOT = Path(__file__).resolve().parents[2]
NODE_CLIENT = ROOT / "clients" / "node"
DEMO_FUNDING = 100_000

# game -> (stacked shoe, the decisions play.js takes, staked, returned)
ROUNDS: dict[str, tuple[list[str], list[str], int, int]] = {
    # 19 against 7+10: stand, win
    "snap": (stack("snap", [["TS", "9H"]], ["7D", "TC"]), ["stand"], 1000, 2000),
    # 16 against an ace: insurance declined, stand; the dealer's A+9 is 20
    "double-deck": (["TS", "AD", "6H", "9C"], ["insurance", "stand"], 1000, 0),
    # 9 against 7+10 (both face up): hit a 10, stand on 19
    "double-exposure": (stack("double-exposure", [["5S", "4H"]], ["7D", "TC"], ["TD"]),
                        ["hit", "stand"], 1000, 2000),
    # a blackjack against a 9: paid 3:2 at the deal, no decision
    "multi-hand": (stack("multi-hand", [["AS", "KH"]], ["9D", "7C"]), [], 1000, 2500),
}


def npm_ci_if_needed() -> None:
    """``npm ci`` in clients/node when node_modules is missing or older than the lock (what
    scripts/setup-tests does; here too so that the test also runs outside scripts/test)."""
    installed = NODE_CLIENT / "node_modules" / ".package-lock.json"
    lock = NODE_CLIENT / "package-lock.json"
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    assert npm is not None, "npm is required (Node.js 18 or later) for the Node client"
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=NODE_CLIENT,
                   check=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("node")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def run_node(server: ServerProcess, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    npm_ci_if_needed()
    node = shutil.which("node")
    assert node is not None, "node is required (Node.js 18 or later) for the Node client"
    done = subprocess.run([node, str(NODE_CLIENT / "play.js"), "--address",
                           f"127.0.0.1:{server.port}", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, lines, done.stderr


def test_one_round_of_each_game_from_the_published_protos(server: ServerProcess) -> None:
    for shoe, *_ in ROUNDS.values():  # play.js starts the games in this order
        server.stack(shoe)
    status, lines, stderr = run_node(server, "--player", "node-player")
    assert status == 0, (lines, stderr)
    assert lines[0] == {"event": "games", "games": list(ROUNDS)}
    assert lines[-1] == {"event": "done", "rounds": 4}
    rounds = {line["game"]: line for line in lines if line["event"] == "round"}
    assert list(rounds) == list(ROUNDS)
    client, balance = server.client(), DEMO_FUNDING
    for game, (_, actions, staked, returned) in ROUNDS.items():
        line = rounds[game]
        assert line["status"] == "ROUND_STATUS_FINISHED"
        assert line["actions"] == actions, line
        assert (line["staked_minor"], line["returned_minor"]) == (staked, returned), line
        balance += returned - staked
        assert line["balance_after_minor"] == line["balance_minor"] == balance, line
        view = client.get("node-player", line["round_id"])  # the server's own record of it
        assert view.status == rt.ROUND_STATUS_FINISHED
        assert (view.total_staked_minor, view.total_returned_minor) == (staked, returned)
        assert view.shoe.commitment == line["shoe_commitment"]
        assert [c.code for c in view.hands[0].cards] == line["hands"][0]["cards"]
    assert client.balance("node-player", DEMO) == balance == DEMO_FUNDING + 2500


def test_a_failure_exits_non_zero_with_the_status(server: ServerProcess) -> None:
    """Real money with no deposit: StartRound is refused, and play.js says so and fails."""
    status, lines, _ = run_node(server, "--player", "node-broke", "--mode", "real",
                                "--games", "snap")
    assert status == 1
    assert lines[-1]["event"] == "error"
    assert lines[-1]["message"] == ("StartRound: FAILED_PRECONDITION INSUFFICIENT_FUNDS: the "
                                    "stake 1000 exceeds the balance 0")
    assert server.client().balance("node-broke") == 0


def test_a_refusal_carries_its_reason_and_values(server: ServerProcess) -> None:
    """The reason code and the ErrorInfo metadata, decoded from grpc-status-details-bin."""
    _, lines, _ = run_node(server, "--player", "node-short", "--mode", "real", "--games", "snap",
                           "--bet", "2000")
    assert lines[-1] == {
        "event": "error", "method": "StartRound", "code": "FAILED_PRECONDITION",
        "reason": "INSUFFICIENT_FUNDS",
        "metadata": {"stake_minor": "2000", "balance_minor": "0", "currency": "EUR"},
        "message": "StartRound: FAILED_PRECONDITION INSUFFICIENT_FUNDS: the stake 2000 exceeds "
                   "the balance 0"}


def test_a_bad_currency_names_the_field(server: ServerProcess) -> None:
    status, lines, _ = run_node(server, "--player", "node-xyz", "--games", "snap",
                                "--currency", "XYZ")
    assert status == 1
    error = lines[-1]
    assert (error["event"], error["method"], error["code"]) == (
        "error", "StartRound", "INVALID_ARGUMENT")
    assert error["field"] == "currency"
    assert error["message"] == ("StartRound: INVALID_ARGUMENT: currency: must be an ISO 4217 "
                                "currency code such as EUR, got 'XYZ'")
