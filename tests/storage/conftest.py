"""Fixtures: a service on a real SQLite file in tmp_path, with stackable shoes."""

from service_helpers import env, harness, stacked

__all__ = ["env", "harness", "stacked"]
