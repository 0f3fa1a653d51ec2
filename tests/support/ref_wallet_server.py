"""A reference operator wallet: ``fairshoe.operator.v1.OperatorWalletService`` on its own durable
SQLite ledger, with faults a test injects. Run as a process by :mod:`ref_wallet`:

    python tests/support/ref_wallet_server.py --db wallet.db --faults faults.json [--port 0]
    python tests/support/ref_wallet_server.py --db wallet.db --faults faults.json \
        --http --hmac-secret-file secret [--port 0]

The second is its HTTPS JSON face (plain HTTP unless TLS is given; docs/wallet.md states that
contract): the same calls as POSTs to ``/fairshoe/v1/<Method>``, each request's HMAC-SHA256
signature checked (401 if missing, wrong or its timestamp more than 300 s off) and its nonce
refused when seen before (409; the nonces are kept in the ledger's database, so a restart does
not forget them).
Both faces answer from the same :class:`Ledger`. Either takes ``--tls-cert``, ``--tls-key`` and
``--tls-client-ca``: it then serves TLS (HTTPS) and requires a client certificate signed by that
CA (mutual TLS).

It prints ``{"serving": PORT}`` once listening. The ledger (``balances``, ``transactions``) is
idempotent by transaction id: the same id again returns the first answer; the same id with other
content is INVALID_ARGUMENT. A Rollback of a debit it never saw records the id as rolled back, so
a late Debit with it is rejected (ROLLED_BACK) and moves nothing.

Faults are read from the JSON file at every call (absent or ``{}``: none), each limited to the
methods in ``"methods"`` when given (e.g. ``["Debit"]``):

* ``latency_ms``: sleep before doing anything;
* ``error``: answer with that status code name (``"UNAVAILABLE"``), applying nothing;
* ``lose_answer``: apply the call, then answer UNAVAILABLE (an answer lost on the way); a
  number between 0 and 1 instead of ``true``: that share of the calls, at random (flaky);
* ``malformed``: apply the call, then answer OK with no result;
* ``reject``: a reason name (``"PLAYER_BLOCKED"``) every Debit is rejected with (with
  ``"purposes"``, e.g. ``["SIDE_BET"]``, only the Debits for those);
* ``http_status`` (HTTP face): answer with that status, applying nothing (``error`` there is
  503);
* ``body`` (HTTP face): apply the call, then answer 200 with this text as the body;
* ``reset``: close the connection abruptly (the process exits at once, mid-call: a "reset"
  and the wallet down in one, until the test starts it again).

Being down for minutes is the process not running (:meth:`ref_wallet.RefWallet.stop`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import hmac
import json
import os
import random
import sqlite3
import ssl
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc

from rng_service.api.proto_gen.fairshoe.operator.v1 import wallet_pb2 as pb
from rng_service.api.proto_gen.fairshoe.operator.v1 import wallet_pb2_grpc as pb_grpc

SCHEMA = """
CREATE TABLE IF NOT EXISTS balances (
    player TEXT NOT NULL, currency TEXT NOT NULL, balance INTEGER NOT NULL CHECK (balance >= 0),
    PRIMARY KEY (player, currency));
CREATE TABLE IF NOT EXISTS transactions (
    transaction_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,             -- debit, credit, rollback
    player TEXT NOT NULL, currency TEXT NOT NULL,
    amount INTEGER NOT NULL,        -- as requested
    applied INTEGER NOT NULL,       -- what moved: -amount, +amount, or 0
    round_id TEXT NOT NULL,
    reference TEXT NOT NULL,        -- a credit's settled debits, a rollback's debit
    state TEXT NOT NULL,            -- accepted, rejected, rolled_back (a debit cancelled)
    reason INTEGER NOT NULL,        -- a reject's reason
    balance_after INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    purpose TEXT NOT NULL,          -- a debit's, as sent (DEBIT_PURPOSE_BET ...); else ''
    calls INTEGER NOT NULL DEFAULT 1);  -- how many calls came with this id (retries included)
CREATE TABLE IF NOT EXISTS seen_nonces (  -- the HTTP face's replay guard
    nonce TEXT PRIMARY KEY, seen_at INTEGER NOT NULL);
