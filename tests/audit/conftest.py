"""Fixtures shared by the audit's tests: collections that fail many ways at once
(tests/support/audit_labs.py)."""

from support.audit_labs import labs

__all__ = ["labs"]
