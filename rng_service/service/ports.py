"""The storage the round and wallet use cases need, as Protocols any database can implement.

One :class:`UnitOfWork` is one database transaction. A use case opens it with
:meth:`Storage.transaction`, reads and writes through it, and either every write commits together
(a round's state, its ledger entries, its shoe's position and, when the round ends, its signed
record and perhaps the shoe's reveal, plus the stored idempotent response) or none does: leaving
the ``with`` block by an exception rolls back. :mod:`rng_service.storage.sqlite` implements it for
one host, :mod:`rng_service.storage.postgres` for several replicas on one PostgreSQL, because

* write transactions are units that cannot lose an update (SQLite ``BEGIN IMMEDIATE``;
  PostgreSQL ``READ COMMITTED`` with account rows locked ``FOR UPDATE``),
* rows carry a ``version`` and are updated only ``WHERE version = expected`` (optimistic
  concurrency: a lost race raises :class:`~rng_service.core.errors.Conflict`, never overwrites),
* "one open round per player and game" and "one current shoe per player, game and mode" are unique
  partial indexes, so they hold across replicas too,
* every key and every query includes the operator,
* each operator's transparency log has one sequencer row (its size and compact range), taken
  last in the transaction that appends (``FOR UPDATE`` on PostgreSQL), so leaf indices stay dense
  and in commit order across replicas, and a rolled-back transaction leaves no leaf.

Secrets: a shoe row holds the seed only sealed (AES-GCM, :mod:`rng_service.rng.seed_vault`); a
round row holds only dealt cards (``Round.to_bytes``). Reprs of rows omit the byte columns.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Protocol

from rng_service.core import times
from rng_service.core.errors import NotFound
from rng_service.core.frozen import quick_init
from rng_service.log import NodeID

DEFAULT_OPERATOR: Final = "default"


#: The timestamps stored: RFC 3339 UTC with microseconds (``YYYY-MM-DDTHH:MM:SS.ffffffZ``,
#: what ``datetime.strftime("%Y-%m-%dT%H:%M:%S.%fZ")`` writes), which sort as text (so rounds
#: started within one millisecond still list in order): ``utc_now()`` the time now,
#: ``utc_stamp(ns)`` that of ``ns`` nanoseconds since the epoch. Both in C where built
#: (:mod:`rng_service.core.times`; tests/service/test_ports.py, tests/core/test_times.py).
utc_now: Final = times.utc_now
utc_stamp: Final = times.utc_stamp


# System accounts of each operator, currency and mode. Player ids cannot start with "@"
# (rng_service.service.validate), so these never collide with a player's account.
HOUSE: Final = "@house"  # the other side of every stake and return: HOUSE_SHARDS rows
#: house accounts of each operator, currency and mode (see house_of)
HOUSE_SHARDS: Final = 16
CASH: Final = "@cash"  # the other side of every real deposit and withdrawal
DEMO_FUNDS: Final = "@demo"  # the source of play money credited to demo accounts


def house_of(round_id: str) -> str:
    """The house account a round's stakes and returns post to: one of :data:`HOUSE_SHARDS`,
    ``@house/00`` to ``@house/15``, chosen by the round id, all of one round's money on one.

    A posting locks both its accounts' rows until COMMIT; with one house row every round of an
    operator, currency and mode queued on it (on PostgreSQL, across replicas). Spread over
    sixteen, concurrent rounds rarely share one, and the house's position is their sum.
    (Rounds begun before the split staked on ``@house`` itself; sums over ``@house%`` include
    it.)
    """
    return f"{HOUSE}/{zlib.crc32(round_id.encode()) % HOUSE_SHARDS:02d}"


class Mode(StrEnum):
    """Real money, or play money with its own balances (same rules, same shoes)."""

    DEMO = "DEMO"
    REAL = "REAL"


class RoundStatus(StrEnum):
    """Where a round is: open (awaiting decisions), finished (settled) or void."""

    OPEN = "open"
    FINISHED = "finished"
    VOID = "void"


class WalletKind(StrEnum):
    """Where an operator's real money is kept."""

    INTERNAL = "internal"  # Fairshoe's own ledger (Deposit/Withdraw: a transfer wallet)
    GRPC = "grpc"  # the operator's OperatorWalletService, over gRPC
    HTTP = "http"  # the same four calls as signed JSON POSTs (docs/wallet.md)


