"""``fairshoe audit export``: a collection directory taken straight from the database.

Writes the layout ``fairshoe audit verify DIR --keys KEYS`` checks, from the service's database
opened read-only (no server needed, nothing written to the database)::

    DIR/keys/<key id>.json            signed key leaves (fairshoe.key/v1)
    DIR/shoes/<shoe id>.json          signed shoe commitments (fairshoe.shoe-commitment/v1)
    DIR/rounds/<round id>.json        signed round records
    DIR/reveals/<shoe id>.json        signed shoe reveals
    DIR/rng/<draw id>.json            signed RNG records (RngService draws)
    DIR/rng-reveals/<draw id>.json    signed RNG reveals
    DIR/rules/<rules digest>.json     the rule set of every round exported
    DIR/keys.jwks.json                the key store's public keys with their validity periods:
                                      a convenience copy, never a trust anchor
    DIR/log/checkpoint                the signed checkpoint of the operator's log the export is
                                      made against
    DIR/log/leaves.jsonl              {"index", "path", "proof"} per leaf, in index order
    DIR/log/frontier.json             the compact range of the leaves before the first listed

By default every leaf of the log up to the latest checkpoint is written; ``--since FILE`` (an
earlier checkpoint the auditor kept) writes only the leaves after its size, and refuses a
checkpoint whose root is not the log's at that size. ``--start``/``--end`` instead bound the time
each envelope was stored (``[start, end)``, RFC 3339; a time without a zone is UTC; ``end``
defaults to, and is capped at, now; ``--until`` is the old name of ``--end``): leaves.jsonl then
lists the leaves held (with the key and shoe commitment leaves they depend on), not necessarily
contiguous. Each envelope is written as the bytes that were signed and stored. A round whose shoe
is still in play is exported without its reveal, and ``audit verify`` reports it as unrevealed.
A checkpoint newer than the stored ones is signed with the key store's active key (and not
stored: the database is read-only).

``--address HOST:PORT`` (with ``--tls*`` as for ``fairshoe log``) instead asks a running server
(an auditor without the database): the same leaf-range collection, streamed by ExportRecords
(:mod:`rng_service.cli.audit_remote`), for the operator the caller's identity names.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from rng_service.cli.log import tls_options
from rng_service.cli.main import CommandError

if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def register(audit_subparsers: Subparsers) -> None:
    """Add ``export`` to the ``audit`` command's subcommands."""
    export = audit_subparsers.add_parser(
        "export", help="write signed records, reveals, rules and keys from the database to DIR",
        description="Write the operator's transparency log to DIR, by default every leaf up to "
                    "its latest signed checkpoint (from an earlier checkpoint's size on with "
                    "--since), with each leaf's inclusion proof: the signed envelopes (round "
                    "records, shoe commitments and reveals, RNG records and reveals), the rules "
                    "documents of the rounds and the public keys, in the layout `fairshoe audit "
                    "verify` checks. --start/--end export a time range of stored envelopes "
                    "instead, without completeness. The database is opened read-only.")
    export.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="a new or empty directory")
    export.add_argument("--database", metavar="PATH_OR_URL",
                        help="a SQLite database file or a postgresql:// URL, opened read-only "
                             "(default: $FAIRSHOE_DATABASE_URL, else $FAIRSHOE_DATABASE, else "
                             "$FAIRSHOE_DATA_DIR/fairshoe.db)")
    export.add_argument("--since", metavar="CHECKPOINT_FILE",
                        help="export the log's leaves from this earlier checkpoint's size on "
                             "(default: every leaf), up to the latest checkpoint; or from the "
                             "checkpoint of an audit state (audit verify --save-state)")
    export.add_argument("--start", metavar="TIME",
                        help="instead, a time range: envelopes stored at or after TIME "
                             "(RFC 3339)")
    export.add_argument("--end", "--until", dest="end", metavar="TIME",
                        help="a time range: stored before TIME (RFC 3339; default now)")
    export.add_argument("--address", metavar="HOST:PORT",
                        help="instead of a database, export the log's leaves from a running "
                             "server (the caller's operator; leaf ranges only)")
    tls_options(export, timeout=600.0)
    export.add_argument("--operator", default="default", metavar="ID",
                        help="the operator whose records to export (default: default)")
    export.add_argument("--key-store", type=Path, metavar="PATH",
                        help="key store whose public keys are copied (default: the configured "
                             "one, $FAIRSHOE_DATA_DIR/keys)")
    export.set_defaults(func=cmd_audit_export)


