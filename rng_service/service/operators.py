"""Operators (tenants): provisioning them is a deliberate act, not a side effect of a call.

Under mutual TLS a client certificate names its operator, but a certificate alone does not make
one: an operator holds players' real-money balances, so it exists only once someone with access
to the database has added it (``fairshoe operators add``). A certificate whose operator was never
added gets NOT_FOUND (field ``operator``) on every call, and a typo in a certificate cannot
quietly open a second, empty tenant. The default operator (``default``) exists from the first
migration on: it is every call's without client certificates.
"""

from __future__ import annotations

from collections.abc import Sequence

from rng_service.service import validate
from rng_service.service.ports import Storage


def add_operator(storage: Storage, name: str) -> bool:
    """Add the operator ``name`` (an operator id, InvalidInput otherwise); False if it existed."""
    return add_operators(storage, [name])[0]


def add_operators(storage: Storage, names: Sequence[str]) -> list[bool]:
    """Add every operator of ``names`` in one transaction, or none if one is no operator id
    (InvalidInput naming it): a typo among them must not leave the others half provisioned.
    Each result is False if that operator existed."""
    checked = [validate.operator_id(name) for name in names]
    with storage.transaction() as uow:
        return [uow.add_operator(name) for name in checked]


def list_operators(storage: Storage) -> list[tuple[str, str]]:
    """Every operator and when it was added, by name."""
    with storage.snapshot() as uow:
        return uow.list_operators()
