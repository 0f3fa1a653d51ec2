"""`fairshoe keys create|rotate|list|export`: the service's Ed25519 signing keys."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rng_service.cli.main import CommandError

if TYPE_CHECKING:
    from rng_service.crypto.keys import KeyStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``keys create|rotate|list|export`` to the command line."""
    parser = subparsers.add_parser(
        "keys",
        help="create, rotate, list and export the signing keys",
        description="Signing keys live in DIR (default $FAIRSHOE_DATA_DIR/keys, or ./var/keys).",
    )
    commands = parser.add_subparsers(dest="keys_command", required=True, metavar="ACTION")

    create = commands.add_parser("create", help="create the first (active) signing key")
    create.add_argument(
        "--force", action="store_true", help="even if a key is active (it is kept, retired)"
    )
    create.set_defaults(func=_create)

    rotate = commands.add_parser("rotate", help="new active key; the old one stays for verifying")
    rotate.set_defaults(func=_rotate)

    listing = commands.add_parser("list", help="key ids with status and dates")
    listing.set_defaults(func=_list)

    export = commands.add_parser(
        "export", help="public keys as PEM or JWK (default: every key, retired ones included)"
    )
    export.add_argument("--format", choices=("pem", "jwk"), default="jwk")
    which = export.add_mutually_exclusive_group()
    which.add_argument("--key-id", help="only this key (JWK: a single JWK, not a set)")
    which.add_argument("--active", action="store_true", help="only the active key")
    export.add_argument("--out", type=Path, help="write here instead of stdout")
    export.set_defaults(func=_export)

    for sub in (create, rotate, listing, export):
        sub.add_argument("--dir", type=Path, help="key store directory")


def _store(args: argparse.Namespace) -> KeyStore:
    # the key store loads cryptography: only a keys command pays for it, not parsing
    from rng_service.crypto.keys import KeyStore

    return KeyStore(args.dir)


def _create(args: argparse.Namespace) -> int:
    from rng_service.crypto.keys import KeyStoreError

    store = _store(args)
    try:
        info = store.create(force=args.force)
    except KeyStoreError as exc:
        raise CommandError(str(exc)) from None
    print(f"created {info.key_id} (active) in {store.root}")
    return 0


def _rotate(args: argparse.Namespace) -> int:
    from rng_service.crypto.keys import KeyStoreError

    store = _store(args)
    try:
        info, retired = store.rotate()
    except KeyStoreError as exc:
        raise CommandError(str(exc)) from None
    print(f"created {info.key_id} (active); retired {retired}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from rng_service.crypto.keys import KeyStoreError

    try:
        keys = _store(args).list_keys()
    except KeyStoreError as exc:
        raise CommandError(str(exc)) from None
    for key in keys:
        retired = key.retired_at or "-"
        print(f"{key.key_id}  {key.status:7}  created {key.created_at}  retired {retired}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from rng_service.crypto.keys import (
        PUBLIC_MODE,
        KeyStoreError,
        atomic_write,
        export_jwk,
        export_pem,
    )

    store = _store(args)
    try:
        kid = store.active_key_id() if args.active else args.key_id
        if args.active and kid is None:
            raise KeyStoreError(f"no active key in {store.root}")
        keys = store.public_keys([kid] if kid else None)
        if not keys:
            raise KeyStoreError(f"no keys in {store.root}; run `fairshoe keys create`")
        # A named key exports as one JWK; everything else as a JWK Set.
        validity = {info.key_id: info for info in store.list_keys()}  # JWK: valid_from/until
        text = (export_pem(keys) if args.format == "pem"
                else export_jwk(keys, as_set=kid is None, validity=validity))
        if args.out is None:
            sys.stdout.write(text)
        else:
            atomic_write(args.out, text.encode("ascii"), PUBLIC_MODE)
    except (KeyStoreError, OSError) as exc:
        raise CommandError(str(exc)) from None
    return 0
