"""Pure, deterministic blackjack game math: cards, rules as data, the round engine, side bets
and the exact analysis. Nothing here does I/O; ``rng_service`` does."""
