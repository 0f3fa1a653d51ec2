"""Exact side-bet mathematics: the probability of every paytable line, the return and a PAR table.

The shoe holds ``decks`` copies of each of the 52 faces and the judged cards are drawn without
replacement, so an ordered deal of faces with multiplicities ``m_1, m_2, ...`` (how often each
distinct face occurs) can be dealt in ``perm(decks, m_1) * perm(decks, m_2) * ...`` ways out of
``perm(52 * decks, k)``. The analysis therefore enumerates *face* deals once, independent of the
deck count, and weighs each by those falling factorials.

Every deal is judged by the engine's own ``game_math.sidebets`` functions, never by rules re-derived
here, so engine and analysis cannot disagree. Two facts keep the enumeration small:

* ``side_bet_result`` depends on the cards only through ``qualifying_lines``; deals are grouped by
  their qualifying lines and each group is paid once, on one of its own deals, with any paytable.
* Each evaluator is blind to a symmetry of the deals (``_SYMMETRY``): Snap compares cards only for
  identity, so one deal per *identity pattern* (which positions hold the same face) stands for all
  ``perm(52, distinct faces)`` deals of that pattern; Perfect Pairs and 21+3 ignore the order of the
  cards, so one deal per face *multiset* stands for its ``k! / (m_1! m_2! ...)`` orderings. The
  tests check both symmetries on the evaluators and brute-force small shoes card by card.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from functools import cache
from itertools import combinations_with_replacement
from math import factorial, isqrt, perm, prod
from typing import Any

from game_math.cards import Card
from game_math.rules import Rules, SideBet, SideBetKind
from game_math.sidebets import qualifying_lines, side_bet_result

FACES = 52
DECIMAL_PLACES = 12

#: multiplicities of the distinct faces of a deal, largest first, e.g. (2, 1, 1, 1) for one pair
Pattern = tuple[int, ...]


class _Symmetry(Enum):
    IDENTITY_PATTERN = "identity pattern"  # judged only on which cards are the same card
    MULTISET = "multiset"  # judged on the cards regardless of their order


#: cards each bet is judged on (Snap: hand 1's two, hand 2's two, the dealer's up card)
CARDS_JUDGED: dict[SideBetKind, int] = {
    SideBetKind.SNAP: 5,
    SideBetKind.PERFECT_PAIRS: 2,
    SideBetKind.TWENTY_ONE_PLUS_THREE: 3,
}

_SYMMETRY: dict[SideBetKind, _Symmetry] = {
    SideBetKind.SNAP: _Symmetry.IDENTITY_PATTERN,
    SideBetKind.PERFECT_PAIRS: _Symmetry.MULTISET,
    SideBetKind.TWENTY_ONE_PLUS_THREE: _Symmetry.MULTISET,
}


@dataclass(frozen=True)
class OutcomeClass:
    """All face deals that qualify for the same paytable lines."""

    lines: tuple[str, ...]
    #: one deal of the class, to be paid by ``side_bet_result``
    cards: tuple[Card, ...]
    #: ordered face deals of the class by multiplicity pattern
    deals: tuple[tuple[Pattern, int], ...]

    def ordered_deals(self, decks: int) -> int:
        """Ordered deals of physical cards from ``decks`` decks that fall in this class."""
        return sum(count * prod(perm(decks, m) for m in pattern) for pattern, count in self.deals)


def _set_partitions(n: int) -> Iterator[tuple[int, ...]]:
    """Restricted growth strings: the block of each of ``n`` positions, blocks numbered in order."""
    def grow(prefix: tuple[int, ...], blocks: int) -> Iterator[tuple[int, ...]]:
        if len(prefix) == n:
            yield prefix
            return
        for block in range(blocks + 1):
            yield from grow((*prefix, block), max(blocks, block + 1))

    yield from grow((), 0)


def _pattern(cards: tuple[Card, ...]) -> Pattern:
    return tuple(sorted(Counter(cards).values(), reverse=True))


def _face_deals(kind: SideBetKind) -> Iterator[tuple[tuple[Card, ...], int]]:
    """One face deal per symmetry class, with the number of ordered face deals it stands for."""
    k = CARDS_JUDGED[kind]
    if _SYMMETRY[kind] is _Symmetry.IDENTITY_PATTERN:
        for blocks in _set_partitions(k):
            # block b is dealt face b: any other choice of distinct faces is judged the same
            yield blocks, perm(FACES, max(blocks) + 1)
    else:
        for cards in combinations_with_replacement(range(FACES), k):
            orderings = factorial(k) // prod(factorial(m) for m in _pattern(cards))
            yield cards, orderings


@cache
def outcome_classes(kind: SideBetKind) -> tuple[OutcomeClass, ...]:
    """Every face deal of ``kind``, grouped by qualifying lines. Deck-independent, so cached."""
    representative: dict[tuple[str, ...], tuple[Card, ...]] = {}
    deals: dict[tuple[str, ...], Counter[Pattern]] = {}
    for cards, count in _face_deals(kind):
        lines = tuple(qualifying_lines(kind, cards))
        representative.setdefault(lines, cards)
        deals.setdefault(lines, Counter())[_pattern(cards)] += count
    return tuple(
        OutcomeClass(lines, representative[lines], tuple(sorted(deals[lines].items())))
        for lines in representative
    )


def _check_decks(decks: int) -> None:
    if decks < 1:
        raise ValueError(f"decks must be at least 1, got {decks}")


def _line_deals(bet: SideBet, decks: int) -> dict[str | None, int]:
    """Ordered physical deals paying each paytable line (None: the bet loses)."""
    _check_decks(decks)
    counts: dict[str | None, int] = {line: 0 for line, _ in bet.paytable}
    counts[None] = 0
    for cls in outcome_classes(bet.kind):
        line, _ = side_bet_result(bet, cls.cards)
        counts[line] += cls.ordered_deals(decks)
    return counts


def _total_deals(kind: SideBetKind, decks: int) -> int:
    return perm(FACES * decks, CARDS_JUDGED[kind])


def side_bet_distribution(bet: SideBet, decks: int) -> dict[str | None, Fraction]:
    """Probability of each paytable line (highest first; None = the bet loses), summing to 1.

    Lines the paytable carries but that can never pay (suited trips from one deck, a line
    outranked by a better-paying one for every deal) appear with probability 0.
    """
    total = _total_deals(bet.kind, decks)
    return {line: Fraction(n, total) for line, n in _line_deals(bet, decks).items()}


def side_bet_return(bet: SideBet, decks: int) -> Fraction:
    """Expected amount returned per unit staked, stake included (the RTP)."""
    distribution = side_bet_distribution(bet, decks)
    return sum(
        (p * bet.payout(line).returns for line, p in distribution.items() if line is not None),
        Fraction(0),
    )


def house_edge(bet: SideBet, decks: int) -> Fraction:
    """Expected loss per unit staked: 1 minus the return."""
    return 1 - side_bet_return(bet, decks)


# --- PAR table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SideBetRow:
    """One paytable line of a side bet (or the loss), with its exact probability."""
    line: str | None  # None: the bet loses
    payout: str  # the paytable text, "" for a loss
    returns: Fraction  # per unit staked, stake included
    combinations: int
    probability: Fraction

    @property
    def contribution(self) -> Fraction:
        """This line's share of the return (probabilities times returns sum to the RTP)."""
        return self.probability * self.returns


