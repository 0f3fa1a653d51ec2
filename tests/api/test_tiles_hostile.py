"""A hostile client against the tlog-tiles HTTP server (rng_service/api/tiles_http.py): random
and malformed paths, methods, headers and slow or vanishing connections never get a 500 or put a
traceback on stderr (500 is for stored data that fails its check); an unpublished operator's
log, existing or not, is the same 404 as a path naming nothing; one slow client blocks no one."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from urllib.parse import quote as urlquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.service_helpers import OP, Harness, harness
from support.waits import wait_until

from rng_service.api.tiles_http import MAX_CONNECTIONS, TilesPublication, TilesServer, TilesSite
from rng_service.crypto.keys import KeyStore
from rng_service.service.audit import AuditService
from rng_service.service.operators import add_operator
from rng_service.service.rng_draws import RngDrawService

__all__ = ["harness"]

OTHER = "op-hidden"


@pytest.fixture
def site(harness: Harness, tmp_path: Path) -> TilesSite:
    add_operator(harness.storage, OTHER)
    rng = RngDrawService(harness.storage, signer=harness.signer)
    for operator in (OP, OTHER):
        for _ in range(3):
            rng.generate_integers(operator, count=1, minimum=1, maximum=6,
                                  request_id=harness.rid())
    keys = KeyStore(tmp_path / "keys")
    keys.create()
    return TilesSite(AuditService(harness.storage, keys), TilesPublication.parse(OP, ""),
                     base_origin="fairshoe.example/log")


@pytest.fixture
def served(site: TilesSite) -> Iterator[TilesServer]:
    server = TilesServer(site, "127.0.0.1", 0).start()
    yield server
    server.stop()


def _raw(port: int, data: bytes, timeout: float = 30.0) -> bytes:
    """Send ``data`` on a new connection, half-close, and read everything the server sends
    (``timeout``: a bound on a broken server, not a timing; a loaded machine may take
    seconds)."""
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        # a server that refused the connection (503 and closed) may have closed it already
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        with contextlib.suppress(ConnectionResetError):  # after the answer, not instead of it
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _answered_or_closed(socks: list[socket.socket]) -> list[socket.socket]:
    """Those of ``socks`` the server has sent something on or closed, by now: an idle
    connection it times out (SOCKET_TIMEOUT_S) becomes one of them."""
    if not socks:
        return []
    readable, _, _ = select.select(socks, [], [], 0)
    return list(readable)


def _served_everything(port: int) -> None:
    """Returns once the server is done with every connection made before the call, error reports
    included: a last connection answered in full means its one accepting thread has taken every
    earlier connection off the queue (in order) and started its thread; then those threads
    (socketserver names them after process_request_thread) are waited for. A connection's
    error is reported in its thread before the thread closes the connection."""
    final = _raw(port, f"GET /log/{OP}/checkpoint HTTP/1.1\r\nConnection: close\r\n\r\n".encode())
    assert _status(final) == HTTPStatus.OK, final[:200]
    wait_until(lambda: not [t for t in threading.enumerate()
                            if t.name.endswith("(process_request_thread)")],
               "the server's connection threads end")


def _nothing_reported(capfd: pytest.CaptureFixture[str]) -> None:
    """No traceback and no failed connection, on stderr or stdout (an unconfigured structlog
    writes to stdout: the logs go to stderr only once `fairshoe serve` configures them)."""
    out, err = capfd.readouterr()
    for stream in (out, err):
        assert "Traceback" not in stream and "tiles_connection_failed" not in stream, stream


_SEGMENT = st.one_of(
    st.sampled_from(["tile", "entries", "0", "1", "63", "64", "000", "001", "x000", "x001",
                     "x999", "999", "000.p", "001.p", "0", "256", "255", "00", "..", ".", "",
                     "checkpoint", OP, OTHER, "%2e%2e", "%2F", "op-a%00", "\u00e9", "x" * 200,
                     "9" * 60, "x" + "9" * 3]),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(_SEGMENT, max_size=12), query=st.one_of(st.none(), st.text(max_size=20)),
       root=st.sampled_from(["/log/", f"/log/{OP}/", f"/log/{OTHER}/", "/", "//", "/log/./",
                             f"/log/{OP}/tile/", f"/log/{OP}/../{OTHER}/"]))
def test_no_path_is_a_500(site: TilesSite, segments: list[str], query: str | None,
                          root: str) -> None:
    target = root + "/".join(segments) + ("" if query is None else "?" + query)
    reply = site.get(target)
    assert reply.status < HTTPStatus.INTERNAL_SERVER_ERROR, (target, reply)
    if reply.status == HTTPStatus.OK:
        assert target.startswith(f"/log/{OP}/") and OTHER not in target.split("?")[0]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300))
def test_no_percent_encoded_byte_path_is_a_500(site: TilesSite, raw: bytes) -> None:
    for target in (f"/log/{OP}/" + urlquote(raw), f"/log/{OP}/" + raw.decode("latin-1")):
        assert site.get(target).status < HTTPStatus.INTERNAL_SERVER_ERROR


@pytest.mark.parametrize("rest", [
    "tile/0/" + "/".join(["x999"] * 40) + "/999",  # a huge N, over the length bound
    "tile/0/" + "/".join(["x999"] * 30) + "/999",  # a huge N, under it
    "tile/63/" + "/".join(["x999"] * 20) + "/999.p/255",
    "tile/entries/" + "/".join(["x999"] * 25) + "/999",
    "tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/007", "tile/0/00", "tile/0/0000",
    "tile/00/000", "tile/64/000", "tile/0/x000/001", "tile/0/000.p/", "tile/0/.p/3",
    "tile/0/000.p/3/x", "tile/entries/000", "tile/-1/000", "tile/0/\u0661\u0662\u0663",
    "tile/\u0661/000", "tile/0/000.p/\u0663",
])
def test_odd_tile_paths_are_404_or_403(site: TilesSite, rest: str) -> None:
    reply = site.get(f"/log/{OP}/{rest}")
    assert reply.status in (HTTPStatus.NOT_FOUND, HTTPStatus.FORBIDDEN), (rest, reply)


@pytest.mark.parametrize("rest", ["checkpoint", "tile/0/000.p/3", "tile/entries/000.p/3",
                                  "tile/0/000", "nothing"])
def test_an_unlisted_operator_is_an_unknown_one(site: TilesSite, rest: str) -> None:
    hidden, unknown = site.get(f"/log/{OTHER}/{rest}"), site.get(f"/log/op-nobody/{rest}")
    assert (hidden.status, hidden.body, hidden.cache) == (
        unknown.status, unknown.body, unknown.cache) == (
        HTTPStatus.NOT_FOUND, b"no log here\n", "no-store")
    assert site.get(f"/log/{OP}/checkpoint").status == HTTPStatus.OK


@pytest.mark.parametrize("request_bytes", [
    b"POST /log/op/checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    b"PUT /log/op/checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    b"CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"DELETE /log/op/checkpoint HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /log/op/checkpoint HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n",
    b"GET /log/op/checkpoint HTTP/1.1\r\n" + b"".join(
        b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n",
    b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    b"GET /log/op/tile/entries/000.p/3 HTTP/1.1\r\nHost: x\r\nAccept-Encoding: \xff\xfe;q=;,,"
    b"gzip;q=zz\r\n\r\n",
    b"GET /log/op/checkpoint HTTP/9.9\r\n\r\n",
    b"GET /log/op/checkpoint\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(300),  # a TLS ClientHello
    b"GET /log/op/checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"GET /log/op/checkpoint HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\r\n\r\n\r\n",
    bytes(range(256)),
])
def test_hostile_requests_get_no_500_and_no_traceback(
        served: TilesServer, request_bytes: bytes, capfd: pytest.CaptureFixture[str]) -> None:
    response = _raw(served.port, request_bytes.replace(b"/op/", f"/{OP}/".encode()))
    if response.startswith(b"HTTP/"):  # else an HTTP/0.9 answer: a body alone
        assert _status(response) < HTTPStatus.INTERNAL_SERVER_ERROR or _status(response) in (
            HTTPStatus.NOT_IMPLEMENTED, HTTPStatus.HTTP_VERSION_NOT_SUPPORTED), response[:200]
    _served_everything(served.port)
    _nothing_reported(capfd)


def test_a_client_that_goes_away_mid_answer_puts_no_traceback_on_stderr(
        served: TilesServer, capfd: pytest.CaptureFixture[str]) -> None:
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", served.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.sendall(f"GET /log/{OP}/checkpoint HTTP/1.1\r\nHost: x\r\n\r\n".encode() * 50)
        sock.close()  # a reset, with the answers unread
    _served_everything(served.port)
    _nothing_reported(capfd)


def test_a_slow_client_blocks_no_other(served: TilesServer) -> None:
    slow = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"GET /log/")  # and nothing more, for now
        response = _raw(served.port, f"GET /log/{OP}/checkpoint HTTP/1.1\r\nHost: x\r\n"
                        "Connection: close\r\n\r\n".encode())
        assert _status(response) == HTTPStatus.OK
        # answered while the slow ones still wait: not once their timeout had freed the server
        # (what happened first, not how long it took: a loaded machine may take seconds)
        assert _answered_or_closed(slow) == []
    finally:
        for sock in slow:
            sock.close()


@pytest.mark.parametrize("target", ["//[", "//]/log/x", f"//[::1/log/{OP}/checkpoint",
                                    f"http://[::1/log/{OP}/checkpoint"])
def test_a_target_urlsplit_refuses_is_404(site: TilesSite, target: str) -> None:
    assert site.get(target).status == HTTPStatus.NOT_FOUND


def test_a_crowd_of_idle_connections_is_bounded(served: TilesServer) -> None:
    """Each connection is a thread: past MAX_CONNECTIONS a new one is refused at once (503,
    closed), not one more thread; once the crowd goes, the server answers again."""
    before = threading.active_count()
    crowd = [socket.create_connection(("127.0.0.1", served.port))
             for _ in range(MAX_CONNECTIONS + 20)]
    try:
        for sock in crowd:
            sock.sendall(b"GET /log/")
        refused: set[socket.socket] = set()  # the crowd past the limit: 503 and closed
        deadline = time.monotonic() + 30  # a bound on a broken test, not a timing assertion
        while len(refused) < 20 and time.monotonic() < deadline:
            readable, _, _ = select.select([s for s in crowd if s not in refused], [], [], 0.1)
            refused.update(readable)
        assert len(refused) == 20
        assert all(_status(s.recv(4096)) == HTTPStatus.SERVICE_UNAVAILABLE for s in refused)
        assert threading.active_count() <= before + MAX_CONNECTIONS + 2
        response = _raw(served.port, f"GET /log/{OP}/checkpoint HTTP/1.1\r\n\r\n".encode())
        assert _status(response) == HTTPStatus.SERVICE_UNAVAILABLE
        # at once, while the admitted crowd still waits: not once its idle timeout freed slots
        assert _answered_or_closed([s for s in crowd if s not in refused]) == []
    finally:
        for sock in crowd:
            sock.close()
    deadline = time.monotonic() + 30
    while True:  # the crowd's threads see their connections closed, and free their slots
        response = _raw(served.port, f"GET /log/{OP}/checkpoint HTTP/1.1\r\nConnection: "
                        "close\r\n\r\n".encode())
        if _status(response) == HTTPStatus.OK or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert _status(response) == HTTPStatus.OK