@quick_init
@dataclass(frozen=True)
class WalletConfig:
    """An operator's wallet settings, as stored. ``credentials`` is a file path (for gRPC a
    PEM file holding the client certificate chain and its private key, for mutual TLS), never
    the secret itself; ``ca`` the PEM file of the CA that signed the wallet's certificate
    (TLS); ``hmac_secret`` the file holding the secret an HTTP wallet's requests are signed
    with. None of them, nor what the files hold, is ever logged. Without ``ca`` a gRPC channel
    is plaintext (tests, a sidecar on localhost); an HTTP wallet's scheme says."""

    operator: str
    kind: WalletKind
    endpoint: str = ""
    timeout_ms: int = 2000
    credentials: str = field(default="", repr=False)
    ca: str = field(default="", repr=False)
    hmac_secret: str = field(default="", repr=False)

    @property
    def seamless(self) -> bool:
        """True if real money is the operator's wallet's, not Fairshoe's ledger."""
        return self.kind is not WalletKind.INTERNAL


class RoundWallet(StrEnum):
    """Where a round's money is: this ledger, or the operator's seamless wallet (the outbox)."""

    INTERNAL = "internal"
    SEAMLESS = "seamless"


class MovementKind(StrEnum):
    """What an outbox movement asks of an operator's seamless wallet."""

    DEBIT = "debit"
    CREDIT = "credit"
    ROLLBACK = "rollback"


class MovementState(StrEnum):
    """Where an outbox movement is. ``pending``: durable, not yet acknowledged (being sent, or
    due again); ``acked``: the wallet applied it; ``rejected``: a debit the wallet refused
    cleanly; ``uncertain``: a debit whose fate is unknown, its rollback pending;
    ``rolled_back``: a debit its acknowledged rollback cancelled."""

    PENDING = "pending"
    ACKED = "acked"
    REJECTED = "rejected"
    UNCERTAIN = "uncertain"
    ROLLED_BACK = "rolled_back"


class ShoeStatus(StrEnum):
    """Where a shoe is in its life; the members are in order."""

    COMMITTED = "committed"  # seed drawn and sealed, commitment stored; no card dealt yet
    IN_PLAY = "in_play"  # a card was dealt: the client seed is fixed
    FINISHED = "finished"  # no further round; the reveal is due (written in the same transaction)
    REVEALED = "revealed"  # the signed reveal is stored


class EntryKind(StrEnum):
    """What a ledger entry is; each member's comment says which way the money moves."""

    STAKE = "stake"  # player -> house, a wager placed
    RETURN = "return"  # house -> player, what a settled wager returned (stake included)
    DEPOSIT = "deposit"  # cash -> player
    WITHDRAWAL = "withdrawal"  # player -> cash
    DEMO_CREDIT = "demo_credit"  # demo funds -> player (automatic demo funding)


class AccountKind(StrEnum):
    """Whether an account is a player's (never negative) or a system counterparty."""

    PLAYER = "player"  # may never go below zero
    SYSTEM = "system"  # house, cash, demo funds: may go negative (they are the counterparty)


class MissingAccount(NotFound):
    """A posting names an account that does not exist (raised before anything is written)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message, reason="ACCOUNT_NOT_FOUND")


@quick_init
@dataclass(frozen=True)
class AccountKey:
    """One balance: a holder (player id or a system account) in one currency and mode."""

    operator: str
    holder: str
    currency: str
    mode: Mode

    def other(self, holder: str) -> AccountKey:
        """The account of ``holder`` in the same operator, currency and mode."""
        return AccountKey(self.operator, holder, self.currency, self.mode)


@quick_init
@dataclass(frozen=True)
class Posting:
    """One double-entry movement: ``amount`` (> 0, minor units) leaves ``source`` for ``target``."""

    source: AccountKey
    target: AccountKey
    amount: int
    kind: EntryKind
    round_id: str | None = None
    wager_id: int | None = None
    request_id: str | None = None
    reference: str | None = None  # the operator's own, for a deposit or withdrawal


@quick_init
@dataclass(frozen=True)
class LedgerEntry:
    """A stored posting with its sequence number and both balances after it. ``entry_id`` is the
    internal order, a counter all operators share: clients see only ``public_id`` (random,
    unique per operator), which tells nothing of other operators' postings."""

    entry_id: int
    operator: str
    currency: str
    mode: Mode
    source: str
    target: str
    amount: int
    kind: EntryKind
    round_id: str | None
    wager_id: int | None
    request_id: str | None
    source_balance_after: int
    target_balance_after: int
    created_at: str
    reference: str | None = None  # the operator's reference for a deposit or withdrawal
    public_id: str = ""  # 32 hex digits; "" only in an entry not yet stored


