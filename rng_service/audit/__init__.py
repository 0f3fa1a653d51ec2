"""The offline verifier of signed records: its checks and its report."""

#: the modules meant for use outside this package; the others (checks, claims, commitments,
#  file_checks, key_records, options, report, reveals, rng_checks, rules_index, times, walk,
#  wallet_checks) are its internals
__all__ = ["failures", "files", "log_audit", "round_checks", "state", "verifier", "workers"]
