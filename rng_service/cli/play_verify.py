"""The player's own check of a finished shoe: the revealed seed against the commitment shown
before the deal, and every card dealt against the shoe recomputed from that seed.

Pure: it takes the reveal's payload (``fairshoe.shoe-reveal/v1``, from
AuditService.GetShoeReveal) and the round views the player saw from that shoe, and recomputes
with the service's own shoe functions (:func:`rng_service.rng.shoe.seed_commitment`,
:func:`rng_service.rng.shoe.shoe_cards`). An auditor's full check (signatures, the replay of
every decision) is ``fairshoe audit verify``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from game_math.cards import card_codes
from rng_service.records.schema import REVEAL_SCHEMA
from rng_service.rng.shoe import ShoeError, seed_commitment, shoe_cards

#: event kinds (fairshoe.round.v1.EventKind) a dealt card appears in
EVENT_CARD = 1
EVENT_REVEAL = 2


@dataclass(frozen=True)
class ShoeCheck:
    """The outcome of checking one shoe: ``ok`` and one line saying what was found."""

    shoe_id: str
    ok: bool
    message: str

    def line(self) -> str:
        """One line for the session: VERIFIED or MISMATCH, the shoe id and the detail."""
        return f"{'VERIFIED' if self.ok else 'MISMATCH'} shoe {self.shoe_id}: {self.message}"


def dealt_cards(view: Any) -> list[str]:
    """The codes of the cards a round dealt, in shoe order, read from its events: a hole card
    dealt face down takes its place in the order and its code from the later reveal event
    (empty while never revealed)."""
    dealt: list[str] = []
    hidden: list[int] = []
    for event in view.events:
        if event.kind == EVENT_CARD:
            if event.card.hidden or not event.card.code:
                hidden.append(len(dealt))
            dealt.append(event.card.code)
        elif event.kind == EVENT_REVEAL and hidden:
            dealt[hidden.pop(0)] = event.card.code
    return dealt


def _payload_problem(payload: dict[str, Any], shoe: Any) -> str | None:
    """What is wrong with the reveal itself, before any card is compared."""
    if payload.get("schema") != REVEAL_SCHEMA:
        return f"the reveal's schema is {payload.get('schema')!r}, not {REVEAL_SCHEMA}"
    if payload.get("shoe_id") != shoe.shoe_id:
        return f"the reveal is of shoe {payload.get('shoe_id')!r}"
    if payload.get("commitment") != shoe.commitment:
        return (f"the reveal names commitment {payload.get('commitment')}, the round showed "
                f"{shoe.commitment}")
    if payload.get("client_seed") != bytes(shoe.client_seed).hex():
        return "the reveal's client seed is not the one the round showed"
    if payload.get("decks") != shoe.decks:
        return f"the reveal says {payload.get('decks')} decks, the round showed {shoe.decks}"
    return None


def _round_problem(view: Any, shoe: Sequence[str]) -> str | None:
    """The first card of ``view`` that is not the recomputed shoe's card at its position."""
    start, end = view.cards_used.start, view.cards_used.end
    dealt = dealt_cards(view)
    if len(dealt) != end - start:
        return (f"round {view.round_id} shows {len(dealt)} cards for shoe positions "
                f"[{start}, {end})")
    for offset, code in enumerate(dealt):
        if code != shoe[start + offset]:
            return (f"round {view.round_id} dealt {code or 'a hidden card'} at shoe position "
                    f"{start + offset}; the shoe recomputed from the revealed seed has "
                    f"{shoe[start + offset]} there")
    return None


def verify_shoe(payload: dict[str, Any], rounds: Sequence[Any]) -> ShoeCheck:
    """Check the reveal ``payload`` of the shoe that dealt ``rounds`` (round views, at least
    one, all from that shoe as their ``shoe`` says)."""
    shoe = rounds[0].shoe
    problem = _payload_problem(payload, shoe)
    if problem is not None:
        return ShoeCheck(shoe.shoe_id, False, problem)
    try:
        seed = bytes.fromhex(str(payload.get("seed")))
        if seed_commitment(seed) != shoe.commitment:
            return ShoeCheck(shoe.shoe_id, False, "the revealed seed does not hash to the "
                             f"commitment {shoe.commitment}")
        cards = card_codes(shoe_cards(seed, bytes(shoe.client_seed), shoe.decks))
    except (ValueError, ShoeError) as exc:
        return ShoeCheck(shoe.shoe_id, False, f"the revealed seed is unusable: {exc}")
    for view in rounds:
        problem = _round_problem(view, cards)
        if problem is not None:
            return ShoeCheck(shoe.shoe_id, False, problem)
    dealt = sum(v.cards_used.end - v.cards_used.start for v in rounds)
    return ShoeCheck(shoe.shoe_id, True,
                     f"the revealed seed matches commitment {shoe.commitment[:16]}…; "
                     f"{dealt} cards of {len(rounds)} round(s) match the shoe recomputed from it")
