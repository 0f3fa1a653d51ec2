"""Round, reveal and RNG record schemas and their writer."""

#: the modules meant for use outside this package (all of them)
__all__ = ["collect_workers", "durable", "logged", "schema"]
