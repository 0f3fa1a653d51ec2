"""The crash tests' players (tests/api/test_crash.py, test_crash_seamless.py): client threads
that each play complete rounds of every game and move money in and out, send a call again with
the same request id whenever the server was killed under it, and log every acknowledged answer
(``Harness``) for the checks after each restart."""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import grpc

from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2
from support.error_details import reason_of
from support.live_server import DEMO, EUR, REAL, Client, ServerProcess

GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")
#: how long the players play between two kills, drawn at random in this range (seconds)
PLAY_SECONDS = (0.02, 0.3)
#: one call's deadline: a restart under load takes seconds
CALL_TIMEOUT = 20.0
Code = grpc.StatusCode

ACTION_NAMES = {rt.ACTION_KIND_HIT: "hit", rt.ACTION_KIND_STAND: "stand",
                rt.ACTION_KIND_DOUBLE: "double", rt.ACTION_KIND_SPLIT: "split",
                rt.ACTION_KIND_INSURANCE: "insurance", rt.ACTION_KIND_EVEN_MONEY: "even_money"}


@dataclass(frozen=True)
class Ack:
    """One acknowledged answer: ``kind`` start/act (round id, version, the decision as the
    engine stores it) or deposit/withdrawal (transaction id, amount, request id)."""

    kind: str
    ident: str
    version: int = 0
    action: Any = None
    amount: int = 0
    request_id: str = ""


def stored_action(action: Any) -> tuple[str, int | None, bool | None]:
    """An engine action's JSON (``"hit"`` or ``{"action": ..., ...}``) as a comparable tuple."""
    if isinstance(action, str):
        return action, None, None
    return action["action"], action.get("amount"), action.get("accept")


