"""Exact side-bet mathematics, checked against the published returns, closed forms, brute force
over real card deals, and published analyses of other configurations."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping
from fractions import Fraction
from itertools import permutations, product
from math import comb, perm, prod

import pytest
from hypothesis import given
from hypothesis import strategies as st

from game_math.analysis.sidebets import (
    decimal,
    decimal_sqrt,
    house_edge,
    side_bet_distribution,
    side_bet_return,
    side_bet_table,
    side_bet_tables,
)
from game_math.cards import ordered_shoe, parse_cards
from game_math.games import PUBLISHED_SIDE_BET_RETURNS, game_rules
from game_math.rules import Payout, SideBet, SideBetKind
from game_math.sidebets import qualifying_lines, side_bet_result

SNAP = SideBetKind.SNAP
PP = SideBetKind.PERFECT_PAIRS
TP3 = SideBetKind.TWENTY_ONE_PLUS_THREE
DECKS = range(1, 9)


def make_bet(kind: SideBetKind, paytable: Mapping[str, str]) -> SideBet:
    lines = tuple((line, Payout.parse(text, line)) for line, text in paytable.items())
    return SideBet(name=str(kind), kind=kind, paytable=lines)


def game_bet(game: str, name: str) -> tuple[SideBet, int]:
    rules = game_rules(game)
    bet = rules.side_bet(name)
    assert bet is not None
    return bet, rules.decks


STANDARD_21_3 = {
    "suited_trips": "100:1", "straight_flush": "40:1", "three_of_a_kind": "25:1",
    "straight": "10:1", "flush": "5:1",
}


# --- the published returns ---------------------------------------------------------------------


@pytest.mark.parametrize(("game", "name"), sorted(PUBLISHED_SIDE_BET_RETURNS))
def test_published_return_to_the_second_decimal(game: str, name: str) -> None:
    bet, decks = game_bet(game, name)
    published = Fraction(PUBLISHED_SIDE_BET_RETURNS[(game, name)])
    ret = side_bet_return(bet, decks)
    assert round(float(ret) * 100, 2) == round(float(published) * 100, 2)


def test_game_tables_cover_every_offered_side_bet() -> None:
    for game in ("snap", "multi-hand", "double-deck"):
        rules = game_rules(game)
        tables = side_bet_tables(rules)
        assert set(tables) == {bet.name for bet in rules.side_bets}
        for name, table in tables.items():
            bet = rules.side_bet(name)
            assert bet is not None
            assert table.decks == rules.decks
            assert table.expected_return == side_bet_return(bet, rules.decks)


# --- closed forms, line by line, for every deck count -------------------------------------------


def snap_closed_form(decks: int) -> dict[str | None, Fraction]:
    """Ordered deal h1, h1, h2, h2, up card; a "pair" is two identical cards."""
    n = 52 * decks
    hand_pair = Fraction(decks - 1, n - 1)
    # after hand 1 pairs face X: X has decks - 2 copies left, the 51 other faces decks each
    second_given_first = Fraction((decks - 2) * (decks - 3) + 51 * decks * (decks - 1),
                                  (n - 2) * (n - 3))
    both = hand_pair * second_given_first
    either = 2 * hand_pair - both
    all_distinct = prod(Fraction(n - i * decks, n - i) for i in range(5))
    return {
        "matching_pair_both_hands": both,
        "pair_in_any_hand": either - both,
        "matching_pair_anywhere": 1 - all_distinct - either,
        None: Fraction(all_distinct),
    }


@pytest.mark.parametrize("decks", [*DECKS, 16])
def test_snap_matches_closed_form(decks: int) -> None:
    bet, _ = game_bet("snap", "snap")
    assert side_bet_distribution(bet, decks) == snap_closed_form(decks)


def perfect_pairs_closed_form(decks: int) -> dict[str | None, Fraction]:
    total = comb(52 * decks, 2)
    lines = {
        "perfect_pair": 52 * comb(decks, 2),
        "coloured_pair": 13 * 2 * decks * decks,  # per rank: S-C and H-D
        "mixed_pair": 13 * 4 * decks * decks,  # per rank: 2 black suits x 2 red suits
    }
    out: dict[str | None, Fraction] = {k: Fraction(v, total) for k, v in lines.items()}
    out[None] = 1 - sum(out.values(), Fraction(0))
    return out


@pytest.mark.parametrize("decks", DECKS)
def test_perfect_pairs_matches_closed_form(decks: int) -> None:
    bet, _ = game_bet("multi-hand", "perfect_pairs")
    assert side_bet_distribution(bet, decks) == perfect_pairs_closed_form(decks)


def twenty_one_plus_three_counts(decks: int) -> dict[str, int]:
    """Unordered three-card combinations of each poker hand, each hand counted at its best."""
    d = decks
    return {
        "suited_trips": 52 * comb(d, 3),
        "straight_flush": 12 * 4 * d**3,  # A23 .. QKA, 12 straights
        "three_of_a_kind": 13 * (comb(4 * d, 3) - 4 * comb(d, 3)),
        "straight": 12 * ((4 * d) ** 3 - 4 * d**3),
        "flush": 4 * (comb(13 * d, 3) - 13 * comb(d, 3) - 12 * d**3),
    }


@pytest.mark.parametrize("decks", DECKS)
def test_twenty_one_plus_three_matches_closed_form(decks: int) -> None:
    bet = make_bet(TP3, STANDARD_21_3)
    total = comb(52 * decks, 3)
    expected: dict[str | None, Fraction] = {
        k: Fraction(v, total) for k, v in twenty_one_plus_three_counts(decks).items()
    }
    expected[None] = 1 - sum(expected.values(), Fraction(0))
    assert side_bet_distribution(bet, decks) == expected


@pytest.mark.parametrize(("game", "name"), sorted(PUBLISHED_SIDE_BET_RETURNS))
@pytest.mark.parametrize("decks", [*DECKS, 16])
def test_probabilities_sum_to_exactly_one(game: str, name: str, decks: int) -> None:
    bet, _ = game_bet(game, name)
    distribution = side_bet_distribution(bet, decks)
    assert sum(distribution.values()) == 1
    assert all(p >= 0 for p in distribution.values())
    assert house_edge(bet, decks) == 1 - side_bet_return(bet, decks)


# --- brute force over real deals ----------------------------------------------------------------


def brute_force_cards(bet: SideBet, decks: int, k: int) -> dict[str | None, Fraction]:
    """Every ordered deal of k physical cards from the shoe, judged by the engine."""
    counts: Counter[str | None] = Counter()
    for cards in permutations(ordered_shoe(decks), k):
        counts[side_bet_result(bet, cards)[0]] += 1
    total = perm(52 * decks, k)
    return {line: Fraction(n, total) for line, n in counts.items()}


def nonzero(distribution: Mapping[str | None, Fraction]) -> dict[str | None, Fraction]:
    return {line: p for line, p in distribution.items() if p}


@pytest.mark.parametrize("decks", [1, 2, 3])
def test_perfect_pairs_equals_brute_force_over_cards(decks: int) -> None:
    bet, _ = game_bet("multi-hand", "perfect_pairs")
    expected = brute_force_cards(bet, decks, 2)
    assert nonzero(side_bet_distribution(bet, decks)) == expected


def test_twenty_one_plus_three_equals_brute_force_over_one_deck() -> None:
    bet, _ = game_bet("multi-hand", "twenty_one_plus_three")
    expected = brute_force_cards(bet, 1, 3)
    assert nonzero(side_bet_distribution(bet, 1)) == expected


@pytest.fixture(scope="module")
def ordered_face_deals_21_3() -> Counter[tuple[str | None, tuple[int, ...]]]:
    """Every ordered triple of faces (52**3, no symmetry assumed), judged by the engine, counted by
    paying line and by how often each distinct face occurs."""
    bet, _ = game_bet("multi-hand", "twenty_one_plus_three")
    counts: Counter[tuple[str | None, tuple[int, ...]]] = Counter()
    for cards in product(range(52), repeat=3):
        multiplicities = tuple(Counter(cards).values())
        counts[(side_bet_result(bet, cards)[0], multiplicities)] += 1
    return counts


@pytest.mark.parametrize("decks", [2, 3, 6, 8])
def test_twenty_one_plus_three_equals_brute_force_over_ordered_faces(
    decks: int, ordered_face_deals_21_3: Counter[tuple[str | None, tuple[int, ...]]]
) -> None:
    bet, _ = game_bet("multi-hand", "twenty_one_plus_three")
    weighted: Counter[str | None] = Counter()
    for (line, multiplicities), n in ordered_face_deals_21_3.items():
        weighted[line] += n * prod(perm(decks, m) for m in multiplicities)
    total = perm(52 * decks, 3)
    expected = {line: Fraction(n, total) for line, n in weighted.items() if n}
    assert nonzero(side_bet_distribution(bet, decks)) == expected


# The analysis stands one deal for many; these are the symmetries it relies on, on the evaluators.

deals_5 = st.lists(st.integers(0, 51), min_size=5, max_size=5)


@given(deals_5, st.permutations(list(range(52))))
def test_snap_is_judged_on_identity_alone(cards: list[int], relabel: list[int]) -> None:
    assert qualifying_lines(SNAP, [relabel[c] for c in cards]) == qualifying_lines(SNAP, cards)


@given(st.lists(st.integers(0, 51), min_size=3, max_size=3), st.randoms())
def test_order_blind_bets_ignore_card_order(cards: list[int], rnd: random.Random) -> None:
    shuffled = list(cards)
    rnd.shuffle(shuffled)
    assert qualifying_lines(TP3, shuffled) == qualifying_lines(TP3, cards)
    assert qualifying_lines(PP, shuffled[:2]) == qualifying_lines(PP, shuffled[1::-1])


# --- published analyses of other configurations -------------------------------------------------
# Source: Michael Shackleford, Wizard of Odds, "Perfect Pairs" (Version 1, pay tables A and D),
# https://wizardofodds.com/games/blackjack/side-bets/perfect-pairs/


def test_perfect_pairs_table_a_eight_decks_wizard_of_odds() -> None:
    bet = make_bet(PP, {"perfect_pair": "25:1", "coloured_pair": "12:1", "mixed_pair": "6:1"})
    table = side_bet_table(bet, 8)
    combos = {row.line: row.combinations for row in table.rows}
    assert combos == {"perfect_pair": 1456, "coloured_pair": 1664, "mixed_pair": 3328, None: 79872}
    assert table.total == 86320
    assert decimal(table.expected_return - 1, 6) == "-0.040964"
    assert decimal(table.house_edge * 100, 2) == "4.10"


def test_perfect_pairs_table_d_eight_decks_wizard_of_odds() -> None:
    bet = make_bet(PP, {"perfect_pair": "25:1", "coloured_pair": "15:1", "mixed_pair": "5:1"})
    assert decimal(side_bet_return(bet, 8) - 1, 6) == "-0.021687"


# Source: Michael Shackleford, Wizard of Odds, "21+3" (Version 1: every hand pays 9 to 1, and
# Version 3), https://wizardofodds.com/games/blackjack/side-bets/21plus3/

FLAT_21_3 = {"straight_flush": "9:1", "three_of_a_kind": "9:1", "straight": "9:1", "flush": "9:1"}


def test_twenty_one_plus_three_version_1_six_decks_wizard_of_odds() -> None:
    table = side_bet_table(make_bet(TP3, FLAT_21_3), 6)
    combos = {row.line: row.combinations for row in table.rows}
    # the Wizard's flush 236736 and pair+flush 56160 are one line here
    assert combos == {
        "straight_flush": 10368, "three_of_a_kind": 26312, "straight": 155520,
        "flush": 236736 + 56160, None: 977184 + 3551040,
    }
    assert table.total == 5013320
    assert decimal(table.expected_return - 1, 6) == "-0.032386"


@pytest.mark.parametrize(
    ("decks", "edge"), [(1, "13.30"), (2, "7.26"), (4, "4.24"), (6, "3.24"), (8, "2.74")]
)
def test_21_3_version_1_edge_by_decks_wizard_of_odds(decks: int, edge: str) -> None:
    assert decimal(house_edge(make_bet(TP3, FLAT_21_3), decks) * 100, 2) == edge


def test_twenty_one_plus_three_version_3_six_decks_wizard_of_odds() -> None:
    # three of a kind pays less than a straight flush here: only the highest win pays
    bet = make_bet(TP3, {
        "suited_trips": "100:1", "three_of_a_kind": "33:1", "straight_flush": "35:1",
        "straight": "10:1", "flush": "5:1",
    })
    combos = {row.line: row.combinations for row in side_bet_table(bet, 6).rows}
    assert combos == {
        "suited_trips": 1040, "three_of_a_kind": 25272, "straight_flush": 10368,
        "straight": 155520, "flush": 292896, None: 4528224,
    }


# --- custom paytables ---------------------------------------------------------------------------


@pytest.mark.parametrize("decks", [1, 2, 6])
def test_21_3_without_suited_trips_pays_them_as_three_of_a_kind(decks: int) -> None:
    paytable = {k: v for k, v in STANDARD_21_3.items() if k != "suited_trips"}
    bet = make_bet(TP3, paytable)
    distribution = side_bet_distribution(bet, decks)
    counts = twenty_one_plus_three_counts(decks)
    total = comb(52 * decks, 3)
    assert "suited_trips" not in distribution
    assert distribution["three_of_a_kind"] == Fraction(13 * comb(4 * decks, 3), total)
    assert distribution["flush"] == Fraction(counts["flush"], total)
    kings = parse_cards(["KH", "KH", "KH"])
    assert side_bet_result(bet, kings) == ("three_of_a_kind", Fraction(26))


@pytest.mark.parametrize("decks", [2, 6])
def test_21_3_without_suited_trips_pays_the_better_of_trips_and_flush(decks: int) -> None:
    bet = make_bet(TP3, {"three_of_a_kind": "25:1", "flush": "50:1"})
    distribution = side_bet_distribution(bet, decks)
    counts = twenty_one_plus_three_counts(decks)
    total = comb(52 * decks, 3)
    # with no straight lines on the table, straight flushes are paid as flushes too
    every_flush = counts["flush"] + counts["suited_trips"] + counts["straight_flush"]
    assert distribution["flush"] == Fraction(every_flush, total)
    assert distribution["three_of_a_kind"] == Fraction(counts["three_of_a_kind"], total)
    assert side_bet_result(bet, parse_cards(["KH", "KH", "KH"]))[0] == "flush"


@pytest.mark.parametrize("decks", [2, 4])
def test_snap_without_hand_line_pays_hand_pairs_as_anywhere(decks: int) -> None:
    bet = make_bet(SNAP, {"matching_pair_both_hands": "1000 for 1",
                          "matching_pair_anywhere": "5 for 1"})
    closed = snap_closed_form(decks)
    distribution = side_bet_distribution(bet, decks)
    assert distribution["matching_pair_anywhere"] == (
        closed["matching_pair_anywhere"] + closed["pair_in_any_hand"]
    )
    assert distribution["matching_pair_both_hands"] == closed["matching_pair_both_hands"]


def test_one_line_perfect_pairs_loses_other_pairs() -> None:
    bet = make_bet(PP, {"perfect_pair": "30:1"})
    assert side_bet_distribution(bet, 6) == {
        "perfect_pair": Fraction(5, 311), None: Fraction(306, 311),
    }


def test_snap_from_one_deck_never_pays() -> None:
    bet, _ = game_bet("snap", "snap")
    assert side_bet_distribution(bet, 1)[None] == 1
    assert side_bet_return(bet, 1) == 0


def test_no_decks_is_refused() -> None:
    bet, _ = game_bet("snap", "snap")
    with pytest.raises(ValueError, match="decks"):
        side_bet_distribution(bet, 0)


# --- the PAR table ------------------------------------------------------------------------------


@pytest.mark.parametrize(("game", "name"), sorted(PUBLISHED_SIDE_BET_RETURNS))
def test_table_is_consistent_with_the_distribution(game: str, name: str) -> None:
    bet, decks = game_bet(game, name)
    table = side_bet_table(bet, decks)
    distribution = side_bet_distribution(bet, decks)
    assert [row.line for row in table.rows] == list(distribution)
    assert [row.line for row in table.rows][:-1] == [line for line, _ in bet.paytable]
    assert sum(row.combinations for row in table.rows) == table.total
    assert all(row.probability == distribution[row.line] for row in table.rows)
    assert table.expected_return == side_bet_return(bet, decks)
    assert table.hit_frequency == 1 - distribution[None]
    mean = table.expected_return
    assert table.variance == sum(p * (row.returns - mean) ** 2
                                 for row, p in ((r, r.probability) for r in table.rows))


def test_table_counts_card_sets_or_ordered_deals() -> None:
    snap, _ = game_bet("snap", "snap")
    pairs, _ = game_bet("multi-hand", "perfect_pairs")
    assert side_bet_table(snap, 2).total == perm(104, 5)
    assert side_bet_table(pairs, 6).total == comb(312, 2)


@pytest.mark.parametrize(("game", "name"), sorted(PUBLISHED_SIDE_BET_RETURNS))
def test_table_dict_is_json_with_exact_fractions_and_decimals(game: str, name: str) -> None:
    bet, decks = game_bet(game, name)
    table = side_bet_table(bet, decks)
    data = json.loads(json.dumps(table.to_dict()))
    assert Fraction(data["return"]["fraction"]) == table.expected_return
    assert abs(Fraction(data["return"]["decimal"]) - table.expected_return) <= Fraction(1, 10**12)
    assert Fraction(data["house_edge"]["fraction"]) == table.house_edge
    for row, out in zip(table.rows, data["rows"], strict=True):
        assert out["line"] == row.line
        assert out["combinations"] == row.combinations
        assert Fraction(out["probability"]["fraction"]) == row.probability
        assert Fraction(out["contribution"]["fraction"]) == row.contribution
    sd = Fraction(data["standard_deviation"])
    assert sd**2 <= table.variance < (sd + Fraction(1, 10**12)) ** 2


@pytest.mark.parametrize(
    ("value", "places", "text"),
    [
        (Fraction(2, 3), 12, "0.666666666667"),
        (Fraction(3, 8), 2, "0.38"),  # half to even
        (Fraction(1, 8), 2, "0.12"),
        (Fraction(-1, 8), 2, "-0.12"),
        (Fraction(-5, 3), 3, "-1.667"),
        (Fraction(7), 0, "7"),
        (Fraction(1, 400), 2, "0.00"),
    ],
)
def test_decimal_rounds_exactly(value: Fraction, places: int, text: str) -> None:
    assert decimal(value, places) == text


def test_decimal_sqrt_truncates() -> None:
    assert decimal_sqrt(Fraction(2), 6) == "1.414213"
    assert decimal_sqrt(Fraction(9, 4), 3) == "1.500"
    with pytest.raises(ValueError):
        decimal_sqrt(Fraction(-1))


def best_line_by_scan(bet: SideBet, cards: list[int]) -> tuple[str | None, Fraction]:
    """The paying line as the rule says it, scanned afresh: of the qualifying lines the paytable
    carries, the largest return, and of equal returns the first listed."""
    best: tuple[str | None, Fraction] = (None, Fraction(0))
    table = dict(bet.paytable)
    for line in qualifying_lines(bet.kind, cards):
        payout = table.get(line)
        if payout is not None and payout.returns > best[1]:
            best = (line, payout.returns)
    return best


# paytables with ties between lines that qualify together (the first listed must pay) and with
# the ranking against the listing (a lower line paying more)
TIED_PAYTABLES = [
    (SNAP, {"matching_pair_both_hands": "5:1", "pair_in_any_hand": "5:1",
            "matching_pair_anywhere": "5:1"}),
    (SNAP, {"pair_in_any_hand": "2:1", "matching_pair_anywhere": "9:1"}),
    (TP3, {"suited_trips": "10:1", "straight_flush": "10:1", "three_of_a_kind": "10:1",
           "straight": "10:1", "flush": "10:1"}),
    (TP3, {"flush": "40:1", "three_of_a_kind": "30:1", "straight_flush": "30:1"}),
    (PP, {"mixed_pair": "6:1", "coloured_pair": "6:1"}),
]


@pytest.mark.parametrize(("kind", "paytable"), TIED_PAYTABLES)
def test_ranked_paytable_pays_what_a_scan_of_the_qualifying_lines_pays(
    kind: SideBetKind, paytable: Mapping[str, str],
) -> None:
    bet = make_bet(kind, paytable)
    rng = random.Random(21)
    size = {SNAP: 5, TP3: 3, PP: 2}[kind]
    shoe = ordered_shoe(2)
    paid: Counter[str | None] = Counter()
    for _ in range(20_000):
        # cards from a small pool of values so pairs, trips and flushes come often
        cards = [shoe[rng.randrange(0, 104, rng.choice((1, 13, 26)))] for _ in range(size)]
        result = side_bet_result(bet, cards)
        assert result == best_line_by_scan(bet, cards), cards
        paid[result[0]] += 1
    assert len(paid) >= 2  # lines were paid, and nothing: the comparison saw both


def test_every_game_side_bet_pays_what_a_scan_pays() -> None:
    rng = random.Random(7)
    for game in ("snap", "double-deck", "double-exposure", "multi-hand"):
        for bet in game_rules(game).side_bets:
            size = {SNAP: 5, TP3: 3, PP: 2}[bet.kind]
            shoe = ordered_shoe(2)
            for _ in range(3_000):
                cards = rng.sample(shoe, size)
                assert side_bet_result(bet, cards) == best_line_by_scan(bet, cards)
