"""Shoes: a seed from the operating system, a commitment to it, and the cards it shuffles to.

A shoe is a pure function of (server seed, client seed, decks), so anyone holding the revealed seed
recomputes it. The server seed is exactly 48 bytes from the OS CSPRNG. The mapping onto HMAC_DRBG
(SP 800-90A) inputs, which an auditor needs (:func:`drbg_inputs` computes it):

* ``entropy_input`` = server seed bytes 0..31 (256 bits, the DRBG's security strength);
* ``nonce`` = server seed bytes 32..47 (128 bits of fresh OS randomness: half the security
  strength, as SP 800-90A section 8.6.7 asks, and secret until the reveal like the rest);
* ``personalization_string`` = ``b"fairshoe/shoe/v2\\0"`` || decks as a 4-byte big-endian integer
  || SHA-256(``b"fairshoe/client-seed/v2\\0"`` || client seed), 17 + 4 + 32 = 53 bytes.

The DRBG instantiates on entropy_input || nonce || personalization_string, every part of a fixed
length, so distinct inputs give distinct seed material (barring a SHA-256 collision between client
seeds). The nonce comes from the server, not the client seed: the client seed is empty by default
and otherwise chosen by the player, so as a nonce it would repeat across shoes or be picked by one
side. In the personalization string it still changes the shoe.
The cards are then ``game_math.cards.ordered_shoe(decks)`` shuffled by
:meth:`rng_service.rng.sampling.DrbgRandom.shuffle`, whose byte convention is documented there.
That shuffle runs forward, fixing position i at its step i, so :class:`LazyShoe` deals the same
cards while running only the steps up to the last card asked for: a round that deals 12 cards of
a fresh shoe pays for 12 steps and one 128-byte DRBG request, not a whole shuffle.

Why neither side alone chooses the shoe: the server draws its seed and publishes the commitment
``seed_commitment(seed)`` before it learns the client seed, so it cannot pick a seed to suit that
client seed; the player picks the client seed without knowing the server seed, so cannot steer the
DRBG. The commitment is a domain-separated SHA-256 over the whole 48-byte seed (entropy input and
nonce): SHA-256(``b"fairshoe/seed-commitment/v1\\0"`` || seed).

The seed stays secret until the shoe is finished: :class:`Shoe` never shows it in its repr, errors
or pickles, and :meth:`Shoe.reveal` refuses before the end.
"""

from __future__ import annotations

import hashlib
import operator
import secrets
import uuid
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn, overload

from game_math.cards import Card, ordered_shoe
from game_math.errors import ShoeExhausted
from game_math.rules import cut_card_position
from rng_service.core.errors import ErrorFamily, IllegalState, InvalidInput
from rng_service.rng.drbg import NONCE_BYTES, SECURITY_STRENGTH_BITS, HmacDrbg
from rng_service.rng.sampling import DrbgRandom

if TYPE_CHECKING:
    from rng_service.rng._hmac_drbg import Cards as _CardsBase
    from rng_service.rng.seed_vault import SeedVault

ENTROPY_INPUT_BYTES: Final = SECURITY_STRENGTH_BITS // 8  # 32
SEED_BYTES: Final = ENTROPY_INPUT_BYTES + NONCE_BYTES  # 48: entropy input, then nonce
MAX_DECKS: Final = 16
MAX_CLIENT_SEED_BYTES: Final = 256
CLIENT_SEED_DOMAIN: Final = b"fairshoe/client-seed/v2\0"
SHOE_PERSONALIZATION: Final = b"fairshoe/shoe/v2\0"
COMMITMENT_DOMAIN: Final = b"fairshoe/seed-commitment/v1\0"


class ShoeError(ErrorFamily):
    """Base of the shoe's errors. None of them ever carries the seed.

    Asking for more cards than are left raises :class:`game_math.errors.ShoeExhausted`, the one
    class the engine also raises for it (re-exported here).
    """


class InvalidShoeInput(ShoeError, InvalidInput):
    """A seed, client seed, deck count or cut that is out of range."""


class ShoeFinished(ShoeError, IllegalState):
    """Dealing from, or starting a round in, a finished shoe."""

    reason_code = "SHOE_FINISHED"


