"""ParJobs: analyses in child processes, bounded, per caller, killed once nobody waits."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from game_math.games import game_rules
from game_math.rules import Rules
from rng_service.api.interceptors import ServiceInterceptor
from rng_service.api.math_service import MathService
from rng_service.api.par_jobs import AnalysisFailed, Busy, CallerGone, ParJobs, par_document
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc

GATE = "FAIRSHOE_TEST_PAR_GATE"


def gated(rules: Rules) -> dict[str, Any]:
    """Answers once the gate file exists (the test opens it), with the child's pid."""
    gate = Path(os.environ[GATE])
    while not gate.exists():
        time.sleep(0.01)
    return {"game": rules.game, "pid": os.getpid()}


def gated_par(rules: Rules) -> dict[str, Any]:
    """The real document, once the gate file exists."""
    gated(rules)
    return par_document(rules)


def broken(rules: Rules) -> dict[str, Any]:
    raise KeyError("secret-looking internals")


def _alive(flag: threading.Event) -> Any:
    return lambda: not flag.is_set()


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "open"
    monkeypatch.setenv(GATE, str(path))  # children are spawned with the environment
    return path


def _in_thread(jobs: ParJobs, rules: Rules, caller: str, gone: threading.Event,
               out: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            out.append(jobs.analyse(rules, caller, _alive(gone)))
        except Exception as exc:  # the test reads what it was
            out.append(exc)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_for(predicate: Any) -> None:
    deadline = time.monotonic() + 60  # a bound on a broken test, not a timing assertion
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _par_children() -> set[int]:
    """The analysis children of this process alive now. A test counts those not in a set taken
    at its start: an earlier test's child (this xdist worker's) may still be being killed."""
    return {p.pid for p in multiprocessing.active_children()
            if p.name == "fairshoe-par" and p.pid is not None}


def test_an_analysis_runs_in_a_child_and_its_child_is_kept(gate: Path) -> None:
    gate.touch()
    jobs = ParJobs(processes=1, analysis=gated)
    try:
        first = jobs.analyse(game_rules("snap"), "a", lambda: True)
        second = jobs.analyse(game_rules("double-deck"), "a", lambda: True)
        assert first["pid"] != os.getpid() and first["pid"] == second["pid"]  # kept warm
        assert jobs.started == 2
    finally:
        jobs.close()


def test_the_child_is_killed_once_its_caller_has_gone(gate: Path) -> None:
    jobs = ParJobs(processes=1, analysis=gated)
    try:
        gone, out = threading.Event(), []
        thread = _in_thread(jobs, game_rules("snap"), "a", gone, out)
        _wait_for(jobs.worker_pids)
        (pid,) = jobs.worker_pids()
        gone.set()  # deadline passed, or cancelled
        thread.join()
        assert isinstance(out[0], CallerGone)
        _wait_for(lambda: not jobs.worker_pids())  # killed, not left computing
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        gate.touch()  # the next one runs on a fresh child
        assert jobs.analyse(game_rules("snap"), "a", lambda: True)["pid"] != pid
    finally:
        jobs.close()


def test_past_the_limit_a_new_rule_set_is_busy_and_the_same_one_is_shared(gate: Path) -> None:
    jobs = ParJobs(processes=1, per_caller=1, analysis=gated)
    try:
        gone, out = threading.Event(), []
        first = _in_thread(jobs, game_rules("snap"), "a", gone, out)
        _wait_for(jobs.worker_pids)
        with pytest.raises(Busy, match="the most this server runs at once"):
            jobs.analyse(game_rules("double-deck"), "b", lambda: True)
        with pytest.raises(Busy, match="the most one caller may"):
            jobs.analyse(game_rules("snap"), "a", lambda: True)
        shared = _in_thread(jobs, game_rules("snap"), "b", threading.Event(), out)
        _wait_for(lambda: jobs._running[game_rules("snap").digest()].waiters == 2)
        gate.touch()
        first.join()
        shared.join()
        assert out[0] == out[1] and jobs.started == 1  # one analysis for both callers
    finally:
        jobs.close()


def test_a_caller_starts_at_most_its_quota(gate: Path) -> None:
    gate.touch()
    jobs = ParJobs(processes=1, quota=2, quota_seconds=3600, analysis=gated)
    try:
        jobs.analyse(game_rules("snap"), "a", lambda: True)
        jobs.analyse(game_rules("double-deck"), "a", lambda: True)
        with pytest.raises(Busy, match="its quota"):
            jobs.analyse(game_rules("multi-hand"), "a", lambda: True)
        assert jobs.analyse(game_rules("multi-hand"), "b", lambda: True)["game"] == "multi-hand"
    finally:
        jobs.close()


def test_a_failing_analysis_names_only_the_error_type() -> None:
    jobs = ParJobs(processes=1, analysis=broken)
    try:
        with pytest.raises(AnalysisFailed) as err:
            jobs.analyse(game_rules("snap"), "a", lambda: True)
        assert str(err.value) == "KeyError" and not err.value.invalid
    finally:
        jobs.close()


def test_a_child_that_cannot_be_started_fails_its_callers_and_frees_the_slot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A child process that cannot be started (out of processes or memory) answers its callers
    at once, and the next analysis may start: the job no longer waits for callers to give up
    with its slot held."""
    from rng_service.api import par_jobs  # noqa: PLC0415

    def refuse(analysis: Any) -> Any:
        raise OSError(11, "Resource temporarily unavailable")

    jobs = ParJobs(processes=1, analysis=broken)
    monkeypatch.setattr(par_jobs, "_Worker", refuse)
    try:
        for rules in (game_rules("snap"), game_rules("double-deck")):  # the slot is free again
            with pytest.raises(AnalysisFailed) as err:
                jobs.analyse(rules, "a", lambda: True)
            assert "could not be started" in str(err.value) and not err.value.invalid
        assert jobs.worker_pids() == []
    finally:
        jobs.close()


# ----- over gRPC: GetReturns -------------------------------------------------------------------


@pytest.fixture
def gated_server(gate: Path) -> Any:
    jobs = ParJobs(processes=1, analysis=gated_par)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         interceptors=[ServiceInterceptor()])
    math_pb2_grpc.add_MathServiceServicer_to_server(MathService(jobs=jobs), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield math_pb2_grpc.MathServiceStub(channel), jobs
    server.stop(grace=None)
    jobs.close()


def _returns(game: str) -> math_pb2.GetReturnsRequest:
    # without its published return, whose reconciliation would analyse eight more rule sets
    lines = game_rules(game).to_toml().splitlines()
    doc = "\n".join(line for line in lines if not line.startswith("published_return"))
    return math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(rules_toml=doc))


def test_get_returns_stops_the_analysis_its_caller_gave_up_on(gated_server: Any,
                                                               gate: Path) -> None:
    stub, jobs = gated_server
    with pytest.raises(grpc.RpcError) as err:
        stub.GetReturns(_returns("snap"), timeout=1)
    assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    _wait_for(lambda: not jobs.worker_pids())  # the child computing it was killed
    # meanwhile, and after, the other RPCs are answered by the server's own threads
    assert stub.EvaluateHand(math_pb2.EvaluateHandRequest(cards=["AS", "KD"])).total == 21
    gate.touch()
    reply = stub.GetReturns(_returns("snap"), timeout=60)
    assert reply.game == "snap" and jobs.started == 2
    assert stub.GetReturns(_returns("snap"), timeout=60) == reply  # cached: no third analysis
    assert jobs.started == 2


def test_get_returns_past_the_limit_is_resource_exhausted(gated_server: Any,
                                                          gate: Path) -> None:
    stub, jobs = gated_server
    first = stub.GetReturns.future(_returns("snap"), timeout=60)
    _wait_for(jobs.worker_pids)
    with pytest.raises(grpc.RpcError) as err:
        stub.GetReturns(_returns("double-deck"), timeout=60)
    assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the most" in (err.value.details() or "")
    gate.touch()
    assert first.result().game == "snap"


# ----- a hostile crowd: many rule sets, callers that give up, no child left behind -------------


def _variant(decks: int, name: str) -> math_pb2.GetReturnsRequest:
    """snap's rules with ``decks`` decks and ``name``: another digest each."""
    doc = _returns("snap").rules.rules_toml.replace("decks = 2", f"decks = {decks}").replace(
        'name = "Double Deck Blackjack Snap"', f'name = "{name}"')
    return math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(rules_toml=doc))


