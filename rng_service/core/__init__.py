"""The error tree (one root), configuration, JSON logs and the cheaper frozen-dataclass init."""

#: the modules meant for use outside this package (all of them)
__all__ = ["config", "cpus", "currency", "errors", "files", "frozen", "json_input", "logs", "text",
           "times"]