class ShoeNotFinished(ShoeError, IllegalState):
    """The seed of a shoe still in play was asked for."""

    reason_code = "SHOE_NOT_FINISHED"


class ClientSeedLocked(ShoeError, IllegalState):
    """The client seed was changed after the shoe's cards were fixed."""

    reason_code = "CLIENT_SEED_LOCKED"


def new_server_seed() -> bytes:
    """A fresh 48-byte seed from the operating system's CSPRNG: 256-bit entropy input, 128-bit
    nonce."""
    return secrets.token_bytes(SEED_BYTES)


def new_server_seeds(count: int) -> list[bytes]:
    """``count`` fresh seeds, as ``new_server_seed`` makes them, from one read of the OS CSPRNG
    (each its own 48 bytes of it): a batch of one-round shoes costs one read, not one each
    (a read of 48 bytes cost about 1.8 µs, a simulated snap round about 50)."""
    pool = secrets.token_bytes(SEED_BYTES * count)
    return [pool[i:i + SEED_BYTES] for i in range(0, SEED_BYTES * count, SEED_BYTES)]


def check_shoe_inputs(seed: bytes, client_seed: bytes, decks: int) -> None:
    """InvalidShoeInput if a shoe cannot be made of these inputs: the one way
    :func:`shoe_cards` (and :class:`LazyShoe`) fail, checked before any card is shuffled, so an
    auditor can tell whether a revealed shoe can be recomputed without recomputing it."""
    if len(seed) != SEED_BYTES:
        raise InvalidShoeInput(
            f"seed has {len(seed)} bytes; a server seed is exactly {SEED_BYTES} "
            f"({ENTROPY_INPUT_BYTES}-byte entropy input, {NONCE_BYTES}-byte nonce)"
        )
    if len(client_seed) > MAX_CLIENT_SEED_BYTES:
        raise InvalidShoeInput(
            f"client seed has {len(client_seed)} bytes; at most {MAX_CLIENT_SEED_BYTES} are allowed"
        )
    if not 1 <= decks <= MAX_DECKS:
        raise InvalidShoeInput(f"decks must be between 1 and {MAX_DECKS}, got {decks}")


class DrbgInputs(NamedTuple):
    """The HMAC_DRBG instantiate inputs of one shoe. As secret as the seed until its reveal."""

    entropy_input: bytes
    nonce: bytes
    personalization_string: bytes

    def __repr__(self) -> str:
        # The tuple's own repr would print the entropy input and nonce into any log or traceback.
        return f"<DrbgInputs, personalization_string {len(self.personalization_string)} bytes>"


def drbg_inputs(seed: bytes, client_seed: bytes, decks: int) -> DrbgInputs:
    """The shoe's HMAC_DRBG inputs, exactly as the module docstring maps them."""
    check_shoe_inputs(seed, client_seed, decks)
    return DrbgInputs(seed[:ENTROPY_INPUT_BYTES], seed[ENTROPY_INPUT_BYTES:],
                      shoe_personalization(bytes(client_seed), decks))


@lru_cache(maxsize=1024)
def shoe_personalization(client_seed: bytes, decks: int) -> bytes:
    """The personalization string of a shoe of ``decks`` decks and ``client_seed``, as the
    module docstring maps them. Kept for the most recent 1,024 pairs: most shoes share a few
    (the empty client seed, a player's own), and the hash of the client seed was about a sixth
    of a fresh shoe's set-up, which the simulator and the audit pay for every one-round shoe
    (docs/performance.md, 7 December 2026). A client seed is public (a round record shows it)."""
    client_digest = hashlib.sha256(CLIENT_SEED_DOMAIN + client_seed).digest()
    return SHOE_PERSONALIZATION + decks.to_bytes(4, "big") + client_digest


def shoe_drbg(seed: bytes, client_seed: bytes, decks: int) -> HmacDrbg:
    """The DRBG a shoe is shuffled with (the mapping is in the module docstring)."""
    return HmacDrbg(*drbg_inputs(seed, client_seed, decks))


