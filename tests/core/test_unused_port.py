"""The tests' port that nothing listens on (tests/support/live_server.py): held for the test, so
no other socket (another xdist worker's server, an outgoing connection) can take it first."""

from __future__ import annotations

import socket

import pytest
from support.live_server import unused_port


@pytest.mark.parametrize(
    "options",
    [(), (socket.SO_REUSEADDR,), (socket.SO_REUSEADDR, socket.SO_REUSEPORT)],
    ids=["plain", "reuseaddr", "reuseport-as-grpc"],
)
def test_no_other_socket_can_bind_the_port_while_it_is_held(options: tuple[int, ...]) -> None:
    with unused_port() as port, socket.socket() as other:
        for option in options:
            other.setsockopt(socket.SOL_SOCKET, option, 1)
        with pytest.raises(OSError, match="in use"):
            other.bind(("127.0.0.1", port))


def test_a_connection_to_the_held_port_is_refused() -> None:
    with unused_port() as port, socket.socket() as client, pytest.raises(ConnectionRefusedError):
        client.connect(("127.0.0.1", port))
