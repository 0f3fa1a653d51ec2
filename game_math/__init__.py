"""Pure, deterministic blackjack game math: cards, rules as data, the round engine, side bets
and the exact analysis. Nothing here does I/O; ``rng_service`` does."""

#: the modules meant for use outside this package; the others (actions, round_state, table, turns)
#  are its internals
__all__ = [
    "analysis", "autoplay", "cards", "errors", "events", "games", "legality", "round", "rules",
    "sidebets",
]
