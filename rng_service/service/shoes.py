"""Where shoes come from, and how a stored shoe row becomes a :class:`Shoe` again.

:class:`ShoeSource` is the one port randomness enters through. Production uses
:class:`OsShoeSource`: seeds from the OS CSPRNG (after the RNG self-test), cards by the certified
DRBG shuffle. A test stacks a shoe with a source of its own (``tests/service/stacking.py``) whose
``certified`` is False; :class:`rng_service.service.rounds.RoundService` refuses such a source
unless ``FAIRSHOE_TEST_SHOES=1``, which is itself refused when ``FAIRSHOE_ENV=production``
(:func:`rng_service.core.config.test_shoes_allowed`). No production code can stack cards.

A stored shoe's cards are re-derived from its sealed seed when a transition restores it (a
process that dealt the last transition keeps them in its live cache, :mod:`.live_cache`); only
the position (cards dealt so far) is stored in clear, and ``Round.to_bytes`` stores only dealt
cards.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Protocol

from game_math.cards import Card
from game_math.rules import Rules, ShufflePolicy
from rng_service.core.errors import IntegrityFailure, Unavailable
from rng_service.core.frozen import quick_replace
from rng_service.records.schema import rules_digest
from rng_service.rng.seed_vault import SeedVault, SeedVaultError
from rng_service.rng.selftest import SelfTestFailed, require_healthy_rng
from rng_service.rng.shoe import Shoe
from rng_service.service.ports import Mode, ShoeRow, ShoeStatus
from rng_service.service.views import ShoeView


class ShoeSource(Protocol):
    """Makes new shoes and gives the cards of a shoe in dealing order."""

    #: True only for the production source; an uncertified one deals only where tests allow it
    certified: bool

    def new_shoe(self, decks: int, cut: Fraction | None) -> Shoe:
        """A new shoe of ``decks`` decks, with a cut card at ``cut`` (None: one round)."""
        ...

    def cards(self, shoe: Shoe) -> Sequence[Card]:
        """The shoe's cards in dealing order."""
        ...


class OsShoeSource:
    """Production: an OS CSPRNG seed per shoe, cards by the certified lazy DRBG shuffle."""

    certified = True

    def new_shoe(self, decks: int, cut: Fraction | None) -> Shoe:
        """A new OS-seeded shoe; ``Unavailable`` if the RNG has failed its self-test."""
        # the guard runs here, where the service deals: Shoe.new has no self-test side effect
        require_rng()
        return Shoe.new(decks, cut=cut)

    def cards(self, shoe: Shoe) -> Sequence[Card]:
        """The shoe's cards by the certified lazy shuffle."""
        return shoe.cards


def require_rng() -> None:
    """Refuse to deal (``Unavailable``, reason RNG_SELF_TEST_FAILED) once the RNG has failed its
    self-test: a new shoe, a new round in a shoe already open, and a decision in an open round
    (their cards come from the same DRBG code, dealt lazily)."""
    try:
        require_healthy_rng()
    except SelfTestFailed as exc:
        raise Unavailable(str(exc), reason="RNG_SELF_TEST_FAILED") from None


def cut_of(rules: Rules) -> Fraction | None:
    """The cut-card fraction of a game whose shoe spans rounds; None for a shoe per round."""
    return rules.shuffle.cut_card if rules.shuffle.policy is ShufflePolicy.CUT_CARD else None


def new_row(shoe: Shoe, vault: SeedVault, *, operator: str, player: str, rules: Rules,
            mode: Mode, now: str) -> ShoeRow:
    """The row of a fresh shoe for ``mode``'s rounds: its seed sealed, its commitment fixed, no
    card dealt."""
    # positional, in field order: a class called with 17 keyword arguments pays some 8,000
    # instructions more (tests/service/test_shoes_rows.py holds it to the row made by name)
    return ShoeRow(operator, shoe.id, player, rules.game, rules_digest(rules), shoe.decks,
                   None if shoe.cut is None else str(shoe.cut), shoe.commitment,
                   shoe.seal_seed(vault), shoe.client_seed, shoe.position, shoe.rounds_started,
                   ShoeStatus.COMMITTED, 1, now, now, mode)


def restore(row: ShoeRow, vault: SeedVault) -> Shoe:
    """The shoe of ``row``, its seed opened from the vault."""
    try:
        shoe = Shoe.restore(
            vault, row.sealed_seed, shoe_id=row.shoe_id, decks=row.decks,
            client_seed=row.client_seed, cut=None if row.cut is None else Fraction(row.cut),
            position=row.position, rounds_started=row.rounds_started,
            finished=row.status in (ShoeStatus.FINISHED, ShoeStatus.REVEALED),
        )
    except SeedVaultError as exc:  # the message names the shoe, never the seed or key
        raise IntegrityFailure(str(exc), reason="SEED_VAULT") from None
    if shoe.commitment != row.commitment:
        raise IntegrityFailure(f"shoe {row.shoe_id}: the sealed seed does not match its "
                               "commitment", reason="COMMITMENT_MISMATCH")
    return shoe


def updated_row(row: ShoeRow, shoe: Shoe, status: ShoeStatus, now: str) -> ShoeRow:
    """``row`` after ``shoe`` moved on: next version, new position, count and status."""
    return quick_replace(
        row, client_seed=shoe.client_seed, position=shoe.position,
        rounds_started=shoe.rounds_started, status=status, version=row.version + 1,
        updated_at=now,
    )


def moved(old: ShoeRow, new: ShoeRow) -> bool:
    """Whether ``new`` differs from ``old`` in what a transition changes (position, rounds
    started, status, client seed): if not, there is nothing to write."""
    return (old.position, old.rounds_started, old.status, old.client_seed) != (
        new.position, new.rounds_started, new.status, new.client_seed)


def cut_position(row: ShoeRow) -> int | None:
    """The first position at or after the cut card (as ``Shoe.cut_position``), from the row."""
    if row.cut is None:
        return None
    cut = Fraction(row.cut)
    return 52 * row.decks * cut.numerator // cut.denominator


def shoe_view(row: ShoeRow) -> ShoeView:
    """A shoe row as the player sees it (no seed)."""
    return ShoeView(
        shoe_id=row.shoe_id, game=row.game, decks=row.decks, commitment=row.commitment,
        client_seed=row.client_seed.hex(), status=str(row.status), cards_dealt=row.position,
        cut_position=cut_position(row), client_seed_locked=row.status is not ShoeStatus.COMMITTED,
        committed_at=row.created_at,
    )
