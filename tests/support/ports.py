"""Ports the tests choose for servers.

A server that listens on ``any`` (port 0) and reports the port it bound needs no choice here.
A server restarted on its port (clients keep its address: the reference wallet, PostgreSQL)
takes :func:`restartable_port`: one below the kernel's local port range, which the kernel
never gives to an outgoing connection. A port from that range can, while the server is down,
become the local end of any connection on the machine (a client reconnecting to that very
server every few milliseconds, another xdist worker's calls), and the restart then cannot bind
it, whatever SO_REUSEADDR or SO_REUSEPORT says. Two tests may still choose the same port: the
first start of such a server moves to another port if its own was taken (restarts never do).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import Final

#: where Linux keeps the local port range (32768 60999 by default)
LOCAL_RANGE_FILE: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: the ports below the local range the choice draws from, at most this many
SPAN: Final = 12_000
#: the lowest port chosen (above the well-known and most registered services' ports)
LOWEST: Final = 10_000
#: the OS's randomness, not the random module's shared state, which a test may seed (two xdist
#: workers seeded alike would then choose the same ports)
_DRAW: Final = random.SystemRandom()


def local_port_range() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (first, last)."""
    try:
        low, high = LOCAL_RANGE_FILE.read_text().split()
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default
    return int(low), int(high)


def restartable_port() -> int:
    """A port on 127.0.0.1 free now, below the local port range (see the module docstring)."""
    low, _ = local_port_range()
    candidates = range(max(LOWEST, low - SPAN), low)
    if not candidates:
        raise RuntimeError(
            f"no ports below the local port range {local_port_range()} "
            f"from {LOWEST} on: lower {LOCAL_RANGE_FILE}'s first port"
        )
    for _ in range(200):
        port = _DRAW.choice(candidates)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the local port range")
