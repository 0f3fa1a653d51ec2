"""Round, reveal and RNG record schemas and their writer."""
