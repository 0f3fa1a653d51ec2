"""The error tree (one root), configuration, JSON logs, the cheaper frozen-dataclass init,
waits on worker pools that notice a dead worker and sqlite3's binding of blobs and NULLs."""

#: the modules meant for use outside this package (all of them)
__all__ = ["config", "cpus", "currency", "errors", "files", "frozen", "json_input", "logs", "pools",
           "sqlite_binding", "text", "times"]
