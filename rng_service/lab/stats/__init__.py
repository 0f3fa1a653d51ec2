"""Statistical evidence for the RNG: NIST SP 800-22, shuffle uniformity, and their reports."""

#: the modules meant for use outside this package (all of them)
__all__ = ["battery", "report", "shuffle_tests", "sp800_22"]
