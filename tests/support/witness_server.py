"""A test witness written from the spec (c2sp.org/tlog-witness, add-checkpoint; cosignatures per
c2sp.org/tlog-cosignature, Ed25519 cosignature/v1), served over real HTTP on localhost.

For each log it trusts (origin -> the log's note verifiers) it keeps the latest checkpoint it
cosigned, and answers an add-checkpoint request in the spec's order: 400 for a malformed body or
an old size above the checkpoint's, 404 for an unknown origin, 403 without a good signature of a
trusted log key, 409 (``text/x.tlog.size``, ``<size>\\n``) for an old size that is not the one it
cosigned last, 422 for a proof with old size 0, a size-0 checkpoint without the empty root, an
equal size with another root, or a consistency proof that does not hold; else it stores the new
checkpoint and answers its cosignature line. Every request is kept (``requests``) for the tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rng_service.core.errors import FairshoeError, IntegrityFailure
from rng_service.crypto.keys import SigningKey
from rng_service.log import EMPTY_ROOT, parse_checkpoint, verify_checkpoint, verify_consistency
from rng_service.log.cosignature import Cosigner, cosign
from rng_service.log.note import NoteVerifier, split_note
from rng_service.log.witness_protocol import PATH, SIZE_CONTENT_TYPE, parse_request


@dataclass
class TestWitness:
    """The witness's state and its add-checkpoint logic (no HTTP: :func:`serving` adds it)."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    name: str
    logs: dict[str, list[NoteVerifier]] = field(default_factory=dict)
    key: SigningKey = field(default_factory=SigningKey.generate)
    #: origin -> (size, root) of the latest checkpoint cosigned
    state: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    #: (old size, checkpoint size or None, status) of every request answered
    requests: list[tuple[int, int | None, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def cosigner(self) -> Cosigner:
        return Cosigner.from_public_key(self.name, self.key.public_key)

    def add_checkpoint(self, body: bytes) -> tuple[int, str, bytes]:
        """The answer to an add-checkpoint body: status, content type, body."""
        old, size = -1, None
        try:
            request = parse_request(body)
            old = request.old_size
            claimed = parse_checkpoint(request.note).checkpoint
            size = claimed.size
        except FairshoeError as exc:
            return self._answer(old, size, 400, str(exc))
        verifiers = self.logs.get(claimed.origin)
        if verifiers is None:
            return self._answer(old, size, 404, "unknown log")
        try:
            head = verify_checkpoint(request.note, verifiers, origin=claimed.origin)
        except IntegrityFailure as exc:
            return self._answer(old, size, 403, str(exc))
        except FairshoeError as exc:
            return self._answer(old, size, 400, str(exc))
        if old > head.size:
            return self._answer(old, size, 400, "old size above the checkpoint's")
        with self._lock:  # the check and the update are one step (the spec's rollback race)
            known, root = self.state.get(head.origin, (0, EMPTY_ROOT))
            if old != known:
                self.requests.append((old, size, 409))
                return 409, SIZE_CONTENT_TYPE, f"{known}\n".encode()
            if head.size == 0 and head.root_hash != EMPTY_ROOT:
                return self._answer(old, size, 422, "a tree of 0 leaves has the empty root")
            if old == 0 and request.proof:
                return self._answer(old, size, 422, "a proof from the empty tree")
            if old and old == head.size and root != head.root_hash:
                return self._answer(old, size, 422, "same size, another root")
            if old and old != head.size:
                try:
                    verify_consistency(old, head.size, list(request.proof), root, head.root_hash)
                except FairshoeError as exc:
                    return self._answer(old, size, 422, str(exc))
            self.state[head.origin] = (head.size, head.root_hash)
            text, _ = split_note(request.note)
            line = cosign(text, self.key, self.name, int(time.time())).line()
            self.requests.append((old, size, 200))
        return 200, "text/plain; charset=utf-8", line.encode()

    def _answer(self, old: int, size: int | None, status: int, why: str
                ) -> tuple[int, str, bytes]:
        self.requests.append((old, size, status))
        return status, "text/plain; charset=utf-8", f"{why}\n".encode()


@contextmanager
def serving(witness: TestWitness) -> Iterator[str]:
    """``witness`` on a free localhost port; yields its submission prefix URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != PATH:
                status, kind, answer = 404, "text/plain", b"not found\n"
            else:
                status, kind, answer = witness.add_checkpoint(body)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
