"""`fairshoe operators add|list`: the tenants a server serves under mutual TLS.

An operator's client certificate (URI SAN ``fairshoe://operator/<id>``, certs/README.md) acts
for that operator only once the operator has been added here; why provisioning is explicit is in
:mod:`rng_service.service.operators`. The database is the server's: ``--database``, else
``$FAIRSHOE_DATABASE_URL``, else ``$FAIRSHOE_DATABASE``, else ``<data dir>/fairshoe.db``. Adding
works while servers run on it (one short transaction).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rng_service.service.ports import Storage


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``operators add|list`` to the command line."""
    parser = subparsers.add_parser(
        "operators", help="add and list the operators (tenants) of a database",
        description="Operators own players, rounds, wallets and records; under mutual TLS a "
                    "client certificate names one, which must have been added here.")
    commands = parser.add_subparsers(dest="operators_command", required=True, metavar="ACTION")
    add = commands.add_parser("add", help="add operators, all or none (an existing one is left "
                                          "as it is)")
    add.add_argument("names", nargs="+", metavar="OPERATOR",
                     help="operator id: 1-64 letters, digits or . _ - (as in its certificate)")
    add.set_defaults(func=_add)
    listing = commands.add_parser("list", help="every operator, with when it was added")
    listing.set_defaults(func=_list)
    for sub in (add, listing):
        sub.add_argument("--database", default=None, metavar="PATH_OR_URL",
                         help="a SQLite file or a postgresql:// URL (default: the server's)")


def _open(args: argparse.Namespace) -> Storage:
    from rng_service.storage import open_storage

    return open_storage(args.database or None, pool_size=1)


def _add(args: argparse.Namespace) -> int:
    from rng_service.service.operators import add_operators

    storage = _open(args)
    try:
        for name, added in zip(args.names, add_operators(storage, args.names), strict=True):
            print(f"{'added' if added else 'exists'} {name}")
    finally:
        storage.close()
    return 0


def _list(args: argparse.Namespace) -> int:
    from rng_service.service.operators import list_operators

    storage = _open(args)
    try:
        for name, created in list_operators(storage):
            print(f"{name}\t{created}")
    finally:
        storage.close()
    return 0
