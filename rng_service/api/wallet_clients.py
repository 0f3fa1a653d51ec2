"""The :class:`~rng_service.service.operator_wallet.WalletDirectory` of a server: the client of
each operator's seamless wallet, over the transport its configuration names (gRPC or HTTPS
JSON), kept while that configuration is unchanged."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from rng_service.api.operator_wallet_grpc import GrpcOperatorWallet
from rng_service.api.operator_wallet_http import HttpOperatorWallet
from rng_service.core.config import ConfigError
from rng_service.service.operator_wallet import OperatorWallet, WalletConfig, WalletKind

TRANSPORTS: Final[dict[WalletKind, Callable[[WalletConfig], OperatorWallet]]] = {
    WalletKind.GRPC: GrpcOperatorWallet,
    WalletKind.HTTP: HttpOperatorWallet,
}


class WalletClients:
    """One client per operator, replaced when its configuration changes (a secret file
    rewritten in place is read again only then, or at a restart)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[WalletConfig, OperatorWallet]] = {}

    def client(self, config: WalletConfig) -> OperatorWallet:
        """The operator's client for ``config`` (a new one if its configuration changed)."""
        transport = TRANSPORTS.get(config.kind)
        if transport is None:
            raise ConfigError(f"operator {config.operator}: its wallet {config.kind} is not "
                              "a seamless one")
        with self._lock:
            kept = self._clients.get(config.operator)
            if kept is not None and kept[0] == config:
                return kept[1]
            client = transport(config)
            self._clients[config.operator] = (config, client)
        if kept is not None:
            kept[1].close()
        return client

    def close(self) -> None:
        """Close every client."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for _, client in clients:
            client.close()
