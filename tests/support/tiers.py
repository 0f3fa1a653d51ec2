"""The suite's two tiers: unit tests, and tests that start programs or use one that a fixture
started (a `fairshoe serve`, PostgreSQL, the reference wallet, Go, Node, promtool, buf).

A test is in the ``processes`` tier when it or its module says so (``pytestmark =
pytest.mark.processes``), when it uses a fixture that starts a program (:data:`PROCESS_FIXTURES`
and PostgreSQL's ``pg_*``) or when it is parametrized onto ``postgresql``. ``pytest -m "not
processes"`` then runs the unit tier alone, and nothing in it needs a server, a database server
or a tool on the machine.

The tier is checked, not trusted: every ``subprocess.Popen`` a test's own thread makes in its
setup or call is counted, and a test outside the ``processes`` tier that starts one
fails, naming what it ran. A module-scoped fixture starts its program during the first test
that uses it, so the check sees it there. With ``FAIRSHOE_TIERS_RECORD=FILE`` a violation is
written to FILE (one test id a line) instead of failing, to find the tests to mark.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

#: fixtures that start a program or hand the test one that runs (besides PostgreSQL's ``pg_*``)
PROCESS_FIXTURES = frozenset({"own_pg_server", "server", "client", "ref_wallet"})

MARK = "processes"
RECORD_ENV = "FAIRSHOE_TIERS_RECORD"

_current: list[pytest.Item] = []
_started: dict[str, list[str]] = {}


def _uses_a_process(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    callspec = getattr(item, "callspec", None)
    # a test parametrized over the backends takes its PostgreSQL database through
    # request.getfixturevalue, which the fixture names do not show
    on_postgresql = callspec is not None and any(
        isinstance(v, str) and v == "postgresql" for v in callspec.params.values())
    return on_postgresql or any(n in PROCESS_FIXTURES or n.startswith("pg_") for n in names)


def _program(args: Any) -> str:
    if isinstance(args, str | bytes | os.PathLike):
        return os.fsdecode(args)
    return " ".join(os.fsdecode(a) for a in list(args)[:2])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARK}: starts a program or uses one a fixture started (a server, "
        "PostgreSQL, a tool); -m 'not processes' runs the unit tier")
    real = subprocess.Popen.__init__

    def counted(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        # the test's own thread only: a thread a fixture left running may start a program
        # while a later test runs, and that test did not start it
        if _current and threading.current_thread() is threading.main_thread():
            _started.setdefault(_current[-1].nodeid, []).append(_program(args))
        real(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = counted  # type: ignore[method-assign]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(MARK) is None and _uses_a_process(item):
            item.add_marker(MARK)


def _watching(item: pytest.Item) -> Generator[None, object, object]:
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()


# Setup and call only: a teardown also runs the teardown of every wider fixture whose last user
# just finished (PostgreSQL's `pg_ctl stop` at the end of a worker's session, say), which is not
# this test's doing
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watching(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watching(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when != "teardown" or item.get_closest_marker(MARK) is not None:
        return report
    started = _started.pop(item.nodeid, [])
    if not started:
        return report
    record = os.environ.get(RECORD_ENV)
    if record:
        with Path(record).open("a", encoding="utf-8") as out:
            out.write(f"{item.nodeid}\n")
    elif report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is in the unit tier but started {started[0]!r}"
                           f"{f' and {len(started) - 1} more' if len(started) > 1 else ''}: "
                           f"mark its module `pytestmark = pytest.mark.{MARK}` "
                           "(tests/support/tiers.py)")
    return report
