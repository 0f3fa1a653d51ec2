"""`fairshoe serve` dealing stacked shoes, as a real process: for end-to-end tests only.

    FAIRSHOE_TEST_SHOES=1 FAIRSHOE_TEST_STACK_DIR=DIR \
        python tests/support/stacked_serve.py [serve options]

It runs exactly `fairshoe serve` (``rng_service.cli.serve.run``) with one difference: its shoe
source is :class:`FileStackedShoes`, which lives here under ``tests/`` (no installed code can
construct it or read its directory) and is not certified, so the round service accepts it only
with ``FAIRSHOE_TEST_SHOES=1``, which ``FAIRSHOE_ENV=production`` refuses (the process exits).

Stacks are files ``DIR/queue/<name>.json``, each a JSON list of card codes. Every new shoe takes
the first file by name that no other process (of a ``--processes`` serve) took first (moved to
``DIR/shoes/<shoe_id>.json``) and deals those cards first, then the rest of an ordered shoe;
with no file queued it deals its genuine seed's cards. Because the stack is kept by shoe id, a
server restarted on the same directories deals the same cards from a shoe it restores (what a
crash test needs). A shoe still has a genuine sealed seed and
commitment; only its cards come from the test.

While a file ``DIR/hold`` exists, a new shoe waits for its removal (up to two minutes) after
creating ``DIR/held`` (and ``DIR/held.<pid>``, naming the process that holds it): a test
holds a StartRound provably in flight, inside its handler, for as
long as it needs (:meth:`live_server.ServerProcess.hold_new_shoes`).

With ``FAIRSHOE_TEST_KNOWN_ANSWERS=FILE`` (and ``FAIRSHOE_TEST_SELF_TEST=1``, which production
refuses) the RNG self-test compares against FILE, a copy of the known answers a test can damage.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
import uuid
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from game_math.cards import Card, ordered_shoe, parse_cards
from rng_service.cli.main import CommandError, build_parser
from rng_service.cli.serve import run
from rng_service.rng.shoe import SEED_BYTES, Shoe

STACK_DIR_ENV = "FAIRSHOE_TEST_STACK_DIR"
#: a copy of the RNG's known answers the self-test reads instead (a test damages it to make the
#: running server's self-test fail); passed on only with FAIRSHOE_TEST_SELF_TEST=1
KNOWN_ANSWERS_ENV = "FAIRSHOE_TEST_KNOWN_ANSWERS"
#: how long a held new shoe waits at most for its hold file to go
HOLD_SECONDS = 120.0


class FileStackedShoes:
    """Test shoes stacked from files (see the module docstring)."""

    certified = False

    def __init__(self, root: Path) -> None:
        self.hold, self.held = root / "hold", root / "held"
        self.queue = root / "queue"
        self.shoes = root / "shoes"
        for folder in (self.queue, self.shoes):
            folder.mkdir(parents=True, exist_ok=True)
        self._cards: dict[str, list[Card]] = {}

    def new_shoe(self, decks: int, cut: Fraction | None) -> Shoe:
        """A shoe with a genuine seed; the next queued stack, if any, becomes its cards (once
        the hold file, if any, is gone)."""
        if self.hold.exists():
            self.held.touch()
            self.held.with_name(f"held.{os.getpid()}").touch()  # which process holds one
            deadline = time.monotonic() + HOLD_SECONDS
            while self.hold.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        shoe = Shoe(shoe_id=uuid.uuid4().hex, seed=secrets.token_bytes(SEED_BYTES), decks=decks,
                    cut=cut)
        for queued in sorted(self.queue.glob("*.json")):
            try:
                os.replace(queued, self.shoes / f"{shoe.id}.json")
            except FileNotFoundError:  # another process (`--processes`) took it: the next
                continue
            break
        return shoe

    def cards(self, shoe: Shoe) -> Sequence[Card]:
        """The stacked cards of ``shoe`` followed by the rest of an ordered shoe, or its own."""
        if shoe.id not in self._cards:
            path = self.shoes / f"{shoe.id}.json"
            if not path.exists():
                return shoe.cards
            stacked = parse_cards(json.loads(path.read_text()))
            rest = ordered_shoe(shoe.decks)
            for card in stacked:
                rest.remove(card)
            self._cards[shoe.id] = stacked + rest
        return self._cards[shoe.id]


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(["serve", *argv])
    root = os.environ.get(STACK_DIR_ENV)
    if not root:
        print(f"stacked_serve: set {STACK_DIR_ENV}", file=sys.stderr)
        return 2
    known = os.environ.get(KNOWN_ANSWERS_ENV)
    try:
        return run(args, shoe_source=FileStackedShoes(Path(root)),
                   known_answers=Path(known) if known else None)
    except CommandError as exc:
        print(f"stacked_serve: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
