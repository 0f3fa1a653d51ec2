"""Statistical evidence for the RNG: NIST SP 800-22, shuffle uniformity, and their reports."""
