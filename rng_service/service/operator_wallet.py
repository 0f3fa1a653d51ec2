"""The seamless wallet as the round use cases see it: a port any transport implements.

An operator on the seamless wallet keeps its players' money in its own wallet; Fairshoe asks
that wallet to take each stake (:class:`Debit`), pay each return (:class:`Credit`) and cancel a
stake whose fate it does not know (:class:`Rollback`), each under a stable transaction id the
wallet treats as idempotent (``proto/fairshoe/operator/v1/wallet.proto`` is the contract).

Every call ends in one of three :data:`Answer` kinds, and a transport must say which, never
raise:

* :class:`Accepted`: the wallet applied it (now or before, under the same id): the balance after;
* :class:`Rejected`: a clean refusal with a known :class:`RejectReason`: nothing moved;
* :class:`Uncertain`: anything else (a timeout, the wallet down, an error status, an answer
  that does not parse). The movement may or may not have been applied: a debit is rolled back,
  a credit or rollback is sent again with the same id.

The transports are :mod:`rng_service.api.operator_wallet_grpc` (the API layer holds the
stubs) and :mod:`rng_service.api.operator_wallet_http` (signed JSON POSTs), chosen per operator
by :mod:`rng_service.api.wallet_clients`; :class:`~rng_service.service.ports.WalletConfig` is
what ``fairshoe operators wallet`` stores per operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol

from rng_service.service.ports import WalletConfig, WalletKind

__all__ = ["MAX_WALLET_TEXT", "Accepted", "Answer", "Credit", "Debit", "OperatorWallet",
           "Purpose", "RejectReason", "Rejected", "Rollback", "Uncertain", "WalletConfig",
           "WalletDirectory", "WalletKind"]

#: what a transport keeps of a wallet's free text (a reject's message, an uncertain's cause)
MAX_WALLET_TEXT: Final = 200


class Purpose(StrEnum):
    """What a debit is for (``DebitPurpose`` in the contract)."""

    BET = "bet"
    DOUBLE = "double"
    SPLIT = "split"
    INSURANCE = "insurance"
    SIDE_BET = "side_bet"


class RejectReason(StrEnum):
    """Why a wallet refused a debit; also the ``reason`` a refused StartRound carries."""

    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    PLAYER_BLOCKED = "PLAYER_BLOCKED"
    LIMIT_REACHED = "LIMIT_REACHED"
    ROLLED_BACK = "ROLLED_BACK"


@dataclass(frozen=True)
class Debit:
    """Take ``amount`` (> 0, minor units) from the player for round ``round_id``."""

    transaction_id: str
    round_id: str
    player: str
    currency: str
    amount: int
    purpose: Purpose
    game: str


@dataclass(frozen=True)
class Credit:
    """Pay ``amount`` (>= 0) to the player, settling the round's ``debits``."""

    transaction_id: str
    round_id: str
    player: str
    currency: str
    amount: int
    debits: tuple[str, ...]
    game: str


@dataclass(frozen=True)
class Rollback:
    """Cancel the debit ``debit_id`` (which the wallet may never have seen)."""

    transaction_id: str
    debit_id: str
    round_id: str
    player: str
    currency: str
    amount: int


@dataclass(frozen=True)
class Accepted:
    """Applied: the player's balance after it, and the wallet's reference if it gave one."""

    balance_after: int
    reference: str = ""


@dataclass(frozen=True)
class Rejected:
    """Refused cleanly (nothing moved), with the wallet's reason."""

    reason: RejectReason
    message: str = ""


@dataclass(frozen=True)
class Uncertain:
    """No usable answer: ``cause`` says why (for logs; never a secret)."""

    cause: str


Answer = Accepted | Rejected | Uncertain


class OperatorWallet(Protocol):
    """One operator's wallet. Thread-safe; every call returns an :data:`Answer`, never
    raises, and gives up after the configured timeout (an :class:`Uncertain`)."""

    def debit(self, movement: Debit) -> Answer:
        """Send a debit."""
        ...

    def credit(self, movement: Credit) -> Answer:
        """Send a credit (a :class:`Rejected` is the wallet breaking the contract: retried)."""
        ...

    def rollback(self, movement: Rollback) -> Answer:
        """Send a rollback (as :meth:`credit`, never to be rejected)."""
        ...

    def balance(self, player: str, currency: str) -> int | Uncertain:
        """The player's balance, or why it is not known."""
        ...

    def close(self) -> None:
        """Release the transport's connections."""
        ...


class WalletDirectory(Protocol):
    """Gives the wallet client of a configuration (kept and reused while it is unchanged)."""

    def client(self, config: WalletConfig) -> OperatorWallet:
        """The client for ``config`` (a seamless one)."""
        ...
