"""Fixtures: a real server process with stacked shoes, shared by a module's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live_server import Client, ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A stacked `fairshoe serve` process on a free port and its own data directory, SERVING."""
    proc = ServerProcess(tmp_path_factory.mktemp("live")).start()
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Client:
    return server.client()
