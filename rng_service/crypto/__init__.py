"""Ed25519 signing keys and signed envelopes over canonical JSON."""
