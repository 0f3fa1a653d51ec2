"""A service on a real database, SQLite or PostgreSQL, with shoes a test can stack.

The ``backend`` fixture runs each test that uses ``harness`` (or ``database_url``) on both
databases: a SQLite file in ``tmp_path`` and a fresh PostgreSQL database of the session's test
server (``tests/support/pg_server.py``).

:class:`StackedShoes` is the only way a test chooses cards: it is a ``ShoeSource`` whose
``certified`` is False, so ``RoundService`` accepts it only with ``FAIRSHOE_TEST_SHOES=1`` (set by
the ``env`` fixture), a switch production refuses. It lives under ``tests/``: no installed code
can construct it. A stacked shoe still has a genuine OS seed, sealed and committed as usual; only
its cards come from the test (they then follow the stack with the rest of an ordered shoe).
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg
import pytest

from game_math.cards import Card, ordered_shoe, parse_cards
from game_math.round import Action, ActionKind
from rng_service.crypto.keys import SigningKey
from rng_service.rng.seed_vault import SeedVault
from rng_service.rng.shoe import SEED_BYTES, Shoe
from rng_service.service.ports import DEFAULT_OPERATOR, Mode, Storage
from rng_service.service.rounds import RoundService
from rng_service.service.views import RoundView
from rng_service.service.wallet import WalletService
from rng_service.storage import backend_of, open_storage

OP = DEFAULT_OPERATOR
EUR = "EUR"


class StackedShoes:
    """Test shoes: each new shoe deals the next stacked cards first (if any were stacked)."""

    certified = False

    def __init__(self) -> None:
        self._queue: list[list[Card]] = []
        self._stacks: dict[str, list[Card]] = {}

    def stack(self, cards: Sequence[str]) -> None:
        """The next shoe created deals ``cards`` first, then the rest of an ordered shoe."""
        self._queue.append(parse_cards(cards))

    def new_shoe(self, decks: int, cut: Fraction | None) -> Shoe:
        shoe = Shoe(shoe_id=uuid.uuid4().hex, seed=secrets.token_bytes(SEED_BYTES), decks=decks,
                    cut=cut)
        if self._queue:
            self._stacks[shoe.id] = _fill(self._queue.pop(0), decks)
        return shoe

    def cards(self, shoe: Shoe) -> Sequence[Card]:
        stacked = self._stacks.get(shoe.id)
        return stacked if stacked is not None else shoe.cards

    def stacked_cards(self, shoe_id: str) -> list[Card]:
        return self._stacks[shoe_id]


def _fill(stacked: list[Card], decks: int) -> list[Card]:
    rest = ordered_shoe(decks)
    for card in stacked:
        rest.remove(card)
    return stacked + rest


@dataclass
class Harness:
    """A RoundService and WalletService on one database; :meth:`reopen` starts new ones."""

    url: str  # a SQLite file path or a postgresql:// URL
    vault: SeedVault
    signer: SigningKey
    shoes: StackedShoes
    storage: Storage = field(init=False)
    rounds: RoundService = field(init=False)
    wallet: WalletService = field(init=False)
    _requests: Iterator[int] = field(init=False)

    def __post_init__(self) -> None:
        self._requests = iter(range(1, 10**9))
        self.open()

    def open(self) -> None:
        self.storage = open_storage(self.url)
        self.rounds = RoundService(self.storage, vault=self.vault, signer=self.signer,
                                   shoe_source=self.shoes)
        self.wallet = WalletService(self.storage)

    def reopen(self) -> None:
        """As after a restart: new storage and service objects on the same database."""
        self.storage.close()
        self.open()

    def rid(self) -> str:
        return f"req-{next(self._requests)}"

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Query the database directly, as an auditor of it would (``?`` placeholders)."""
        return run_sql(self.url, query, *params)

    def deposit(self, player: str, amount: int) -> None:
        self.wallet.deposit(OP, player, EUR, amount, request_id=self.rid())

    def balance(self, player: str, mode: Mode = Mode.REAL) -> int:
        return self.wallet.get_balance(OP, player, EUR, mode).balance

    def act(self, view: RoundView, action: str | Action) -> RoundView:
        act = action if isinstance(action, Action) else Action(action)
        return self.rounds.act(OP, view.round_id, act, hand_id=view.turn_hand,
                               expected_version=view.version, request_id=self.rid())

    def play_out(self, view: RoundView) -> RoundView:
        """Decline insurance and even money, then stand until the round is settled."""
        while view.status == "awaiting":
            if view.decision == "insurance":
                view = self.act(view, Action(ActionKind.INSURANCE, 0))
            elif view.decision == "even_money":
                view = self.act(view, Action(ActionKind.EVEN_MONEY, accept=False))
            else:
                view = self.act(view, "stand")
        return view


def run_sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """One statement on its own connection, committed; rows it returns (``?`` placeholders)."""
    if backend_of(url) == "postgresql":
        with psycopg.connect(url, autocommit=True) as pg:
            cur = pg.execute(query.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []
    with contextlib.closing(sqlite3.connect(url)) as conn, conn:
        return conn.execute(query, params).fetchall()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    """Which database the test runs on."""
    return str(request.param)


@pytest.fixture
def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh database of ``backend`` (a file path or a postgresql:// URL; migrated by the
    storage that opens it, and PostgreSQL's already copied from the migrated template)."""
    if backend == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "fairshoe.db")


@pytest.fixture
def storage(database_url: str) -> Iterator[Storage]:
    """The storage on a fresh database of ``backend``, closed afterwards."""
    opened = open_storage(database_url)
    yield opened
    opened.close()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSHOE_TEST_SHOES", "1")
    monkeypatch.delenv("FAIRSHOE_ENV", raising=False)


@pytest.fixture
def stacked() -> StackedShoes:
    return StackedShoes()


@pytest.fixture
def harness(database_url: str, env: None, stacked: StackedShoes) -> Iterator[Harness]:
    h = Harness(database_url, SeedVault(secrets.token_bytes(32)), SigningKey.generate(), stacked)
    yield h
    h.storage.close()


def ledger_invariants(h: Harness) -> None:
    """Double-entry checks straight from the tables: each account's balance is the sum of its
    entries; each (operator, currency, mode) sums to zero; each round's house result is its
    stakes minus its returns, and equals what its record says."""
    for op, holder, cur, mode, balance in h.sql(
            "SELECT operator, holder, currency, mode, balance FROM accounts"):
        (inflow,), = h.sql("SELECT COALESCE(SUM(amount), 0) FROM ledger_entries WHERE operator = ?"
                           " AND target = ? AND currency = ? AND mode = ?", op, holder, cur, mode)
        (outflow,), = h.sql("SELECT COALESCE(SUM(amount), 0) FROM ledger_entries WHERE operator = "
                            "? AND source = ? AND currency = ? AND mode = ?", op, holder, cur, mode)
        assert balance == inflow - outflow, (holder, mode)
    for total, in h.sql("SELECT SUM(balance) FROM accounts GROUP BY operator, currency, mode"):
        assert total == 0
    for round_id, stakes, returns in h.sql(
            "SELECT round_id, SUM(CASE kind WHEN 'stake' THEN amount ELSE 0 END), "
            "SUM(CASE kind WHEN 'return' THEN amount ELSE 0 END) FROM ledger_entries "
            "WHERE round_id IS NOT NULL GROUP BY round_id"):
        (house,), = h.sql("SELECT COALESCE(SUM(CASE WHEN substr(target, 1, 6) = '@house' "
                          "THEN amount ELSE -amount END), 0) FROM ledger_entries "
                          "WHERE round_id = ?", round_id)
        assert house == stakes - returns