"""
#: how far a signed request's timestamp may be from the wallet's clock, either way
REPLAY_WINDOW_S = 300
#: where the HTTP face serves the calls: ``<prefix><Method>``
HTTP_PREFIX = "/fairshoe/v1/"


@dataclass(frozen=True)
class Move:
    """One requested movement: debit, credit or rollback (``reference``: a credit's settled
    debits, a rollback's debit)."""

    kind: str
    tx: str
    player: str
    currency: str
    amount: int
    round_id: str
    reference: str
    purpose: str = ""  # a debit's


class Ledger:
    """The wallet's money: one connection under one lock, every change committed before the call
    is answered, so it survives the process's SIGKILL (the fault the tests inflict)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # a commit in WAL mode survives the process's death without an fsync (only the
        # machine's would lose it); an fsync per call (two over HTTP, with the nonce) made the
        # answer wait on the disk, which the suite's databases keep busy, and a call that waits
        # past its timeout turns a test's expected answer into an uncertain one
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(SCHEMA)
        self._lock = threading.Lock()

    def balance(self, player: str, currency: str) -> int:
        with self._lock:
            return self._balance(player, currency)

    def _balance(self, player: str, currency: str) -> int:
        row = self._conn.execute("SELECT balance FROM balances WHERE player = ? AND currency = ?",
                                 (player, currency)).fetchone()
        return 0 if row is None else int(row[0])

    def first_use(self, nonce: str, now: int) -> bool:
        """True once per nonce (durably); nonces older than the replay window are forgotten, as
        their requests' timestamps are refused anyway."""
        with self._lock:
            self._conn.execute("DELETE FROM seen_nonces WHERE seen_at < ?",
                               (now - 2 * REPLAY_WINDOW_S,))
            inserted = self._conn.execute("INSERT INTO seen_nonces VALUES (?, ?) ON CONFLICT "
                                          "DO NOTHING", (nonce, now)).rowcount
            return inserted == 1

    def _move(self, player: str, currency: str, delta: int) -> int:
        new = self._balance(player, currency) + delta
        self._conn.execute("INSERT INTO balances VALUES (?, ?, ?) ON CONFLICT (player, currency) "
                           "DO UPDATE SET balance = excluded.balance", (player, currency, new))
        return new

    def apply(self, move: Move, *, reject: int = 0) -> tuple[str, int, int]:
        """(state, reason, balance after) of ``move``, applied once per transaction id;
        ValueError for an id seen with other content."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                answer = self._apply(move, reject)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return answer

    def _apply(self, move: Move, reject: int) -> tuple[str, int, int]:
        seen = self._conn.execute(
            "SELECT kind, player, currency, amount, round_id, reference, state, reason, "
            "balance_after FROM transactions WHERE transaction_id = ?", (move.tx,)).fetchone()
        if seen is not None:
            self._conn.execute("UPDATE transactions SET calls = calls + 1 WHERE "
                               "transaction_id = ?", (move.tx,))
            if move.kind == "debit" and seen[0] == "debit" and seen[6] == "rolled_back":
                return ("rejected", pb.REJECT_REASON_ROLLED_BACK,
                        self._balance(move.player, move.currency))
            if tuple(seen[:6]) != (move.kind, move.player, move.currency, move.amount,
                                   move.round_id, move.reference):
                raise ValueError(f"transaction {move.tx} was used for another movement")
            return seen[6], seen[7], seen[8]
        state, reason, applied = "accepted", 0, 0
        if move.kind == "debit":
            if reject:
                state, reason = "rejected", reject
            elif self._balance(move.player, move.currency) < move.amount:
                state, reason = "rejected", pb.REJECT_REASON_INSUFFICIENT_FUNDS
            else:
                applied = -move.amount
        elif move.kind == "credit":
            applied = move.amount
        else:  # rollback of the debit `reference`
            debit = self._conn.execute(
                "SELECT applied, state FROM transactions WHERE transaction_id = ? AND "
                "kind = 'debit'", (move.reference,)).fetchone()
            if debit is None:  # never seen: remembered, so a late debit moves nothing
                tombstone = Move("debit", move.reference, move.player, move.currency, 0,
                                 move.round_id, "")
                self._insert(tombstone, 0, "rolled_back", 0,
                             self._balance(move.player, move.currency), calls=0)
            elif debit[1] == "accepted":
                applied = -int(debit[0])
                self._conn.execute("UPDATE transactions SET state = 'rolled_back' "
                                   "WHERE transaction_id = ?", (move.reference,))
        after = (self._move(move.player, move.currency, applied) if applied
                 else self._balance(move.player, move.currency))
        self._insert(move, applied, state, reason, after)
        return state, reason, after

    def _insert(self, move: Move, applied: int, state: str, reason: int, after: int, *,
                calls: int = 1) -> None:
        self._conn.execute(
            "INSERT INTO transactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "(SELECT COALESCE(MAX(seq), 0) + 1 FROM transactions), ?, ?)",
            (move.tx, move.kind, move.player, move.currency, move.amount, applied,
             move.round_id, move.reference, state, reason, after, move.purpose, calls))


class Faults:
    """The fault file, read at each call."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def now(self, method: str) -> dict[str, Any]:
        try:
            faults = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return {}
        methods = faults.get("methods")
        return {} if methods is not None and method not in methods else dict(faults)


class Wallet(pb_grpc.OperatorWalletServiceServicer):  # type: ignore[misc]
    """The reference wallet's servicer."""

    def __init__(self, ledger: Ledger, faults: Faults) -> None:
        self._ledger = ledger
        self._faults = faults

    def _enter(self, method: str, context: grpc.ServicerContext) -> dict[str, Any]:
        faults = self._faults.now(method)
        if faults.get("latency_ms"):
            time.sleep(faults["latency_ms"] / 1000)
        if faults.get("reset"):
            os._exit(3)  # mid-call: the client's connection is reset
        if faults.get("error"):
            context.abort(grpc.StatusCode[faults["error"]], "injected")
        return faults

    def _leave(self, faults: dict[str, Any], context: grpc.ServicerContext) -> None:
        if _lost(faults):
            context.abort(grpc.StatusCode.UNAVAILABLE, "answer lost (injected)")

    def _movement(self, move: Move, context: grpc.ServicerContext, *, reject: int = 0
                  ) -> tuple[str, int, int]:
        if not move.tx or move.amount < 0 or not move.player or not move.currency:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "incomplete request")
        try:
            return self._ledger.apply(move, reject=reject)
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise  # not reached

    def GetBalance(self, request: pb.GetBalanceRequest, context: grpc.ServicerContext
                   ) -> pb.GetBalanceResponse:
        self._enter("GetBalance", context)
        return pb.GetBalanceResponse(balance_minor=self._ledger.balance(
            request.account.player_id, request.account.currency))

    def Debit(self, request: pb.DebitRequest, context: grpc.ServicerContext
              ) -> pb.DebitResponse:
        faults = self._enter("Debit", context)
        purpose = pb.DebitPurpose.Name(request.purpose)  # type: ignore[arg-type]
        if request.amount_minor <= 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a debit is positive")
        move = _move("debit", request.transaction_id, request.account, request.amount_minor,
                     request.round_id, "")
        state, reason, after = self._movement(
            dataclasses.replace(move, purpose=purpose), context,
            reject=_reject(faults, purpose))
        self._leave(faults, context)
        if faults.get("malformed"):
            return pb.DebitResponse()
        if state == "rejected":
            return pb.DebitResponse(rejected=pb.Rejected(reason=reason, message="refused"))  # type: ignore[arg-type]
        return pb.DebitResponse(accepted=pb.Accepted(balance_after_minor=after,
                                                     wallet_reference=request.transaction_id))

    def Credit(self, request: pb.CreditRequest, context: grpc.ServicerContext
               ) -> pb.CreditResponse:
        faults = self._enter("Credit", context)
        _, _, after = self._movement(
            _move("credit", request.transaction_id, request.account, request.amount_minor,
                  request.round_id, ",".join(request.debit_transaction_ids)), context)
        self._leave(faults, context)
        if faults.get("malformed"):
            return pb.CreditResponse()
        return pb.CreditResponse(accepted=pb.Accepted(balance_after_minor=after))

    def Rollback(self, request: pb.RollbackRequest, context: grpc.ServicerContext
                 ) -> pb.RollbackResponse:
        faults = self._enter("Rollback", context)
        if not request.debit_transaction_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no debit_transaction_id")
        _, _, after = self._movement(
            _move("rollback", request.transaction_id, request.account, request.amount_minor,
                  request.round_id, request.debit_transaction_id), context)
        self._leave(faults, context)
        if faults.get("malformed"):
            return pb.RollbackResponse()
        return pb.RollbackResponse(accepted=pb.Accepted(balance_after_minor=after))


