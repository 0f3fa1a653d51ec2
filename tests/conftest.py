"""Session-wide fixtures: the throwaway PostgreSQL server and its databases
(tests/support/pg_server.py)."""

import os

# The tests start servers and tools with fork+exec while gRPC channels have calls in flight.
# gRPC's fork handlers are unsafe then (the child can crash before its exec: a "Fatal Python
# error: Segmentation fault" in a pg_ctl start made PostgreSQL move to another port); with exec
# right after every fork they are not needed. Set before anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from support import hypothesis_profiles
from support.pg_server import (
    own_pg_server,
    pg_empty_url,
    pg_fresh_url,
    pg_module_url,
    pg_server,
    pg_template,
    pg_url,
    pg_worker_database,
)

hypothesis_profiles.load()  # before any test module builds its settings (they inherit it)

# the unit and processes tiers, checked (tests/support/tiers.py); pytester tests that check
pytest_plugins = ["pytester", "support.tiers"]

__all__ = ["own_pg_server", "pg_empty_url", "pg_fresh_url", "pg_module_url", "pg_server",
           "pg_template", "pg_url", "pg_worker_database"]
