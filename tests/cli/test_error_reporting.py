"""How the command line reports a deliberate error: one line on stderr, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from game_math.errors import IllegalAction
from rng_service.cli import game as game_cli
from rng_service.cli.main import CommandError, main
from rng_service.core.errors import InvalidInput, NotFound
from rng_service.crypto.keys import KeyNotFound


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.mark.parametrize(("error", "line"), [
    (IllegalAction("cannot split\nhand 0"), "fairshoe replay: cannot split hand 0\n"),
    (NotFound("game", "no game 'x'"), "fairshoe replay: game: no game 'x'\n"),
    (KeyNotFound("no key ed25519:00"), "fairshoe replay: no key ed25519:00\n"),
    (CommandError("--seed must be hexadecimal"), "fairshoe replay: --seed must be hexadecimal\n"),
])
def test_fairshoe_and_game_math_errors_print_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    error: Exception, line: str
) -> None:
    def fail(script: object, *, rules_files: bool) -> None:
        raise error

    monkeypatch.setattr(game_cli, "play_script", fail)
    script = tmp_path / "s.json"
    script.write_text("{}")
    code, out, err = _run(["replay", str(script)], capsys)
    assert (code, out, err) == (2, "", line)


def test_a_bug_is_not_disguised_as_a_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(script: object, *, rules_files: bool) -> None:
        raise KeyError("bug")

    monkeypatch.setattr(game_cli, "play_script", fail)
    script = tmp_path / "s.json"
    script.write_text("{}")
    with pytest.raises(KeyError):
        main(["replay", str(script)])


def test_command_error_is_invalid_input() -> None:
    err = CommandError("--rounds: at least 2")
    assert isinstance(err, InvalidInput) and str(err) == "--rounds: at least 2"


def test_a_script_that_is_not_json_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "s.json"
    script.write_text("[" * 100_000)
    code, _, err = _run(["replay", str(script)], capsys)
    assert code == 2 and err.startswith("fairshoe replay: not JSON") and err.count("\n") == 1
