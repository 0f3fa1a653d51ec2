"""`fairshoe operators add|list|wallet`: the tenants a server serves under mutual TLS, and where
each keeps its players' real money.

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
    """Add ``operators add|list|wallet`` to the command line."""
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
    listing = commands.add_parser("list", help="every operator, with when it was added and "
                                                "where its real money is kept")
    listing.set_defaults(func=_list)
    wallet = commands.add_parser(
        "wallet", help="where an operator's real money is kept: Fairshoe's ledger (internal) "
                       "or the operator's own seamless wallet (grpc, or http: signed JSON)",
        description="From the operator's next real-money round on; open rounds finish on the "
                    "ledger they began on. Demo play always stays on the internal ledger.")
    wallet.add_argument("name", metavar="OPERATOR")
    wallet.add_argument("--kind", required=True, choices=["internal", "grpc", "http"])
    wallet.add_argument("--endpoint", default="", metavar="HOST:PORT|URL",
                        help="the operator's OperatorWalletService (grpc: host:port), or the "
                             "base URL its calls are POSTed under (http: https://host/path)")
    wallet.add_argument("--timeout-ms", type=int, default=2000, metavar="MS",
                        help="how long one wallet call may take (default 2000, at most 10000)")
    wallet.add_argument("--credentials", default="", metavar="FILE",
                        help="PEM file with the client certificate and key (mutual TLS)")
    wallet.add_argument("--ca", default="", metavar="FILE",
                        help="PEM file of the CA of the wallet's certificate (TLS); without "
                             "it a grpc channel is plaintext, an https one trusts the system's "
                             "CAs")
    wallet.add_argument("--hmac-secret-file", default="", metavar="FILE",
                        help="file holding the secret every request is signed with "
                             "(HMAC-SHA256, http; required there)")
    wallet.set_defaults(func=_wallet)
    for sub in (add, listing, wallet):
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
    from rng_service.service.operators import list_operators, wallet_of

    storage = _open(args)
    try:
        for name, created in list_operators(storage):
            wallet = wallet_of(storage, name)
            where = f"{wallet.kind} {wallet.endpoint}".rstrip()
            print(f"{name}\t{created}\t{where}")
    finally:
        storage.close()
    return 0


def _wallet(args: argparse.Namespace) -> int:
    from rng_service.service.operators import set_wallet

    storage = _open(args)
    try:
        config = set_wallet(storage, args.name, args.kind, endpoint=args.endpoint,
                            timeout_ms=args.timeout_ms, credentials=args.credentials,
                            ca=args.ca, hmac_secret=args.hmac_secret_file)
    finally:
        storage.close()
    tls = "mutual TLS" if config.credentials else "TLS" if (
        config.ca or config.endpoint.startswith("https://")) else "plaintext"
    # the secret's path is shown (it is what was typed), never what the file holds
    signed = f", HMAC secret from {config.hmac_secret}" if config.hmac_secret else ""
    suffix = (f" {config.endpoint} ({tls}{signed}, {config.timeout_ms} ms)" if config.seamless
              else "")
    print(f"{config.operator}: wallet {config.kind}{suffix}")
    return 0
