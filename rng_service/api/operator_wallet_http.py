"""The seamless wallet over HTTPS JSON: the calls of ``fairshoe.operator.v1.OperatorWalletService``
as signed POSTs to ``<endpoint>/<Method>`` (docs/wallet.md states the contract in full).

Bodies mirror the proto's messages field for field (``preserving`` their snake_case names),
amounts as JSON integers of minor units and enums by their proto names. Each request carries
``X-Fairshoe-Timestamp`` (Unix seconds), ``X-Fairshoe-Nonce`` (random, once per request) and
``X-Fairshoe-Signature``: the lowercase hex HMAC-SHA256, under the operator's secret, of
:func:`canonical` (method, path, timestamp, nonce and the body's SHA-256, one a line).

Each call is classified exactly as the gRPC client's are
(:mod:`rng_service.api.operator_wallet_grpc`), never raised:

* a 2xx answer whose JSON object has an ``accepted`` answer (an integer balance >= 0):
  :class:`Accepted`;
* a 2xx answer to a Debit with a ``rejected`` answer of a known reason: :class:`Rejected`;
* everything else is :class:`Uncertain`: a timeout, a connection refused or reset, any other
  status (a 4xx too: the wallet may have applied an earlier call under that id, and a refused
  signature is a misconfiguration that must not lose a movement), a body that is not JSON, a
  JSON of another shape, an unknown reason, a reject of a Credit or Rollback.

The secret is read once per client from the configured file; neither it, nor the file's path,
nor the signature reaches a log or an error.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import ssl
import time
from collections.abc import Callable
from typing import Any, Final, TypeGuard

import httpx
import orjson

from rng_service.api.errors import printable
from rng_service.api.wallet_files import read_wallet_file
from rng_service.core.config import ConfigError
from rng_service.service.operator_wallet import (
    MAX_WALLET_TEXT,
    Accepted,
    Answer,
    Credit,
    Debit,
    Purpose,
    Rejected,
    RejectReason,
    Rollback,
    Uncertain,
    WalletConfig,
    WalletKind,
)

TIMESTAMP_HEADER: Final = "X-Fairshoe-Timestamp"
NONCE_HEADER: Final = "X-Fairshoe-Nonce"
SIGNATURE_HEADER: Final = "X-Fairshoe-Signature"
#: a shorter secret is refused: HMAC-SHA256 is only as strong as its key
MIN_SECRET_BYTES: Final = 32
PURPOSES: Final = {p: f"DEBIT_PURPOSE_{p.name}" for p in Purpose}
REASONS: Final = {f"REJECT_REASON_{r.name}": r for r in RejectReason}


def canonical(method: str, path: str, timestamp: str, nonce: str, body: bytes) -> bytes:
    """The string a request's signature is over: the HTTP method, the URL path as sent, the
    timestamp and nonce headers, and the body's lowercase hex SHA-256, joined by newlines."""
    return "\n".join((method, path, timestamp, nonce, hashlib.sha256(body).hexdigest())).encode()


def signature(secret: bytes, message: bytes) -> str:
    """The lowercase hex HMAC-SHA256 of ``message`` under ``secret``."""
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


class HttpOperatorWallet:
    """One operator's wallet under the base URL ``config.endpoint``; one connection pool, shared
    by every thread."""

    def __init__(self, config: WalletConfig, *, clock: Callable[[], float] = time.time) -> None:
        if config.kind is not WalletKind.HTTP or not config.endpoint:
            raise ConfigError(f"operator {config.operator}: not an HTTP wallet with an endpoint")
        self._base = config.endpoint.rstrip("/")
        self._secret = _secret(config)
        self._clock = clock
        # no proxy from the environment: a wallet's money calls go where they are configured
        self._client = httpx.Client(timeout=config.timeout_ms / 1000, verify=_tls(config),
                                    follow_redirects=False, trust_env=False)

    def debit(self, movement: Debit) -> Answer:
        """Send a debit; a reject is a clean one only with a known reason."""
        return self._call("Debit", {
            "transaction_id": movement.transaction_id, "round_id": movement.round_id,
            "account": _account(movement.player, movement.currency),
            "amount_minor": movement.amount, "purpose": PURPOSES[movement.purpose],
            "game": movement.game}, may_reject=True)

    def credit(self, movement: Credit) -> Answer:
        """Send a credit."""
        return self._call("Credit", {
            "transaction_id": movement.transaction_id, "round_id": movement.round_id,
            "account": _account(movement.player, movement.currency),
            "amount_minor": movement.amount, "debit_transaction_ids": list(movement.debits),
            "game": movement.game}, may_reject=False)

    def rollback(self, movement: Rollback) -> Answer:
        """Send a rollback."""
        return self._call("Rollback", {
            "transaction_id": movement.transaction_id,
            "debit_transaction_id": movement.debit_id, "round_id": movement.round_id,
            "account": _account(movement.player, movement.currency),
            "amount_minor": movement.amount}, may_reject=False)

    def balance(self, player: str, currency: str) -> int | Uncertain:
        """The player's balance as the wallet reports it."""
        answer = self._post("GetBalance", {"account": _account(player, currency)})
        if isinstance(answer, Uncertain):
            return answer
        balance = answer.get("balance_minor")
        if not _is_int(balance):
            return Uncertain("a balance answer without an integer balance_minor")
        if balance < 0:
            return Uncertain(f"a negative balance {balance}")
        return int(balance)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _call(self, method: str, body: dict[str, Any], *, may_reject: bool) -> Answer:
        answer = self._post(method, body)
        return answer if isinstance(answer, Uncertain) else classify(answer,
                                                                     may_reject=may_reject)

    def _post(self, method: str, body: dict[str, Any]) -> dict[str, Any] | Uncertain:
        """The JSON object a 2xx answer holds, or why there is none."""
        try:
            content = orjson.dumps(body)
            request = self._client.build_request(
                "POST", f"{self._base}/{method}", content=content,
                headers={"Content-Type": "application/json"})
            timestamp, nonce = str(int(self._clock())), secrets.token_hex(16)
            path = request.url.raw_path.decode("ascii")
            request.headers[TIMESTAMP_HEADER] = timestamp
            request.headers[NONCE_HEADER] = nonce
            request.headers[SIGNATURE_HEADER] = signature(
                self._secret, canonical("POST", path, timestamp, nonce, content))
            response = self._client.send(request)
        except httpx.TimeoutException:
            return Uncertain("timed out")
        except Exception as exc:  # refused, reset, TLS: still an answer, never raised
            return Uncertain(f"the call failed: {type(exc).__name__}")
        if not 200 <= response.status_code < 300:
            return Uncertain(f"HTTP status {response.status_code}")
        try:
            data = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return Uncertain("an answer that is not JSON")
        if not isinstance(data, dict):
            return Uncertain("an answer that is not a JSON object")
        return data


