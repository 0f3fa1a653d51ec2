"""Monte Carlo cross-check of the exact analysis: the real engine, the real shuffle, basic strategy.

Each simulated round is a ``game_math.round.Round`` dealt from a certified shoe
(``rng_service.rng.shoe``: server seed -> HMAC_DRBG -> Fisher–Yates) and played by the analyser's
own
basic strategy (``game_math.autoplay.basic_strategy``, the tables behind the basic return). One
hand per round (the fewest the rules allow), the table's smallest bet that keeps every payout whole,
no side bets, insurance and even money declined.

Shoes follow the rules' shuffle policy exactly as ``rng_service.rng.shoe.Shoe`` deals them: a fresh
shoe
for every round, or, with a cut card, rounds from the same shoe until one would start at or after
the cut position. A one-round shoe is a ``LazyShoe`` (shuffled only as far as its first cards,
which the round reads as a list; see ``Player``); a cut-card shoe, dealt to half its depth anyway,
is shuffled whole by ``shoe_cards``. Both give the certified cards. Every shoe gets a fresh
48-byte seed from the operating system; with a master seed (``master_seed``) shoe seeds are
derived from it instead, so a run is reproducible (tests).

Work is split into chunks of ``CHUNK_ROUNDS`` rounds numbered from 0; a chunk's shoe seeds depend
only on the master seed and the chunk number, so a seeded run gives the same result with any number
of worker processes. With a cut card a chunk plays whole shoes until it has its rounds, so the run
plays slightly more rounds than asked (the report counts what was played).

Statistics are exact integer sums (minor units) until the final division. The estimate is the ratio
of the net result to the rounds played, with a 95 % interval from the variance of per-shoe results
(batch means over shoes): for one-round shoes that is the ordinary per-round variance of
independent rounds; with a cut card it also absorbs the small correlation between rounds of one
shoe. A cut-card game's simulated return also carries the cut-card effect (how many rounds a shoe
yields depends on its cards), which the analyser's off-the-top figure leaves out; the cross-check's
interval says whether the two still agree at its precision.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import lcm, sqrt
from typing import Final

from tqdm import tqdm

from game_math.analysis.ca_strategy import BasicStrategy
from game_math.autoplay import (
    DECLINE_EVEN_MONEY,
    DECLINE_INSURANCE,
    basic_strategy,
    visible_dealer_cards,
)
from game_math.cards import VALUE_OF, Card
from game_math.errors import IllegalAction
from game_math.round import Action, ActionKind, Decision, HandBet, Round
from game_math.rules import Rules
from rng_service.core.cpus import available_cores
from rng_service.core.pools import forked, stop_if_orphaned, unordered, worker_pool
from rng_service.rng.selftest import require_healthy_rng
from rng_service.rng.shoe import SEED_BYTES, LazyShoe, new_server_seeds, shoe_cards

#: rounds per unit of work handed to a worker (fixed, so seeded runs do not depend on workers)
CHUNK_ROUNDS: Final = 5_000
#: cards of a one-round shoe taken at once per hand: a hand's round rarely needs more (one that
#: does is replayed on the whole shoe); reading a list is much cheaper than the lazy shoe's reads
PREFIX_CARDS_PER_HAND: Final = 24
#: one-round shoes shuffled together before their rounds are played
SHOE_BATCH: Final = 128
#: two-sided 95 % normal quantile
Z95: Final = 1.959963984540054
SEED_DOMAIN: Final = b"fairshoe/simulate/shoe-seed/v1\0"

def derived_seed(master: bytes, chunk: int, shoe: int) -> bytes:
    """The seed of a chunk's ``shoe``-th shoe in a seeded run: SHA-384 over all three, whose
    48 bytes are exactly a server seed (entropy input and nonce, distinct for every shoe)."""
    data = SEED_DOMAIN + master + chunk.to_bytes(8, "big") + shoe.to_bytes(8, "big")
    return hashlib.sha384(data).digest()


def table_bet(rules: Rules) -> int:
    """The smallest initial bet the default level accepts for one hand (whole payouts, chips)."""
    level = rules.level()
    step = rules.bet_multiple
    if level.chips:
        step = lcm(step, min(level.chips))
    bet = -(-level.min_bet // step) * step
    if bet > level.max_bet:
        raise ValueError(f"no bet between {level.min_bet} and {level.max_bet} is a multiple "
                         f"of {step}")
    return bet


def round_bets(rules: Rules) -> list[HandBet]:
    """One hand (the fewest the rules allow) at ``table_bet``, no side bets."""
    n = min(rules.hands.counts)
    return [HandBet(table_bet(rules) * (rules.hands.multi_hand_min_multiple if n > 1 else 1))] * n


# ----- the player ----------------------------------------------------------------------------


class Player:
    """Plays rounds and shoes of one rule set by basic strategy; counts results in minor units.

    The decision is the table's, tried against the engine in order of preference (split, double,
    hit, stand): the engine alone judges legality and refuses an illegal action without changing
    the round, so this makes exactly the choice of ``game_math.autoplay.basic_strategy_action``
    (the tests compare the two) without building the list of legal actions at every decision.
    """

    def __init__(self, rules: Rules, strategy: BasicStrategy, *,
                 prefix: int = PREFIX_CARDS_PER_HAND) -> None:
        self.rules = rules
        self.hands = round_bets(rules)
        self.prefix = prefix * len(self.hands)
        self.stake = sum(hb.bet for hb in self.hands)
        self.cut = rules.cut_position
        self._double = Action(ActionKind.DOUBLE, self.hands[0].bet)
        self._split = Action(ActionKind.SPLIT)
        self._plays, self._split_ok = _preferences(strategy, self._double)
        self._column = _column_lookup(strategy)

    def play_round(self, cards: Sequence[Card], start: int) -> Round:
        """Play one round from ``cards[start:]`` by the analysed strategy; the finished round."""
        rnd = Round(self.rules, cards, self.hands, start=start)
        if rnd.finished:
            return rnd
        dealer = visible_dealer_cards(rnd)
        col = self._column(dealer)
        plays, split_ok = self._plays[col], self._split_ok[col]
        while not rnd.finished:
            hand = rnd.hand_in_play
            if hand is None:  # an insurance decision (not finished, not in play)
                even_money = rnd.turn.decision is Decision.EVEN_MONEY
                rnd.act(DECLINE_EVEN_MONEY if even_money else DECLINE_INSURANCE)
                continue
            held = hand.cards
            two = len(held) == 2
            value = VALUE_OF[held[0]]
            if two and value == VALUE_OF[held[1]] and split_ok[value] and _try(rnd, self._split):
                continue
            on_two, on_more = plays[hand.total + (22 if hand.soft else 0)]
            for action in on_two if two else on_more:
                if _try(rnd, action):
                    break
        return rnd

    def play_shoes(self, seeds: Sequence[bytes], tally: Tally) -> None:
        """Deals the shoes of ``seeds`` in order: one round each, or rounds to the cut card."""
        if self.cut is None:
            self._one_round_shoes(seeds, tally)
            return
        for seed in seeds:
            self._cut_card_shoe(seed, self.cut, tally)

    def _cut_card_shoe(self, seed: bytes, cut: int, tally: Tally) -> None:
        # dealt to its cut card: the whole shuffle, as a list the engine indexes at C speed
        cards = shoe_cards(seed, b"", self.rules.decks)
        position = 0
        net = played = 0
        while position < cut:
            rnd = self.play_round(cards, position)
            result = rnd.total_returned - rnd.total_staked
            net += result
            played += 1
            tally.round_sq += result * result
            tally.void += rnd.void_reason is not None
            position = rnd.position
        tally.add_shoe(net, played)

    def _one_round_shoes(self, seeds: Sequence[bytes], tally: Tally) -> None:
        # Each round is played on the first cards of its lazily shuffled shoe, taken as one list;
        # a round that needs more (it voids, out of cards) is played again on the whole shoe:
        # the same cards and the same decisions, so the same round. Shuffling a batch of shoes
        # before playing them keeps each loop's code hot (about a quarter faster than alternating).
        shoes = [LazyShoe(seed, b"", self.rules.decks) for seed in seeds]
        prefix = self.prefix
        for shoe, cards in zip(shoes, [shoe[:prefix] for shoe in shoes], strict=True):
            rnd = self.play_round(cards, 0)
            if rnd.void_reason is not None and prefix < len(shoe):
                rnd = self.play_round(shoe, 0)
            result = rnd.total_returned - rnd.total_staked
            tally.round_sq += result * result
            tally.void += rnd.void_reason is not None
            tally.add_shoe(result, 1)


def _try(rnd: Round, action: Action) -> bool:
    try:
        rnd.act(action)
    except IllegalAction:
        return False
    return True


#: the actions to try for one table cell: (on the first two cards, on more cards)
Choices = tuple[tuple[Action, ...], tuple[Action, ...]]


def _preferences(strategy: BasicStrategy, double: Action,
                 ) -> tuple[list[list[Choices]], list[tuple[bool, ...]]]:
    """Per column, per cell (total, +22 when soft): the actions to try on two cards / on more.

    The order is ``BasicStrategy.action``'s: double where the table doubles, hit where it hits,
    stand last; a double needs the first two cards (every game), so it is not tried on more.
    A 21 stands. Split is per column by pair value (``split_ok[col][value]``, value 1..10).
    """
    hit_, stand = Action(ActionKind.HIT), Action(ActionKind.STAND)
    plays: list[list[Choices]] = []
    for hits, doubles in zip(strategy.hit, strategy.double, strict=True):
        cells: list[Choices] = []
        for cell in range(44):
            total = cell - 22 if cell >= 22 else cell
            more: tuple[Action, ...] = (hit_, stand) if total < 21 and hits[cell] else (stand,)
            two = (double, *more) if total < 21 and doubles[cell] else more
            cells.append((two, more))
        plays.append(cells)
    split_ok = [(False, *(row[v - 1] for v in range(1, 11))) for row in strategy.split]
    return plays, split_ok


def _column_lookup(strategy: BasicStrategy) -> Callable[[Sequence[Card]], int]:
    """The strategy column of the dealer's visible cards, from a table built once."""
    if not strategy.exposed:
        by_up = tuple(strategy.column([c]) for c in range(52))
        return lambda dealer: by_up[dealer[0]]
    # one representative card per value: the column depends on values only
    rep = {VALUE_OF[c]: c for c in range(52)}
    by_pair: dict[tuple[int, int], int] = {}
    for a, ca in rep.items():
        for b, cb in rep.items():
            name_ok = (a, b) not in ((1, 10), (10, 1))  # a dealer blackjack ends the round
            if name_ok:
                by_pair[a, b] = strategy.column([ca, cb])
    return lambda dealer: by_pair[VALUE_OF[dealer[0]], VALUE_OF[dealer[1]]]