@quick_init
@dataclass(frozen=True)
class ShoeRow:
    """A shoe as stored. ``cut`` is a fraction as text (``"1/2"``) or None for a one-round shoe.
    ``mode``: the money its rounds are played for; demo and real rounds never share a shoe (demo
    play would show cards of a cut-card shoe real money is then bet on)."""

    operator: str
    shoe_id: str
    player: str
    game: str
    rules_digest: str
    decks: int
    cut: str | None
    commitment: str
    sealed_seed: bytes = field(repr=False)
    client_seed: bytes = field(repr=False)
    position: int
    rounds_started: int
    status: ShoeStatus
    version: int
    created_at: str
    updated_at: str
    mode: Mode


@quick_init
@dataclass(frozen=True)
class RoundRow:
    """A round as stored: ``state`` is ``Round.to_bytes()`` (inputs, dealt cards, actions)."""

    operator: str
    round_id: str
    player: str
    game: str
    rules_digest: str
    level: str
    mode: Mode
    currency: str
    status: RoundStatus
    version: int
    state: bytes = field(repr=False)
    shoe_id: str
    created_at: str
    updated_at: str
    #: which ledger the round's money is on, fixed when it starts
    wallet: RoundWallet = field(default_factory=lambda: RoundWallet.INTERNAL)


@quick_init
@dataclass(frozen=True)
class RoundCursor:
    """Where a page of :meth:`UnitOfWork.list_rounds` ended (open rounds sort first)."""

    is_open: bool
    created_at: str
    round_id: str


class EnvelopeKind(StrEnum):
    """What a stored signed envelope is; the order of the members is the export's order among
    envelopes stored at the same instant."""

    ROUND = "round"  # fairshoe.round/v1
    SHOE_REVEAL = "shoe_reveal"  # fairshoe.shoe-reveal/v1
    RNG = "rng"  # fairshoe.rng/v1
    RNG_REVEAL = "rng_reveal"  # fairshoe.rng-reveal/v1

    @property
    def rank(self) -> int:
        """The member's position, the export's order among envelopes of one instant."""
        return list(EnvelopeKind).index(self)


@quick_init
@dataclass(frozen=True)
class StoredEnvelope:
    """One signed envelope as stored: its kind, the id it is stored under (round, shoe or draw
    id), its canonical bytes and when it was stored. Also the cursor of the next export page."""

    kind: EnvelopeKind
    ident: str
    envelope: bytes = field(repr=False)
    created_at: str


@quick_init
@dataclass(frozen=True)
class RngDrawRow:
    """A certified draw as stored: both envelopes; the seed is only inside ``reveal``."""

    operator: str
    draw_id: str
    kind: str
    commitment: str
    record: bytes = field(repr=False)
    reveal: bytes = field(repr=False)
    created_at: str


class LeafKind(StrEnum):
    """What a leaf of an operator's transparency log is: which signed envelope its entry is."""

    KEY = "key"  # fairshoe.key/v1, before the first leaf signed by that key
    SHOE_COMMITMENT = "shoe_commitment"  # fairshoe.shoe-commitment/v1, when the shoe is created
    ROUND = "round"  # fairshoe.round/v1
    SHOE_REVEAL = "shoe_reveal"  # fairshoe.shoe-reveal/v1
    RNG = "rng"  # fairshoe.rng/v1
    RNG_REVEAL = "rng_reveal"  # fairshoe.rng-reveal/v1

    @property
    def stored_in_log(self) -> bool:
        """True if the log's leaves table keeps this kind's entry bytes itself: keys and shoe
        commitments have no other table; the other envelopes are read from theirs."""
        return self in (LeafKind.KEY, LeafKind.SHOE_COMMITMENT)


@quick_init
@dataclass(frozen=True)
class NewLeaf:
    """A leaf to append: its kind, the id it is logged under (key, shoe, round or draw id) and
    the entry (the envelope's canonical bytes, exactly as stored)."""

    kind: LeafKind
    ident: str
    entry: bytes = field(repr=False)


@quick_init
@dataclass(frozen=True)
class LogLeaf:
    """A leaf as stored: its index in the operator's log, kind, id, leaf hash and entry bytes
    (None where a listing did not ask for them)."""

    index: int
    kind: LeafKind
    ident: str
    leaf_hash: bytes = field(repr=False)
    entry: bytes | None = field(repr=False, default=None)