def parse_time(text: str | None, option: str) -> datetime | None:
    """An RFC 3339 / ISO 8601 time (a date alone is its midnight); no zone means UTC."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{option}: {text!r} is not an RFC 3339 time "
                           "(e.g. 2024-05-01T00:00:00Z)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def read_checkpoint(path: str | None, option: str) -> str | None:
    """The text of a checkpoint file, or the checkpoint of an audit state (``audit verify
    --save-state``), checked when it is used; or None."""
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
        if not data.lstrip().startswith(b"{"):
            return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{option} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    from rng_service.audit.state import StateError, state_checkpoint

    try:
        return state_checkpoint(data)
    except StateError as exc:
        where = f"{exc.field} " if exc.field else ""
        raise CommandError(f"{option} {path}: {where}{exc.message}") from None


def cmd_audit_export(args: argparse.Namespace) -> int:
    """``fairshoe audit export``: the collection written, a summary printed."""
    from rng_service.core import config
    from rng_service.core.errors import FairshoeError
    from rng_service.crypto.keys import KeyStore
    from rng_service.service.audit import AuditService
    from rng_service.storage import describe, open_storage

    if args.since is not None and (args.start or args.end):
        raise CommandError("--since (a checkpoint file) exports a leaf range; --start/--end a "
                           "time range: give one or the other")
    start, end = parse_time(args.start, "--start"), parse_time(args.end, "--end")
    checkpoint = read_checkpoint(args.since, "--since")
    if args.address is not None:
        return _export_remote(args, checkpoint)
    database = args.database or config.database_url()
    try:
        storage = open_storage(database, read_only=True, pool_size=1)
        try:
            service = AuditService(storage, KeyStore(args.key_store), read_only=True)
            if checkpoint is not None or (start is None and end is None):
                stats = service.export_log(args.out, args.operator, checkpoint)
            else:
                stats = service.export_collection(args.out, args.operator, start, end)
        finally:
            storage.close()
    except FairshoeError as exc:  # ConfigError included
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"--out {args.out}: {exc.strerror}") from None
    counts = ", ".join(f"{n} {kind}" for kind, n in [*stats.counts.items(),
                                                      *stats.logged.items()])
    print(f"exported {counts} and {len(stats.rule_sets)} rule sets ({stats.leaves} log leaves) "
          f"from {describe(database)} to {args.out}")
    print(verify_hint(args.out))
    return 0


def _export_remote(args: argparse.Namespace, since: str | None) -> int:
    """``--address``: the leaf-range collection streamed from a running server."""
    from rng_service.cli.audit_remote import export_remote
    from rng_service.core.errors import FairshoeError

    if args.start or args.end or args.database or args.key_store:
        raise CommandError("--address exports a leaf range from a server: give no --start, "
                           "--end, --database or --key-store with it")
    try:
        summary = export_remote(args, since)
    except FairshoeError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"--out {args.out}: {exc.strerror}") from None
    print(summary)
    print(verify_hint(args.out))
    return 0


def verify_hint(out: Path) -> str:
    """The line telling how to verify the export at ``out``, whether read from a database or
    from a server: each holds its log, so each is verified against a checkpoint and keys the
    auditor obtained apart from it."""
    return (f"verify with: fairshoe audit verify {out} --keys TRUSTED_KEYS --checkpoint "
            "CHECKPOINT  (the operator's public keys and a checkpoint obtained independently, "
            "e.g. `fairshoe keys export` and `fairshoe log checkpoint --out`)")
