"""The error tree (one root), configuration and JSON logs."""

#: the modules meant for use outside this package (all of them)
__all__ = ["config", "cpus", "currency", "errors", "json_input", "logs", "text", "times"]
