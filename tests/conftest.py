"""Session-wide fixtures: the throwaway PostgreSQL server and its databases (tests/pg_server.py)."""

from pg_server import pg_empty_url, pg_server, pg_template, pg_url

__all__ = ["pg_empty_url", "pg_server", "pg_template", "pg_url"]
