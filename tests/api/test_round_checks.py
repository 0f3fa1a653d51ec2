"""The request checks of a round's transitions take and refuse what they did before their faster
forms: a round id as ``validate.round_id``'s pattern judges it, and the checks whose results are
kept by value (``calls.kept``: the player, StartRound's game, level, mode and currency, a plain
hand bet) give the check's own result or error, whatever was kept before."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from game_math.round import HandBet
from rng_service.api import calls, round_api
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.core.errors import InvalidInput
from rng_service.service import validate

HEX = "0123456789abcdef"


def _outcome(check: Any, *values: Any) -> tuple[str, Any]:
    """What ``check`` does with ``values``: its result, or the error's field and message."""
    try:
        return "taken", check(*values)
    except InvalidInput as err:
        return "refused", (err.field, str(err))


@pytest.fixture(autouse=True)
def _nothing_kept() -> Any:
    for table in (round_api._players, round_api._games, round_api._plain_bets):
        table.clear()
    yield


@pytest.mark.parametrize("code", range(0x250))
def test_a_round_id_with_each_character_anywhere(code: int) -> None:
    for value in (chr(code) * 32, "a" * 31 + chr(code), chr(code) + "0" * 31,
                  "f" * 15 + chr(code) + "e" * 16, "0" * 31, "0" * 33 + chr(code)):
        assert _outcome(round_api.checked_round_id, value) == _outcome(validate.round_id, value)


@given(st.text(HEX, min_size=30, max_size=34) | st.text(max_size=40)
       | st.text(HEX + "ABCDEFg \n\u0660", min_size=31, max_size=33))
def test_any_round_id_as_the_pattern(value: str) -> None:
    assert _outcome(round_api.checked_round_id, value) == _outcome(validate.round_id, value)


@pytest.mark.parametrize("value", ["", None, 7, b"0" * 32, "0" * 32 + "\n"])
def test_a_round_id_refused_is_refused_as_before(value: object) -> None:
    assert _outcome(round_api.checked_round_id, value) == _outcome(validate.round_id, value)
    assert _outcome(round_api.checked_round_id, value)[0] == "refused"


def test_kept_keeps_only_what_the_check_let_through(monkeypatch: pytest.MonkeyPatch) -> None:
    table: dict[Any, Any] = {}
    checked: list[Any] = []

    def check(value: str) -> str:
        checked.append(value)
        return validate.player(value)

    assert calls.kept(table, "alice", check) == "alice" and table == {"alice": "alice"}
    with pytest.raises(InvalidInput):
        calls.kept(table, "@house", check)
    assert table == {"alice": "alice"} and checked == ["alice", "@house"]
    assert calls.kept(table, ("a", 1), lambda *values: values) == ("a", 1)  # a tuple: its values
    monkeypatch.setattr(calls, "MAX_KEPT", 2)
    calls.kept(table, "bob", check)
    assert table == {"bob": "bob"}  # emptied once full


PLAYERS = ["alice", "@house", "", "a" * 128, "a" * 129, "b:c.d_e-f", "-x", "alice"]
GAMES = [("classic", "", common_pb2.MODE_REAL, "EUR"), ("", "", common_pb2.MODE_REAL, "EUR"),
         ("classic", "high", common_pb2.MODE_DEMO, "JPY"), ("g" * 65, "", 0, "eur"),
         ("classic", "l" * 65, common_pb2.MODE_REAL, "EUR"),
         ("classic", "", 0, "EUR"), ("classic", "", 7, "EUR"), ("classic", "", 1, "XAU"),
         ("classic", "", common_pb2.MODE_REAL, "eur"), ("classic", "", common_pb2.MODE_REAL, "EUR")]


def _game_fields_as_before(game: str, level: str, mode: int, currency: str) -> Any:
    return (calls.text("game", game, most=round_api.MAX_NAME_CHARS),
            calls.text("level", level, most=round_api.MAX_NAME_CHARS, required=False) or None,
            calls.mode("mode", mode), validate.currency(currency))


def _kept_player(value: str) -> str:
    return round_api._players.get(value) or calls.kept(round_api._players, value,
                                                        validate.player)


def _kept_game(key: tuple[str, str, int, str]) -> Any:
    return round_api._games.get(key) or calls.kept(round_api._games, key, round_api.game_fields)


def test_kept_checks_answer_as_the_checks_in_any_order() -> None:
    """Each value met twice, in three orders, refused ones between: the handlers' kept form
    of each check gives the check's result or error every time."""
    for order in (PLAYERS, PLAYERS[::-1], PLAYERS * 2):
        for value in order:
            assert _outcome(_kept_player, value) == _outcome(validate.player, value)
    for order in (GAMES, GAMES[::-1], GAMES * 2):
        for key in order:
            assert _outcome(_kept_game, key) == _outcome(_game_fields_as_before, *key)
    assert set(round_api._players) == {"alice", "a" * 128, "b:c.d_e-f"}
    assert len(round_api._games) == 2  # the first and the last are one


def test_hand_bets_are_the_bets_built_anew() -> None:
    """A plain hand's bet is one kept ``HandBet`` a bet, equal to one built for the request; a
    hand with side bets is built anew; refusals name the hand as before."""
    hands = [rt.HandBet(bet_minor=100), rt.HandBet(bet_minor=250),
             rt.HandBet(bet_minor=100, side_bets=[rt.SideBetStake(name="pairs", stake_minor=5)])]
    first = round_api.hand_bets(hands)
    again = round_api.hand_bets(hands)
    assert first == again == [HandBet(100), HandBet(250), HandBet(100, {"pairs": 5})]
    assert first[0] is again[0] and first[2] is not again[2]
    assert first[0].side_bets == {} and first[2].side_bets == {"pairs": 5}
    for bad, field in (([rt.HandBet(bet_minor=100), rt.HandBet(bet_minor=0)], "hands[1].bet_minor"),
                       ([rt.HandBet(bet_minor=-5)], "hands[0].bet_minor")):
        with pytest.raises(InvalidInput) as err:
            round_api.hand_bets(bad)
        assert err.value.field == field
    assert set(round_api._plain_bets) == {100, 250}
