"""Use cases the API and the CLI both call, and the storage ports they need."""