@dataclass(frozen=True)
class SideBetTable:
    """A side bet's every outcome over all deals, counted exactly."""
    name: str
    kind: SideBetKind
    decks: int
    cards_judged: int
    #: what ``combinations`` counts: unordered card sets, or ordered deals where position matters
    counted: str
    total: int
    rows: tuple[SideBetRow, ...]

    @property
    def expected_return(self) -> Fraction:
        """The exact return per unit staked, stake included."""
        return sum((row.contribution for row in self.rows), Fraction(0))

    @property
    def house_edge(self) -> Fraction:
        """One less the expected return."""
        return 1 - self.expected_return

    @property
    def hit_frequency(self) -> Fraction:
        """Probability that the bet pays anything."""
        return sum((row.probability for row in self.rows if row.line is not None), Fraction(0))

    @property
    def variance(self) -> Fraction:
        """Variance of the amount returned per unit staked."""
        second = sum((row.probability * row.returns**2 for row in self.rows), Fraction(0))
        return second - self.expected_return**2

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every exact value as ``{"fraction": "n/d", "decimal": "0.…"}``."""
        return {
            "name": self.name,
            "kind": str(self.kind),
            "decks": self.decks,
            "cards_judged": self.cards_judged,
            "counted": self.counted,
            "total": self.total,
            "rows": [
                {
                    "line": row.line,
                    "payout": row.payout,
                    "returns": exact(row.returns),
                    "combinations": row.combinations,
                    "probability": exact(row.probability),
                    "contribution": exact(row.contribution),
                }
                for row in self.rows
            ],
            "return": exact(self.expected_return),
            "house_edge": exact(self.house_edge),
            "hit_frequency": exact(self.hit_frequency),
            "variance": exact(self.variance),
            "standard_deviation": decimal_sqrt(self.variance),
        }


def side_bet_table(bet: SideBet, decks: int) -> SideBetTable:
    """The PAR table of ``bet`` dealt from ``decks`` decks: one row per line, the loss last."""
    kind = bet.kind
    # order-blind bets are counted the usual way, as card sets; Snap's positions matter
    per_set = factorial(CARDS_JUDGED[kind]) if _SYMMETRY[kind] is _Symmetry.MULTISET else 1
    total = _total_deals(kind, decks) // per_set
    rows = []
    for line, deals in _line_deals(bet, decks).items():
        payout = bet.payout(line) if line is not None else None
        rows.append(SideBetRow(
            line=line,
            payout=payout.text if payout else "",
            returns=payout.returns if payout else Fraction(0),
            combinations=deals // per_set,
            probability=Fraction(deals // per_set, total),
        ))
    counted = "card combinations" if per_set > 1 else "ordered deals"
    return SideBetTable(bet.name, kind, decks, CARDS_JUDGED[kind], counted, total, tuple(rows))


def side_bet_tables(rules: Rules) -> dict[str, SideBetTable]:
    """The table of every side bet a game offers, dealt from the game's shoe."""
    return {bet.name: side_bet_table(bet, rules.decks) for bet in rules.side_bets}


# --- exact decimals ----------------------------------------------------------------------------


def decimal(value: Fraction, places: int = DECIMAL_PLACES) -> str:
    """``value`` rounded half-even to ``places`` decimals, computed exactly (no floats)."""
    scaled = value * 10**places
    whole, rest = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rest
    if twice > scaled.denominator or (twice == scaled.denominator and whole % 2):
        whole += 1
    sign = "-" if whole < 0 else ""
    digits = str(abs(whole)).rjust(places + 1, "0")
    if places == 0:
        return sign + digits
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def decimal_sqrt(value: Fraction, places: int = DECIMAL_PLACES) -> str:
    """Square root of a non-negative ``value``, truncated to ``places`` decimals, exactly."""
    if value < 0:
        raise ValueError("square root of a negative value")
    root = isqrt(value.numerator * 10 ** (2 * places) // value.denominator)
    return decimal(Fraction(root, 10**places), places)


def exact(value: Fraction) -> dict[str, str]:
    """``value`` as an exact fraction and its decimal, for JSON."""
    return {"fraction": f"{value.numerator}/{value.denominator}", "decimal": decimal(value)}