@quick_init
@dataclass(frozen=True)
class StoredCheckpoint:
    """A signed checkpoint of an operator's log: its tree size, the signed note and when."""

    operator: str
    size: int
    note: str
    created_at: str


@quick_init
@dataclass(frozen=True)
class Movement:
    """One money movement of the seamless wallet's outbox, under the transaction id it is sent
    with. ``reference``: a credit's settled debit ids, a rollback's debit id; ``request_id``
    and ``request_hash``: the request whose stake a debit is; ``reason``: a reject's reason or
    the last failed attempt's cause."""

    operator: str
    transaction_id: str
    round_id: str
    player: str
    currency: str
    game: str
    kind: MovementKind
    purpose: str
    amount: int
    reference: str
    request_id: str | None
    request_hash: str | None
    state: MovementState
    reason: str
    balance_after: int | None
    attempts: int
    next_attempt_at: str
    created_at: str
    updated_at: str


@quick_init
@dataclass(frozen=True)
class MovementUpdate:
    """A movement's new state, written only if it is still in the state it was read in."""

    state: MovementState
    reason: str = ""
    balance_after: int | None = None
    attempts: int = 0
    next_attempt_at: str = ""


@quick_init
@dataclass(frozen=True)
class StoredResponse:
    """The first answer to an idempotent request: what it was (hash) and what it returned."""

    operation: str
    request_hash: str
    response: bytes = field(repr=False)


