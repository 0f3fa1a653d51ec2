"""HMAC_DRBG, rejection sampling and the shuffle, shoes, the seed vault, the self-test."""
