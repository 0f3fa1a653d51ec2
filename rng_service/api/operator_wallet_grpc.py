"""The seamless wallet over gRPC: Fairshoe as a client of the operator's
``fairshoe.operator.v1.OperatorWalletService``.

Each call is classified, never raised (:mod:`rng_service.service.operator_wallet`):

* status OK with an ``accepted`` answer (a non-negative balance): :class:`Accepted`;
* status OK, a Debit's ``rejected`` answer with a known reason: :class:`Rejected`;
* everything else is :class:`Uncertain`: the deadline passed, UNAVAILABLE, any other status
  (INVALID_ARGUMENT included: the wallet may have applied an earlier call under that id), an
  answer with neither result, an unknown reject reason, a reject of a Credit or Rollback, or an
  error of the channel itself.

Credentials: a client certificate and key (one PEM file) for mutual TLS and the wallet's CA,
read once per client from the paths configured; neither their content nor their paths reach a
log or an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import grpc

from rng_service.api.errors import printable
from rng_service.api.proto_gen.fairshoe.operator.v1 import wallet_pb2 as pb
from rng_service.api.proto_gen.fairshoe.operator.v1 import wallet_pb2_grpc as pb_grpc
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

PURPOSES: Final = {
    Purpose.BET: pb.DEBIT_PURPOSE_BET,
    Purpose.DOUBLE: pb.DEBIT_PURPOSE_DOUBLE,
    Purpose.SPLIT: pb.DEBIT_PURPOSE_SPLIT,
    Purpose.INSURANCE: pb.DEBIT_PURPOSE_INSURANCE,
    Purpose.SIDE_BET: pb.DEBIT_PURPOSE_SIDE_BET,
}
REASONS: Final = {
    pb.REJECT_REASON_INSUFFICIENT_FUNDS: RejectReason.INSUFFICIENT_FUNDS,
    pb.REJECT_REASON_PLAYER_BLOCKED: RejectReason.PLAYER_BLOCKED,
    pb.REJECT_REASON_LIMIT_REACHED: RejectReason.LIMIT_REACHED,
    pb.REJECT_REASON_ROLLED_BACK: RejectReason.ROLLED_BACK,
}
#: a wallet back from an outage is reconnected to within a second, not gRPC's default of up to
#: two minutes of backoff (every call meanwhile fails fast as UNAVAILABLE: uncertain). Despite
#: its name, "min_reconnect_backoff_ms" is gRPC's minimum connect timeout, the time one attempt
#: has to set a connection up (TCP, TLS, HTTP/2's settings); it stays gRPC's default of 20 s,
#: past the longest wallet timeout (10 s), so a call fails by its own deadline, never by the
#: connection's. Set to 100 ms, a wallet across an ocean or on a busy machine was never
#: connected to, every call on it uncertain (tests/api/test_operator_wallet_grpc.py).
CHANNEL_OPTIONS: Final = (("grpc.initial_reconnect_backoff_ms", 100),
                          ("grpc.min_reconnect_backoff_ms", 20_000),
                          ("grpc.max_reconnect_backoff_ms", 1000))
#: a PEM private key block, whatever its algorithm
_KEY_MARK: Final = b"PRIVATE KEY-----"


class GrpcOperatorWallet:
    """One operator's wallet at ``config.endpoint``; one channel, shared by every thread."""

    def __init__(self, config: WalletConfig) -> None:
        if config.kind is not WalletKind.GRPC or not config.endpoint:
            raise ConfigError(f"operator {config.operator}: not a gRPC wallet with an endpoint")
        self._timeout = config.timeout_ms / 1000
        self._channel = _channel(config)
        self._stub = pb_grpc.OperatorWalletServiceStub(self._channel)

    def debit(self, movement: Debit) -> Answer:
        """Send a debit; a reject is a clean one only with a known reason."""
        request = pb.DebitRequest(
            transaction_id=movement.transaction_id, round_id=movement.round_id,
            account=_account(movement.player, movement.currency),
            amount_minor=movement.amount, purpose=PURPOSES[movement.purpose],
            game=movement.game)
        return self._call(self._stub.Debit, request, may_reject=True)

    def credit(self, movement: Credit) -> Answer:
        """Send a credit."""
        request = pb.CreditRequest(
            transaction_id=movement.transaction_id, round_id=movement.round_id,
            account=_account(movement.player, movement.currency),
            amount_minor=movement.amount, debit_transaction_ids=list(movement.debits),
            game=movement.game)
        return self._call(self._stub.Credit, request, may_reject=False)

    def rollback(self, movement: Rollback) -> Answer:
        """Send a rollback."""
        request = pb.RollbackRequest(
            transaction_id=movement.transaction_id, debit_transaction_id=movement.debit_id,
            round_id=movement.round_id, account=_account(movement.player, movement.currency),
            amount_minor=movement.amount)
        return self._call(self._stub.Rollback, request, may_reject=False)

    def balance(self, player: str, currency: str) -> int | Uncertain:
        """The player's balance as the wallet reports it."""
        request = pb.GetBalanceRequest(account=_account(player, currency))
        try:
            response = self._stub.GetBalance(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            return _uncertain_status(exc)
        if response.balance_minor < 0:
            return Uncertain(f"a negative balance {response.balance_minor}")
        return int(response.balance_minor)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def _call(self, method: Callable[..., Any], request: Any, *, may_reject: bool) -> Answer:
        try:
            response = method(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            return _uncertain_status(exc)
        except Exception as exc:  # the channel's own failure: still an answer, never raised
            return Uncertain(f"the call failed: {type(exc).__name__}")
        return classify(response, may_reject=may_reject)


def classify(response: Any, *, may_reject: bool) -> Answer:
    """The answer kind of a response that arrived with status OK."""
    which = response.WhichOneof("result") if may_reject else (
        "accepted" if response.HasField("accepted") else None)
    if which == "accepted":
        balance = int(response.accepted.balance_after_minor)
        if balance < 0:
            return Uncertain(f"an accepted answer with a negative balance {balance}")
        return Accepted(balance, printable(response.accepted.wallet_reference, MAX_WALLET_TEXT))
    if which == "rejected":
        reason = REASONS.get(response.rejected.reason)
        if reason is None:
            return Uncertain(f"a reject with an unknown reason {response.rejected.reason}")
        return Rejected(reason, printable(response.rejected.message, MAX_WALLET_TEXT))
    return Uncertain("an answer with no result")


def _uncertain_status(exc: grpc.RpcError) -> Uncertain:
    code = exc.code() if isinstance(exc, grpc.Call) else None
    name = code.name if isinstance(code, grpc.StatusCode) else "no status"
    return Uncertain(f"status {name}")


def _account(player: str, currency: str) -> pb.WalletAccount:
    return pb.WalletAccount(player_id=player, currency=currency)


def _channel(config: WalletConfig) -> grpc.Channel:
    """Plaintext without a CA; TLS trusting ``config.ca``, mutual with ``credentials``."""
    if not config.ca:
        if config.credentials:
            raise ConfigError(f"operator {config.operator}: a client certificate needs the "
                              "wallet's CA (TLS)")
        return grpc.insecure_channel(config.endpoint, options=CHANNEL_OPTIONS)
    roots = read_wallet_file(config.ca, config.operator, "CA file")
    key = chain = None
    if config.credentials:
        pem = read_wallet_file(config.credentials, config.operator, "credentials file")
        key, chain = _split_pem(pem, config.operator)
    creds = grpc.ssl_channel_credentials(root_certificates=roots, private_key=key,
                                         certificate_chain=chain)
    return grpc.secure_channel(config.endpoint, creds, options=CHANNEL_OPTIONS)


def _split_pem(pem: bytes, operator: str) -> tuple[bytes, bytes]:
    """(private key, certificate chain) of a PEM file holding both."""
    blocks = [b"-----BEGIN" + part for part in pem.split(b"-----BEGIN")[1:]]
    keys = [b for b in blocks if _KEY_MARK in b.split(b"\n", 1)[0]]
    certs = [b for b in blocks if b.startswith(b"-----BEGIN CERTIFICATE")]
    if len(keys) != 1 or not certs:
        raise ConfigError(f"operator {operator}: its wallet credentials file must hold one "
                          "private key and its certificate chain (PEM)")
    return keys[0], b"".join(certs)
