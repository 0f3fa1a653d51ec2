"""The published protos are usable as published: clients/node/play.js (Node.js, @grpc/grpc-js and
@grpc/proto-loader loading proto/ at run time, no generated code) plays one round of each game
against a real stacked server process, and its JSON lines agree with the server's own answers.

Node.js and npm are required, as for buf (scripts/setup-tests installs the client's packages with
``npm ci`` from the committed lock); this fails rather than skips without them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.engine_helpers import stack
from support.live_server import DEMO, ServerProcess
from support.node_client import run_node

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("node")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


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
