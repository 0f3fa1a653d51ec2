"""Shoe reveals (``fairshoe.reveal/v1``): :func:`read_reveal` checks a verified reveal's payload
(decks within bounds, client seed within its length, whether the seed opens the commitment), and
:class:`Reveal` recomputes its shoe from the seed, once, for the rounds dealt from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from game_math.cards import Card
from rng_service.audit.failures import Doc, fail
from rng_service.rng.shoe import (
    MAX_CLIENT_SEED_BYTES,
    MAX_DECKS,
    InvalidShoeInput,
    seed_commitment,
    shoe_cards,
)


@dataclass
class Reveal:
    """A shoe reveal whose signature verified, and whether its seed opens its commitment."""

    shoe_id: str
    commitment: str
    seed: bytes
    client_seed: bytes
    decks: int
    path: Path
    opens: bool
    #: other shoe ids revealed with the same commitment (so the same seed)
    shared_with: tuple[str, ...] = ()
    #: why the shoe cannot be recomputed from this seed, once that was tried
    unusable: str | None = None
    recomputed: bool = False
    _cards: list[Card] | None = None

    def cards(self) -> list[Card]:
        """The shoe recomputed from the seed; AuditFailure on ``reveal.seed`` if it cannot be."""
        if self.unusable is not None:
            fail("reveal.seed", self.unusable)
        if self._cards is None:
            try:
                self._cards = shoe_cards(self.seed, self.client_seed, self.decks)
            except (ValueError, InvalidShoeInput) as exc:
                # the seed's length is the shoe module's rule (InvalidShoeInput), not the audit's
                self.unusable = f"cannot shuffle the shoe: {exc}"
                fail("reveal.seed", self.unusable)
            self.recomputed = True
        return self._cards

    def drop_cards(self) -> None:
        """Forget the recomputed shoe; :meth:`cards` recomputes it if asked again."""
        self._cards = None

    def same_as(self, other: Reveal) -> bool:
        """True if ``other`` reveals the same shoe: same commitment, seed, client seed and
        decks (the file it came from may differ)."""
        return (self.commitment, self.seed, self.client_seed, self.decks) == (
            other.commitment, other.seed, other.client_seed, other.decks)


def read_reveal(payload: Mapping[str, Any], path: Path) -> Reveal:
    """The reveal in a verified payload; AuditFailure on the member out of bounds."""
    doc = Doc(payload, "")
    seed = doc.get_hex("seed")  # its length is the shoe's rule: shoe_cards checks it (Reveal.cards)
    decks = doc.get_int("decks")
    if not 1 <= decks <= MAX_DECKS:
        fail("decks", f"must be 1..{MAX_DECKS}, got {decks}")
    client_seed = doc.get_hex("client_seed")
    if len(client_seed) > MAX_CLIENT_SEED_BYTES:
        fail("client_seed", f"has {len(client_seed)} bytes, more than {MAX_CLIENT_SEED_BYTES}")
    commitment = doc.get_str("commitment")
    return Reveal(doc.get_str("shoe_id"), commitment, seed, client_seed, decks, path,
                  opens=seed_commitment(seed) == commitment)
