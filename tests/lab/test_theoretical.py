"""The built-in games' theoretical figures ship with the package, for the rules they were made
from; a server start reads them instead of spending seconds of CPU on each game."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from game_math.games import game_rules
from game_math.rules import GAME_IDS
from rng_service.lab import theoretical

REGENERATE = "run .venv/bin/python -m rng_service.lab.theoretical --write"


def _shipped_doc() -> dict:
    return json.loads(theoretical.SHIPPED.read_text(encoding="utf-8"))


def test_every_built_in_game_ships_figures_made_from_its_current_rules() -> None:
    doc = _shipped_doc()
    assert doc["format"] == theoretical.FORMAT
    assert sorted(doc["games"]) == sorted(GAME_IDS), REGENERATE
    for game in GAME_IDS:
        entry = doc["games"][game]
        assert entry["rules_digest"] == game_rules(game).digest(), f"{game}: {REGENERATE}"
        assert entry["stddev_rounds"] == theoretical.STDDEV_ROUNDS, REGENERATE
        found, source = theoretical.figures(game)
        assert source == "shipped"
        assert set(found) == {"main", *(s.name for s in game_rules(game).side_bets)}


def test_the_shipped_figures_are_what_the_computation_gives() -> None:
    # snap: the cheapest game to compute, with a side bet; the computation is deterministic
    # (exact analysis, fixed-seed simulation on one worker), so equal to the last bit
    shipped = _shipped_doc()["games"]["snap"]["figures"]
    computed = theoretical.compute("snap")
    assert {w: list(v) for w, v in computed.items()} == shipped


@pytest.mark.parametrize("content", [
    None,  # absent
    "not json",
    json.dumps({"format": "something-else/v1", "games": {}}),
    json.dumps({"format": theoretical.FORMAT, "games": {"snap": {
        "rules_digest": "0" * 64, "stddev_rounds": theoretical.STDDEV_ROUNDS,
        "figures": {"main": [2.0, 9.0]}}}}),  # made from other rules
])
def test_figures_not_made_from_these_rules_are_computed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None) -> None:
    path = tmp_path / "theoretical.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setattr(theoretical, "SHIPPED", path)
    monkeypatch.setattr(theoretical, "compute", lambda game: {"main": (0.5, 1.5)})
    assert theoretical.figures("snap") == ({"main": (0.5, 1.5)}, "computed")
