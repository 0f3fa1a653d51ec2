"""The seamless-wallet tests' fixtures: the reference operator wallet as a process, on each of its
faces (gRPC and signed HTTP JSON), and a :class:`Seamless` harness whose operator keeps its real
money there, with the outbox's dispatcher; and the checks those tests share (a round void before
its deal, the signed record, the offline audit, the outbox settled)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from game_math.round import HandBet
from rng_service.api.wallet_clients import WalletClients
from rng_service.audit.verifier import audit_paths
from rng_service.crypto.signing import decode_envelope
from rng_service.records.schema import REVEALS_SUBDIR, ROUNDS_SUBDIR, write_file
from rng_service.service import outbox
from rng_service.service.dispatcher import OutboxDispatcher
from rng_service.service.operators import MAX_WALLET_TIMEOUT_MS, set_wallet
from rng_service.service.ports import Mode
from rng_service.service.rounds import RoundService
from rng_service.service.views import RoundView
from support.engine_helpers import stack
from support.ref_wallet import RefWallet
from support.service_helpers import EUR, OP, Harness

SNAP_19_V_17 = stack("snap", [["TS", "9H"]], ["7D", "TC"])


#: the operator's wallet timeout: a loaded machine must not turn an answer into an uncertain one
#: (the most the configuration allows; the tests of a timeout set their own)
TIMEOUT_MS = MAX_WALLET_TIMEOUT_MS


@pytest.fixture(scope="module", params=["grpc", "http"])
def ref_wallet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[RefWallet]:
    """The reference wallet's face for the transport: gRPC, or HTTP (signed JSON)."""
    ref = RefWallet(tmp_path_factory.mktemp(f"ref-wallet-{request.param}"),
                    http=request.param == "http").start()
    yield ref
    ref.stop()


@pytest.fixture
def wallet(ref_wallet: RefWallet) -> Iterator[RefWallet]:
    if not ref_wallet.running():
        ref_wallet.start()
    ref_wallet.faults()
    yield ref_wallet
    ref_wallet.faults()


class Seamless:
    """The harness's operator on the reference wallet, with the outbox's dispatcher (its passes
    run by the test)."""

    def __init__(self, h: Harness, wallet: RefWallet) -> None:
        self.h, self.wallet = h, wallet
        self.player = f"p{uuid.uuid4().hex[:10]}"
        self.configure(TIMEOUT_MS)
        self.open()

    def configure(self, timeout_ms: int) -> None:
        """The operator on the reference wallet's face, its calls timing out after
        ``timeout_ms`` (the wallet directory makes a new client when this changes)."""
        w = self.wallet
        set_wallet(self.h.storage, OP, "http" if w.http else "grpc", endpoint=w.endpoint,
                   timeout_ms=timeout_ms, hmac_secret=str(w.hmac_secret) if w.http else "")

    @property
    def unavailable(self) -> str:
        """The cause the outbox records for the wallet's ``error`` fault (UNAVAILABLE over
        gRPC, 503 over HTTP)."""
        return "HTTP status 503" if self.wallet.http else "status UNAVAILABLE"

    def open(self) -> None:
        self.wallets = WalletClients()
        self.h.rounds = RoundService(self.h.storage, vault=self.h.vault, signer=self.h.signer,
                                     shoe_source=self.h.shoes, wallets=self.wallets)
        self.dispatcher = OutboxDispatcher(self.h.storage, self.wallets)

    def reopen(self) -> None:
        """As after a restart of the server."""
        self.wallets.close()
        self.h.reopen()
        self.open()

    def start(self, bet: int = 1000, *, request_id: str | None = None,
              mode: Mode = Mode.REAL, side_bets: dict[str, int] | None = None,
              hands: int = 1) -> RoundView:
        return self.h.rounds.start_round(OP, self.player, "snap", mode=mode, currency=EUR,
                                         hands=[HandBet(bet)] * hands, side_bets=side_bets,
                                         request_id=request_id or self.h.rid())

    def movements(self, round_id: str | None = None) -> list[tuple[str, str, int]]:
        where = "round_id = ?" if round_id else "player = ?"
        return [(k, s, a) for k, s, a in self.h.sql(
            f"SELECT kind, state, amount FROM wallet_movements WHERE {where} "
            "ORDER BY created_at", round_id or self.player)]

    def purposes(self, round_id: str) -> list[str]:
        """The purposes of the round's debits, oldest first."""
        return [p for p, in self.h.sql("SELECT purpose FROM wallet_movements WHERE round_id = ? "
                                       "AND kind = 'debit' ORDER BY created_at", round_id)]


