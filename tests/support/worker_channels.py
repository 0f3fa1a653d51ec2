"""Which worker of a `fairshoe serve --processes N` a connection reached: the workers share one
listening port and the kernel gives each new connection to one of them, so a test that needs a
channel on each worker opens channels until every worker has one, telling them apart by the
connections each worker's process holds (/proc)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from support.live_server import ServerProcess

#: channels opened at most to find one on each worker (each lands on one at random: 2^-63)
MOST_CHANNELS = 64
#: how long a new channel may take to connect and answer, on a loaded machine
CONNECT_TIMEOUT_S = 30.0


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process ``pid`` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _established(port: int) -> set[int]:
    """Inodes of the established TCP connections whose local port is ``port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                inodes.add(int(fields[9]))
    return inodes


def connections(server: ServerProcess) -> dict[int, int]:
    """Established connections to the gRPC port, per worker pid."""
    live = _established(server.port)
    return {pid: len(socket_inodes(pid) & live) for pid in server.worker_pids()}


def own_channel(server: ServerProcess) -> grpc.Channel:
    """A channel with a connection of its own (gRPC shares one between a process's channels to
    one address unless told not to)."""
    return grpc.insecure_channel(f"127.0.0.1:{server.port}",
                                 options=(("grpc.use_local_subchannel_pool", 1),))


def channels_on_each_worker(server: ServerProcess) -> dict[int, list[grpc.Channel]]:
    """New channels, connected, by the worker each reached, until every worker has one."""
    found: dict[int, list[grpc.Channel]] = {pid: [] for pid in server.worker_pids()}
    for _ in range(MOST_CHANNELS):
        before = connections(server)
        channel = own_channel(server)
        # a call answered on it, not only the channel ready: then a worker has accepted the
        # connection (until it does, the socket is in no worker's fds), whenever gRPC's client
        # counts its handshake done
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                  timeout=CONNECT_TIMEOUT_S)
        after = connections(server)
        gained = [pid for pid in after if after[pid] > before.get(pid, 0)]
        assert len(gained) == 1, (before, after)
        found[gained[0]].append(channel)
        if all(found.values()):
            return found
    pytest.fail(f"{MOST_CHANNELS} connections never reached every worker: {connections(server)}")


def close_channels(channels: dict[int, list[grpc.Channel]]) -> None:
    """Close every channel of :func:`channels_on_each_worker`'s answer."""
    for group in channels.values():
        for channel in group:
            channel.close()