def seed_material(seed: bytes, client_seed: bytes, decks: int) -> bytes:
    """What the shoe's HMAC_DRBG is instantiated on: :func:`drbg_inputs` joined (entropy input
    || nonce || personalization string), which is the seed itself and the personalization
    string. InvalidShoeInput as :func:`check_shoe_inputs` says."""
    check_shoe_inputs(seed, client_seed, decks)
    return seed + shoe_personalization(bytes(client_seed), decks)


def shoe_cards(
    seed: bytes, client_seed: bytes, decks: int, *, reference: bool = False
) -> list[Card]:
    """The shoe's cards in dealing order: a pure function of its three inputs.

    By :class:`LazyShoe` (the DRBG and the shuffle in C where built); ``reference=True``
    (keyword only) by :class:`HmacDrbg` and :class:`DrbgRandom`, which define the convention:
    the two give the same cards (the tests compare them on random inputs, the self-test on the
    known answers)."""
    if reference:
        source = DrbgRandom(shoe_drbg(seed, client_seed, decks))  # checks the inputs first
        cards = ordered_shoe(decks)
        source.shuffle(cards)
        return cards
    return LazyShoe(seed, client_seed, decks)[:]


#: Steps a ReferenceLazyShoe runs ahead at least per request: a round's opening deal and first
#: hits in one call. Only speed depends on it; the cards and the stream do not.
_LAZY_STEPS: Final = 8


class _PythonCards(Sequence[Card]):
    """The shoe of ``decks`` decks shuffled by HmacDrbg and DrbgRandom (the reference) as far as
    it is read, its DRBG instantiated on ``seed_material`` (:func:`seed_material`): what the C
    base of :class:`LazyShoe` (``_hmac_drbg.Cards``) does, in Python.

    Reading position i runs the forward shuffle's steps up to i (and a few beyond), so the cards
    equal the full shuffle's whatever the order of reads; slices and iteration shuffle as far as
    they reach. Once every position is fixed the DRBG is dropped.
    """

    __slots__ = ("_cards", "_source", "_steps")

    def __init__(self, seed_material: bytes, decks: int) -> None:
        # entropy input, nonce and personalization string as drbg_inputs cuts them
        drbg = HmacDrbg(seed_material[:ENTROPY_INPUT_BYTES],
                        seed_material[ENTROPY_INPUT_BYTES:SEED_BYTES], seed_material[SEED_BYTES:])
        self._source: DrbgRandom | None = DrbgRandom(drbg)
        self._cards = ordered_shoe(decks)
        self._steps = 0  # shuffle steps run: positions below it hold their final cards

    def __len__(self) -> int:
        return len(self._cards)

    @property
    def fixed(self) -> int:
        """How many leading positions hold their final cards."""
        n = len(self._cards)
        return n if self._steps >= n - 1 else self._steps

    def _fix(self, count: int) -> None:
        """Run the shuffle until at least the first ``count`` positions are final."""
        source = self._source
        if source is None or count <= self._steps:
            return
        last = len(self._cards) - 1  # a full shuffle has len - 1 steps
        stop = min(max(count, self._steps + _LAZY_STEPS), last)
        source.shuffle_steps(self._cards, self._steps, stop)
        self._steps = stop
        if stop == last:
            self._source = None

    @overload
    def __getitem__(self, index: int) -> Card: ...

    @overload
    def __getitem__(self, index: slice) -> list[Card]: ...

    def __getitem__(self, index: int | slice) -> Card | list[Card]:
        if isinstance(index, slice):
            wanted = range(*index.indices(len(self._cards)))
            if wanted:
                self._fix(max(wanted[0], wanted[-1]) + 1)
            return self._cards[index]
        index = operator.index(index)
        if not 0 <= index < self._steps:  # the fast path is a card already fixed
            n = len(self._cards)
            if index < 0:
                index += n
            if not 0 <= index < n:
                raise IndexError(f"position {index} is outside a {n}-card shoe")
            self._fix(index + 1)
        return self._cards[index]

    def __iter__(self) -> Iterator[Card]:
        # Growing batches: a full pass costs a handful of calls, an early stop shuffles little.
        cards, done = self._cards, 0
        while done < len(cards):
            self._fix(2 * done + _LAZY_STEPS)
            fixed = self.fixed
            yield from cards[done:fixed]
            done = fixed