def _lost(faults: dict[str, Any]) -> bool:
    """Whether the ``lose_answer`` fault loses this answer (``true``, or a share at random)."""
    lose = faults.get("lose_answer")
    if isinstance(lose, bool) or lose is None:
        return bool(lose)
    return random.random() < float(lose)  # a fault's dice, not a secret


def _reject(faults: dict[str, Any], purpose: str) -> int:
    """The reason the ``reject`` fault refuses a debit for ``purpose`` with, or 0."""
    purposes = faults.get("purposes")
    if not faults.get("reject") or (
            purposes is not None and purpose.removeprefix("DEBIT_PURPOSE_") not in purposes):
        return 0
    return int(pb.RejectReason.Value(f"REJECT_REASON_{faults['reject']}"))


def _move(kind: str, tx: str, account: pb.WalletAccount, amount: int, round_id: str,  # noqa: PLR0917
          reference: str) -> Move:
    return Move(kind, tx, account.player_id, account.currency, amount, round_id, reference)


class HttpFace(BaseHTTPRequestHandler):
    """The reference wallet's HTTP face: the signature is checked by its own reading of the
    contract (not Fairshoe's code), then the call goes to the same :class:`Ledger`."""

    protocol_version = "HTTP/1.1"  # keep-alive, as a client's connection pool expects
    ledger: Ledger
    faults: Faults
    secret: bytes

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the test reads the ledger, not an access log

    def _answer(self, status: int, body: dict[str, Any] | str) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        method = self.path.removeprefix(HTTP_PREFIX)
        faults = self.faults.now(method)
        if faults.get("latency_ms"):
            time.sleep(faults["latency_ms"] / 1000)
        if faults.get("reset"):
            os._exit(3)  # mid-call: the client's connection is reset
        refused = self._refused(body)
        if refused is not None:
            status, why = refused
            self._answer(status, {"error": why})
            return
        if faults.get("http_status") or faults.get("error"):
            self._answer(int(faults.get("http_status") or 503), {"error": "injected"})
            return
        call = CALLS.get(method) if self.path.startswith(HTTP_PREFIX) else None
        if call is None:
            self._answer(404, {"error": "no such call"})
            return
        try:
            request = json.loads(body)
            answer = call(self.ledger, request, faults)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._answer(400, {"error": str(exc)})
            return
        if _lost(faults):
            self._answer(503, {"error": "answer lost (injected)"})
        elif faults.get("body") is not None:
            self._answer(200, str(faults["body"]))
        elif faults.get("malformed"):
            self._answer(200, {})
        else:
            self._answer(200, answer)

    def _refused(self, body: bytes) -> tuple[int, str] | None:
        """Why the request's signature is refused (401), or its nonce (409); None if good."""
        timestamp = self.headers.get("X-Fairshoe-Timestamp", "")
        nonce = self.headers.get("X-Fairshoe-Nonce", "")
        given = self.headers.get("X-Fairshoe-Signature", "")
        if not (timestamp.isdigit() and nonce and given):
            return 401, "unsigned"
        now = int(time.time())
        if abs(now - int(timestamp)) > REPLAY_WINDOW_S:
            return 401, "timestamp outside the replay window"
        message = "\n".join(("POST", self.path, timestamp, nonce,
                             hashlib.sha256(body).hexdigest())).encode()
        expected = hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, given):
            return 401, "bad signature"
        if not self.ledger.first_use(nonce, now):
            return 409, "replayed"
        return None