class UnitOfWork(Protocol):
    """One transaction's reads and writes. Nothing is visible to others before it commits."""

    def operator_exists(self, operator: str) -> bool:
        """True if ``operator`` is one the database knows."""
        ...

    def add_operator(self, operator: str) -> bool:
        """Make ``operator`` known; False if it already was."""
        ...

    def list_operators(self) -> list[tuple[str, str]]:
        """Every operator and when it was added, by name."""
        ...

    # --- idempotency ------------------------------------------------------------------------
    def get_response(self, operator: str, request_id: str) -> StoredResponse | None:
        """The stored first answer to ``request_id``, or None if the request is new."""
        ...

    def put_response(self, operator: str, request_id: str, stored: StoredResponse) -> bool:
        """Store the first answer to ``request_id`` (it commits with the request's writes);
        False, writing nothing, if an answer to it is stored already."""
        ...

    # --- accounts and the ledger -------------------------------------------------------------
    def get_balance(self, account: AccountKey) -> int | None:
        """The balance, or None if the account does not exist."""
        ...

    def balance_and_wallet(self, account: AccountKey) -> tuple[int | None, WalletKind | None]:
        """The account's balance (None if it does not exist) and the kind of its operator's
        wallet (None if never set), in one read: what a StartRound needs to know first."""
        ...

    def in_play(self, account: AccountKey) -> int:
        """What ``account`` has staked in its open rounds, less what they already returned."""
        ...

    def open_account(self, account: AccountKey, kind: AccountKind) -> bool:
        """Create the account with balance 0 unless it exists; True if it was created."""
        ...

    def post(self, posting: Posting) -> LedgerEntry:
        """Move the money and append the entry. Both accounts must exist (else
        :class:`MissingAccount`, before anything is written). A player account that would go
        below zero raises ``IllegalState(reason="INSUFFICIENT_FUNDS")``."""
        ...

    def round_entries(self, operator: str, round_id: str) -> list[LedgerEntry]:
        """The ledger entries of round ``round_id``, oldest first."""
        ...

    def list_entries(self, account: AccountKey, limit: int, before: int | None, *,
                     round_id: str | None = None) -> list[LedgerEntry]:
        """Entries touching ``account``, newest first, with ``entry_id < before`` if given (and
        of round ``round_id`` only, if given)."""
        ...

    def entry_position(self, account: AccountKey, public_id: str) -> int | None:
        """The ``entry_id`` of the entry ``public_id`` touching ``account`` (a page token's
        position in :meth:`list_entries`), or None if there is no such entry."""
        ...

    # --- the seamless wallet ---------------------------------------------------------------
    def wallet_config(self, operator: str) -> WalletConfig | None:
        """How ``operator``'s real money is kept, or None if never set (the internal ledger)."""
        ...

    def put_wallet_config(self, config: WalletConfig) -> None:
        """Store (or replace) an operator's wallet settings."""
        ...

    def insert_movement(self, movement: Movement) -> None:
        """A new outbox movement; a transaction id or a debit's request id used before raises
        ``Conflict(reason="CONCURRENT_UPDATE")``."""
        ...

    def get_movement(self, operator: str, transaction_id: str) -> Movement | None:
        """The movement ``transaction_id`` of ``operator``, or None."""
        ...

    def movement_for_request(self, operator: str, request_id: str) -> Movement | None:
        """The debit made for request ``request_id``, or None."""
        ...

    def round_movements(self, operator: str, round_id: str) -> list[Movement]:
        """The movements of round ``round_id``, oldest first."""
        ...

    def update_movement(self, movement: Movement, update: MovementUpdate) -> bool:
        """Write ``update`` if the movement is still in ``movement.state`` (with
        ``movement.attempts``); False (nothing written) if it has moved on since it was read."""
        ...

    def claim_movement(self, movement: Movement, until: str) -> bool:
        """Push a pending movement's next attempt to ``until`` if it is still as read (state,
        attempts and next attempt): the caller then has it to itself until then. False if
        another claimed or recorded it first."""
        ...

    def due_movements(self, now: str, limit: int) -> list[Movement]:
        """Every operator's pending movements due at ``now`` (``next_attempt_at <= now``),
        the longest due first."""
        ...

    def unsettled_movements(self, operator: str | None = None) -> list[Movement]:
        """The movements still pending or uncertain (of ``operator``, or all), oldest first."""
        ...

    def unsettled_page(self, operator: str, after: tuple[str, str], limit: int
                       ) -> list[Movement]:
        """At most ``limit`` of the operator's unsettled movements after ``after`` (created_at,
        transaction_id; ``("", "")`` for the first page), oldest first."""
        ...

    def unsettled_count(self, operator: str) -> tuple[int, str | None]:
        """How many of the operator's movements are unsettled, and the oldest ``created_at``."""
        ...

    # --- shoes ---------------------------------------------------------------------------
    def insert_shoe(self, row: ShoeRow) -> None:
        """A new shoe; a second current shoe for one player, game and mode raises
        ``Conflict``."""
        ...

    def get_shoe(self, operator: str, shoe_id: str) -> ShoeRow | None:
        """The shoe ``shoe_id`` of ``operator``, or None."""
        ...

    def current_shoe(self, operator: str, player: str, game: str, mode: Mode) -> ShoeRow | None:
        """The player's committed or in-play shoe for ``game`` in ``mode`` (at most one
        exists)."""
        ...

    def update_shoe(self, row: ShoeRow, expected_version: int) -> None:
        """Write ``row`` (whose version is ``expected_version + 1``) if the stored version is
        still ``expected_version``; else ``Conflict(reason="CONCURRENT_UPDATE")``."""
        ...

    def finished_unrevealed_shoes(self) -> list[ShoeRow]:
        """Every operator's shoes in status ``finished`` (recovery reveals them)."""
        ...

    # --- rounds --------------------------------------------------------------------------
    def insert_round(self, row: RoundRow) -> None:
        """A new round; a second open round for one player and game raises ``Conflict``."""
        ...

    def get_round(self, operator: str, round_id: str) -> RoundRow | None:
        """The round ``round_id`` of ``operator``, or None."""
        ...

    def open_round(self, operator: str, player: str, game: str) -> RoundRow | None:
        """The player's open round of ``game``, or None (at most one exists)."""
        ...

    def update_round(self, row: RoundRow, expected_version: int, *,
                     expected_state: bytes | None = None) -> None:
        """As :meth:`update_shoe`, for a round; with ``expected_state``, also Conflict unless
        the stored state is those bytes (a writer that did not read the row: the check that it
        holds the stored round)."""
        ...

    def list_rounds(self, operator: str, player: str, limit: int, after: RoundCursor | None,
                    *, mode: Mode | None = None, is_open: bool | None = None) -> list[RoundRow]:
        """Open rounds first, then the others; each group newest first; after ``after``. Only
        rounds of ``mode`` and, when ``is_open`` is given, only open (True) or only finished and
        void (False) rounds."""
        ...

    def open_round_ids(self) -> list[tuple[str, str]]:
        """(operator, round id) of every open round (recovery looks at each)."""
        ...

    # --- signed records ------------------------------------------------------------------
    def put_record(self, operator: str, round_id: str, envelope: bytes) -> None:
        """Store a finished round's signed record (``fairshoe.round/v1``),
        in the transaction that finishes it."""
        ...

    def get_record(self, operator: str, round_id: str) -> bytes | None:
        """The signed record of round ``round_id``, or None if none is stored."""
        ...

    def put_reveal(self, operator: str, shoe_id: str, envelope: bytes) -> None:
        """Store a finished shoe's signed reveal (``fairshoe.shoe-reveal/v1``)."""
        ...

    def get_reveal(self, operator: str, shoe_id: str) -> bytes | None:
        """The signed reveal of shoe ``shoe_id``, or None if none is stored yet."""
        ...

    def put_rng_draw(self, row: RngDrawRow) -> None:
        """A draw's record and reveal; a draw id or commitment stored before is an error."""
        ...

    def list_envelopes(self, operator: str, start: str, end: str,
                       after: StoredEnvelope | None, limit: int) -> list[StoredEnvelope]:
        """At most ``limit`` signed envelopes (round records, shoe reveals, RNG records and
        reveals) stored at ``start <= created_at < end``, ordered by (created_at, kind in
        :class:`EnvelopeKind` order, id), strictly after ``after`` if given."""
        ...

    # --- the transparency log -------------------------------------------------------------
    def append_leaf(self, operator: str, leaf: NewLeaf, *, prerequisite: NewLeaf | None = None
                    ) -> None:
        """Append ``leaf`` to ``operator``'s log when this transaction commits (after every other
        write of it, so the log's sequencer lock is the last one taken and held briefly), in the
        order of the calls. With ``prerequisite``, that leaf is appended first unless the log
        already holds a leaf of its kind and id (how a key leaf precedes the key's first use)."""
        ...

    def log_size(self, operator: str) -> int:
        """How many leaves ``operator``'s log has (committed ones)."""
        ...

    def log_state(self, operator: str) -> bytes | None:
        """The stored compact range (``CompactRange.to_bytes``) of ``operator``'s log, or None
        while it is empty."""
        ...

    def find_leaf(self, operator: str, kind: LeafKind, ident: str) -> LogLeaf | None:
        """The leaf of ``kind`` logged under ``ident`` (without its entry), or None."""
        ...

    def find_leaves(self, operator: str, kind: LeafKind, idents: Sequence[str]
                    ) -> list[LogLeaf]:
        """The leaves of ``kind`` logged under any of ``idents`` (without their entries), in no
        set order; an ident not logged is left out."""
        ...

    def list_leaves(self, operator: str, start: int, end: int) -> list[LogLeaf]:
        """Leaves ``start <= index < end`` in index order, each with its entry bytes."""
        ...

    def list_leaves_at(self, operator: str, indices: Sequence[int]) -> list[LogLeaf]:
        """The leaves at ``indices`` the log has, in index order, each with its entry bytes."""
        ...

    def get_log_nodes(self, operator: str, ids: Sequence[NodeID]) -> list[bytes]:
        """Hashes of the stored perfect nodes ``ids`` of ``operator``'s log, in order
        (:class:`~rng_service.log.NodeReader`); NotFound for a node not stored."""
        ...

    def latest_checkpoint(self, operator: str) -> StoredCheckpoint | None:
        """The stored checkpoint of the largest size, or None."""
        ...

    def put_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        """Store a signed checkpoint; one of the same size already stored is kept instead."""
        ...


