"""The tier check (tests/support/tiers.py) in a pytest run of its own: a unit-tier test that
starts a program fails naming it, a marked one and one on a process fixture pass, a test
parametrized onto PostgreSQL is in the processes tier, and the record mode lists instead of
failing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # it runs pytest as a program

TESTS = Path(__file__).resolve().parents[1]

CASES = '''
import subprocess, sys
import pytest

def test_unit_that_starts_a_program():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.processes
def test_marked_that_starts_a_program():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_plain_unit():
    assert 1 + 1 == 2

@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_on_a_backend(backend):
    assert backend
'''


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytest run of its own with the tier check and nothing else of this suite."""
    pytester.makeconftest('pytest_plugins = ["support.tiers"]\n')
    pytester.makepyfile(test_cases=CASES)
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.delenv("FAIRSHOE_TIERS_RECORD", raising=False)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", *args)


def test_a_unit_test_that_starts_a_program_fails_naming_it(pytester: pytest.Pytester) -> None:
    result = run(pytester, "-rf")
    result.assert_outcomes(passed=5, errors=1)  # its call passed, its teardown failed
    result.stdout.fnmatch_lines([
        "*test_unit_that_starts_a_program is in the unit tier but started *python* -c*"
        "mark its module*"])


def test_the_unit_tier_leaves_out_the_marked_and_postgresql(pytester: pytest.Pytester) -> None:
    result = run(pytester, "-m", "not processes", "-v")
    result.stdout.fnmatch_lines(["*test_plain_unit PASSED*", "*test_on_a_backend?sqlite? PASSED*"])
    result.stdout.no_fnmatch_line("*test_on_a_backend?postgresql?*PASSED*")
    result.stdout.no_fnmatch_line("*test_marked_that_starts_a_program*PASSED*")


def test_record_mode_lists_instead_of_failing(pytester: pytest.Pytester, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "tiers.txt"
    monkeypatch.setenv("FAIRSHOE_TIERS_RECORD", str(record))
    run(pytester).assert_outcomes(passed=5)
    assert record.read_text().split() == ["test_cases.py::test_unit_that_starts_a_program"]