def _json_move(kind: str, request: dict[str, Any], reference: str) -> Move:
    amount = request["amount_minor"]
    if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
        raise ValueError("amount_minor is a non-negative integer")
    account = request["account"]
    move = Move(kind, str(request["transaction_id"]), str(account["player_id"]),
                str(account["currency"]), amount, str(request["round_id"]), reference)
    if not move.tx or not move.player or not move.currency:
        raise ValueError("incomplete request")
    return move


def _json_debit(ledger: Ledger, request: dict[str, Any], faults: dict[str, Any]
                ) -> dict[str, Any]:
    move = dataclasses.replace(_json_move("debit", request, ""), purpose=str(request["purpose"]))
    if move.amount <= 0:
        raise ValueError("a debit is positive")
    state, reason, after = ledger.apply(move, reject=_reject(faults, move.purpose))
    if state == "rejected":
        return {"rejected": {"reason": pb.RejectReason.Name(reason),  # type: ignore[arg-type]
                             "message": "refused"}}
    return {"accepted": {"balance_after_minor": after, "wallet_reference": move.tx}}


def _json_credit(ledger: Ledger, request: dict[str, Any], faults: dict[str, Any]
                 ) -> dict[str, Any]:
    debits = request["debit_transaction_ids"]
    if not isinstance(debits, list):
        raise ValueError("debit_transaction_ids is a list")
    _, _, after = ledger.apply(_json_move("credit", request, ",".join(map(str, debits))))
    return {"accepted": {"balance_after_minor": after}}


