"""The operators' transparency logs over plain HTTP as C2SP tlog-tiles (``serve --tiles-port``).

Each published operator's log is at the URL prefix its origin names (tlog-tiles: the origin is the
scheme-less prefix): origin ``fairshoe.example/log/op-a`` is served at ``/log/op-a/``, so behind
``https://fairshoe.example/`` the prefix and the origin agree::

    GET /log/op-a/checkpoint                  the latest signed checkpoint (the RPCs' own)
    GET /log/op-a/tile/<L>/<N>[.p/<W>]        hash tiles
    GET /log/op-a/tile/entries/<N>[.p/<W>]    entry bundles, if the operator's entries are public

The checkpoint is :meth:`AuditService.checkpoint`'s, the one GetCheckpoint returns (signed when
the log has grown since the last one, stored, and then the same for everyone), and the tiles are
read from the same stored nodes its proofs are: what anyone reads here is consistent with what
the RPCs sign. Caching: full tiles and bundles never change (``immutable``, a year); partial ones
and the checkpoint are fresh for seconds (the checkpoint moves; a partial tile's bytes do not, but
tlog-tiles lets a log drop it once the full tile exists, so no cache should keep it for good);
errors are ``no-store`` (a tile missing now exists once the log grows).

What is public, per operator (:class:`TilesPublication`): nothing unless listed. Over gRPC only an
operator and the auditors it was granted to read its log, so a plain HTTP port must not publish
one by default. ``--tiles-logs`` publishes an operator's checkpoints and hash tiles: tree sizes,
times and SHA-256 hashes of signed envelopes, which reveal no record's content (a leaf hash is
over the envelope and its Ed25519 signature, which no one without the key can guess), what
witnesses and monitors need to catch a split view. ``--tiles-entries`` also publishes the entries,
the signed envelopes themselves (player ids, bets, cards, revealed seeds): the operator's choice
to make its records public, as an export to an auditor does for that auditor. A log not published
is 404, like a path that names nothing (an unlisted operator's existence is not told); the
entries of a log whose entries are not published are 403, saying so.

A player's verifier (:mod:`rng_service.api.verifier_site`) is served beside the tiles: the
static page at ``<root>verify`` (``/log/verify``; one path segment, so no operator's prefix,
which always ends in ``/``, can be it), and per published log ``<prefix>keys`` (the public
signing keys, a JWK Set: what checkpoints and records verify under) and, for the operators of
``--tiles-rounds``, ``<prefix>round/<round id>``: one finished round's evidence (its record, its
shoe's commitment and, once the shoe is finished, its reveal, each with its inclusion proof in
one checkpoint). A round id is 128 random bits that only its player and the operator know, so
this publishes one round to whoever holds its id, never a listing; a round of another operator,
or one still open, is 404; a shoe still in play has no reveal there (its seed is never served
before the shoe is finished). ``--tiles-entries`` implies ``--tiles-rounds`` (its entries are
all public already).

Reads take a database connection each: at most :data:`TILES_CONCURRENCY` at once (the serve
command adds that many connections to the pool), so a crowd of tile readers cannot starve the
gRPC calls of connections. Each line logged is JSON (structlog), one per failed request.
"""

from __future__ import annotations

import contextlib
import gzip
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import urlsplit

import structlog

from rng_service.api.verifier_site import KEYS_PATH, ROUND_PATH, evidence_json, page_asset
from rng_service.core.errors import ErrorKind, FairshoeError, InvalidInput, quote
from rng_service.log import parse_tile_path
from rng_service.service import validate
from rng_service.service.audit import AuditService
from rng_service.service.translog import log_origin

log = structlog.get_logger("fairshoe.tiles")

#: database reads served at once (and the connections the serve command adds for them)
TILES_CONCURRENCY: Final = 4
IMMUTABLE: Final = "public, max-age=31536000, immutable"
CHECKPOINT_CACHE: Final = "public, max-age=5"
PARTIAL_CACHE: Final = "public, max-age=60"
#: the verifier's page and scripts: fresh for minutes (they change only with the service)
PAGE_CACHE: Final = "public, max-age=300"
NO_STORE: Final = "no-store"
#: a connection that sends nothing for this long is closed (a slow client holds no thread)
SOCKET_TIMEOUT_S: Final = 10.0
#: connections served at once (a thread each); past it a new one is 503 and closed at once
MAX_CONNECTIONS: Final = 64
_BUSY: Final = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                b"Cache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\n\r\n")
_STATUS: Final = {
    ErrorKind.NOT_FOUND: HTTPStatus.NOT_FOUND,
    ErrorKind.INVALID_INPUT: HTTPStatus.NOT_FOUND,  # a malformed path names no resource
    ErrorKind.PERMISSION_DENIED: HTTPStatus.FORBIDDEN,
    ErrorKind.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
}


