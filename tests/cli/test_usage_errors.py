"""Argument errors, as a new user meets them: one line on stderr naming the command, the fault
and where to read more, and exit status 2 (issue 20, "Clients and CLI" 5); and the help texts
that must agree with what the command does."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from rng_service.cli.main import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.mark.parametrize(("argv", "line"), [
    (["simulate", "snap", "--rounds", "abc"],
     "fairshoe simulate: argument --rounds: invalid int value: 'abc' "
     "(see fairshoe simulate --help)"),
    (["play", "--game", "nope"],
     "fairshoe play: argument --game: invalid choice: 'nope' (choose from 'snap', "
     "'double-deck', 'double-exposure', 'multi-hand') (see fairshoe play --help)"),
    (["nonsense"],
     "fairshoe: argument COMMAND: invalid choice: 'nonsense' (choose from 'rules', 'replay', "
     "'serve', 'health', 'keys', 'operators', 'wallet', 'rng-test', 'shoe', 'collect', "
     "'audit', 'par', 'simulate', 'play', 'log') "
     "(see fairshoe --help)"),
    ([], "fairshoe: the following arguments are required: COMMAND (see fairshoe --help)"),
    (["rules", "show", "--no-such-flag"],
     "fairshoe rules: unrecognized arguments: --no-such-flag (see fairshoe rules --help)"),
    (["simulate", "snap"],
     "fairshoe simulate: the following arguments are required: --rounds "
     "(see fairshoe simulate --help)"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_an_argument_error_is_one_line_ending_in_a_hint(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(argv, capsys)
    assert (code, out, err) == (2, "", line + "\n")


def test_a_fields_name_is_not_repeated_after_the_command(
    capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["rules", "show", "--rules", "/missing.toml"], capsys)
    assert code == 2
    assert err == ("fairshoe rules: cannot read rules file /missing.toml: "
                   "No such file or directory\n")


def test_play_help_gives_one_default_for_mode() -> None:
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        main(["play", "--help"])
    text = " ".join(out.getvalue().split())
    assert "--mode {demo,real} demo (play money) or real money (default: ask; demo when " \
           "the answer is empty)" in text
    assert "the default" not in text.split("--mode", 2)[2].split("--level")[0]
