"""A shoe reveal is judged recomputable as it is read (``shoe.shuffle``): the verdict and its
message are those of recomputing the shoe, and checking the shoe's rounds does not change the
reveal, so the audit keeps it as read (nothing goes back to the scratch store after pass 2)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

from rng_service.audit.failures import AuditFailure
from rng_service.audit.files import Status
from rng_service.audit.reveals import Reveal, ShoeShuffles, read_reveal, reveal_finding
from rng_service.rng.shoe import (
    MAX_CLIENT_SEED_BYTES,
    InvalidShoeInput,
    seed_commitment,
    shoe_cards,
)

PATH = Path("reveals/s1.json")


def _reveal(seed: bytes, client_seed: bytes = b"", decks: int = 2) -> Reveal:
    return read_reveal({"shoe_id": "s1", "seed": seed.hex(), "client_seed": client_seed.hex(),
                        "decks": decks, "commitment": seed_commitment(seed)}, PATH)


def _shuffled(seed: bytes, client_seed: bytes, decks: int) -> str | None:
    """Why recomputing the shoe fails, as the audit words it, or None if it does not."""
    try:
        shoe_cards(seed, client_seed, decks)
    except (ValueError, InvalidShoeInput) as exc:
        return f"cannot shuffle the shoe: {exc}"
    return None


@pytest.mark.parametrize("seed_bytes", [0, 1, 12, 32, 47, 48, 49, 64, 96])
@pytest.mark.parametrize(("client_bytes", "decks"), [(0, 1), (16, 2), (MAX_CLIENT_SEED_BYTES, 8)])
def test_a_reveal_is_judged_recomputable_as_recomputing_it_judges(
        seed_bytes: int, client_bytes: int, decks: int) -> None:
    seed, client_seed = bytes(range(seed_bytes)), b"\x07" * client_bytes
    reveal = _reveal(seed, client_seed, decks)
    assert reveal.unusable == _shuffled(seed, client_seed, decks)
    line = reveal_finding(reveal, (ShoeShuffles(),))
    if reveal.unusable is None:
        assert line.status is Status.OK
        assert reveal.cards() == shoe_cards(seed, client_seed, decks)
    else:
        assert (line.status, line.field, line.message) == (Status.FAIL, "seed", reveal.unusable)
        recomputes: tuple[Callable[[], object], ...] = (reveal.cards,
                                                        lambda: reveal.round_cards(1))
        for recompute in recomputes:
            with pytest.raises(AuditFailure) as info:
                recompute()
            assert (info.value.field, info.value.message) == ("reveal.seed", reveal.unusable)


@pytest.mark.parametrize("seed_bytes", [48, 12])
def test_checking_a_shoes_rounds_leaves_its_reveal_as_it_was_read(seed_bytes: int) -> None:
    reveal = _reveal(bytes(range(seed_bytes)))
    kept = pickle.dumps(reveal, pickle.HIGHEST_PROTOCOL)
    recomputes: tuple[Callable[[], object], ...] = (
        lambda: reveal.round_cards(1)[:4], reveal.cards, lambda: reveal.round_cards(3))
    for recompute in recomputes:
        try:
            recompute()
        except AuditFailure:
            assert seed_bytes != 48
    assert pickle.dumps(reveal, pickle.HIGHEST_PROTOCOL) == kept
    again = pickle.loads(kept)
    assert (again.shoe_id, again.seed, again.unusable, again.path) == (
        reveal.shoe_id, reveal.seed, reveal.unusable, PATH)
