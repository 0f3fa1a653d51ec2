"""The metrics of a real `fairshoe serve` process: rounds played over gRPC, then ``/metrics``
scraped and checked by ``promtool check metrics`` (Debian's prometheus package, installed by
scripts/setup-tests), the key series read from the scrape and compared with the database."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from support.engine_helpers import stack
from support.live_server import DEMO, STAND, Client, ServerProcess, double
from support.promql_names import dashboard_exprs, metric_names, rule_exprs

from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
ROUNDS = "fairshoe.round.v1.RoundService"
PUBLISH_TIMEOUT = 120.0  # the theoretical figures: ~1-3 s a game, on a busy 2-core machine


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: run scripts/setup-tests (installs prometheus)")
    return path


def samples(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


def total(found: Samples, name: str, **labels: str) -> float:
    """The sum over every series of ``name`` carrying ``labels`` (and any others)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and want <= ls)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    """A server that played a few rounds (every outcome path the metrics see), and a scrape
    taken once its theoretical figures are published."""
    server = ServerProcess(tmp_path_factory.mktemp("metrics"), metrics_port="any").start()
    try:
        client = server.client()
        play(server, client)
        deadline = time.monotonic() + PUBLISH_TIMEOUT
        text = server.scrape()
        while 'fairshoe_theoretical_return{game="multi-hand",wager="main"}' not in text:
            assert time.monotonic() < deadline, f"no theoretical figures:\n{server.log()}"
            time.sleep(0.5)
            text = server.scrape()
        yield server, text
    finally:
        assert server.stop() == 0, server.log()


