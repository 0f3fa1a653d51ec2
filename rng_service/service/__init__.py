"""Use cases the API and the CLI both call, and the storage ports they need."""

#: the modules meant for use outside this package; the others (idempotency, ledger, live_cache,
#  outbox) are its internals
__all__ = [
    "audit", "dispatcher", "observe", "operator_wallet", "operators", "ports", "reconcile",
    "replay", "rng_draws", "rounds", "rules", "shoes", "translog", "validate", "views", "wallet",
    "witnessing",
]
