"""gRPC: server assembly, interceptors, the error-to-status table, one module per service."""

#: the modules meant for use outside this package (``interceptors``: what every server's calls
#  go through, for a server assembled another way, as a test's or a benchmark's; ``round_api``:
#  the RoundService servicer, which bench/bench_served_gap.py runs without a server); the others
#  (authorization, calls, decoding, errors, game_service, math_service, operator_wallet_grpc,
#  par_jobs, readiness, record_services, rng_api, round_messages, round_wire, rpc_call, rpc_log,
#  rpc_metrics, rpc_status, wallet_api) are its internals
__all__ = ["admission", "audit_api", "caller", "interceptors", "metrics", "port_claim",
           "proto_gen", "round_api", "server", "tiles_http"]
