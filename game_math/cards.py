"""Cards as small integers, and their two-character codes.

A card is an int in 0..51: ``suit * 13 + (rank - 1)`` with rank 1 (ace) .. 13 (king) and suits
in the order S, H, D, C. An ordered shoe is deck after deck, each deck S A..K, H A..K, D A..K,
C A..K; the certified shuffle permutes that order, so an auditor recomputes it from this ordering.

>>> parse_card("AS"), parse_card("KS"), parse_card("AH"), parse_card("KC")
(0, 12, 13, 51)
>>> card_codes(ordered_shoe(1)[:3]), VALUE_OF[parse_card("QD")]
(['AS', '2S', '3S'], 10)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from game_math.errors import GameMathError, quote

Card = int

RANKS: Final = "A23456789TJQK"
SUITS: Final = "SHDC"
RED_SUITS: Final = frozenset({1, 2})  # hearts, diamonds

_RANK_INDEX: Final = {r: i for i, r in enumerate(RANKS)}
_SUIT_INDEX: Final = {s: i for i, s in enumerate(SUITS)}

#: rank (1..13) of each card 0..51
RANK_OF: Final[tuple[int, ...]] = tuple((c % 13) + 1 for c in range(52))
#: suit index (0..3) of each card
SUIT_OF: Final[tuple[int, ...]] = tuple(c // 13 for c in range(52))
#: blackjack point value with the ace as 1
VALUE_OF: Final[tuple[int, ...]] = tuple(min(r, 10) for r in RANK_OF)
CODE_OF: Final[tuple[str, ...]] = tuple(RANKS[c % 13] + SUITS[c // 13] for c in range(52))
_CARD_OF_CODE: Final = {code: c for c, code in enumerate(CODE_OF)}


class CardError(GameMathError):
    """A card code that is not rank (A 2-9 T J Q K) followed by suit (S H D C)."""


def make_card(rank: int, suit: int) -> Card:
    """The card of ``rank`` (1 = ace .. 13 = king) and ``suit`` (0..3 = S H D C).

    >>> card_code(make_card(1, 3)), card_code(make_card(12, 1))
    ('AC', 'QH')
    """
    if not 1 <= rank <= 13 or not 0 <= suit <= 3:
        raise CardError(f"no card with rank {rank} and suit {suit}")
    return suit * 13 + rank - 1


def parse_card(code: str) -> Card:
    """``"AS"`` -> the ace of spades. Accepts ``10`` for T and lower case, ASCII only.

    >>> parse_card("10h") == parse_card("TH")
    True
    >>> parse_card("1S")
    Traceback (most recent call last):
    ...
    game_math.cards.CardError: bad card code '1S': expected rank A 2-9 T J Q K and suit S H D C
    """
    # str.upper and str.strip know all of Unicode: 'ſ'.upper() is 'S' and U+3000 is a space, so
    # look-alike codes would pass; a card code is ASCII by definition
    text = code.strip().upper() if code.isascii() else ""
    if text.startswith("10"):
        text = "T" + text[2:]
    card = _CARD_OF_CODE.get(text)
    if card is None:
        raise CardError(f"bad card code {quote(code, 16)}: "
                        "expected rank A 2-9 T J Q K and suit S H D C")
    return card


def parse_cards(codes: Iterable[str]) -> list[Card]:
    """Each code parsed by ``parse_card``, in order."""
    return [parse_card(code) for code in codes]


def card_code(card: Card) -> str:
    """The two-character code of ``card`` (``"TD"``), as ``parse_card`` reads it."""
    return CODE_OF[card]


def card_codes(cards: Iterable[Card]) -> list[str]:
    """The code of each card, in order."""
    return [CODE_OF[c] for c in cards]


def ordered_shoe(decks: int) -> list[Card]:
    """The unshuffled shoe: ``decks`` decks, each in the canonical order."""
    if decks < 1:
        raise ValueError(f"decks must be at least 1, got {decks}")
    return list(range(52)) * decks


def is_ten_value(card: Card) -> bool:
    """True for a ten, jack, queen or king."""
    return VALUE_OF[card] == 10


def is_ace(card: Card) -> bool:
    """True for an ace of any suit."""
    return RANK_OF[card] == 1


def hand_total(cards: Sequence[Card]) -> tuple[int, bool]:
    """Best total of ``cards`` and whether it is soft (an ace counted as 11).

    >>> hand_total(parse_cards(["AS", "6D"])), hand_total(parse_cards(["AS", "6D", "9C"]))
    ((17, True), (16, False))
    >>> hand_total(parse_cards(["AS", "AH", "KD"]))  # a second ace always counts 1
    (12, False)
    """
    hard = 0
    has_ace = False
    for c in cards:
        v = VALUE_OF[c]
        hard += v
        has_ace = has_ace or v == 1
    if has_ace and hard <= 11:
        return hard + 10, True
    return hard, False
