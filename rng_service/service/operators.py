"""Operators (tenants): provisioning them is a deliberate act, not a side effect of a call.

Under mutual TLS a client certificate names its operator, but a certificate alone does not make
one: an operator holds players' real-money balances, so it exists only once someone with access
to the database has added it (``fairshoe operators add``). A certificate whose operator was never
added gets NOT_FOUND (field ``operator``) on every call, and a typo in a certificate cannot
quietly open a second, empty tenant. The default operator (``default``) exists from the first
migration on: it is every call's without client certificates.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

from rng_service.core.errors import InvalidInput, NotFound, quote
from rng_service.service import validate
from rng_service.service.operator_wallet import WalletConfig, WalletKind
from rng_service.service.ports import Storage

#: the longest a wallet call may take: a StartRound waits for its debit's answer
MAX_WALLET_TIMEOUT_MS: Final = 10_000
MAX_ENDPOINT_CHARS: Final = 255


def add_operator(storage: Storage, name: str) -> bool:
    """Add the operator ``name`` (an operator id, InvalidInput otherwise); False if it existed."""
    return add_operators(storage, [name])[0]


def add_operators(storage: Storage, names: Sequence[str]) -> list[bool]:
    """Add every operator of ``names`` in one transaction, or none if one is no operator id
    (InvalidInput naming it): a typo among them must not leave the others half provisioned.
    Each result is False if that operator existed."""
    checked = [validate.operator_id(name) for name in names]
    with storage.transaction() as uow:
        return [uow.add_operator(name) for name in checked]


def list_operators(storage: Storage) -> list[tuple[str, str]]:
    """Every operator and when it was added, by name."""
    with storage.snapshot() as uow:
        return uow.list_operators()


def set_wallet(storage: Storage, operator: str, kind: WalletKind | str, *, endpoint: str = "",
               timeout_ms: int = 2000, credentials: str = "", ca: str = "",
               hmac_secret: str = "") -> WalletConfig:
    """Keep ``operator``'s real money in ``kind`` from its next round on (rounds already open
    finish on the ledger they began on). A gRPC wallet needs its host:port, an HTTP one its
    base URL and the file of the secret its requests are signed with (``hmac_secret``);
    ``credentials`` (a PEM file with the client certificate and key), ``ca`` and
    ``hmac_secret`` are file paths, which must be readable now and are never shown back in an
    error."""
    try:
        how = WalletKind(kind)
    except ValueError:
        known = ", ".join(k.value for k in WalletKind)
        raise InvalidInput("kind", f"unknown wallet {quote(kind)} (known: {known})") from None
    if how is WalletKind.INTERNAL:
        config = WalletConfig(validate.operator_id(operator), how)
    else:
        _check_endpoint(how, endpoint)
        if (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int)
                or not 1 <= timeout_ms <= MAX_WALLET_TIMEOUT_MS):
            raise InvalidInput("timeout_ms", f"must be 1 to {MAX_WALLET_TIMEOUT_MS} ms")
        if how is WalletKind.HTTP and not hmac_secret:
            raise InvalidInput("hmac_secret", "an HTTP wallet needs the file of the secret its "
                                              "requests are signed with")
        if how is not WalletKind.HTTP and hmac_secret:
            raise InvalidInput("hmac_secret", "only an HTTP wallet's requests are signed")
        for field, path in (("credentials", credentials), ("ca", ca),
                            ("hmac_secret", hmac_secret)):
            if path and not os.access(path, os.R_OK):
                raise InvalidInput(field, "the file cannot be read")
        if credentials and not ca:
            raise InvalidInput("ca", "a client certificate needs the wallet's CA (TLS)")
        config = WalletConfig(validate.operator_id(operator), how, endpoint, timeout_ms,
                              credentials, ca, hmac_secret)
    with storage.transaction() as uow:
        if not uow.operator_exists(config.operator):
            raise NotFound("operator", f"no operator {quote(config.operator)}")
        uow.put_wallet_config(config)
    return config


def _check_endpoint(kind: WalletKind, endpoint: str) -> None:
    """A gRPC wallet's host:port; an HTTP wallet's base URL (http:// only without TLS)."""
    if not endpoint or len(endpoint) > MAX_ENDPOINT_CHARS or not endpoint.isprintable():
        what = "its host:port" if kind is WalletKind.GRPC else "its https:// base URL"
        raise InvalidInput("endpoint", f"a {kind} wallet needs {what}")
    if kind is WalletKind.HTTP:
        scheme, _, rest = endpoint.partition("://")
        if scheme not in {"http", "https"} or not rest or any(c in rest for c in "?# "):
            raise InvalidInput("endpoint", "an http wallet's endpoint is a base URL "
                                           "(https://host[:port][/path])")


def wallet_of(storage: Storage, operator: str) -> WalletConfig:
    """How ``operator``'s real money is kept (the internal ledger unless set)."""
    with storage.snapshot() as uow:
        name = validate.operator(operator, uow)
        return uow.wallet_config(name) or WalletConfig(name, WalletKind.INTERNAL)