def _json_rollback(ledger: Ledger, request: dict[str, Any], faults: dict[str, Any]
                   ) -> dict[str, Any]:
    if not request.get("debit_transaction_id"):
        raise ValueError("no debit_transaction_id")
    _, _, after = ledger.apply(_json_move("rollback", request,
                                          str(request["debit_transaction_id"])))
    return {"accepted": {"balance_after_minor": after}}


def _json_balance(ledger: Ledger, request: dict[str, Any], faults: dict[str, Any]
                  ) -> dict[str, Any]:
    account = request["account"]
    return {"balance_minor": ledger.balance(str(account["player_id"]),
                                            str(account["currency"]))}


CALLS: dict[str, Callable[[Ledger, dict[str, Any], dict[str, Any]], dict[str, Any]]] = {
    "GetBalance": _json_balance, "Debit": _json_debit, "Credit": _json_credit,
    "Rollback": _json_rollback}


def _serve_http(ledger: Ledger, faults: Faults, args: argparse.Namespace) -> None:
    handler = type("Face", (HttpFace,), {"ledger": ledger, "faults": faults,
                                         "secret": args.hmac_secret_file.read_bytes().strip()})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    if args.tls_cert:  # HTTPS, requiring a client certificate of --tls-client-ca if given
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(args.tls_client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(json.dumps({"serving": server.server_address[1]}), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.server_close()
    sys.exit(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True, type=Path)
    parser.add_argument("--faults", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--http", action="store_true", help="the HTTP face instead of gRPC")
    parser.add_argument("--hmac-secret-file", type=Path)
    parser.add_argument("--tls-cert", type=Path, help="serve TLS (HTTPS) with this cert")
    parser.add_argument("--tls-key", type=Path)
    parser.add_argument("--tls-client-ca", type=Path, help="require a client cert of this CA")
    args = parser.parse_args()
    if args.http:
        _serve_http(Ledger(args.db), Faults(args.faults), args)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_OperatorWalletServiceServicer_to_server(
        Wallet(Ledger(args.db), Faults(args.faults)), server)
    if args.tls_cert:  # mutual TLS: a client certificate of --tls-client-ca required
        creds = grpc.ssl_server_credentials(
            [(args.tls_key.read_bytes(), args.tls_cert.read_bytes())],
            root_certificates=args.tls_client_ca.read_bytes(), require_client_auth=True)
        port = server.add_secure_port(f"127.0.0.1:{args.port}", creds)
    else:
        port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    print(json.dumps({"serving": port}), flush=True)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        server.stop(grace=None)
    sys.exit(0)


if __name__ == "__main__":
    main()