class Harness:
    """The server process, the current connection to it, and the client-side log."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.up = threading.Event()
        self.stopping = threading.Event()
        self.generation = 0
        self.conn: Client | None = None
        self.lock = threading.Lock()
        self.acks: list[Ack] = []
        self.restarts: list[float] = []

    def start(self) -> None:
        began = time.perf_counter()
        self.server.start()
        self.restarts.append(time.perf_counter() - began)
        self.conn = self.server.client()
        self.generation += 1

    def kill(self) -> None:
        self.up.clear()  # before the kill: every failure it causes finds the server down
        self.server.kill()

    def connection(self) -> tuple[int, Client]:
        if not self.up.wait(timeout=120):
            raise TimeoutError("the server stayed down")
        generation, conn = self.generation, self.conn
        assert conn is not None
        return generation, conn

    def interrupted(self, generation: int) -> bool:
        return not self.up.is_set() or self.generation != generation

    def ack(self, entry: Ack) -> None:
        with self.lock:
            self.acks.append(entry)


class Player:
    """One client thread playing as ``name`` (see the module docstring). The account's money is
    the service's own (deposits, withdrawals, demo and real rounds); a subclass whose money is
    elsewhere (the seamless wallet's crash test) overrides the hooks marked so below."""

    def __init__(self, harness: Harness, name: str, seed: int) -> None:
        self.harness = harness
        self.name = name
        self.rng = random.Random(seed)
        self.ids = 0
        self.error: str | None = None
        self.retries = 0
        self.refusals: dict[str, int] = defaultdict(int)
        self.rounds = 0
        self.actions = 0
        self.real_expected = 0  # the real balance the acknowledged answers add up to
        # the double-exposure shoe of the last such round, per mode (demo and real money never
        # share a shoe)
        self.de_shoes: dict[int, str] = {}
        self.round_ids: list[str] = []  # every acknowledged start's round, in order
        self.thread = threading.Thread(target=self.run, name=name, daemon=True)

    def rid(self) -> str:
        self.ids += 1
        return f"{self.name}-{self.ids}"

    def call(self, service: str, method: str, request: Any) -> Any:
        """``request`` until it is answered: sent again, as it is, whenever the server was
        killed under it (or refuses with UNAVAILABLE)."""
        busy = 0
        while True:
            generation, conn = self.harness.connection()
            stub = getattr(conn, service)
            try:
                return getattr(stub, method)(request, timeout=CALL_TIMEOUT)
            except grpc.RpcError as exc:
                if self.harness.interrupted(generation):
                    self.retries += 1
                    continue
                if self.busy(exc) and busy < 50:
                    busy += 1
                    self.retries += 1
                    time.sleep(0.02)
                    continue
                raise
            except ValueError:  # "Cannot invoke RPC on closed channel!"
                if self.harness.interrupted(generation):
                    self.retries += 1
                    continue
                raise

    def run(self) -> None:
        try:
            self.open_account()
            while not self.harness.stopping.is_set():
                self.step()
            # every double-exposure shoe played to its cut card, so each record's shoe is revealed
            for mode, shoe_id in self.de_shoes.items():
                while shoe_id == self.next_shoe("double-exposure", mode):
                    self.play_round("double-exposure", mode=mode)
        except BaseException:
            self.error = traceback.format_exc()

    # --- hooks: what a subclass whose money is elsewhere changes ---------------------------

    def busy(self, exc: grpc.RpcError) -> bool:
        """A refusal to send again as it is (after a pause): UNAVAILABLE, e.g. the database busy."""
        return exc.code() is Code.UNAVAILABLE

    def open_account(self) -> None:
        self.deposit(self.rng.randrange(20_000, 100_000, 100))

    def step(self) -> None:
        """One thing a player does between two looks at the harness: mostly a round."""
        draw = self.rng.random()
        if draw < 0.08:
            self.deposit(self.rng.randrange(1_000, 50_000, 100))
        elif draw < 0.14:
            self.withdraw(self.rng.randrange(1_000, 30_000, 100))
        else:
            self.play_round(self.rng.choice(GAMES))

    def pick_mode(self) -> int:
        return REAL if self.rng.random() < 0.8 else DEMO

    def start_refused(self, exc: grpc.RpcError) -> bool:
        """Whether a refused StartRound is one the player answers (and how): the balance short."""
        if exc.code() is Code.FAILED_PRECONDITION and reason_of(exc) == "INSUFFICIENT_FUNDS":
            self.refusals["start INSUFFICIENT_FUNDS"] += 1
            self.deposit(50_000)
            return True
        return False

    def settled(self, view: rt.RoundView, mode: int) -> None:
        """A round played to its end: real money's balance is what the answers add up to."""
        if mode == REAL:
            self.real_expected += view.total_returned_minor - view.total_staked_minor
            assert view.balance_after_minor == self.real_expected, (view, self.real_expected)

    def act_refused(self, exc: grpc.RpcError, view: rt.RoundView) -> rt.RoundView | None:
        """The view after a refused Act the player answers (None: not one it answers).

        A stake the balance cannot cover (a legal action's range is the rules', not the
        wallet's) is refused with nothing changed: decide again on the same view, declining."""
        if exc.code() is not Code.FAILED_PRECONDITION or reason_of(exc) != "INSUFFICIENT_FUNDS":
            return None
        self.refusals["act INSUFFICIENT_FUNDS"] += 1
        narrowed = rt.RoundView()
        narrowed.CopyFrom(view)
        plain = [la for la in view.legal_actions if la.action in (
            rt.ACTION_KIND_STAND, rt.ACTION_KIND_EVEN_MONEY) or (
            la.action == rt.ACTION_KIND_INSURANCE and 0 in la.stakes_minor)]
        assert plain, view
        for la in plain:  # declines only: insurance 0
            if la.action == rt.ACTION_KIND_INSURANCE:
                la.any_amount, la.max_stake_minor = False, 0
                del la.stakes_minor[:]
                la.stakes_minor.append(0)
        del narrowed.legal_actions[:]
        narrowed.legal_actions.extend(plain)
        return self.act(narrowed)

    # --- the wallet ----------------------------------------------------------------------

    def deposit(self, amount: int) -> None:
        rid = self.rid()
        request = wallet_pb2.DepositRequest(account=Client.account(self.name),
                                            amount_minor=amount, request_id=rid)
        tx = self.call("wallet", "Deposit", request).transaction
        assert tx.amount_minor == amount and tx.request_id == rid, tx
        self.real_expected += amount
        assert tx.balance_after_minor == self.real_expected, (tx, self.real_expected)
        self.harness.ack(Ack("deposit", tx.transaction_id, amount=amount, request_id=rid))

    def withdraw(self, amount: int) -> None:
        rid = self.rid()
        request = wallet_pb2.WithdrawRequest(account=Client.account(self.name),
                                             amount_minor=amount, request_id=rid)
        try:
            tx = self.call("wallet", "Withdraw", request).transaction
        except grpc.RpcError as exc:
            if exc.code() is Code.FAILED_PRECONDITION and reason_of(exc) == "INSUFFICIENT_FUNDS":
                assert amount > self.real_expected, (amount, self.real_expected)
                self.refusals["withdraw INSUFFICIENT_FUNDS"] += 1
                return
            raise
        assert tx.amount_minor == -amount and tx.request_id == rid, tx
        self.real_expected -= amount
        assert tx.balance_after_minor == self.real_expected, (tx, self.real_expected)
        self.harness.ack(Ack("withdrawal", tx.transaction_id, amount=-amount, request_id=rid))

    def next_shoe(self, game: str, mode: int) -> str:
        request = round_pb2.GetNextShoeRequest(player_id=self.name, game=game,
                                               mode=mode)  # type: ignore[arg-type]
        return str(self.call("rounds", "GetNextShoe", request).shoe.shoe_id)

    # --- rounds --------------------------------------------------------------------------

    def bets(self, game: str) -> tuple[list[rt.HandBet], list[rt.SideBetStake]]:
        rng = self.rng
        bet = rng.choice((1000, 2000))
        if game == "snap":
            count = rng.choice((1, 2))
            side = ([rt.SideBetStake(name="snap", stake_minor=500)]
                    if count == 2 and rng.random() < 0.5 else [])
            return [rt.HandBet(bet_minor=bet) for _ in range(count)], side
        if game == "multi-hand":
            hands = []
            for _ in range(rng.choice((1, 3))):
                sides = [rt.SideBetStake(name=name, stake_minor=100)
                         for name in ("perfect_pairs", "twenty_one_plus_three")
                         if rng.random() < 0.3]
                hands.append(rt.HandBet(bet_minor=bet, side_bets=sides))
            return hands, []
        count = rng.choice((1, 2))
        return [rt.HandBet(bet_minor=bet) for _ in range(count)], []

    def play_round(self, game: str, mode: int | None = None) -> None:
        if mode is None:
            mode = self.pick_mode()
        hands, side_bets = self.bets(game)
        request = round_pb2.StartRoundRequest(
            player_id=self.name, game=game, mode=mode, currency=EUR,  # type: ignore[arg-type]
            hands=hands, side_bets=side_bets, request_id=self.rid())
        try:
            view = self.call("rounds", "StartRound", request).round
        except grpc.RpcError as exc:
            if self.start_refused(exc):
                return
            raise
        assert view.version == 1, view
        self.harness.ack(Ack("start", view.round_id, 1))
        self.round_ids.append(view.round_id)
        if game == "double-exposure":
            self.de_shoes[mode] = view.shoe.shoe_id
        while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            view = self.act(view)
        assert view.status in (rt.ROUND_STATUS_FINISHED, rt.ROUND_STATUS_VOID), view.status
        self.settled(view, mode)
        self.rounds += 1

    def act(self, view: rt.RoundView) -> rt.RoundView:
        action, stored = self.choose(view)
        request = round_pb2.ActRequest(player_id=self.name, round_id=view.round_id,
                                       hand_id=view.turn.hand_id, action=action,
                                       expected_version=view.version, request_id=self.rid())
        try:
            after = self.call("rounds", "Act", request).round
        except grpc.RpcError as exc:
            again = self.act_refused(exc, view)
            if again is None:
                raise
            return again
        assert after.round_id == view.round_id and after.version == view.version + 1, after
        self.actions += 1
        self.harness.ack(Ack("act", after.round_id, after.version, stored))
        return after

    def choose(self, view: rt.RoundView) -> tuple[rt.PlayerAction, tuple[Any, ...]]:
        """A random legal action (standing more likely on a high total, to keep rounds short),
        and the decision as the engine stores it."""
        hand = next((h for h in view.hands if h.hand_id == view.turn.hand_id), None)
        legal = list(view.legal_actions)
        assert legal, view
        kinds = {la.action: la for la in legal}
        if (hand is not None and hand.total >= 17 and rt.ACTION_KIND_STAND in kinds
                and self.rng.random() < 0.85):
            pick = kinds[rt.ACTION_KIND_STAND]
        else:
            pick = self.rng.choice(legal)
        name = ACTION_NAMES[pick.action]
        if pick.action == rt.ACTION_KIND_HIT:
            return rt.PlayerAction(hit=rt.PlayerAction.Hit()), (name, None, None)
        if pick.action == rt.ACTION_KIND_STAND:
            return rt.PlayerAction(stand=rt.PlayerAction.Stand()), (name, None, None)
        if pick.action == rt.ACTION_KIND_SPLIT:
            return rt.PlayerAction(split=rt.PlayerAction.Split()), (name, None, None)
        if pick.action == rt.ACTION_KIND_EVEN_MONEY:
            accept = self.rng.random() < 0.5
            return (rt.PlayerAction(even_money=rt.PlayerAction.EvenMoney(accept=accept)),
                    (name, None, accept))
        amount = self.stake(pick)
        if pick.action == rt.ACTION_KIND_DOUBLE:
            return (rt.PlayerAction(double=rt.PlayerAction.Double(amount_minor=amount)),
                    (name, amount, None))
        return (rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=amount)),
                (name, amount, None))

    def stake(self, legal: rt.LegalAction) -> int:
        if legal.any_amount:
            return self.rng.choice((legal.min_stake_minor, legal.max_stake_minor))
        return int(self.rng.choice(list(legal.stakes_minor)))
