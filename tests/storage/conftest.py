"""Fixtures: the storage (and a service on it) on a fresh database, SQLite and PostgreSQL."""

from support.service_helpers import backend, database_url, env, harness, stacked, storage

__all__ = ["backend", "database_url", "env", "harness", "stacked", "storage"]