if not TYPE_CHECKING:
    try:  # the DRBG and the shuffle in one C object, built with the package (pyproject)
        from rng_service.rng._hmac_drbg import Cards as _CardsBase
    except ImportError:  # pragma: no cover - a build without libcrypto's headers
        _CardsBase = _PythonCards


class LazyShoe(_CardsBase, Sequence[Card]):
    """The cards of :func:`shoe_cards`, shuffled only as far as they are read.

    Reading position i runs the forward shuffle's steps up to i, so the cards equal
    ``shoe_cards(seed, client_seed, decks)`` whatever the order of reads; slices and iteration
    shuffle as far as they reach; :attr:`fixed` is how many leading positions are final. Once
    every position is fixed the DRBG state is dropped. Its base is the C object
    ``_hmac_drbg.Cards`` (the DRBG, the shuffle and the reads in C) where built, else the same in
    Python: :class:`ReferenceLazyShoe` is the reference the tests and the self-test hold it to.
    The undealt cards are as secret as the seed: the repr shows neither, and it is not pickled.
    """

    __slots__ = ()

    def __init__(self, seed: bytes, client_seed: bytes, decks: int) -> None:
        super().__init__(seed_material(seed, client_seed, decks), decks)

    def __repr__(self) -> str:
        return f"<LazyShoe of {len(self)} cards, {self.fixed} fixed>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a LazyShoe holds DRBG state as secret as its seed and is not pickled")


class ReferenceLazyShoe(_PythonCards):
    """:class:`LazyShoe` by HmacDrbg and DrbgRandom in Python, its DRBG from
    :func:`shoe_drbg`: the reference the C path is tested against."""

    __slots__ = ()

    def __init__(self, seed: bytes, client_seed: bytes, decks: int) -> None:
        self._source = DrbgRandom(shoe_drbg(seed, client_seed, decks))
        self._cards = ordered_shoe(decks)
        self._steps = 0

    def __repr__(self) -> str:
        return f"<ReferenceLazyShoe of {len(self._cards)} cards, {self.fixed} fixed>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a LazyShoe holds DRBG state as secret as its seed and is not pickled")


def seed_commitment(seed: bytes) -> str:
    """Hex SHA-256 over the domain tag and the seed: published before the first card is dealt.

    >>> seed_commitment(bytes(48))  # the 48 bytes of a seed: entropy input, then nonce
    '86c54d701bcb3c1ee474bb9327103917746301058d812ba21402e0c160c316f0'
    """
    return hashlib.sha256(COMMITMENT_DOMAIN + seed).hexdigest()