def test_a_crowd_of_rule_sets_and_cancels_leaves_no_child_and_no_internal(
        gated_server: Any) -> None:
    stub, jobs = gated_server
    calls = [stub.GetReturns.future(_variant(1 + i % 8, f"v{i}"), timeout=0.3 + (i % 3) * 0.3)
             for i in range(24)]
    for call in calls[::4]:
        call.cancel()
    codes = set()
    for call in calls:
        try:
            call.result()
            codes.add(grpc.StatusCode.OK)
        except grpc.FutureCancelledError:
            codes.add(grpc.StatusCode.CANCELLED)
        except grpc.RpcError as exc:
            codes.add(exc.code())
    assert codes <= {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
                     grpc.StatusCode.CANCELLED}, codes
    _wait_for(lambda: not jobs.worker_pids() and not jobs._running and not jobs._active)
    assert len(jobs.worker_pids()) <= jobs.processes


def test_many_callers_with_many_rule_sets_stay_within_the_limits(gate: Path) -> None:
    jobs = ParJobs(processes=2, per_caller=1, quota=3, quota_seconds=3600, analysis=gated)
    outcomes: list[Any] = []
    lock = threading.Lock()
    games = ("snap", "double-deck", "double-exposure", "multi-hand")
    peak, children = [0], [0]
    stop = threading.Event()
    earlier = _par_children()

    def sample() -> None:
        while not stop.is_set():
            with jobs._lock:
                peak[0] = max(peak[0], len(jobs._running))
            children[0] = max(children[0], len(_par_children() - earlier))
            time.sleep(0.005)

    def caller(n: int) -> None:
        for i in range(6):
            giving_up = time.monotonic() + 0.05 * (1 + (n + i) % 3)
            try:
                result: Any = jobs.analyse(game_rules(games[(n + i) % 4]), f"caller-{n}",
                                           lambda g=giving_up: time.monotonic() < g)
            except (Busy, CallerGone) as exc:
                result = exc
            with lock:
                outcomes.append(result)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=caller, args=(n,)) for n in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop.set()
        sampler.join()
        jobs.close()
    assert len(outcomes) == 36
    assert all(isinstance(o, (Busy, CallerGone)) for o in outcomes), outcomes  # gate shut
    assert peak[0] <= jobs.processes
    assert children[0] <= jobs.processes, "more analysis processes at once than the limit"
    assert jobs.started <= 6 * jobs.quota
    _wait_for(lambda: not jobs.worker_pids() and not jobs._running and not jobs._active)
    _wait_for(lambda: not _par_children() - earlier)


