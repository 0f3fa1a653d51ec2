"""A test server restarted on its port (the reference wallet; PostgreSQL in
tests/support/pg_server.py) must find it free: a port from the kernel's local port range can
become, while the server is down, the local end of any outgoing connection on the machine (a
client reconnecting to that very server, every few milliseconds), and the restart then cannot
bind it. The ports such servers take lie below that range."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.ports import local_port_range, restartable_port
from support.ref_wallet import RefWallet

pytestmark = pytest.mark.processes


def test_a_restartable_port_is_never_the_local_end_of_an_outgoing_connection() -> None:
    low, _ = local_port_range()
    ports = {restartable_port() for _ in range(50)}
    assert all(1024 <= port < low for port in ports), sorted(ports)


def test_a_seeded_random_module_does_not_make_two_workers_choose_alike() -> None:
    """A test seeds the random module (test_audit_findings does); two xdist workers that both
    ran it then drew the same ports from it."""
    drawn, state = [], random.getstate()
    try:
        for _ in range(2):
            random.seed(0)
            drawn.append([restartable_port() for _ in range(5)])
    finally:
        random.setstate(state)  # as this test found it, for the tests after it
    assert drawn[0] != drawn[1]


@pytest.mark.parametrize("http", [False, True], ids=["grpc", "http"])
def test_the_wallet_comes_back_on_its_port(tmp_path: Path, http: bool) -> None:
    ref = RefWallet(tmp_path / "wallet", http=http).start()
    try:
        port = ref.port
        low, high = local_port_range()
        assert not low <= port <= high, port  # no connection's local end while it is down
        ref.stop()
        ref.start()
        assert ref.port == port and ref.running()
    finally:
        ref.stop()
