"""The published JSON of two known rounds, pinned byte for byte.

``fairshoe replay``'s output (docs/games.md, "Replaying a round") and the signed round record
(``fairshoe.round/v1``) are formats others parse and sign: a refactoring of the engine must leave
every byte of them as it is. The two scripts between them deal every kind of event (cards face
up and down, a reveal, a peek, even money, insurance, a split, a double, side-bet lines, an alert,
settlements) to both a hole-card game and a no-hole-card game. The expected files were written by
the engine before its events became typed records; regenerate them only for a deliberate change
of format.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rfc8785

from game_math.cards import parse_cards
from game_math.games import game_rules
from game_math.round import HandBet, Round, action_from_json
from rng_service.cli.main import main
from rng_service.records.schema import ShoeRef, round_payload

PINNED = Path(__file__).parent / "data" / "pinned"
GAMES = ("snap", "multi-hand")


@pytest.mark.parametrize("game", GAMES)
def test_replay_output_is_byte_identical(game: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["replay", str(PINNED / f"{game}.script.json")])
    out, _ = capsys.readouterr()
    assert done.value.code in (0, None)
    assert out == (PINNED / f"{game}.replay.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("game", GAMES)
def test_round_record_is_byte_identical(game: str) -> None:
    script = json.loads((PINNED / f"{game}.script.json").read_text(encoding="utf-8"))
    hands = [HandBet.from_json(h, "hands") for h in script["hands"]]
    rnd = Round(game_rules(game), parse_cards(script["shoe"]), hands, script.get("side_bets"),
                level=script.get("level"), balance=script.get("balance"))
    for item in script["actions"]:
        rnd.act(action_from_json(item))
    payload = round_payload(rnd, round_id="0" * 32, shoe=ShoeRef("shoe-1", "c" * 64, 2, b"p"),
                            started_at="2024-05-01T12:00:00.000Z",
                            finished_at="2024-05-01T12:00:01.000Z", version="0.1.0")
    assert rfc8785.dumps(payload) == (PINNED / f"{game}.record.json").read_bytes()