class _SlowDone(threading.Event):
    """A job's ``done`` whose set() lets the caller give up before it takes effect (widening
    the instant between the driver's bookkeeping and the event)."""

    answered = threading.Event()

    def set(self) -> None:
        type(self).answered.set()
        time.sleep(0.3)
        super().set()


def test_a_caller_that_gives_up_as_the_answer_arrives_is_no_internal_error(
        gate: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rng_service.api import par_jobs  # noqa: PLC0415

    gate.touch()
    _SlowDone.answered.clear()
    monkeypatch.setattr(par_jobs, "_Job", functools.partial(par_jobs._Job, done=_SlowDone()))
    jobs = ParJobs(processes=1, analysis=gated)
    try:
        with pytest.raises(CallerGone):
            jobs.analyse(game_rules("snap"), "a", lambda: not _SlowDone.answered.is_set())
        assert not jobs._running and not jobs._waiting
    finally:
        jobs.close()


def test_callers_giving_up_at_once_never_run_more_children_than_the_limit(gate: Path) -> None:
    """An abandoned analysis's child lives until its driver kills it: until then it counts
    against ``processes``, or callers giving up in turn run more children than the limit."""
    jobs = ParJobs(processes=1, per_caller=1, quota=1000, analysis=gated)
    games = ("snap", "double-deck", "double-exposure", "multi-hand")
    most, stop = [0], threading.Event()
    earlier = _par_children()

    def sample() -> None:
        while not stop.is_set():
            most[0] = max(most[0], len(_par_children() - earlier))
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for i in range(20):
            with contextlib.suppress(CallerGone, Busy):
                jobs.analyse(game_rules(games[i % 4]), f"caller-{i}", lambda: False)
    finally:
        stop.set()
        sampler.join()
        jobs.close()
    assert most[0] <= jobs.processes
