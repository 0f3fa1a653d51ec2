"""Exact analysis of the games: side bets, main-game returns and strategy, PAR sheets."""
