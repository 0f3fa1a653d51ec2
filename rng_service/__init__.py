"""Everything of Fairshoe that touches the world: entropy, shoes, keys, records, storage, gRPC.

``game_math`` decides every rule; this package deals, signs, stores and serves. Its layers
(``docs/design.md``, "Layout") import one way: cli, api, storage, service and lab, audit, records,
log, crypto and rng, core."""

#: the modules meant for use outside this package; the others (cli) are its internals
__all__ = ["api", "audit", "core", "crypto", "lab", "log", "records", "rng", "service", "storage"]
