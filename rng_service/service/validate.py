"""Checks on what a caller sends, each naming the offending field (``InvalidInput``) as the
caller's request names it.

The API runs these once, at its edge, under the proto's field names (``player_id``,
``account.player_id``, ``amount_minor``); the use cases then take the values as checked and
check only what they alone can know (the operator, the game, a round's state, the balance). The
defaults are the names most protos give the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from game_math.errors import BetError
from game_math.games import game_rules
from game_math.round import HandBet
from game_math.rules import Rules
from rng_service.core import currency as currencies
from rng_service.core.errors import InvalidInput, NotFound, quote
from rng_service.rng.shoe import MAX_CLIENT_SEED_BYTES
from rng_service.service.ports import Mode, UnitOfWork

MAX_AMOUNT: Final = 2**53 - 1  # the signed record's integer range (JSON-safe)
#: a page of rounds (and of most listings): at most, and when the request says 0
MAX_PAGE_SIZE: Final = 100
DEFAULT_PAGE_SIZE: Final = 20
MAX_TRANSACTIONS_PAGE: Final = 500  # ledger entries are small: longer pages (wallet.proto)
DEFAULT_TRANSACTIONS_PAGE: Final = 50
MAX_REASON_CHARS: Final = 200
MAX_REFERENCE_CHARS: Final = 128

_OPERATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
# no "@": system accounts (@house, @cash, @demo) share the accounts table with players
_PLAYER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}\Z")
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}\Z")
_ROUND_ID = re.compile(r"[0-9a-f]{32}\Z")


def _match(pattern: re.Pattern[str], value: object, field: str, what: str) -> str:
    if value == "":
        raise InvalidInput(field, f"required: {what}")
    if not isinstance(value, str) or not pattern.match(value):
        raise InvalidInput(field, f"must be {what}, got {quote(value)}")
    return value


def operator_id(value: object) -> str:
    """An operator id: 1-64 letters, digits or ``. _ -``, starting with a letter or digit."""
    return _match(_OPERATOR, value, "operator", "an operator id (1-64 letters, digits or . _ -)")


def operator(value: object, uow: UnitOfWork) -> str:
    """An operator id that exists in the storage (``NotFound`` otherwise)."""
    name = operator_id(value)
    if not uow.operator_exists(name):
        raise NotFound("operator", f"no operator {quote(name)}")
    return name


def player(value: object, field: str = "player_id") -> str:
    """A player id: 1-128 letters, digits or ``. _ : -``, starting with a letter or digit.

    >>> player("alice-1")
    'alice-1'
    >>> player("@house")
    Traceback (most recent call last):
    ...
    rng_service.core.errors.InvalidInput: player_id: must be 1-128 letters, ... got '@house'
    """
    return _match(_PLAYER, value, field, "1-128 letters, digits or . _ : - (no leading symbol)")


def currency(value: object, field: str = "currency") -> str:
    """An active ISO 4217 currency code with a minor unit (:mod:`rng_service.core.currency`)."""
    return currencies.check(value, field)


def request_id(value: object, field: str = "request_id") -> str:
    """A request id: 1-128 printable ASCII characters, no spaces.

    >>> request_id("r-1"), request_id("~" * 128) == "~" * 128
    ('r-1', True)
    >>> request_id("a b")
    Traceback (most recent call last):
    ...
    rng_service.core.errors.InvalidInput: request_id: must be 1-128 printable ASCII ... 'a b'
    """
    # what the pattern takes, found by the string's own checks at half its cost (every write
    # carries one); anything else goes through the pattern, which names the error
    if type(value) is str and 0 < len(value) <= 128 and value.isascii() and \
            value.isprintable() and " " not in value:
        return value
    return _match(_REQUEST_ID, value, field, "1-128 printable ASCII characters")


def round_id(value: object, field: str = "round_id") -> str:
    """A round id: 32 lowercase hex digits."""
    return _match(_ROUND_ID, value, field, "32 lowercase hex digits")


def mode(value: object, field: str = "mode") -> Mode:
    """``DEMO`` or ``REAL`` (a :class:`Mode`, or its name from an in-process caller)."""
    try:
        return Mode(value if isinstance(value, str) else "")
    except ValueError:
        raise InvalidInput(field, f"must be DEMO or REAL, got {quote(value)}") from None


def amount(value: object, field: str = "amount_minor") -> int:
    """An amount of minor units: a positive integer no larger than :data:`MAX_AMOUNT`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_AMOUNT:
        raise InvalidInput(field, f"must be a positive integer of minor units, got {quote(value)}")
    return value


def version(value: object, field: str = "expected_version") -> int:
    """A round version: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(field, f"must be a positive integer, got {quote(value)}")
    return value


def client_seed(value: object) -> bytes:
    """A client seed: bytes, at most the shoe's limit."""
    if not isinstance(value, bytes) or len(value) > MAX_CLIENT_SEED_BYTES:
        raise InvalidInput("client_seed", f"must be at most {MAX_CLIENT_SEED_BYTES} bytes")
    return value


def reference(value: object, field: str = "reference") -> str | None:
    """An operator's reference: up to 128 printable characters; empty is None (none)."""
    if value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_REFERENCE_CHARS or not value.isprintable():
        raise InvalidInput(field, f"must be at most {MAX_REFERENCE_CHARS} printable "
                           f"characters, got {quote(value)}")
    return value


def reason(value: object) -> str:
    """A reason: 1 to :data:`MAX_REASON_CHARS` characters, not all blank."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_REASON_CHARS:
        raise InvalidInput("reason", f"must be 1-{MAX_REASON_CHARS} characters")
    return value


def game(value: object) -> Rules:
    """A built-in game's rules (``NotFound`` for an unknown game)."""
    if not isinstance(value, str) or not value:
        raise InvalidInput("game", "required")
    try:
        return game_rules(value)
    except KeyError as exc:
        raise NotFound("game", str(exc.args[0])) from None


def bet_field(exc: BetError, *, hands: Sequence[HandBet], side_bets: Mapping[str, int]) -> str:
    """The request's field of a bet the rules refuse, as the protos name it (StartRound's and
    ReplayRound's ``hands`` and ``side_bets``): a hand's bet ``hands[1].bet_minor``; a side-bet
    stake by its place in the request's list (``hands[0].side_bets[2]``, ``side_bets[0]``),
    which ``hands`` and ``side_bets`` keep in the request's order; ``hands`` or ``level`` for
    the bets as a whole."""
    if exc.side_bet is not None:
        stakes, path = ((side_bets, "side_bets") if exc.hand is None else
                        (hands[exc.hand].side_bets, f"hands[{exc.hand}].side_bets"))
        return f"{path}[{list(stakes).index(exc.side_bet)}]"
    if exc.hand is not None:
        return f"hands[{exc.hand}].bet_minor"
    return exc.field