def play(server: ServerProcess, client: Client) -> None:
    client.deposit("ann", 100_000)
    # snap, real: 19 against 17, stand: 1000 staked, 2000 returned
    server.stack(stack("snap", [["TS", "9H"]], ["7D", "TC"]))
    view = client.start("ann", "snap", [1000])
    request_id = client.rid()
    done = client.act("ann", view, STAND, request_id=request_id)
    assert done.status == rt.ROUND_STATUS_FINISHED
    # the same request again: the stored answer, counted once
    assert client.act("ann", view, STAND, request_id=request_id) == done
    # multi-hand, real: a perfect pair side bet, stand, stand, double (4100 staked, 8600 back)
    server.stack(stack("multi-hand", [["8S", "8S"], ["TH", "9H"], ["5C", "6D"]], ["7D", "TD"],
                       ["TC"]))
    hands = [rt.HandBet(bet_minor=1000, side_bets=[rt.SideBetStake(name="perfect_pairs",
                                                                  stake_minor=100)]), 1000, 1000]
    view = client.start("ann", "multi-hand", hands, level="1-500")
    for action in (STAND, STAND, double(1000)):
        view = client.act("ann", view, action)
    assert view.status == rt.ROUND_STATUS_FINISHED
    # double-exposure, demo: genuine cards, played out plainly
    client.play_out("bob", client.start("bob", "double-exposure", [1000], mode=DEMO))
    # a round left open: its stake is not counted until it ends
    server.stack(stack("snap", [["TS", "9H"]], ["7D", "TC"]))
    client.start("cat", "snap", [1000], mode=DEMO)
    # INVALID_ARGUMENT: a bet of zero; NOT_FOUND: an unknown round, and health of no service
    with pytest.raises(grpc.RpcError) as err:
        client.start("ann", "snap", [0])
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as err:
        client.get("ann", "0" * 32)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        health_pb2_grpc.HealthStub(server.channel).Check(
            health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    # a request that does not decode: INVALID_ARGUMENT too
    assert server.channel is not None
    raw = server.channel.unary_unary(f"/{ROUNDS}/StartRound", request_serializer=None,
                                     response_deserializer=None)
    with pytest.raises(grpc.RpcError) as err:
        raw(b"\x0a\x10{}", timeout=10)  # field 1 says 16 bytes follow, 2 do
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_promtool_accepts_the_scrape(played: tuple[ServerProcess, str]) -> None:
    _, text = played
    result = subprocess.run([promtool(), "check", "metrics"], input=text, text=True,
                            capture_output=True, timeout=60, check=False)
    # exit 0 and silent: no lint finding (names, units, suffixes, help texts)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_rpcs_are_counted_by_code(played: tuple[ServerProcess, str]) -> None:
    _, text = played
    found = samples(text)
    handled = "grpc_server_handled_total"
    start = {"grpc_type": "unary", "grpc_service": ROUNDS, "grpc_method": "StartRound"}
    assert value(found, handled, **start, grpc_code="OK") == 4
    assert value(found, handled, **start, grpc_code="InvalidArgument") == 2  # bet 0, undecodable
    assert value(found, handled, grpc_type="unary", grpc_service=ROUNDS, grpc_method="GetRound",
                 grpc_code="NotFound") == 1
    assert value(found, handled, grpc_type="unary", grpc_service="grpc.health.v1.Health",
                 grpc_method="Check", grpc_code="NotFound") == 1
    assert value(found, "grpc_server_started_total", **start) == 6
    assert value(found, "grpc_server_msg_received_total", **start) == 6
    assert value(found, "grpc_server_msg_sent_total", **start) == 4
    assert value(found, "grpc_server_handling_seconds_count", **start) == 6
    assert value(found, "grpc_server_handling_seconds_bucket", **start, le="+Inf") == 6


def test_money_matches_the_ledger(played: tuple[ServerProcess, str]) -> None:
    server, text = played
    found = samples(text)
    rows = server.sql(
        "SELECT r.game, r.mode, SUM(CASE e.kind WHEN 'stake' THEN e.amount ELSE 0 END), "
        "SUM(CASE e.kind WHEN 'return' THEN e.amount ELSE 0 END) FROM ledger_entries e "
        "JOIN rounds r ON r.operator = e.operator AND r.round_id = e.round_id "
        "WHERE r.status != 'open' GROUP BY r.game, r.mode")
    assert {(game, mode) for game, mode, _, _ in rows} == {
        ("snap", "REAL"), ("multi-hand", "REAL"), ("double-exposure", "DEMO")}
    for game, mode, staked, returned in rows:
        assert total(found, "fairshoe_staked_minor_total", game=game, mode=mode) == staked
        assert total(found, "fairshoe_returned_minor_total", game=game, mode=mode) == returned
    # by wager kind: the multi-hand round's main, double and side bet
    multi = {"game": "multi-hand", "mode": "REAL"}
    assert value(found, "fairshoe_staked_minor_total", **multi, wager="main") == 3000
    assert value(found, "fairshoe_staked_minor_total", **multi, wager="double") == 1000
    assert value(found, "fairshoe_staked_minor_total", **multi, wager="perfect_pairs") == 100
    assert value(found, "fairshoe_returned_minor_total", **multi, wager="perfect_pairs") == 2600
    assert value(found, "fairshoe_wagers_total", **multi, wager="main") == 3
    assert value(found, "fairshoe_staked_minor_total", game="snap", mode="REAL",
                 wager="main") == 1000  # the retried Act counted once


def test_rounds_shoes_and_sizes(played: tuple[ServerProcess, str]) -> None:
    server, text = played
    found = samples(text)
    assert value(found, "fairshoe_rounds_started_total", game="snap", mode="REAL") == 1
    assert value(found, "fairshoe_rounds_started_total", game="snap", mode="DEMO") == 1
    assert value(found, "fairshoe_rounds_finished_total", game="snap", mode="REAL",
                 status="finished") == 1
    assert value(found, "fairshoe_rounds_finished_total", game="snap", mode="DEMO",
                 status="finished") == 0  # still open
    assert total(found, "fairshoe_rounds_finished_total") == 3
    (shoes,), = server.sql("SELECT COUNT(*) FROM shoes")
    (revealed,), = server.sql("SELECT COUNT(*) FROM reveals")
    assert total(found, "fairshoe_shoes_opened_total") == shoes
    assert total(found, "fairshoe_shoes_revealed_total") == revealed
    # read at the scrape: compare with the database after it (nothing was written since)
    (entries,), = server.sql("SELECT COUNT(*) FROM ledger_entries")
    (records,), = server.sql("SELECT COUNT(*) FROM records")
    assert value(found, "fairshoe_ledger_entries") == entries
    assert value(found, "fairshoe_signed_records", kind="round") == records == 3
    assert value(found, "fairshoe_signed_records", kind="shoe_reveal") == revealed
    assert value(found, "fairshoe_rng_self_test_ok") == 1
    assert value(found, "fairshoe_db_transaction_seconds_count", kind="write", outcome="ok") > 0


def test_theoretical_figures(played: tuple[ServerProcess, str]) -> None:
    _, text = played
    found = samples(text)
    main = value(found, "fairshoe_theoretical_return", game="multi-hand", wager="main")
    assert main == pytest.approx(0.993864490257, abs=1e-9)  # docs/par/multi-hand.json
    assert value(found, "fairshoe_theoretical_return", game="snap",
                 wager="snap") == pytest.approx(9970 / 10403)
    assert value(found, "fairshoe_return_stddev", game="multi-hand",
                 wager="perfect_pairs") == pytest.approx(3.890725731117)
    for game in ("snap", "double-deck", "double-exposure", "multi-hand"):
        assert 1.0 < value(found, "fairshoe_return_stddev", game=game, wager="main") < 1.3


def test_the_ops_files_read_only_metrics_the_server_exports(
        played: tuple[ServerProcess, str]) -> None:
    """Every metric the Grafana dashboard and the alert rules read is in a real scrape (the
    rules' own recorded series and Prometheus's ALERTS aside)."""
    _, text = played
    exported = {name for name, _ in samples(text)}
    dashboard = set().union(*map(metric_names, dashboard_exprs()))
    assert dashboard and dashboard <= exported, dashboard - exported
    exprs, recorded = rule_exprs()
    rules = set().union(*map(metric_names, exprs)) - recorded
    assert rules and rules <= exported, rules - exported
