"""Session-wide fixtures: the throwaway PostgreSQL server and its databases (tests/pg_server.py)."""

from pg_server import (
    own_pg_server,
    pg_empty_url,
    pg_fresh_url,
    pg_module_url,
    pg_server,
    pg_template,
    pg_url,
    pg_worker_database,
)

__all__ = ["own_pg_server", "pg_empty_url", "pg_fresh_url", "pg_module_url", "pg_server",
           "pg_template", "pg_url", "pg_worker_database"]