# ----- tallies and the estimate --------------------------------------------------------------


class Tally:
    """Exact integer sums over rounds and shoes (minor units); tallies add up."""

    __slots__ = ("cross", "net", "net_sq", "round_sq", "rounds", "rounds_sq", "shoes", "void")

    def __init__(self) -> None:
        self.rounds = 0
        self.shoes = 0
        self.void = 0
        self.net = 0  # sum of round results
        self.round_sq = 0  # sum of squared round results
        self.net_sq = 0  # sum over shoes of (shoe result)^2
        self.rounds_sq = 0  # sum over shoes of (rounds in the shoe)^2
        self.cross = 0  # sum over shoes of shoe result * rounds in the shoe

    def add_shoe(self, net: int, rounds: int) -> None:
        """Count one shoe: its net result (minor units) over ``rounds`` rounds."""
        self.shoes += 1
        self.rounds += rounds
        self.net += net
        self.net_sq += net * net
        self.rounds_sq += rounds * rounds
        self.cross += net * rounds

    def merge(self, other: Tally) -> None:
        """Add ``other``'s sums to these (tallies of separate workers add up)."""
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def __getstate__(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple[int, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            setattr(self, name, value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tally) and self.__getstate__() == other.__getstate__()

    __hash__ = None  # type: ignore[assignment]  # mutable


@dataclass(frozen=True)
class Estimate:
    """The simulated return per unit of initial bet with its 95 % interval."""

    game: str
    rounds: int
    shoes: int
    void: int
    bet: int  # minor units per hand
    rtp: float  # mean amount returned per unit of initial bet, stake included
    half_width: float  # 95 % interval: rtp +- half_width
    sd_round: float  # standard deviation of one round's result, in initial bets
    method: str

    @property
    def low(self) -> float:
        """The lower end of the 95 % interval."""
        return self.rtp - self.half_width

    @property
    def high(self) -> float:
        """The upper end of the 95 % interval."""
        return self.rtp + self.half_width

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies inside the 95 % interval."""
        return self.low <= value <= self.high


def estimate(game: str, tally: Tally, stake: int, *, per_round_shoes: bool) -> Estimate:
    """The ratio estimate of the return, its interval from the variance of per-shoe results."""
    if tally.shoes < 2:
        raise ValueError("at least two shoes are needed for an interval")
    n, s = tally.rounds, tally.shoes
    mean = Fraction(tally.net, n)  # net minor units per round
    # sum over shoes of (shoe result - mean * its rounds)^2, exactly
    dev = tally.net_sq - 2 * mean * tally.cross + mean * mean * tally.rounds_sq
    var_mean = dev / (s * (s - 1)) / (Fraction(n, s) ** 2)
    round_var = Fraction(tally.round_sq, n) - mean * mean
    method = ("independent rounds (one shoe per round): per-round variance" if per_round_shoes
              else "batch means over shoes (rounds of one shoe are correlated): ratio estimator "
                   "with the variance of per-shoe results")
    return Estimate(
        game=game, rounds=n, shoes=s, void=tally.void, bet=stake,
        rtp=float(1 + mean / stake),
        half_width=Z95 * sqrt(float(var_mean)) / stake,
        sd_round=sqrt(float(round_var)) / stake,
        method=method,
    )


# ----- running chunks ------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """A share of a simulation one worker plays: its index, rounds and the master seed (None:
    from the OS).
    """
    index: int
    rounds: int
    master_seed: bytes | None


_WORKER: Player | None = None


def _init_worker(rules: Rules, strategy: BasicStrategy) -> None:
    global _WORKER  # noqa: PLW0603  (one player per worker process)
    _WORKER = Player(rules, strategy)


def play_chunk(player: Player, chunk: Chunk) -> Tally:
    """The chunk's rounds: one shoe each, or whole cut-card shoes until the rounds are reached."""
    tally = Tally()
    k = 0
    while tally.rounds < chunk.rounds:
        # one-round shoes: exactly the rounds left (in batches); cut-card shoes: one at a time
        n = min(SHOE_BATCH, chunk.rounds - tally.rounds) if player.cut is None else 1
        player.play_shoes(_shoe_seeds(chunk, k, n), tally)
        k += n
    return tally


def _shoe_seeds(chunk: Chunk, first: int, count: int) -> list[bytes]:
    """The seeds of the chunk's shoes ``first`` .. ``first + count - 1``."""
    if chunk.master_seed is None:
        return new_server_seeds(count)
    return [derived_seed(chunk.master_seed, chunk.index, first + i) for i in range(count)]


def _worker_chunk(chunk: Chunk) -> tuple[Chunk, Tally]:
    assert _WORKER is not None, "worker not initialised"
    stop_if_orphaned()  # no chunk played for a run whose process has died
    return chunk, play_chunk(_WORKER, chunk)


def chunks(rounds: int, master_seed: bytes | None, size: int = CHUNK_ROUNDS) -> Iterator[Chunk]:
    """The run split into chunks of at most ``size`` rounds, in order."""
    for index, start in enumerate(range(0, rounds, size)):
        yield Chunk(index, min(size, rounds - start), master_seed)


@dataclass(frozen=True)
class Simulation:
    """A finished simulation: its estimate, the workers used and the wall time."""
    estimate: Estimate
    workers: int
    seconds: float
    seeded: bool

    @property
    def rounds_per_second(self) -> float:
        """Rounds played per wall-clock second."""
        return self.estimate.rounds / self.seconds if self.seconds > 0 else float("inf")


def simulate(rules: Rules, rounds: int, *, workers: int | None = None,
             master_seed: bytes | None = None, progress: bool = False,
             chunk_rounds: int = CHUNK_ROUNDS) -> Simulation:
    """Plays ``rounds`` rounds (at least) over ``workers`` processes (default: CPU count).

    Without ``master_seed`` every shoe is seeded from the OS; with it (at least 48 bytes) the run
    is reproducible and independent of ``workers``. Refused (``SelfTestFailed``) while the RNG
    self-test fails.
    """
    if rounds < 2:
        raise ValueError("simulate at least 2 rounds")
    if master_seed is not None and len(master_seed) < SEED_BYTES:
        raise ValueError(f"a master seed needs at least {SEED_BYTES} bytes")
    require_healthy_rng()  # as for any shoe the service deals: no dealing on a failed self-test
    workers = workers or available_cores()
    strategy = basic_strategy(rules)  # analysed once here, shipped to the workers
    plan = list(chunks(rounds, master_seed, chunk_rounds))
    total = Tally()
    started = time.perf_counter()
    with tqdm(total=rounds, unit="round", unit_scale=True, disable=not progress,
              desc=rules.game, smoothing=0.1) as bar:
        for tally in _run(rules, strategy, plan, workers):
            total.merge(tally)
            bar.update(min(tally.rounds, max(0, rounds - bar.n)))
    seconds = time.perf_counter() - started
    stake = sum(hb.bet for hb in round_bets(rules))
    est = estimate(rules.game, total, stake, per_round_shoes=rules.cut_position is None)
    return Simulation(est, workers, seconds, master_seed is not None)


def _run(rules: Rules, strategy: BasicStrategy, plan: list[Chunk], workers: int,
         ) -> Iterator[Tally]:
    if workers == 1 or len(plan) == 1:
        player = Player(rules, strategy)
        for chunk in plan:
            yield play_chunk(player, chunk)
        return
    # the workers end with this process, however it ends (core/pools)
    with worker_pool(min(workers, len(plan)), _init_worker, (rules, strategy)) as pool:
        processes = forked(pool)  # before any can die, to notice it (core/pools)
        chunks = pool.imap_unordered(_worker_chunk, plan)
        for _, tally in unordered(chunks, processes, "the simulation"):
            yield tally