class Shoe:
    """One shoe from creation to the reveal of its seed.

    Without a cut card the shoe serves exactly one round. With ``cut`` (a fraction of the shoe,
    e.g. ``Fraction(1, 2)``) it serves rounds until one would start at or after the cut position;
    that round goes to a fresh shoe and this one is finished. The client seed may be set until the
    cards are first needed; after that they are fixed. Cards are shuffled only as far as they are
    dealt or read (:class:`LazyShoe`), with the same result as the full shuffle.
    """

    __slots__ = (
        "_cards",
        "_seed",
        "client_seed",
        "commitment",
        "cut",
        "decks",
        "finished",
        "id",
        "position",
        "rounds_started",
    )

    def __init__(
        self,
        *,
        shoe_id: str,
        seed: bytes,
        decks: int,
        client_seed: bytes = b"",
        cut: Fraction | None = None,
        position: int = 0,
        rounds_started: int = 0,
        finished: bool = False,
    ) -> None:
        check_shoe_inputs(seed, client_seed, decks)
        if cut is not None and not 0 < cut < 1:
            raise InvalidShoeInput(f"cut must be a fraction strictly between 0 and 1, got {cut}")
        if not 0 <= position <= 52 * decks:
            raise InvalidShoeInput(f"position {position} is outside a {decks}-deck shoe")
        self.id = shoe_id
        self._seed = seed
        # Fixed here, before any card can be dealt.
        self.commitment = seed_commitment(seed)
        self.decks = decks
        self.client_seed = client_seed
        self.cut = cut
        self.position = position
        self.rounds_started = rounds_started
        self.finished = finished
        self._cards: LazyShoe | None = None

    @classmethod
    def new(cls, decks: int, *, cut: Fraction | None = None) -> Shoe:
        """A fresh shoe with a new OS seed. Callers that deal check the RNG's health first
        (:func:`rng_service.rng.selftest.require_healthy_rng`)."""
        return cls(shoe_id=uuid.uuid4().hex, seed=new_server_seed(), decks=decks, cut=cut)

    def __repr__(self) -> str:
        return (
            f"Shoe(id={self.id!r}, decks={self.decks}, commitment={self.commitment!r}, "
            f"position={self.position}/{self.size}, cut={self.cut_position}, "
            f"finished={self.finished})"
        )

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Shoe holds a secret seed and is not pickled; seal it with SeedVault")

    @property
    def size(self) -> int:
        """The number of cards in the shoe."""
        return 52 * self.decks

    @property
    def remaining(self) -> int:
        """The number of cards not yet dealt."""
        return self.size - self.position

    @property
    def cut_position(self) -> int | None:
        """Index of the first card at or after the cut card, or None without a cut."""
        if self.cut is None:
            return None
        return cut_card_position(self.size, self.cut)

    def _fixed_cards(self) -> LazyShoe:
        if self._cards is None:
            self._cards = LazyShoe(self._seed, self.client_seed, self.decks)
        return self._cards

    @property
    def cards(self) -> LazyShoe:
        """All cards in dealing order, shuffled as far as they are read; asking fixes the client
        seed. A read-only sequence, so ``game_math.round.Round`` deals from it as it is."""
        return self._fixed_cards()

    def set_client_seed(self, client_seed: bytes) -> None:
        """Set the client seed (the personalization string); :class:`ClientSeedLocked` once the
        cards are fixed.
        """
        if self._cards is not None or self.position > 0:
            raise ClientSeedLocked(f"shoe {self.id}: the cards are already fixed")
        check_shoe_inputs(self._seed, client_seed, self.decks)
        self.client_seed = client_seed

    def start_round(self) -> bool:
        """Whether a round may start in this shoe; if not, the shoe is now finished."""
        if self.finished:
            return False
        at_end = (
            self.rounds_started >= 1
            if self.cut_position is None
            else self.position >= self.cut_position
        )
        if at_end:
            self.finished = True
            return False
        self.rounds_started += 1
        return True

    def end_round(self) -> None:
        """A round is over: a one-round shoe, or a shoe dealt past its cut, is finished."""
        cut = self.cut_position
        if cut is None or self.position >= cut:
            self.finished = True

    def finish(self) -> None:
        """Close the shoe early (e.g. a voided round); its seed may then be revealed."""
        self.finished = True

    def take(self, n: int) -> list[Card]:
        """The next ``n`` cards; the position advances past them."""
        if self.finished:
            raise ShoeFinished(f"shoe {self.id} is finished")
        if n < 0:
            raise ValueError("n must not be negative")
        if n > self.remaining:
            raise ShoeExhausted(f"shoe {self.id} has {self.remaining} cards left, {n} asked for")
        cards = self._fixed_cards()
        start = self.position
        self.position = start + n
        return cards[start : start + n]

    def deal(self) -> Card:
        """The next card."""
        return self.take(1)[0]

    def reveal(self) -> bytes:
        """The seed, once the shoe is finished."""
        if not self.finished:
            raise ShoeNotFinished(f"shoe {self.id} is still in play; its seed stays secret")
        return self._seed

    def seal_seed(self, vault: SeedVault) -> bytes:
        """The seed encrypted for storage, bound to this shoe's id."""
        return vault.seal(self.id, self._seed)

    @classmethod
    def restore(
        cls,
        vault: SeedVault,
        sealed_seed: bytes,
        *,
        shoe_id: str,
        decks: int,
        client_seed: bytes = b"",
        cut: Fraction | None = None,
        position: int = 0,
        rounds_started: int = 0,
        finished: bool = False,
    ) -> Shoe:
        """A stored shoe back in play, its seed decrypted from ``sealed_seed``."""
        return cls(
            shoe_id=shoe_id,
            seed=vault.open(shoe_id, sealed_seed),
            decks=decks,
            client_seed=client_seed,
            cut=cut,
            position=position,
            rounds_started=rounds_started,
            finished=finished,
        )
