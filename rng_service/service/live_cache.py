"""A bounded, process-local cache of live rounds and in-play shoes: an optimisation only.

Bringing a stored round back to life costs most of a transition's CPU: the shoe's seed is
unsealed (AES-GCM), its DRBG instantiated and the shuffle re-run as far as the round has dealt,
and every action replayed through the engine. A process that made the last transition of a
round still holds all of that; this cache keeps it for the next transition, under two rules that
leave the database the only authority (any replica can continue any round):

* **Validated inside the transaction.** A round entry is used only if the round row read in the
  transaction that uses it has the entry's version *and* byte-identical state (so the round was
  last written by this process's committed transition, and nothing has written it since: any
  other transition, on any replica, bumps the version). An ``Act`` may skip that read
  (:meth:`LiveCache.take_unread`): then the round's own write, ``UPDATE ... WHERE`` version and
  state, is the same check, made before anything else is written, and a miss there (or any
  refusal decided on the copy before it) is decided again on the stored round. A shoe entry (a
  cut-card shoe between its rounds) is used only if the shoe row's shoe id, sealed seed, client
  seed, decks and cut are the entry's; its position, rounds started and status are then taken
  from the row. Anything else is a miss, and the caller restores from the rows as if there were
  no cache.
* **A player's current shoe, unread.** Once a transition of this process has committed, the
  cache knows the player's current shoe of that game and mode as it left it: none (the round's
  shoe was finished and revealed) or the cut-card shoe it dealt from, at the version it wrote
  (:meth:`LiveCache.take_current`). A ``StartRound`` may deal on that knowledge without reading
  the shoe's row, because a write checks it, as a read would: a new shoe's ``INSERT`` (a unique
  index admits one current shoe per player, game and mode, so a shoe committed meanwhile by
  another process or request refuses it) or the kept shoe's ``UPDATE ... WHERE`` version (any
  other change bumps it; a new shoe stored finished, its round settled at once, is outside that
  index, so that start reads the row before its first write). A refused write rolls the
  transaction back and the start is decided again reading the row.
* **Taken, not shared.** :meth:`LiveCache.take_round` and :meth:`LiveCache.take_shoe` remove the
  entry: the one transaction using it owns its objects (a ``Round`` and a ``Shoe`` are mutable),
  a concurrent transaction on the same round misses and restores its own copy, and a transaction
  that rolls back leaves nothing behind. Entries are put back only after their transaction has
  committed (``Pending.then``); a put never replaces an entry of a newer version.

Secrets: a cached shoe holds its unsealed seed and its DRBG state in memory, as every transition
dealing from it does anyway, and only while the shoe deals: the process that ends a round keeps
no entry of it, and the one that finishes a shoe drops its seed as it writes the reveal. An
entry another replica made stale (that replica moved the round on, and perhaps revealed the
shoe: its seed is public then) is never used, and goes at the next look-up of its round, after
``max_idle`` seconds unused, or when the LRU bound pushes it out. Reprs show ids and versions
only; a ``Shoe`` refuses to be pickled.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final, Generic, TypeVar

from game_math.round import Round
from rng_service.rng.shoe import Shoe
from rng_service.service.ports import Mode, RoundRow, RoundWallet, ShoeRow, ShoeStatus

#: entries kept of each kind by default: the rounds (and cut-card shoes) of this many players
#: who are playing now; an entry is a few tens of KiB at most
DEFAULT_SIZE: Final = 1024

#: seconds an entry may stay unused (a round another replica finished, a player who left)
DEFAULT_MAX_IDLE: Final = 300.0

K = TypeVar("K")
V = TypeVar("V")


@dataclass(eq=False)
class CachedRound:
    """A live round as its last committed transition in this process left it."""

    version: int
    state: bytes = field(repr=False)  # the stored ``Round.to_bytes()`` of ``version``
    rnd: Round = field(repr=False)
    shoe: Shoe = field(repr=False)  # the round's shoe object (its cards are the round's)
    shoe_row: ShoeRow = field(repr=False)  # the shoe row that transition wrote
    #: what the round's ledger entries hold after that transition: wager id -> (staked, returned)
    posted: dict[int, tuple[int, int]] = field(repr=False)
    #: the round row that transition wrote (for :meth:`LiveCache.take_unread`)
    row: RoundRow | None = field(default=None, repr=False)


@dataclass(eq=False)
class _CachedShoe:
    shoe: Shoe = field(repr=False)
    sealed_seed: bytes = field(repr=False)


class _Lru(Generic[K, V]):
    """A bounded map whose least recently put entries go first, and entries left unused for
    ``max_idle`` seconds go too (at the next put or take); every method takes the lock."""

    def __init__(self, size: int, max_idle: float, clock: Callable[[], float]) -> None:
        self._size = size
        self._max_idle = max_idle
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()  # put order: oldest first
        self._lock = threading.Lock()

    def pop(self, key: K) -> V | None:
        with self._lock:
            item = self._items.pop(key, None)
        if item is None or self._clock() - item[0] > self._max_idle:
            return None
        return item[1]

    def pop_if(self, key: K, wanted: Callable[[V], bool]) -> V | None:
        """The entry under ``key``, removed, if ``wanted(entry)``; else None, and an entry
        that is not wanted stays (unless it is idle: it goes)."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if self._clock() - item[0] > self._max_idle:
                del self._items[key]
                return None
            if not wanted(item[1]):
                return None
            del self._items[key]
        return item[1]

    def put(self, key: K, value: V, *, unless: Callable[[V], bool] | None = None) -> None:
        """Keep ``value`` under ``key``, unless the entry there is ``unless(entry)``."""
        if self._size <= 0:
            return
        now = self._clock()
        with self._lock:
            there = self._items.get(key)
            if there is not None and unless is not None and unless(there[1]):
                return
            self._items[key] = (now, value)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            while self._items:  # the idle ones, oldest first
                oldest = next(iter(self._items.values()))
                if now - oldest[0] <= self._max_idle:
                    break
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items


