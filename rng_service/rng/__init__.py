"""HMAC_DRBG, rejection sampling and the shuffle, shoes, the seed vault, the self-test."""

#: the modules meant for use outside this package (all of them)
__all__ = ["draws", "drbg", "sampling", "seed_vault", "selftest", "shoe"]
