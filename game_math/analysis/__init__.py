"""Exact analysis of the games: side bets, main-game returns and strategy, PAR sheets."""

#: the modules meant for use outside this package; the others (ca_check, ca_core, ca_dealer,
#  ca_eval, ca_game, ca_hands) are its internals
__all__ = ["ca_strategy", "main_game", "par", "sidebets"]
