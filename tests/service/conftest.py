"""Fixtures: a service on a real database with stackable shoes, run on SQLite and PostgreSQL."""

from support.service_helpers import backend, database_url, env, harness, stacked, storage

__all__ = ["backend", "database_url", "env", "harness", "stacked", "storage"]
