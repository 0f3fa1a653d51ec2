"""The Go load generator (bench/loadgen, built by tests/support/go_loadgen.py from Debian's
packages, offline) against a real `fairshoe serve`: its players' rounds finish and their books
agree with the server's, its failed calls are counted and reported rather than hidden, and it
measures its own CPU. Its speed is bench/bench_rpc_cpu.py's business; this checks behaviour.

Go, gRPC-Go, protoc and its Go plugins are required (scripts/setup-tests installs them); this
fails rather than skips without them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import go_loadgen
from support.ledger_audit import ledger_problems
from support.live_server import ServerProcess


@pytest.fixture(scope="module")
def binary() -> Path:
    return go_loadgen.build()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("loadgen"), stacked=False).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def address(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.port}"


def test_players_finish_their_rounds_and_the_books_balance(binary: Path,
                                                          server: ServerProcess) -> None:
    status, result, stderr = go_loadgen.run(binary, address(server), "-clients", "3",
                                            "-rounds", "4", "-run-id", "books")
    assert status == 0, (result, stderr)
    assert (result["errors"], result["errors_by_kind"], result["error_samples"]) == (0, {}, [])
    assert (result["workload"], result["clients"], result["connections"]) == ("rounds", 3, 3)
    methods = result["methods"]
    assert set(methods) == {"Deposit", "StartRound", "Act"}  # no GetRound: no Act failed
    assert methods["Deposit"]["calls"] == 3 and methods["StartRound"]["calls"] == 12
    assert result["calls"] == result["latency"]["calls"] == 12 + methods["Act"]["calls"]
    assert result["rounds"] == 12
    assert 0 < result["latency"]["p50_ms"] <= result["latency"]["p99_ms"]
    assert result["cpu_seconds"] > 0 and result["cpu_ms_per_call"] > 0
    client = server.client()
    players = result["players"]
    assert [p["player_id"] for p in players] == ["books-p0", "books-p1", "books-p2"]
    for player in players:
        assert (player["rounds"], player["abandoned"], player["void"]) == (4, 0, 0), player
        assert player["staked_minor"] == 4 * 1000, player  # one hand of 1000, never doubled
        balance = (player["deposited_minor"] - player["staked_minor"]
                   + player["returned_minor"])
        assert client.balance(player["player_id"]) == player["balance_minor"] == balance
        assert server.sql("SELECT status, COUNT(*) FROM rounds WHERE player = ? "
                          "GROUP BY status", player["player_id"]) == [("finished", 4)]
    assert ledger_problems(server.data_dir / "fairshoe.db") == []


def test_failed_calls_are_counted_and_reported(binary: Path, server: ServerProcess) -> None:
    """Players funded below the bet: every StartRound is refused, the run stops at -max-errors
    and exits 1, and the result says which calls failed, how and why."""
    status, result, _ = go_loadgen.run(binary, address(server), "-clients", "2", "-rounds", "1",
                                       "-deposit", "500", "-max-errors", "5", "-run-id", "broke")
    assert status == 1
    assert result["errors"] == 5 and result["stopped_at_max_errors"]
    assert result["errors_by_kind"] == {"StartRound FAILED_PRECONDITION INSUFFICIENT_FUNDS": 5}
    assert result["error_samples"] == ["StartRound: FAILED_PRECONDITION INSUFFICIENT_FUNDS: the "
                                       "stake 1000 exceeds the balance 500"]
    assert (result["calls"], result["rounds"]) == (0, 0)
    for player in result["players"]:
        assert server.client().balance(player["player_id"]) == 500


def test_evaluate_hand_on_one_shared_connection(binary: Path, server: ServerProcess) -> None:
    status, result, stderr = go_loadgen.run(binary, address(server), "-workload", "evaluate",
                                            "-clients", "2", "-shared", "-warmup", "0.2",
                                            "-seconds", "0.5")
    assert status == 0, (result, stderr)
    assert (result["connections"], result["errors"], list(result["methods"])) == (
        1, 0, ["EvaluateHand"])
    assert result["calls"] == result["methods"]["EvaluateHand"]["calls"] > 0
    assert result["players"] == [] and 0.4 < result["seconds"] < 5
