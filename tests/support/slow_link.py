"""A slow network link as a test fixture: a TCP proxy on 127.0.0.1 that delivers every byte
``delay`` seconds after it was sent, each way, as a peer far away or on a busy machine is
reached. Throughput is not limited, only latency: the bytes of one direction keep their order
and are each held for ``delay``."""

from __future__ import annotations

import queue
import socket
import threading
import time
from types import TracebackType


class SlowLink:
    """``with SlowLink(port, 0.3) as link:`` connections to ``127.0.0.1:{link.port}`` reach
    ``127.0.0.1:{port}``, every byte ``delay`` seconds late."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.target_port, self.delay = target_port, delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> SlowLink:
        threading.Thread(target=self._accept, name="slow-link", daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self._listener.accept()
            except OSError:  # closed
                return
            far = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                if self._closed:
                    near.close()
                    far.close()
                    return
                self._sockets += [near, far]
            for source, sink in ((near, far), (far, near)):
                held: queue.Queue[tuple[float, bytes]] = queue.Queue()
                threading.Thread(target=self._read, args=(source, held), daemon=True).start()
                threading.Thread(target=self._deliver, args=(held, sink), daemon=True).start()

    def _read(self, source: socket.socket, held: queue.Queue[tuple[float, bytes]]) -> None:
        while True:
            try:
                chunk = source.recv(65536)
            except OSError:
                chunk = b""
            held.put((time.monotonic() + self.delay, chunk))
            if not chunk:  # the end of this direction, delivered as late as its bytes
                return

    @staticmethod
    def _deliver(held: queue.Queue[tuple[float, bytes]], sink: socket.socket) -> None:
        while True:
            due, chunk = held.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                if not chunk:
                    sink.shutdown(socket.SHUT_WR)
                    return
                sink.sendall(chunk)
            except OSError:  # the other side is gone
                return