class LiveCache:
    """Live rounds by (operator, round id) and in-play shoes by (operator, shoe id); thread-safe.

    ``size`` bounds each map (0 disables the cache: every lookup misses); an entry left unused
    for ``max_idle`` seconds (by ``clock``) is dropped: a player who left, or a round another
    replica moved on, holds nothing for long.
    """

    def __init__(self, size: int = DEFAULT_SIZE, *, max_idle: float = DEFAULT_MAX_IDLE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rounds: _Lru[tuple[str, str], CachedRound] = _Lru(size, max_idle, clock)
        self._shoes: _Lru[tuple[str, str], _CachedShoe] = _Lru(size, max_idle, clock)
        #: (operator, player, game, mode) -> (the current shoe's row as committed, or None:
        #: none is current); a row's shoe is the entry of ``_shoes``, which owns it
        self._current: _Lru[tuple[str, str, str, Mode], tuple[ShoeRow | None]] = _Lru(
            size, max_idle, clock)

    def __repr__(self) -> str:
        return f"LiveCache(rounds={len(self._rounds)}, shoes={len(self._shoes)})"

    # --- rounds ----------------------------------------------------------------------------

    def take_round(self, row: RoundRow) -> CachedRound | None:
        """The entry of ``row``'s round, removed, if it is exactly ``row`` (same version, same
        state bytes, same shoe); else None (a stale entry is dropped)."""
        entry = self._rounds.pop((row.operator, row.round_id))
        if entry is None or entry.version != row.version or entry.state != row.state:
            return None
        if entry.shoe_row.shoe_id != row.shoe_id or entry.shoe.id != row.shoe_id:
            return None
        return entry

    def take_unread(self, operator: str, round_id: str, version: int, *,
                    player: str | None = None) -> CachedRound | None:
        """The entry of the round, removed, if it is at ``version`` (of ``player``, when given)
        and of this ledger's wallet (not seamless); else None, and the entry stays.

        For a transition that does not read the round's row first: nothing but the caller's
        own copy says the stored round is still at ``version``, so the caller confirms it by
        the round's write, an ``UPDATE`` whose ``WHERE`` is the entry's version and state bytes
        (the check a read would make, made by the write). Until that write has matched,
        whatever the caller decided on this copy (an error above all) stands only once decided
        again on the stored round, and nothing may be written before it."""
        return self._rounds.pop_if(
            (operator, round_id),
            lambda e: (e.version == version and e.row is not None
                       and e.row.wallet is not RoundWallet.SEAMLESS
                       and (player is None or e.row.player == player)))

    def put_round(self, row: RoundRow, entry: CachedRound) -> None:
        """Keep ``entry`` for ``row``'s round (call only once its transaction has committed)."""
        self._rounds.put((row.operator, row.round_id), entry,
                         unless=lambda there: there.version > entry.version)

    def drop_round(self, operator: str, round_id: str) -> None:
        """Forget the round (it has ended)."""
        self._rounds.pop((operator, round_id))

    def has_round(self, operator: str, round_id: str) -> bool:
        """Whether an entry for the round is kept (for tests and metrics)."""
        return (operator, round_id) in self._rounds

    # --- shoes -----------------------------------------------------------------------------

    def take_shoe(self, row: ShoeRow) -> Shoe | None:
        """The shoe of ``row``, removed, with its position, rounds started and status set from
        ``row``, if the entry has ``row``'s sealed seed, client seed, decks and cut; else None."""
        entry = self._shoes.pop((row.operator, row.shoe_id))
        if entry is None:
            return None
        shoe = entry.shoe
        cut = None if row.cut is None else Fraction(row.cut)
        if (shoe.id != row.shoe_id or entry.sealed_seed != row.sealed_seed
                or shoe.client_seed != row.client_seed or shoe.decks != row.decks
                or shoe.cut != cut):
            return None
        shoe.position = row.position
        shoe.rounds_started = row.rounds_started
        shoe.finished = row.status in (ShoeStatus.FINISHED, ShoeStatus.REVEALED)
        return shoe

    def put_shoe(self, row: ShoeRow, shoe: Shoe) -> None:
        """Keep ``shoe`` (of the committed ``row``) for its next round; a finished shoe is not
        kept (its seed is revealed: nothing more deals from it)."""
        if shoe.finished or row.status in (ShoeStatus.FINISHED, ShoeStatus.REVEALED):
            self.drop_shoe(row.operator, row.shoe_id)
            return
        self._shoes.put((row.operator, row.shoe_id), _CachedShoe(shoe, row.sealed_seed))

    def drop_shoe(self, operator: str, shoe_id: str) -> None:
        """Forget the shoe and its seed (it is finished, or revealed)."""
        self._shoes.pop((operator, shoe_id))

    # --- a player's current shoe -------------------------------------------------------------

    def take_current(self, operator: str, player: str, game: str, mode: Mode
                     ) -> tuple[ShoeRow, Shoe] | tuple[None, None] | None:
        """The player's current shoe of ``game`` and ``mode`` as this process's last committed
        transition of it left it, removed: ``(None, None)`` if it left none current, the shoe's
        row as written and its shoe (taken from the shoes kept) if it left a shoe dealing on;
        None if not known (then read the row). Unread: the caller's first write on it confirms
        it (see the module's docstring)."""
        item = self._current.pop((operator, player, game, mode))
        if item is None:
            return None
        row, = item
        if row is None:
            return None, None
        shoe = self.take_shoe(row)
        return None if shoe is None else (row, shoe)

    def put_current(self, operator: str, player: str, game: str, mode: Mode,
                    row: ShoeRow | None) -> None:
        """Note the player's current shoe (``row``, whose shoe :meth:`put_shoe` keeps) or that
        none is current (None): call only once the transaction that left it has committed."""
        self._current.put((operator, player, game, mode), (row,))

    def drop_current(self, operator: str, player: str, game: str, mode: Mode) -> None:
        """Forget what the player's current shoe is (a transition is changing it)."""
        self._current.pop((operator, player, game, mode))

    def has_shoe(self, operator: str, shoe_id: str) -> bool:
        """Whether the shoe (and so its seed) is held (for tests)."""
        return (operator, shoe_id) in self._shoes
