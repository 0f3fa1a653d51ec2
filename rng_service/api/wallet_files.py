"""The files an operator's wallet client reads its credentials from (a client certificate, a
CA, an HMAC secret): read without ever showing their path or content in an error."""

from __future__ import annotations

from pathlib import Path

from rng_service.core.config import ConfigError


def read_wallet_file(path: str, operator: str, what: str) -> bytes:
    """The bytes of ``path``; ConfigError naming ``what`` (not the path) if it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:  # the path stays out of the message: it may say too much
        raise ConfigError(f"operator {operator}: its wallet {what} cannot be read "
                          f"({exc.strerror})") from None
