"""Fixtures: a real server process with stacked shoes, shared by a module's tests, on SQLite and
on PostgreSQL (a fresh database of the test run's server, ``tests/support/pg_server.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.live_server import Client, ServerProcess, ledger_is_balanced
from support.service_helpers import backend, database_url, env, stacked, storage

__all__ = ["backend", "client", "database_url", "env", "server", "server_backend", "stacked",
           "storage"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server_backend(request: pytest.FixtureRequest) -> str:
    """The database of the module's server process."""
    return str(request.param)


@pytest.fixture(scope="module")
def server(server_backend: str, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A stacked `fairshoe serve` process on a free port and its own data directory, SERVING,
    with its database in the data directory (SQLite) or FAIRSHOE_DATABASE_URL (PostgreSQL).
    After the module's last test, whatever order they ran in, its books must balance
    (:func:`ledger_is_balanced`)."""
    url = (str(request.getfixturevalue("pg_module_url")) if server_backend == "postgresql"
           else None)
    proc = ServerProcess(tmp_path_factory.mktemp(f"live-{server_backend}"),
                         database_url=url).start()
    yield proc
    ledger_is_balanced(proc)
    assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Client:
    return server.client()
