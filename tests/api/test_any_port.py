"""`fairshoe serve --metrics-port any --tiles-port any`: each listener binds a port the OS picks
(nothing else can take it between the choice and the bind, as with a port chosen beforehand), and
the ``serving`` line reports the ports bound: the serve's own listening sockets, answering
/metrics and the published log. One process and a parent of workers (which serves both ports
itself) alike."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest
from support.live_server import FAIRSHOE, ServerProcess
from support.worker_channels import socket_inodes

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

LISTEN = "0A"  # /proc/net/tcp's state of a listening socket


def listening_inode(port: int) -> int | None:
    """The inode of the socket listening on 127.0.0.1:``port``, if any (/proc/net/tcp)."""
    local = f"0100007F:{port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[3] == LISTEN:
            return int(fields[9])
    return None


def get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as page:
        assert page.status == 200
        return bytes(page.read())


@pytest.mark.parametrize("processes", [1, 2])
def test_the_ports_the_serving_line_reports_are_the_ones_serving(
        tmp_path: Path, processes: int) -> None:
    server = ServerProcess(tmp_path, stacked=False, processes=processes, metrics_port="any",
                           args=["--tiles-port", "any", "--tiles-logs", "default"])
    server.start()
    try:
        serving = [json.loads(line) for line in server.log().splitlines()
                   if '"serving"' in line]
        assert len(serving) == 1, serving
        ports = (serving[0]["metrics_port"], serving[0]["tiles_port"])
        assert ports == (server.metrics_port, server.tiles_port)
        assert all(port > 0 for port in ports) and len({server.port, *ports}) == 3, serving
        assert server.proc is not None
        own = socket_inodes(server.proc.pid)
        for port in ports:  # the serve's own listeners, not another process's
            inode = listening_inode(port)
            assert inode is not None and inode in own, (port, inode)
        assert b"# TYPE fairshoe_" in get(server.metrics_port, "/metrics")
        origin = get(server.tiles_port, "/log/default/checkpoint").split(b"\n", 1)[0]
        assert origin.endswith(b"/default"), origin  # the checkpoint of the log it publishes
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.parametrize(("option", "value"), [("--metrics-port", "-1"), ("--tiles-port", "-1"),
                                               ("--metrics-port", "anywhere"),
                                               ("--metrics-port", "65536"),
                                               ("--tiles-port", "70000")])
def test_a_port_that_is_no_number_nor_any_does_not_start(
        tmp_path: Path, option: str, value: str) -> None:
    """-1 (the internal spelling of any), a word and a number past 65535 are refused before
    anything opens."""
    server = ServerProcess(tmp_path, stacked=False)
    done = subprocess.run([str(FAIRSHOE), "serve", "--address", "127.0.0.1:0", option, value],
                          env=server.env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: a port is 0 (off) to 65535 or any, got {value!r}" in done.stderr
    assert not (tmp_path / "fairshoe.db").exists() and not (tmp_path / "keys").exists()
