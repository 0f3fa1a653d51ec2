"""A new shoe's row (``shoes.new_row``, made positionally for its cost) is the row its fields
name, for shoes of one round and cut-card shoes, with and without a client seed, in both
modes; its sealed seed opens to the shoe whose commitment it carries."""

from __future__ import annotations

import secrets
from fractions import Fraction

import pytest

from game_math.games import game_rules
from rng_service.records.schema import rules_digest
from rng_service.rng.seed_vault import SeedVault
from rng_service.rng.shoe import Shoe
from rng_service.service import shoes
from rng_service.service.ports import Mode, ShoeRow, ShoeStatus

VAULT = SeedVault(secrets.token_bytes(32))
NOW = "2026-12-07T21:00:00.123456Z"


@pytest.mark.parametrize("game", ["snap", "double-deck", "multi-hand", "double-exposure"])
@pytest.mark.parametrize("mode", [Mode.REAL, Mode.DEMO])
@pytest.mark.parametrize("client_seed", [None, b"\x00player seed\xff"])
def test_a_new_shoes_row_is_the_row_its_fields_name(
    game: str, mode: Mode, client_seed: bytes | None
) -> None:
    rules = game_rules(game)
    cut: Fraction | None = shoes.cut_of(rules)
    shoe = Shoe.new(rules.decks, cut=cut)
    if client_seed is not None:
        shoe.set_client_seed(client_seed)
    row = shoes.new_row(shoe, VAULT, operator="op-1", player="p-1", rules=rules, mode=mode, now=NOW)
    assert row == ShoeRow(
        operator="op-1",
        shoe_id=shoe.id,
        player="p-1",
        game=rules.game,
        rules_digest=rules_digest(rules),
        decks=shoe.decks,
        cut=None if shoe.cut is None else str(shoe.cut),
        commitment=shoe.commitment,
        sealed_seed=row.sealed_seed,
        client_seed=shoe.client_seed,
        position=shoe.position,
        rounds_started=shoe.rounds_started,
        status=ShoeStatus.COMMITTED,
        version=1,
        created_at=NOW,
        updated_at=NOW,
        mode=mode,
    )
    assert list(row.__dict__) == [f for f in ShoeRow.__dataclass_fields__]
    reopened = shoes.restore(row, VAULT)  # the seed under its commitment (checked there)
    assert reopened.commitment == shoe.commitment and reopened.cards[:20] == shoe.cards[:20]
