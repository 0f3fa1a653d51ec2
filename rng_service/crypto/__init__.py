"""Ed25519 signing keys and signed envelopes over canonical JSON."""

#: the modules meant for use outside this package (all of them)
__all__ = ["keys", "signing"]