@dataclass(frozen=True)
class TilesPublication:
    """Which operators' logs are published: ``logs`` their checkpoints and hash tiles,
    ``entries`` (a subset) their entry bundles too, ``rounds`` (a subset, holding ``entries``)
    one round's evidence to whoever asks by its id (the player's verifier)."""

    logs: frozenset[str]
    entries: frozenset[str]
    rounds: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # entries public make every round public: looking one up by id reveals nothing more
        object.__setattr__(self, "rounds", self.rounds | self.entries)

    @classmethod
    def parse(cls, logs: str, entries: str, rounds: str = "") -> TilesPublication:
        """From comma-separated operator ids (``--tiles-logs``, ``--tiles-entries``,
        ``--tiles-rounds``); an operator whose entries or rounds are published has its log
        published too. InvalidInput naming the option for a name that is no operator id."""
        hashes = cls._names(logs, "--tiles-logs")
        full = cls._names(entries, "--tiles-entries")
        by_id = cls._names(rounds, "--tiles-rounds")
        return cls(hashes | full | by_id, full, by_id | full)

    @staticmethod
    def _names(text: str, option: str) -> frozenset[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        try:
            return frozenset(validate.operator_id(name) for name in names)
        except InvalidInput as exc:
            raise InvalidInput(option, exc.detail) from None

    def describe(self) -> dict[str, list[str]]:
        """What the ``serving`` line says is published."""
        return {"logs": sorted(self.logs), "entries": sorted(self.entries),
                "rounds": sorted(self.rounds)}


def url_root(base_origin: str) -> str:
    """The URL path under which the logs of ``base_origin`` are served: the origin without its
    host, so an operator's prefix is its origin's path.

    >>> url_root("fairshoe.example/log"), url_root("logs.example")
    ('/log/', '/')
    """
    _, _, path = base_origin.partition("/")
    return "/" + (path.strip("/") + "/" if path.strip("/") else "")


@dataclass(frozen=True)
class Reply:
    """One answer: status, body and its headers."""

    status: HTTPStatus
    body: bytes
    content_type: str
    cache: str
    compress: bool = False  # entry bundles SHOULD be compressed (tlog-tiles); hashes do not
    #: further headers (the verifier page's Content-Security-Policy)
    headers: tuple[tuple[str, str], ...] = ()


def _error(status: HTTPStatus, message: str) -> Reply:
    return Reply(status, (message + "\n").encode(), "text/plain; charset=utf-8", NO_STORE)


class TilesSite:
    """Answers tlog-tiles paths from :class:`AuditService` (no HTTP here: testable alone)."""

    def __init__(self, audit: AuditService, publication: TilesPublication, *,
                 base_origin: str) -> None:
        self._audit = audit
        self._publication = publication
        self._base = base_origin
        self._root = url_root(base_origin)
        self._gate = threading.BoundedSemaphore(TILES_CONCURRENCY)

    def prefix(self, operator: str) -> str:
        """The URL path of ``operator``'s log, ending in ``/``."""
        return f"{self._root}{operator}/"

    def get(self, target: str) -> Reply:
        """The answer to ``GET target`` (a request target: path and maybe a query, ignored)."""
        try:
            path = urlsplit(target).path
        except ValueError:  # an unbalanced '[' in what urlsplit takes for a host: names nothing
            return _error(HTTPStatus.NOT_FOUND, "no log here")
        if not path.startswith(self._root):
            return _error(HTTPStatus.NOT_FOUND, "no log here")
        operator, slash, rest = path[len(self._root):].partition("/")
        if not slash:  # one segment under the root: no log's path, maybe the verifier's page
            asset = page_asset(operator)
            if asset is None:
                return _error(HTTPStatus.NOT_FOUND, "no log here")
            return Reply(HTTPStatus.OK, asset.body, asset.content_type, PAGE_CACHE,
                         headers=asset.headers)
        if operator not in self._publication.logs:
            return _error(HTTPStatus.NOT_FOUND, "no log here")
        try:
            with self._gate:
                return self._answer(operator, rest)
        except FairshoeError as exc:
            status = _STATUS.get(exc.kind, HTTPStatus.INTERNAL_SERVER_ERROR)
            if status >= HTTPStatus.INTERNAL_SERVER_ERROR:
                log.error("tiles_failed", path=quote(path), error=str(exc))
            return _error(status, str(exc))

    def _answer(self, operator: str, rest: str) -> Reply:
        if rest == "checkpoint":
            note = self._audit.checkpoint(operator).note
            return Reply(HTTPStatus.OK, note.encode("utf-8"), "text/plain; charset=utf-8",
                         CHECKPOINT_CACHE)
        if rest == KEYS_PATH:
            return Reply(HTTPStatus.OK, self._audit.signing_keys().jwks_json.encode("utf-8"),
                         "application/json", CHECKPOINT_CACHE)
        if rest.startswith(ROUND_PATH):
            if operator not in self._publication.rounds:
                return _error(HTTPStatus.FORBIDDEN, "rounds of "
                              f"{log_origin(operator, self._base)} are not published by id "
                              "(--tiles-rounds)")
            evidence = self._audit.round_evidence(operator, rest[len(ROUND_PATH):])
            return Reply(HTTPStatus.OK, evidence_json(evidence), "application/json", NO_STORE)
        tile = parse_tile_path(rest)
        if tile.is_bundle and operator not in self._publication.entries:
            return _error(HTTPStatus.FORBIDDEN, f"the entries of {log_origin(operator, self._base)}"
                          " are not published, only its checkpoints and hash tiles")
        data = self._audit.log_tile(operator, tile)
        return Reply(HTTPStatus.OK, data, "application/octet-stream",
                     IMMUTABLE if tile.is_full else PARTIAL_CACHE, compress=tile.is_bundle)


def _accepts_gzip(values: Iterable[str]) -> bool:
    for value in values:
        for item in value.split(","):
            coding, _, params = item.strip().partition(";")
            if coding.strip().lower() == "gzip" and params.replace(" ", "") not in ("q=0",
                                                                                  "q=0.0"):
                return True
    return False


class _Handler(BaseHTTPRequestHandler):
    site: TilesSite  # set on the subclass each server makes
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT_S
    server_version = "fairshoe-tiles"
    sys_version = ""

    def do_GET(self) -> None:
        self._reply(body=True)

    def do_HEAD(self) -> None:
        self._reply(body=False)

    def _reply(self, *, body: bool) -> None:
        try:
            reply = self.site.get(self.path)
        except Exception:  # a bug: one generic line to the client, the cause to the log
            log.exception("tiles_failed", path=quote(self.path))
            reply = _error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error")
        data, encoding = reply.body, None
        if reply.compress and _accepts_gzip(self.headers.get_all("Accept-Encoding") or ()):
            data, encoding = gzip.compress(data, mtime=0), "gzip"
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", reply.cache)
        self.send_header("Access-Control-Allow-Origin", "*")  # public: any page may read it
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in reply.headers:
            self.send_header(name, value)
        if reply.compress:
            self.send_header("Vary", "Accept-Encoding")
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: http.server writes plain text to stderr, where every line is JSON."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS  # socketserver's 5 left a burst waiting on SYN retries

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection if fewer than MAX_CONNECTIONS are open, else a 503 from
        the accepting thread (a crowd of idle connections must not become a crowd of threads)."""
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(_BUSY)
                # the request already received is read off: a socket closed with unread input
                # sends a reset, which can reach the client before it has read the 503
                request.setblocking(False)
                request.recv(65536)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away mid-answer is no error of ours; anything else is one JSON
        line (socketserver's default prints a plain-text traceback to stderr)."""
        if isinstance(sys.exc_info()[1], OSError):  # reset, broken pipe, timeout: the client's
            return
        log.exception("tiles_connection_failed")


class TilesServer:
    """A threaded HTTP server of a :class:`TilesSite` on a daemon thread."""

    def __init__(self, site: TilesSite, address: str, port: int) -> None:
        """Binds now (OSError if it cannot); ``port`` 0 picks a free one (:attr:`port`)."""
        handler = type("TilesHandler", (_Handler,), {"site": site})
        self._httpd = _HTTPServer((address, port), handler)
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="tiles-http",
                                        daemon=True)

    def start(self) -> TilesServer:
        """Start serving; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
