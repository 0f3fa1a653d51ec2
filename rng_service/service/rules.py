"""Which rules a request plays: a built-in game's, or a custom combination from a TOML file."""

from __future__ import annotations

from pathlib import Path

from game_math.errors import RulesError
from game_math.games import game_rules
from game_math.rules import GAME_IDS, Rules, rules_from_toml
from rng_service.core.errors import InvalidInput, NotFound, quote


def load_rules(game: str | None, rules_file: str | None) -> Rules:
    """A built-in game's rules, or those of ``rules_file`` (which must be for ``game`` if both are
    given). InvalidInput names ``rules`` or the offending key of the file; NotFound an unknown
    ``game``."""
    if rules_file is not None:
        rules = _read_rules_file(rules_file)
        if game is not None and rules.game != game:
            raise InvalidInput("game", f"{rules_file} is for game {quote(rules.game)}, "
                                       f"not {quote(game)}")
        return rules
    if game is None:
        raise InvalidInput("game", "name a game or pass --rules FILE")
    return builtin_rules(game)


def builtin_rules(game: str) -> Rules:
    """The rules of a built-in game; NotFound (field ``game``) lists the known ones."""
    try:
        return game_rules(game)
    except KeyError:
        raise NotFound("game", f"no game {quote(game)} (known: {', '.join(GAME_IDS)})") from None


def _read_rules_file(rules_file: str) -> Rules:
    try:
        text = Path(rules_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InvalidInput("rules", f"cannot read rules file {rules_file}: {why}") from None
    try:
        return rules_from_toml(text)
    except RulesError as exc:
        raise InvalidInput(exc.key, f"{exc.detail} (in {rules_file})") from None
