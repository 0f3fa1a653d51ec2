"""`fairshoe shoe` and `fairshoe collect raw|shoes`: the certified RNG for auditors and labs.

Everything here runs the production code path (``rng_service.rng.shoe``, ``rng_service.rng.drbg``);
nothing is re-implemented for the occasion.

Other areas add ``collect`` subcommands (e.g. ``collect rounds``) from a module listed *after* this
one in ``COMMAND_MODULES``: inside their ``register(subparsers)`` they call
``rng_service.cli.rng.collect_subparsers().add_parser("rounds", ...)``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias

from game_math.cards import card_codes
from rng_service.cli import help_values
from rng_service.cli.main import CommandError

# The RNG modules load cryptography (HMAC_DRBG): handlers import them, so parsing stays light.

if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

#: The ``collect`` group's subparsers, set by the latest ``register`` call.
COLLECT_SUBPARSERS: Subparsers | None = None


def collect_subparsers() -> Subparsers:
    """Where other modules add ``fairshoe collect`` subcommands."""
    if COLLECT_SUBPARSERS is None:
        raise RuntimeError("rng_service.cli.rng must be registered before collect commands")
    return COLLECT_SUBPARSERS


def register(subparsers: Subparsers) -> None:
    """Add ``shoe`` and ``collect raw|shoes`` to the command line (other modules add more
    ``collect`` kinds through :data:`COLLECT_SUBPARSERS`).
    """
    global COLLECT_SUBPARSERS  # noqa: PLW0603  (the hook other command modules extend)
    shoe = subparsers.add_parser(
        "shoe",
        help="print the cards of the shoe a seed gives, in dealing order",
        description="Recompute a shoe from its revealed seed: card codes, space-separated.",
    )
    shoe.add_argument("--seed", required=True, metavar="HEX",
                      help=f"server seed, hexadecimal ({help_values.SEED_BYTES} bytes)")
    shoe.add_argument(
        "--client-seed", default="", metavar="TEXT", help="client seed (UTF-8), default empty"
    )
    shoe.add_argument("--decks", required=True, type=int, metavar="N")
    shoe.set_defaults(func=cmd_shoe)

    collect = subparsers.add_parser(
        "collect", help="collect RNG output for a testing lab", description="Collect RNG output."
    )
    COLLECT_SUBPARSERS = collect.add_subparsers(dest="collect", required=True, metavar="WHAT")

    raw = COLLECT_SUBPARSERS.add_parser(
        "raw",
        help="raw HMAC_DRBG output before any scaling",
        description="Raw output of a freshly OS-seeded HMAC_DRBG, reseeded as the standard says.",
    )
    raw.add_argument("--bytes", required=True, type=int, metavar="N", dest="n_bytes")
    raw.add_argument("--out", required=True, type=Path, metavar="FILE")
    raw.set_defaults(func=cmd_collect_raw)

    shoes = COLLECT_SUBPARSERS.add_parser(
        "shoes",
        help="freshly seeded shoes, one per line",
        description="K shoes, each from a fresh OS seed and an empty client seed, one per line.",
    )
    shoes.add_argument("--decks", required=True, type=int, metavar="N")
    shoes.add_argument("--count", required=True, type=int, metavar="K")
    shoes.add_argument("--out", required=True, type=Path, metavar="FILE")
    shoes.set_defaults(func=cmd_collect_shoes)


def _check_decks(decks: int) -> None:
    from rng_service.rng.shoe import MAX_DECKS

    if not 1 <= decks <= MAX_DECKS:
        raise CommandError(f"--decks must be between 1 and {MAX_DECKS}, got {decks}")


def _require_rng() -> None:
    from rng_service.rng.selftest import SelfTestFailed, require_healthy_rng

    try:
        require_healthy_rng()
    except SelfTestFailed as exc:
        raise CommandError(str(exc)) from None


def cmd_shoe(args: argparse.Namespace) -> int:
    """``fairshoe shoe``: the cards of the shoe a revealed seed gives."""
    from rng_service.rng.shoe import MAX_CLIENT_SEED_BYTES, SEED_BYTES, shoe_cards

    try:
        seed = bytes.fromhex(args.seed)
    except ValueError:
        raise CommandError("--seed is not hexadecimal") from None
    if len(seed) != SEED_BYTES:
        raise CommandError(f"--seed has {len(seed)} bytes; a server seed has exactly {SEED_BYTES}")
    client_seed = args.client_seed.encode("utf-8")
    if len(client_seed) > MAX_CLIENT_SEED_BYTES:
        raise CommandError(f"--client-seed is longer than {MAX_CLIENT_SEED_BYTES} bytes (UTF-8)")
    _check_decks(args.decks)
    _require_rng()  # a build failing its known answers would print wrong cards
    print(" ".join(card_codes(shoe_cards(seed, client_seed, args.decks))))
    return 0


def _open_out(path: Path, mode: str) -> IO[Any]:
    try:
        return path.open(mode)
    except OSError as exc:
        raise CommandError(f"--out {path}: {exc.strerror}") from None


def cmd_collect_raw(args: argparse.Namespace) -> int:
    """``fairshoe collect raw``: raw HMAC_DRBG output for a lab."""
    from rng_service.rng.drbg import os_seeded_output

    if args.n_bytes < 1:
        raise CommandError(f"--bytes must be at least 1, got {args.n_bytes}")
    _require_rng()
    with _open_out(args.out, "wb") as out:
        for chunk in os_seeded_output(args.n_bytes):
            out.write(chunk)
    print(f"wrote {args.n_bytes} bytes of raw HMAC_DRBG output to {args.out}")
    return 0


def cmd_collect_shoes(args: argparse.Namespace) -> int:
    """``fairshoe collect shoes``: freshly seeded shoes, one per line."""
    from rng_service.rng.shoe import new_server_seed, shoe_cards

    _check_decks(args.decks)
    if args.count < 1:
        raise CommandError(f"--count must be at least 1, got {args.count}")
    _require_rng()
    with _open_out(args.out, "w") as out:
        for _ in range(args.count):
            cards = shoe_cards(new_server_seed(), b"", args.decks)
            out.write(" ".join(card_codes(cards)) + "\n")
    print(f"wrote {args.count} freshly seeded {args.decks}-deck shoes to {args.out}")
    return 0