def classify(answer: dict[str, Any], *, may_reject: bool) -> Answer:
    """The answer kind of a 2xx answer's JSON object."""
    accepted, rejected = answer.get("accepted"), answer.get("rejected")
    if accepted is not None and rejected is not None:
        return Uncertain("an answer with both results")
    if accepted is not None:
        balance = accepted.get("balance_after_minor") if isinstance(accepted, dict) else None
        if not _is_int(balance):
            return Uncertain("an accepted answer without an integer balance_after_minor")
        if balance < 0:
            return Uncertain(f"an accepted answer with a negative balance {balance}")
        reference = accepted.get("wallet_reference", "")
        if not isinstance(reference, str):
            return Uncertain("an accepted answer whose wallet_reference is not a string")
        return Accepted(int(balance), printable(reference, MAX_WALLET_TEXT))
    if rejected is not None:
        if not may_reject:
            return Uncertain("a reject of a call that may not be rejected")
        name = rejected.get("reason") if isinstance(rejected, dict) else None
        reason = REASONS.get(name) if isinstance(name, str) else None
        if reason is None:
            shown = printable(name, 40) if isinstance(name, str) else type(name).__name__
            return Uncertain(f"a reject with an unknown reason {shown}")
        message = rejected.get("message", "")
        return Rejected(reason, printable(message if isinstance(message, str) else "",
                                          MAX_WALLET_TEXT))
    return Uncertain("an answer with no result")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _account(player: str, currency: str) -> dict[str, str]:
    return {"player_id": player, "currency": currency}


def _secret(config: WalletConfig) -> bytes:
    """The HMAC key: the file's bytes, less surrounding whitespace (a trailing newline)."""
    if not config.hmac_secret:
        raise ConfigError(f"operator {config.operator}: an HTTP wallet needs its HMAC secret "
                          "file")
    secret = read_wallet_file(config.hmac_secret, config.operator, "HMAC secret file").strip()
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(f"operator {config.operator}: its wallet HMAC secret must be at "
                          f"least {MIN_SECRET_BYTES} bytes")
    return secret


def _tls(config: WalletConfig) -> ssl.SSLContext | bool:
    """For https: the system's CAs, or ``config.ca`` alone; a client certificate from
    ``credentials`` (its chain and key in one PEM file) for mutual TLS."""
    if not config.endpoint.startswith("https://"):
        if config.ca or config.credentials:
            raise ConfigError(f"operator {config.operator}: TLS settings need an https:// "
                              "wallet endpoint")
        return True
    if config.ca:
        pem = read_wallet_file(config.ca, config.operator, "CA file")
        try:
            context = ssl.create_default_context(cadata=pem.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError):
            raise ConfigError(f"operator {config.operator}: its wallet CA file holds no "
                              "certificate (PEM)") from None
    else:
        context = ssl.create_default_context()
    if config.credentials:
        read_wallet_file(config.credentials, config.operator, "credentials file")
        try:
            context.load_cert_chain(config.credentials)
        except (OSError, ssl.SSLError):  # their messages may name the file: not shown
            raise ConfigError(f"operator {config.operator}: its wallet credentials file must "
                              "hold one private key and its certificate chain (PEM)") from None
    return context
