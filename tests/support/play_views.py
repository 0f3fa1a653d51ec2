"""What `fairshoe play`'s tests render without a server (tests/cli/test_play_units.py,
test_play_table_render.py): a table's info from a game's rules, a snap round's view, and a
renderable as the plain text a terminal would show."""

from __future__ import annotations

import io
import tomllib
from typing import Any

import tomli_w
from rich.console import Console, RenderableType

from game_math.games import game_rules
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.cli import play_render as render


def text_of(item: RenderableType) -> str:
    out = io.StringIO()
    Console(file=out, width=140, color_system=None, soft_wrap=True).print(item)
    return out.getvalue()


def info(game: str) -> render.TableInfo:
    return render.TableInfo.from_rules(tomllib.loads(tomli_w.dumps(game_rules(game).to_dict())))


def card(code: str, hidden: bool = False) -> Any:
    return rt.Card(code="" if hidden else code, hidden=hidden)


def snap_view(**fields: Any) -> Any:
    """A snap round awaiting a play decision: 10♠ 9♥ against 7♦ and a hole card."""
    view = rt.RoundView(
        round_id="r1", version=1, game="snap", level="medium", mode=1, currency="EUR",
        status=rt.ROUND_STATUS_AWAITING_PLAYER,
        turn=rt.Turn(hand_id=0, decision=rt.DECISION_PLAY),
        dealer=rt.DealerView(cards=[card("7D"), card("", hidden=True)], total=7),
        hands=[rt.HandView(hand_id=0, seat=0, bet_minor=1000, cards=[card("TS"), card("9H")],
                           total=19)],
        legal_actions=[
            rt.LegalAction(action=rt.ACTION_KIND_HIT, alert=rt.ALERT_HIT_HARD_17_20),
            rt.LegalAction(action=rt.ACTION_KIND_STAND),
            rt.LegalAction(action=rt.ACTION_KIND_DOUBLE, min_stake_minor=1000,
                           max_stake_minor=1000, stakes_minor=[1000])],
        total_staked_minor=1000, balance_after_minor=99_000,
        shoe=rt.ShoeRef(shoe_id="s1", commitment="c" * 64, decks=2))
    for name, value in fields.items():
        field = getattr(view, name)
        if isinstance(value, list):
            del field[:]
            field.extend(value)
        elif hasattr(field, "CopyFrom"):
            field.CopyFrom(value)
        else:
            setattr(view, name, value)
    return view