@pytest.fixture
def seamless(harness: Harness, wallet: RefWallet) -> Iterator[Seamless]:
    s = Seamless(harness, wallet)
    yield s
    s.wallets.close()


def rounds_stored(h: Harness) -> int:
    return int(h.sql("SELECT count(*) FROM rounds")[0][0])


def void_unstarted(s: Seamless, staked: int) -> dict[str, Any]:
    """The player's one round, void without a card dealt: its signed record (naming the stake,
    returned), its shoe revealed, no credit written for it (the rollback returns the stake),
    and the offline audit passes it."""
    h = s.h
    (round_id, status), = h.sql("SELECT round_id, status FROM rounds WHERE player = ?", s.player)
    assert status == "void"
    (envelope,), = h.sql("SELECT envelope FROM records WHERE round_id = ?", round_id)
    payload: dict[str, Any] = decode_envelope(bytes(envelope))["payload"]
    assert (payload["status"], payload["cards"], payload["actions"]) == ("void", [], [])
    assert payload["shoe"]["start"] == payload["shoe"]["end"]
    assert payload["total_staked"] == payload["total_returned"] == staked
    assert payload["void_reason"] == outbox.VOID_UNCONFIRMED
    assert [k for k, _, _ in s.movements(round_id)].count("credit") == 0
    view = h.rounds.get_round(OP, round_id)
    assert (view.status, view.total_staked, view.credit) == ("void", staked, None)
    wallet = payload["wallet"]  # no stake taken: each one cancelled and rolled back
    assert (wallet["debits"], wallet["credit"]) == ([], None)
    assert sum(d["amount"] for d in wallet["cancelled"]) == staked
    assert sorted(r["debit"] for r in wallet["rollbacks"]) == sorted(
        d["transaction_id"] for d in wallet["cancelled"])
    return payload


def record(h: Harness, round_id: str) -> dict[str, Any]:
    """The round's signed record's payload."""
    (envelope,), = h.sql("SELECT envelope FROM records WHERE round_id = ?", round_id)
    payload: dict[str, Any] = decode_envelope(bytes(envelope))["payload"]
    return payload


def audit(h: Harness, where: Path) -> list[tuple[str, str]]:
    """The offline audit of every record and reveal: the findings not OK."""
    for sub in (ROUNDS_SUBDIR, REVEALS_SUBDIR):
        (where / sub).mkdir(parents=True)
    for round_id, envelope in h.sql("SELECT round_id, envelope FROM records"):
        write_file(where / ROUNDS_SUBDIR / f"{round_id}.json", bytes(envelope))
    for shoe_id, envelope in h.sql("SELECT shoe_id, envelope FROM reveals"):
        write_file(where / REVEALS_SUBDIR / f"{shoe_id}.json", bytes(envelope))
    report = audit_paths([where], {h.signer.key_id: h.signer.public_key})
    assert report.count("round") == len(h.sql("SELECT 1 FROM records"))
    return [(f.status.value, f.ident) for f in report.findings if f.status.value != "OK"]


#: how long the outbox may take to settle once the wallet answers again (a bound, not a
#: measurement: a gRPC channel reconnects within a second, a loaded machine takes longer)
SETTLE_BOUND_S = 60.0


def unsettled(s: Seamless) -> list[tuple[str, str, str]]:
    """The player's movements still pending or uncertain: (transaction id, kind, state)."""
    return [(t, k, st) for t, k, st in s.h.sql(
        "SELECT transaction_id, kind, state FROM wallet_movements WHERE player = ? AND "
        "state IN ('pending', 'uncertain') ORDER BY created_at", s.player)]


def settle(s: Seamless) -> None:
    """Run the dispatcher, every pending movement due at once, until the player's movements
    are all settled (the wallet answering again: a reconnecting client's first call may still
    fail, and is retried)."""
    bound = time.monotonic() + SETTLE_BOUND_S
    while unsettled(s):
        assert time.monotonic() < bound, f"not settled: {unsettled(s)}"
        s.h.sql("UPDATE wallet_movements SET next_attempt_at = '2000-01-01T00:00:00.000000Z' "
                "WHERE state = 'pending'")
        if not s.dispatcher.run_once():
            time.sleep(0.05)
