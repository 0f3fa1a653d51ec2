"""ParJobs: analyses in child processes, bounded, per caller, killed once nobody waits."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from game_math.games import game_rules
from game_math.rules import Rules
from rng_service.api.par_jobs import AnalysisFailed, Busy, CallerGone, ParJobs

GATE = "FAIRSHOE_TEST_PAR_GATE"


def gated(rules: Rules) -> dict[str, Any]:
    """Answers once the gate file exists (the test opens it), with the child's pid."""
    gate = Path(os.environ[GATE])
    while not gate.exists():
        time.sleep(0.01)
    return {"game": rules.game, "pid": os.getpid()}


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
