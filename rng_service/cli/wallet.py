"""`fairshoe wallet reconcile`: the seamless wallet's movements not yet settled with the
operators' wallets, with their age (the database is the server's, as for `fairshoe operators`)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``wallet reconcile`` to the command line."""
    parser = subparsers.add_parser(
        "wallet", help="the seamless wallet's outbox: what is still unsettled",
        description="Money movements sent (or to be sent) to operators' own wallets.")
    commands = parser.add_subparsers(dest="wallet_command", required=True, metavar="ACTION")
    reconcile = commands.add_parser(
        "reconcile", help="list the movements still pending or uncertain, oldest first, with "
                          "their age; then a summary per operator")
    reconcile.add_argument("--operator", default=None, help="only this operator's")
    reconcile.add_argument("--database", default=None, metavar="PATH_OR_URL",
                           help="a SQLite file or a postgresql:// URL (default: the server's)")
    reconcile.set_defaults(func=_reconcile)


def _reconcile(args: argparse.Namespace) -> int:
    from rng_service.service.reconcile import unsettled
    from rng_service.storage import open_storage

    storage = open_storage(args.database or None, pool_size=1)
    try:
        rows = unsettled(storage, args.operator)
    finally:
        storage.close()
    print("operator\ttransaction_id\tkind\tstate\tamount\tround_id\tplayer\tattempts\tage_s"
          "\tlast_cause")
    oldest: dict[str, tuple[int, float]] = {}
    for row in rows:
        m = row.movement
        print(f"{m.operator}\t{m.transaction_id}\t{m.kind}\t{m.state}\t{m.amount}\t"
              f"{m.round_id}\t{m.player}\t{m.attempts}\t{row.age_seconds:.0f}\t{m.reason}")
        count, age = oldest.get(m.operator, (0, 0.0))
        oldest[m.operator] = (count + 1, max(age, row.age_seconds))
    for operator, (count, age) in sorted(oldest.items()):
        print(f"# {operator}: {count} unsettled, oldest {age:.0f} s")
    if not rows:
        print("# nothing unsettled")
    return 0