class Storage(Protocol):
    """A database behind the ports: transactions and their lifetime."""

    def transaction(self) -> AbstractContextManager[UnitOfWork]:
        """A write transaction, serialised with other writers: all of it commits or none."""
        ...

    def snapshot(self) -> AbstractContextManager[UnitOfWork]:
        """A read-only transaction: one consistent view; writing through it is an error."""
        ...

    def ping(self, timeout: float = 2.0) -> None:
        """A cheap round trip (``SELECT 1``) within about ``timeout`` seconds, for health checks:
        ``Unavailable(reason="DATABASE_UNAVAILABLE")`` if the database cannot answer now."""
        ...

    def describe(self) -> str:
        """Which database this is, for logs: a file path, or host, port, database and user
        (never a password)."""
        ...

    def integrate_log(self, operator: str | None = None) -> int:
        """Sequence every leaf committed so far but still queued, for ``operator`` (None: every
        operator), waiting for a sequencer at work; how many this call merged (only its own:
        another replica's sequencer may have merged the rest meanwhile, so a caller reads the
        log again whatever the count). Called before a read that needs the log complete (a
        checkpoint, a record's proof); a storage that sequences at commit has none."""
        ...

    def close(self) -> None:
        """Release the database's connections; the storage is unusable afterwards."""
        ...
