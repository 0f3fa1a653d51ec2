"""Live rounds: start, act, void, read, list; the player's next shoe and client seed; recovery.

Each use case is one write transaction (:meth:`Storage.transaction`) in which one round
transition, its ledger entries, its shoe's new position and, when the round ends, its signed
record (and the shoe's signed reveal when the shoe is finished) commit together with the stored
answer for the request id. An answer is returned only after that commit, so a SIGKILL at any
moment either loses the whole transition (the client never saw it and retries with the same
request id) or none of it.

The live cache (:mod:`.live_cache`) spares a transition the restore (unsealing the seed,
re-deriving the shuffle, replaying the actions) when this process made the round's last
transition: the cached round is used only if the stored round is the one this process committed,
which a transaction checks either by reading the round row (its version and state bytes) or, in
``act``, by the round's own write (``UPDATE ... WHERE`` version and state bytes, the
transaction's first write); otherwise the round is restored from the rows, and an action
refused on the cached copy before that write confirmed it is decided again on them. The database
stays the only authority, so any replica can continue any round, and a cache entry is kept only
after its transaction commits.

A ``StartRound`` does not read for an open round of its game before its work: the round's INSERT
refuses a second one (a unique index on open rounds; a round settled at once is stored finished,
out of that index, so such a start looks after its deal), so only a refused start pays twice:
its refusal (from that INSERT or anything before it) is decided again in a transaction that looks
first, and the answer is the one looking first gives (``ROUND_IN_PROGRESS`` before the stake or
the bet).

Shoes. A game whose rules shuffle every round deals each round from a fresh shoe; a cut-card game
(double-exposure) deals a player's rounds from one shoe until the cut card comes out, its
position stored between rounds. Either way the player's *next* shoe is created, its seed sealed
and its commitment stored by :meth:`RoundService.get_next_shoe` (or at the latest when a round
needs it) before any card, and the client seed may be set only while no card has been dealt. A
player has at most one open round per game (a unique index), so one round at a time deals from a
cut-card shoe. A finished shoe is revealed (signed) in the transaction that finishes it. Demo and
real rounds deal from separate shoes (a shoe has a mode): demo play never shows a card of a shoe
real money is bet on, so it cannot be used to count that shoe before betting real money.

Errors (all from :mod:`rng_service.core.errors`):

* bets the game refuses (outside the level's limits, not whole chips, an unknown side bet, a
  hand count the game does not play): ``InvalidInput`` reason ``INVALID_BET`` naming the field
  as the request names it (``hands[0].bet_minor``, ``hands[0].side_bets[1]``). Limits are fixed
  by the game and level, which the client knows before it asks, so they are the request's
  fault, not the state's. The arguments' form (ids, amounts, the action's stake) is checked by
  the caller, once, under the request's names (the API's edge, with :mod:`.validate`): the use
  cases take typed values (``Action``, ``HandBet``) as checked.
* unknown operator, game or round: ``NotFound``.
* refused in the current state: ``IllegalState`` with reason ``INSUFFICIENT_FUNDS``,
  ``ROUND_IN_PROGRESS``, ``ROUND_FINISHED``, ``ILLEGAL_ACTION`` (the engine's message says why),
  ``NOT_THIS_HAND``, ``WAGER_SETTLED`` (void), ``NO_COMMITTED_SHOE``, ``NOT_THE_NEXT_SHOE``,
  ``CLIENT_SEED_LOCKED``.
* ``expected_version`` not the round's: ``Conflict`` reason ``STALE_VERSION`` (the message gives
  the current version); a lost race detected at write time: ``Conflict`` ``CONCURRENT_UPDATE``.
* the RNG has failed its self-test: ``Unavailable`` reason ``RNG_SELF_TEST_FAILED`` for anything
  that may deal (a new round, a new shoe, a decision in an open round) until a restart.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from game_math.cards import CardError
from game_math.errors import IllegalAction
from game_math.round import Action, HandBet, Phase, Round
from game_math.rules import Rules
from rng_service.core import config
from rng_service.core.errors import (
    Conflict,
    IllegalState,
    IntegrityFailure,
    InvalidInput,
    NotFound,
    Unavailable,
    quote,
)
from rng_service.core.frozen import quick_replace
from rng_service.crypto.keys import ActiveKey, KeyStore, SigningKey
from rng_service.crypto.signing import sign_and_encode
from rng_service.records.schema import ShoeRef, reveal_payload, round_payload, rules_digest
from rng_service.rng.seed_vault import SeedVault
from rng_service.rng.shoe import ClientSeedLocked, Shoe
from rng_service.service import idempotency, ledger, outbox, shoes, validate
from rng_service.service.live_cache import CachedRound, LiveCache
from rng_service.service.observe import (
    NullObserver,
    Observer,
    Pending,
    RoundFinished,
    RoundStarted,
    ShoeOpened,
    ShoeRevealed,
    WagerTotals,
)
from rng_service.service.operator_wallet import (
    WalletConfig,
    WalletDirectory,
    WalletKind,
)
from rng_service.service.ports import (
    AccountKey,
    LeafKind,
    Mode,
    RoundCursor,
    RoundRow,
    RoundStatus,
    RoundWallet,
    ShoeRow,
    ShoeStatus,
    Storage,
    UnitOfWork,
    utc_now,
)
from rng_service.service.round_parts import (
    Bets,
    Live,
    StartRequest,
    deal,
    decode_round,
    no_open_round,
)
from rng_service.service.round_seamless import (
    PURPOSES,
    NeedsDebit,
    SeamlessRounds,
    credit_view,
    require_debit,
    wallet_record,
)
from rng_service.service.shoes import OsShoeSource, ShoeSource
from rng_service.service.translog import LogWriter, Signers
from rng_service.service.views import (
    RoundContext,
    RoundPage,
    RoundView,
    ShoeRefView,
    ShoeView,
    from_json,
    round_view,
    to_json,
)

log = structlog.get_logger("fairshoe.rounds")



def _decode_shoe(data: bytes) -> ShoeView:
    return from_json(ShoeView, data)


class _Seamless(Exception):  # a signal inside the service, never raised out of it
    """Raised inside a StartRound's transaction (rolling it back) when the operator's real money
    is in its seamless wallet: the round is started the seamless way instead."""

    def __init__(self, config: WalletConfig) -> None:
        super().__init__(config.operator)
        self.config = config


@dataclass(frozen=True)
class RecoveryReport:
    """What startup recovery did: the ids of the rounds it finished and the shoes it
    revealed."""

    completed_rounds: tuple[str, ...]  # open rounds that needed no input, now finished
    revealed_shoes: tuple[str, ...]  # finished shoes whose reveal was missing


class RoundService(SeamlessRounds):
    """The round use cases the gRPC layer calls. Thread-safe: it holds no per-request state."""

    def __init__(self, storage: Storage, *, vault: SeedVault, signer: SigningKey | ActiveKey,
                 shoe_source: ShoeSource | None = None,
                 demo_funding: int = ledger.DEMO_FUNDING,
                 environ: Mapping[str, str] | None = None,
                 observer: Observer | None = None, cache: LiveCache | None = None,
                 key_valid_from: str | None = None,
                 wallets: WalletDirectory | None = None,
                 on_outbox: Callable[[], None] | None = None,
                 debit_grace: float = outbox.DEBIT_GRACE_SECONDS) -> None:
        """``observer`` is told what each committed transaction did (rounds started and
        finished with their money, shoes opened and revealed): see :mod:`.observe`. ``cache``
        keeps live rounds and shoes between transitions (:mod:`.live_cache`; default a new
        one of the default size, ``LiveCache(0)`` for none). ``signer`` is a fixed key, or the
        key store's active key followed through rotations; ``key_valid_from``: when a fixed key
        began to sign (for its key leaf in the log). ``wallets`` gives the clients of operators
        on the seamless wallet (without it their real-money rounds are refused UNAVAILABLE);
        ``on_outbox`` is called once a movement the dispatcher sends is committed (it wakes it);
        ``debit_grace``: see :data:`.outbox.DEBIT_GRACE_SECONDS`."""
        source = shoe_source if shoe_source is not None else OsShoeSource()
        if not source.certified and not config.test_shoes_allowed(environ):
            raise config.ConfigError(
                f"an uncertified shoe source deals only with {config.TEST_SHOES_ENV}=1 (tests)")
        self._storage = storage
        self._vault = vault
        self._signers = Signers(signer, valid_from=key_valid_from)
        self._shoes = source
        self._demo_funding = demo_funding
        self._observer: Observer = observer if observer is not None else NullObserver()
        self._cache = cache if cache is not None else LiveCache()
        self._wallets = wallets
        self._on_outbox = on_outbox if on_outbox is not None else _nothing
        self._debit_grace = debit_grace

    @property
    def _log(self) -> LogWriter:
        """The signer and log writer of the key that signs now (a rotation takes effect at the
        next record, reveal or commitment signed)."""
        return self._signers.current()

    @classmethod
    def from_config(cls, storage: Storage) -> RoundService:
        """Production wiring: the configured seed vault, the key store's active signing key and
        OS-seeded shoes."""
        return cls(storage, vault=SeedVault.from_config(), signer=ActiveKey(KeyStore()))

    # --- rounds ----------------------------------------------------------------------------

    def start_round(self, operator: str, player: str, game: str, *, level: str | None = None,
                    mode: Mode | str, currency: str, hands: Sequence[HandBet],
                    side_bets: Mapping[str, int] | None = None, request_id: str) -> RoundView:
        """Place the bets, deal from the player's shoe and settle what is known at once.

        The ids and bets come checked (see the module's docstring); the game's limits, the
        operator and the balance are checked here."""
        who, cur, how, rid = player, currency, validate.mode(mode), request_id
        rules = validate.game(game)
        bets, side = list(hands), dict(side_bets or {})
        params = {"player": who, "game": rules.game, "level": level, "mode": str(how),
                  "currency": cur, "side_bets": side,
                  "hands": [{"bet": hb.bet, "side_bets": dict(hb.side_bets)} for hb in bets]}
        def run(pending: Pending, *, look_first: bool) -> RoundView:
            return idempotency.run(
                self._storage, operator=partial(validate.operator, operator), request_id=rid,
                operation="start_round", params=params, encode=to_json, decode=decode_round,
                work=lambda uow, op: self._start(uow, AccountKey(op, who, cur, how), rules,
                                                 Bets(level, bets, side), rid,
                                                 pending=pending, look_first=look_first),
                discard=pending.discard)

        pending = Pending()
        try:
            try:
                view = run(pending, look_first=False)
            except (InvalidInput, NotFound, IllegalState, Conflict, Unavailable) as refused:
                if isinstance(refused, Unavailable) and refused.reason != "RNG_SELF_TEST_FAILED":
                    raise  # the database's: looking first needs the same database
                # refused without looking for an open round first (the round's INSERT found
                # one, or another refusal came first): decide again, looking first, so the
                # answer is what it would have been (an open round is named before the rest)
                pending = Pending()
                view = run(pending, look_first=True)
        except _Seamless as seamless:
            pending = Pending()
            account = AccountKey(seamless.config.operator, who, cur, how)
            view = self._start_seamless(seamless.config, StartRequest(
                account, rules, Bets(level, bets, side), rid, params), pending)
        pending.deliver(self._observer)  # committed (a replayed answer noted nothing)
        return view

    def act(self, operator: str, round_id: str, action: Action, *, hand_id: int | None = None,
            expected_version: int, request_id: str, player: str | None = None) -> RoundView:
        """Apply the player's decision to the round at ``expected_version``.

        ``hand_id``, when given, must be the hand whose decision is awaited (a client acting on a
        view of another hand is refused rather than misapplied). With ``player``, a round of
        another player is NotFound (as in :meth:`get_round`). The arguments come checked (see
        the module's docstring); an action the round cannot take is ILLEGAL_ACTION.
        """
        rid, version, round_key, who = request_id, expected_version, round_id, player
        params = {"round_id": round_key, "action": action.to_json(), "hand_id": hand_id,
                  "expected_version": version}
        if who is not None:  # only when given, so the hash of a request without it is unchanged
            params["player"] = who

        def work(uow: UnitOfWork, op: str) -> RoundView:
            # any decision may deal (a hit, the dealer's turn after it): none on a failed RNG;
            # here, so a retry of a decision answered before the failure still gets its answer
            shoes.require_rng()
            kept = self._cache.take_unread(op, round_key, version, player=who)
            if kept is not None and kept.row is not None:  # this process's last transition
                live = Live(kept.row, kept.shoe_row, kept.shoe, kept.rnd, posted=kept.posted,
                            unconfirmed=True)
                try:
                    return step(uow, live)
                except (IllegalState, InvalidInput, Conflict, NotFound, _Unconfirmed):
                    if not live.unconfirmed:  # decided on the stored round: it stands
                        raise
                # the copy was not the stored round, or refused the action before the write
                # said it was: decide again on the stored round (nothing was written)
            return step(uow, self._live(uow, op, round_key, version, player=who))

        def step(uow: UnitOfWork, live: Live) -> RoundView:
            turn = live.rnd.turn
            if hand_id is not None and hand_id != turn.hand:
                raise IllegalState(f"hand {hand_id} is not awaiting a decision; hand "
                                   f"{turn.hand} is", reason="NOT_THIS_HAND",
                                   metadata={"hand_id": hand_id, "turn_hand_id": turn.hand})
            staked = live.rnd.total_staked
            try:
                live.rnd.act(action)
            except IllegalAction as exc:
                raise IllegalState(str(exc), reason="ILLEGAL_ACTION",
                                   metadata=exc.metadata) from None
            extra = live.rnd.total_staked - staked
            if live.row.wallet is RoundWallet.SEAMLESS and extra > 0:
                require_debit(uow, live.row, rid, extra, PURPOSES.get(action.kind))
            return self._commit(uow, live, rid, pending)

        pending = Pending()
        try:
            view = idempotency.run(self._storage, operator=partial(validate.operator, operator),
                                   request_id=rid, operation="act", params=params, work=work,
                                   encode=to_json, decode=decode_round,
                                   discard=pending.discard)
        except NeedsDebit as needed:  # nothing was written: debit the stake, then act
            pending = Pending()
            view = self._act_seamless(needed, params, work, pending.discard)
        pending.deliver(self._observer)
        return view

    def void_round(self, operator: str, round_id: str, *, reason: str, expected_version: int,
                   request_id: str) -> RoundView:
        """Void a round in which no wager is settled yet: every stake is returned, the round is
        recorded void, and its shoe is finished and revealed (no further round deals from a shoe
        whose round was interrupted)."""
        rid, version = validate.request_id(request_id), validate.version(expected_version)
        round_key, why = validate.round_id(round_id), validate.reason(reason)

        def work(uow: UnitOfWork, op: str) -> RoundView:
            live = self._live(uow, op, round_key, version)
            settled = [w.id for w in live.rnd.wagers if w.returned is not None]
            if settled:
                raise IllegalState(f"wager {settled[0]} is settled; only a round with no settled "
                                   "wager can be voided", reason="WAGER_SETTLED")
            live.rnd.void(why)
            return self._commit(uow, live, rid, pending)

        params = {"round_id": round_key, "reason": why, "expected_version": version}
        pending = Pending()
        view = idempotency.run(self._storage, operator=partial(validate.operator, operator),
                               request_id=rid, operation="void_round", params=params, work=work,
                               encode=to_json, decode=decode_round, discard=pending.discard)
        pending.deliver(self._observer)
        return view

    def get_round(self, operator: str, round_id: str, *, player: str | None = None) -> RoundView:
        """The round as the player may see it now (``balance_after``: the current balance).
        With ``player``, a round of another player is NotFound."""
        round_key = round_id
        with self._storage.snapshot() as uow:
            op = validate.operator(operator, uow)
            row = uow.get_round(op, round_key)
            if row is None or (player is not None and row.player != player):
                raise NotFound("round_id", f"no round {round_key}")
            return self._read_view(uow, row)

    def list_rounds(self, operator: str, player: str, *, page_size: int = 0,
                    page_token: str = "", mode: Mode | str | None = None,
                    is_open: bool | None = None) -> RoundPage:
        """The player's rounds: open ones first, then the others, each newest first; only of
        ``mode`` and only open (``is_open`` True) or finished and void (False) when given. A page
        token is valid only with the same player, mode and filter."""
        who, size = player, page_size or validate.DEFAULT_PAGE_SIZE
        how = None if mode is None else validate.mode(mode)
        scope = f"{who}|{how or ''}|{'' if is_open is None else int(is_open)}"
        cursor = _decode_cursor(page_token, scope)
        with self._storage.snapshot() as uow:
            op = validate.operator(operator, uow)
            rows = uow.list_rounds(op, who, size + 1, cursor, mode=how, is_open=is_open)
            views = tuple(self._read_view(uow, row) for row in rows[:size])
        token = _encode_cursor(rows[size - 1], scope) if len(rows) > size else ""
        return RoundPage(views, token)

    # --- shoes -----------------------------------------------------------------------------

    def get_next_shoe(self, operator: str, player: str, game: str, *, mode: Mode | str
                      ) -> ShoeView:
        """The shoe the player's next round of ``game`` in ``mode`` deals from, created (seed
        drawn and sealed, commitment stored) if there is none: publish its commitment before the
        player chooses a client seed."""
        who, rules, how = player, validate.game(game), validate.mode(mode)
        pending = Pending()
        with self._storage.transaction() as uow:
            op = validate.operator(operator, uow)
            row = uow.current_shoe(op, who, rules.game, how)
            # a shoe committed under other rules is replaced, unless a round still deals from
            # it (revealing it then would show that round's undealt cards)
            stale = row is not None and row.rules_digest != rules_digest(rules) and (
                uow.open_round(op, who, rules.game) is None)
            if row is None or stale:
                row, _ = self._replace_shoe(uow, op, who, rules, row, mode=how, pending=pending)
        self._cache.drop_current(op, who, rules.game, how)  # a shoe is current now
        pending.deliver(self._observer)
        return shoes.shoe_view(row)

    def set_client_seed(self, operator: str, player: str, game: str, client_seed: bytes, *,
                        mode: Mode | str, request_id: str, shoe_id: str | None = None
                        ) -> ShoeView:
        """Set the client seed of the player's committed next shoe of ``mode``, until its first
        card. With ``shoe_id`` (the shoe whose commitment the player was shown), another current
        shoe is refused: a seed is never set on a commitment the player has not seen.

        ``request_id`` is an idempotency key like any other (:mod:`.idempotency`): its retry gets
        the first answer, and the same id with another seed (or used by another request) is
        refused, so a late retry can never replace a seed set since."""
        who, rules, seed = player, validate.game(game), client_seed
        how, rid = validate.mode(mode), request_id

        def work(uow: UnitOfWork, op: str) -> ShoeView:
            row = uow.current_shoe(op, who, rules.game, how)
            if row is None:
                # a shoe drawn now would be drawn knowing the client seed: commit first
                raise IllegalState("no committed shoe: get the next shoe's commitment first",
                                   reason="NO_COMMITTED_SHOE")
            if shoe_id is not None and row.shoe_id != shoe_id:
                raise IllegalState(f"the next shoe is {row.shoe_id}, not {quote(shoe_id)}: get "
                                   "its commitment first", reason="NOT_THE_NEXT_SHOE")
            if row.status is not ShoeStatus.COMMITTED:
                raise IllegalState(f"shoe {row.shoe_id} has dealt {row.position} cards; its "
                                   "client seed is fixed", reason="CLIENT_SEED_LOCKED")
            shoe = shoes.restore(row, self._vault)
            try:
                shoe.set_client_seed(seed)
            except ClientSeedLocked as exc:
                raise IllegalState(str(exc), reason="CLIENT_SEED_LOCKED") from None
            new = shoes.updated_row(row, shoe, ShoeStatus.COMMITTED, utc_now())
            uow.update_shoe(new, row.version)
            self._cache.drop_current(op, who, rules.game, how)  # its version moved on
            return shoes.shoe_view(new)

        params = {"player": who, "game": rules.game, "mode": str(how), "shoe_id": shoe_id,
                  "client_seed": seed.hex()}
        return idempotency.run(self._storage, operator=partial(validate.operator, operator),
                               request_id=rid, operation="set_client_seed", params=params,
                               work=work, encode=to_json, decode=_decode_shoe)

    # --- recovery --------------------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Run at start-up: finish every open round that needs no further input (its stored
        state already reaches the end, e.g. the dealer's turn is due) with its money, record and
        reveal, and reveal every finished shoe whose reveal is missing. Each in its own
        transaction; safe to run again (it then finds nothing)."""
        with self._storage.snapshot() as uow:
            candidates = uow.open_round_ids()
        completed = [rid for op, rid in candidates if self._complete(op, rid)] if (
            candidates and self._rng_ok_for_recovery(len(candidates))) else []
        pending = Pending()
        with self._storage.transaction() as uow:
            revealed = []
            for row in uow.finished_unrevealed_shoes():
                self._reveal(uow, row, shoes.restore(row, self._vault), pending)
                revealed.append(row.shoe_id)
        pending.deliver(self._observer)
        if completed or revealed:
            log.info("recovery", completed_rounds=completed, revealed_shoes=revealed)
        return RecoveryReport(tuple(completed), tuple(revealed))

    @staticmethod
    def _rng_ok_for_recovery(open_rounds: int) -> bool:
        """Whether the RNG passed its self-test (run now if it never ran): finishing a round
        deals cards, which no failed RNG may do; the rounds wait for a start that passes."""
        try:
            shoes.require_rng()
        except Unavailable as exc:
            log.error("recovery_deferred", open_rounds=open_rounds, reason=str(exc))
            return False
        return True

    def _complete(self, operator: str, round_id: str) -> bool:
        pending = Pending()
        with self._storage.transaction() as uow:
            row = uow.get_round(operator, round_id)
            if row is None or row.status is not RoundStatus.OPEN:
                return False
            live = self._restore(uow, row)
            if not live.rnd.finished:
                return False
            self._commit(uow, live, None, pending)
        pending.deliver(self._observer)
        return True

    # --- internals -------------------------------------------------------------------------

    def _start(self, uow: UnitOfWork, account: AccountKey, rules: Rules, bets: Bets,
               request_id: str, *, pending: Pending, look_first: bool = True) -> RoundView:
        """Start the round. ``look_first`` False: no read for an open round of the game first;
        the round's INSERT refuses one (a unique index on open rounds), after the rest was done
        in vain, so the caller decides a refusal again with ``look_first`` (it names the open
        round). A round settled at once is stored finished, which that index does not cover:
        then the open round is looked for after the deal, before the round's first write."""
        op, player = account.operator, account.holder
        if look_first:
            no_open_round(uow, op, player, rules)
        # the balance and the wallet's kind in one read; the full settings only for a wallet
        # of the operator's own (the seamless way, which checks the open round again)
        balance, wallet = uow.balance_and_wallet(account)
        if account.mode is Mode.REAL and wallet not in (None, WalletKind.INTERNAL):
            config = uow.wallet_config(op)  # demo play is always on this ledger
            if config is not None and config.seamless:
                raise _Seamless(config)
        if balance is None:  # opened now (a demo account funded)
            balance = ledger.open_player_account(uow, account, demo_funding=self._demo_funding,
                                                 request_id=request_id)
        shoe_row, shoe, stored = self._shoe_for_round(uow, op, player, rules, pending,
                                                      mode=account.mode, look_first=look_first)
        # dealt without a balance, so that bets outside the limits are named as such, and
        # funded once the stake is known to be covered (dealing does not depend on the balance)
        rnd = deal(rules, self._shoes.cards(shoe), bets, shoe.position, None)
        stake = rnd.initial_stake
        if stake > balance and account.mode is Mode.DEMO:
            ledger.top_up_demo(uow, account, self._demo_funding, request_id)
            balance = uow.get_balance(account) or 0
        if stake > balance:
            raise IllegalState(f"the stake {stake} exceeds the balance {balance}",
                               reason="INSUFFICIENT_FUNDS",
                               metadata={"stake_minor": stake, "balance_minor": balance,
                                         "currency": account.currency})
        rnd.fund(balance)
        if not look_first and rnd.finished:  # stored finished: the index on open rounds does
            no_open_round(uow, op, player, rules)  # not see it, so look now (before a write)
            if not stored and uow.current_shoe(op, player, rules.game,
                                               account.mode) is not None:
                # nor does the index on current shoes see a new shoe stored finished: a shoe
                # committed meanwhile (the live cache knew of none) is dealt from, looking first
                raise Conflict("the player's current shoe changed", reason="CONCURRENT_UPDATE")
        now = utc_now()
        row = RoundRow(op, uuid.uuid4().hex, player, rules.game, rules_digest(rules),
                       rules.level(bets.level).name, account.mode, account.currency,
                       RoundStatus.OPEN, 0, b"", shoe.id, now, now)
        live = Live(row, shoe_row, shoe, rnd, posted={}, shoe_stored=stored)
        return self._commit(uow, live, request_id, pending)

    def _live(self, uow: UnitOfWork, operator: str, round_id: str, version: int, *,
              player: str | None = None) -> Live:
        """The open round at ``version``, restored on its shoe (of ``player``, when given)."""
        row = uow.get_round(operator, round_id)
        if row is None or (player is not None and row.player != player):
            raise NotFound("round_id", f"no round {round_id}")
        if row.version != version:
            raise Conflict(f"round {round_id} is at version {row.version}, not {version}",
                           reason="STALE_VERSION")
        if row.status is not RoundStatus.OPEN:
            raise IllegalState(f"round {round_id} is {row.status}", reason="ROUND_FINISHED")
        kept = self._cache.take_round(row)  # only if it is exactly this row's state
        if kept is not None:
            return Live(row, kept.shoe_row, kept.shoe, kept.rnd, posted=kept.posted)
        return self._restore(uow, row)

    def _restore(self, uow: UnitOfWork, row: RoundRow) -> Live:
        shoe_row = uow.get_shoe(row.operator, row.shoe_id)
        if shoe_row is None:
            raise IntegrityFailure(f"round {row.round_id}: its shoe is missing",
                                   reason="SHOE_MISSING")
        shoe = shoes.restore(shoe_row, self._vault)
        try:
            rnd = Round.from_bytes(row.state, self._shoes.cards(shoe))
        except (ValueError, CardError) as exc:
            raise IntegrityFailure(f"round {row.round_id}: {exc}",
                                   reason="STATE_MISMATCH") from None
        return Live(row, shoe_row, shoe, rnd)

    def _commit(self, uow: UnitOfWork, live: Live, request_id: str | None, pending: Pending
                ) -> RoundView:
        """Write one transition: round row, shoe position, record, reveal and money; note the
        round's start and end (with its final money) in ``pending``, and what the cache keeps
        once it commits."""
        rnd, shoe, old = live.rnd, live.shoe, live.row
        now = utc_now()
        row = quick_replace(old, status=_status(rnd), version=old.version + 1,
                            state=rnd.to_bytes(), updated_at=now)
        shoe.position = rnd.position
        if rnd.finished:
            if rnd.phase == Phase.VOID:
                shoe.finish()  # an interrupted round's shoe deals no further round
            else:
                shoe.end_round()
        shoe_row = shoes.updated_row(live.shoe_row, shoe, _shoe_status(shoe), now)
        if not live.shoe_stored:  # before the round row, which refers to it
            uow.insert_shoe(shoe_row)
            self._log.commit_shoe(uow, shoe_row)  # logged before its first card's record
        if old.version == 0:
            uow.insert_round(row)
            pending.add(RoundStarted(row.game, str(row.mode)))
        elif live.unconfirmed:  # the first write: the stored round must be this copy's
            try:
                uow.update_round(row, old.version, expected_state=old.state)
            except Conflict:
                raise _Unconfirmed from None
            live.unconfirmed = False  # the stored round was this copy's: it is confirmed
        else:
            uow.update_round(row, old.version)
        seamless = old.wallet is RoundWallet.SEAMLESS
        credit = None
        balance: int | None = None
        if seamless:  # its record names the movements, the credit a round's end writes too
            balance, credit, movements = self._seamless_money(uow, row, live, pending)
        if rnd.finished:
            writer = self._log  # one look at the key ring for the record's signature and leaf
            record = self._record(row, rnd, shoe, now,
                                  wallet_record(movements) if seamless else None,
                                  signer=writer.signer)
            uow.put_record(row.operator, row.round_id, record)
            writer.append(uow, row.operator, LeafKind.ROUND, row.round_id, record)
        # a round's end moves its shoe's version on even when it dealt nothing (the dealer
        # stood, the cut not reached): a start that read the shoe while this round was open
        # (PostgreSQL's READ COMMITTED) must not commit after it at the version it read, as
        # though the shoe had dealt nothing since: its rounds are dealt one at a time
        if live.shoe_stored and (rnd.finished or shoes.moved(live.shoe_row, shoe_row)):
            uow.update_shoe(shoe_row, live.shoe_row.version)
        elif live.shoe_stored:
            shoe_row = live.shoe_row  # nothing dealt and nothing ended: nothing to write
        if shoe.finished:  # its row says revealed: the reveal commits with it
            self._put_reveal(uow, shoe_row, shoe, pending)
        # the money last: a posting locks the house account's row until COMMIT, and every round
        # of the operator, currency and mode posts to it (on PostgreSQL the replicas' rounds
        # queue on that lock, so it is held for the fewest statements)
        account = AccountKey(old.operator, old.player, old.currency, old.mode)
        if not seamless:
            balance = ledger.post_round_money(uow, account, rnd, old.round_id, request_id,
                                              posted=live.posted)
        if rnd.finished:
            pending.add(RoundFinished(row.game, str(row.mode), str(row.status), _wager_totals(rnd)))
            pending.then(partial(log.info, "round_finished", operator=row.operator,
                                 round_id=row.round_id, status=str(row.status),
                                 staked=rnd.total_staked, returned=rnd.total_returned))
        self._keep(pending, row, rnd, shoe, shoe_row)
        if balance is None:  # no posting touched the player: read it
            balance = uow.get_balance(account) or 0
        return round_view(_context(row), rnd, _shoe_ref(shoe_row, rnd), balance, credit)

    def _keep(self, pending: Pending, row: RoundRow, rnd: Round, shoe: Shoe, shoe_row: ShoeRow
              ) -> None:
        """Once committed, the live cache keeps an open round (with its shoe), or, when the
        round ended, what the player's current shoe of its game and mode is now: none (its shoe
        was finished), or its shoe if more rounds deal from it."""
        cache = self._cache
        if not rnd.finished:
            entry = CachedRound(row.version, row.state, rnd, shoe, shoe_row, ledger.owed(rnd),
                                row)
            pending.then(lambda: cache.put_round(row, entry))
        elif not shoe.finished:
            def keep_shoe() -> None:
                cache.put_shoe(shoe_row, shoe)
                cache.put_current(row.operator, row.player, row.game, row.mode, shoe_row)
            pending.then(keep_shoe)
        else:
            pending.then(lambda: cache.put_current(row.operator, row.player, row.game, row.mode,
                                                   None))

    def _record(self, row: RoundRow, rnd: Round, shoe: Shoe, now: str,
                wallet: dict[str, Any] | None, *, signer: SigningKey) -> bytes:
        payload = round_payload(rnd, round_id=row.round_id, shoe=ShoeRef.of(shoe),
                                started_at=row.created_at, finished_at=now, mode=str(row.mode),
                                wallet=wallet)
        return sign_and_encode(payload, signer)

    def _reveal(self, uow: UnitOfWork, row: ShoeRow, shoe: Shoe, pending: Pending) -> ShoeRow:
        """Store the signed reveal of a finished shoe and mark it revealed."""
        shoe.finish()
        self._cache.drop_shoe(row.operator, row.shoe_id)  # its seed leaves memory with it
        if uow.get_reveal(row.operator, row.shoe_id) is None:
            self._store_reveal(uow, row, shoe)
            pending.add(ShoeRevealed(row.game))
        new = shoes.updated_row(row, shoe, ShoeStatus.REVEALED, utc_now())
        uow.update_shoe(new, row.version)
        return new

    def _put_reveal(self, uow: UnitOfWork, row: ShoeRow, shoe: Shoe, pending: Pending) -> None:
        """Store the signed reveal of a shoe finished in this transaction (its row, already
        written as revealed, was in play when the transaction read it: no reveal exists)."""
        self._cache.drop_shoe(row.operator, row.shoe_id)
        self._store_reveal(uow, row, shoe)
        pending.add(ShoeRevealed(row.game))

    def _store_reveal(self, uow: UnitOfWork, row: ShoeRow, shoe: Shoe) -> None:
        writer = self._log
        reveal = sign_and_encode(reveal_payload(shoe), writer.signer)
        uow.put_reveal(row.operator, row.shoe_id, reveal)
        writer.append(uow, row.operator, LeafKind.SHOE_REVEAL, row.shoe_id, reveal)

    def _new_shoe(self, uow: UnitOfWork, operator: str, player: str, rules: Rules,
                  pending: Pending, *, mode: Mode, insert: bool = True) -> tuple[ShoeRow, Shoe]:
        """A new shoe of ``mode``, its row inserted unless ``insert`` is False (the caller's
        ``_commit`` inserts it then)."""
        shoe = self._shoes.new_shoe(rules.decks, shoes.cut_of(rules))
        row = shoes.new_row(shoe, self._vault, operator=operator, player=player, rules=rules,
                            mode=mode, now=utc_now())
        if insert:
            uow.insert_shoe(row)
            self._log.commit_shoe(uow, row)  # logged before its client seed or first card
        pending.add(ShoeOpened(row.game))
        return row, shoe

    def _replace_shoe(self, uow: UnitOfWork, operator: str, player: str, rules: Rules,
                      old: ShoeRow | None, *, mode: Mode, pending: Pending,
                      old_shoe: Shoe | None = None, insert: bool = True) -> tuple[ShoeRow, Shoe]:
        """A new current shoe of ``mode``; ``old`` (a shoe committed under other rules, or at
        its cut) is finished and revealed first (``old_shoe``: its shoe, if the caller has it).
        Only called with no open round on ``old``."""
        if old is not None:
            shoe = old_shoe if old_shoe is not None else shoes.restore(old, self._vault)
            self._reveal(uow, old, shoe, pending)
        return self._new_shoe(uow, operator, player, rules, pending, mode=mode, insert=insert)

    def _shoe_for_round(self, uow: UnitOfWork, operator: str, player: str, rules: Rules,
                        pending: Pending, *, mode: Mode, look_first: bool = True
                        ) -> tuple[ShoeRow, Shoe, bool]:
        """The player's current shoe of ``mode`` with a round started in it (a new one if
        needed), and whether its row is stored (a new one is not yet: ``_commit`` inserts it).

        ``look_first`` False: when the live cache knows the current shoe as this process last
        committed it (none, or a cut-card shoe at a version), its row is not read: the shoe's
        write in ``_commit`` is the check (a new shoe's INSERT, refused by the unique index on
        current shoes if one was committed meanwhile; the kept shoe's UPDATE at its version),
        and its refusal (``Conflict``) has the caller decide the start again, looking first. A
        new shoe stored finished (its round settled at once) is outside that index: ``_start``
        looks for a current shoe then, before the first write, as for an open round."""
        shoes.require_rng()  # whatever the shoe source: no round starts on a failed RNG
        known = None
        if look_first:
            self._cache.drop_current(operator, player, rules.game, mode)
        else:
            known = self._cache.take_current(operator, player, rules.game, mode)
        digest = rules_digest(rules)
        if known is None:
            row = uow.current_shoe(operator, player, rules.game, mode)
            shoe = None
            if row is not None and row.rules_digest == digest:
                shoe = self._cache.take_shoe(row) or shoes.restore(row, self._vault)
        else:
            row, shoe = known  # unread: the shoe's write checks it (see above)
        if row is not None and shoe is not None and row.rules_digest == digest and (
                shoe.start_round()):
            return row, shoe, True
        row, shoe = self._replace_shoe(uow, operator, player, rules, row, mode=mode,
                                       pending=pending, old_shoe=shoe, insert=False)
        shoe.start_round()
        return row, shoe, False

    def _read_view(self, uow: UnitOfWork, row: RoundRow) -> RoundView:
        shoe_row = uow.get_shoe(row.operator, row.shoe_id)
        if shoe_row is None:
            raise IntegrityFailure(f"round {row.round_id}: its shoe is missing",
                                   reason="SHOE_MISSING")
        if row.status is RoundStatus.OPEN:
            rnd = self._restore(uow, row).rnd
        else:  # a finished round replays from its own dealt cards, no seed needed
            rnd = Round.from_bytes(row.state)
        credit = None
        if row.wallet is RoundWallet.SEAMLESS:  # the wallet's, as last acknowledged
            movements = uow.round_movements(row.operator, row.round_id)
            balance = outbox.last_balance(movements) or 0
            credit = credit_view(movements)
        else:
            account = AccountKey(row.operator, row.player, row.currency, row.mode)
            balance = uow.get_balance(account) or 0
        return round_view(_context(row), rnd, _shoe_ref(shoe_row, rnd), balance, credit)

# --- helpers -----------------------------------------------------------------------------------


class _Unconfirmed(Exception):  # a signal inside act(), never raised out of it
    """The round's write found it at another version than the live cache's copy: decide the
    action again on the stored round."""


def _nothing() -> None:
    """No dispatcher to wake."""


def _wager_totals(rnd: Round) -> dict[str, WagerTotals]:
    """A finished round's wagers by kind: count, staked, returned (what the ledger holds)."""
    out: dict[str, WagerTotals] = {}
    for w in rnd.wagers:
        seen = out.get(w.kind, WagerTotals(0, 0, 0))
        out[w.kind] = WagerTotals(seen.count + 1, seen.staked + w.staked,
                                  seen.returned + ledger.credited(rnd, w))
    return out


def _shoe_status(shoe: Shoe) -> ShoeStatus:
    """A shoe's status at the end of a transition: revealed if it finished (its reveal is
    written in the same transaction), else in play."""
    return ShoeStatus.REVEALED if shoe.finished else ShoeStatus.IN_PLAY


def _status(rnd: Round) -> RoundStatus:
    if not rnd.finished:
        return RoundStatus.OPEN
    return RoundStatus.VOID if rnd.phase == Phase.VOID else RoundStatus.FINISHED


def _context(row: RoundRow) -> RoundContext:
    return RoundContext(row.round_id, row.operator, row.player, row.game, row.rules_digest,
                        row.level, str(row.mode), row.currency, row.version, row.created_at,
                        row.updated_at)


def _shoe_ref(row: ShoeRow, rnd: Round) -> ShoeRefView:
    return ShoeRefView(row.shoe_id, row.commitment, row.decks, row.client_seed.hex(), rnd.start,
                       rnd.position)


def _encode_cursor(row: RoundRow, scope: str) -> str:
    """A page token: where the page ended, and the listing it belongs to (``scope``)."""
    doc = {"p": scope, "o": row.status is RoundStatus.OPEN, "t": row.created_at,
           "r": row.round_id}
    return base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode()


def _decode_cursor(token: object, scope: str) -> RoundCursor | None:
    if token == "":
        return None
    bad = InvalidInput("page_token", "not a page token of this listing")
    if not isinstance(token, str):
        raise bad
    try:
        doc: Any = json.loads(base64.urlsafe_b64decode(token.encode()))
        cursor = RoundCursor(bool(doc["o"]), str(doc["t"]), str(doc["r"]))
        same_scope = doc["p"] == scope
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise bad from None
    if not same_scope:
        raise bad
    return cursor

