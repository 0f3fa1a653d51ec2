"""Rules as data: one frozen object per game, loadable from and dumpable to TOML with the same keys.

Every knob the operator's rule documents name lives here (docs/games.md); the engine
(``game_math.round``) and the analysis read nothing else. A new combination of these knobs needs
no engine code: write a TOML file.

Money is integer minor units (cents). Ratios (payouts, fractions) are exact ``Fraction`` values,
written in TOML as strings such as ``"3:2"`` (pays 3 to 2, stake returned on top) or ``"1/2"``.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from fractions import Fraction
from functools import cached_property, lru_cache
from math import lcm
from typing import Any, Final

import tomli_w

from game_math.errors import RulesError, quote

GAME_IDS: tuple[str, ...] = ("snap", "double-deck", "double-exposure", "multi-hand")
#: the longest payout text and the most digits of a number in a fraction a rules file may write
MAX_NUMBER_TEXT: Final = 40
MAX_NUMBER_DIGITS: Final = 18
_DIGITS: Final = rf"\d{{1,{MAX_NUMBER_DIGITS}}}"
_FRACTION_TEXT: Final = re.compile(rf"\s*[+-]?{_DIGITS}(?:/{_DIGITS}|\.{_DIGITS})?\s*")


class ShufflePolicy(StrEnum):
    """When the shoe is reshuffled: before every round, or once the cut card comes out."""

    EVERY_ROUND = "every_round"
    CUT_CARD = "cut_card"


class DealerCards(StrEnum):
    """How the dealer's second card is dealt."""

    HOLE_CARD = "hole_card"  # second card dealt face down before play
    NO_HOLE_CARD = "no_hole_card"  # second card dealt only after the players finish
    BOTH_EXPOSED = "both_exposed"  # both cards dealt face up


class TieRule(StrEnum):
    """What a tie between a player hand and the dealer pays."""

    PUSH = "push"
    DEALER_WINS = "dealer_wins"


class BlackjackVsBlackjack(StrEnum):
    """What a player blackjack gets against a dealer blackjack."""

    PUSH = "push"
    PLAYER_WINS = "player_wins"  # paid at the blackjack payout
    DEALER_WINS = "dealer_wins"


class DoubleOn(StrEnum):
    """The two-card totals a hand may double on."""

    ANY = "any"
    NINE_TO_ELEVEN = "9-11"
    TEN_OR_ELEVEN = "10-11"


class SideBetKind(StrEnum):
    """The side bets the engine knows how to settle."""

    SNAP = "snap"
    PERFECT_PAIRS = "perfect_pairs"
    TWENTY_ONE_PLUS_THREE = "twenty_one_plus_three"


class Alert(StrEnum):
    """Advisories the engine raises on a questionable decision (they never block it)."""

    HIT_HARD_17_TO_20 = "hit_hard_17_20"
    STAND_HARD_UNDER_12 = "stand_hard_under_12"


@dataclass(frozen=True)
class Payout:
    """A paytable ratio as the seeds write it: ``"25:1"`` (to one) or ``"1000 for 1"``."""

    text: str
    returns: Fraction  # amount returned per unit staked, stake included; 0 never appears

    @staticmethod
    def parse(text: str, key: str) -> Payout:
        """The payout ``text`` writes; RulesError on ``key`` if it is malformed.

        >>> Payout.parse("3:2", "k").returns, Payout.parse("1000 for 1", "k").returns
        (Fraction(5, 2), Fraction(1000, 1))
        """
        raw = text.strip()
        try:
            if len(raw) > MAX_NUMBER_TEXT:  # int() of thousands of digits, then slow arithmetic
                raise ValueError
            if " for " in raw:
                num, den = (int(p) for p in raw.split(" for "))
                returns = Fraction(num, den)
            else:
                num, den = (int(p) for p in raw.split(":"))
                returns = Fraction(num, den) + 1
        except (ValueError, ZeroDivisionError):
            raise RulesError(key, f"bad payout {text!r}: write 'N:M' (to) or 'N for M'") from None
        if returns <= 1 and " for " not in raw:
            raise RulesError(key, f"payout {text!r} must pay more than nothing")
        if returns <= 0:
            raise RulesError(key, f"payout {text!r} must return something")
        return Payout(raw, returns)

    @property
    def profit(self) -> Fraction:
        """Winnings per unit staked, stake excluded."""
        return self.returns - 1


@dataclass(frozen=True)
class Shuffle:
    """The shuffle policy, and where the cut card goes when there is one."""

    policy: ShufflePolicy = ShufflePolicy.EVERY_ROUND
    #: with a cut card: the fraction of the shoe dealt before the round that reshuffles
    cut_card: Fraction = Fraction(1, 2)


@dataclass(frozen=True)
class Dealer:
    """How the dealer's cards are dealt and how the dealer draws."""

    cards: DealerCards = DealerCards.HOLE_CARD
    #: with a hole card: the dealer checks for blackjack under an ace or ten-value up card
    peek: bool = True
    hits_soft_17: bool = False


@dataclass(frozen=True)
class Payouts:
    """What a blackjack pays and how ties are settled."""

    blackjack: Payout = field(default_factory=lambda: Payout.parse("3:2", "payouts.blackjack"))
    ties: TieRule = TieRule.PUSH
    blackjack_vs_blackjack: BlackjackVsBlackjack = BlackjackVsBlackjack.PUSH


@dataclass(frozen=True)
class DoubleRule:
    """When a hand may double, and for how much."""

    on: DoubleOn = DoubleOn.ANY
    soft: bool = True
    after_split: bool = True
    #: the double stake may be any amount from 1 minor unit up to the hand's bet
    for_less: bool = False


@dataclass(frozen=True)
class SplitRule:
    """How often and what a hand may split."""

    #: hands one initial hand may become (2 = split once, 4 = resplit to four)
    max_hands: int = 2
    resplit_aces: bool = False
    split_aces_one_card: bool = True


@dataclass(frozen=True)
class InsuranceRule:
    """Insurance and even money against a dealer ace."""

    offered: bool = True
    pays: Payout = field(default_factory=lambda: Payout.parse("2:1", "insurance.pays"))
    #: the insurance stake as a fraction of the hand's bet (the most, when partial)
    fraction: Fraction = Fraction(1, 2)
    partial: bool = False
    #: a blackjack hand facing an ace is offered even money (paid 1:1 at once) instead
    even_money: bool = False
    #: a blackjack hand may take ordinary insurance (when even money is not offered)
    to_blackjack: bool = True


@dataclass(frozen=True)
class HandsRule:
    """How many hands a player may play at once."""

    #: numbers of hands a player may play at once
    counts: tuple[int, ...] = (1,)
    #: names of the betting spots in dealing order (display only)
    labels: tuple[str, ...] = ()
    #: with more than one hand, each bet must be at least this multiple of the table minimum
    multi_hand_min_multiple: int = 1


@dataclass(frozen=True)
class StakeLevel:
    """One table level: bet and side-bet limits in minor units, and its chips."""

    name: str
    min_bet: int
    max_bet: int
    side_bet_min: int
    side_bet_max: int
    #: chip values in minor units; when set, every bet must be a multiple of the smallest chip
    chips: tuple[int, ...] = ()


@dataclass(frozen=True)
class SideBet:
    """A side bet on offer: its kind, paytable and scope."""

    name: str
    kind: SideBetKind
    #: paytable lines from the highest win down; only the highest win pays
    paytable: tuple[tuple[str, Payout], ...]
    #: "hand": one per hand, needing that hand's main bet; "round": one per round
    scope: str = "hand"

    @cached_property
    def stake_multiple(self) -> int:
        """Side-bet stakes must be a multiple of this (minor units) so every payout is whole.
        Worked out once per side bet: every bet placed on it is checked against it."""
        return lcm(*(p.returns.denominator for _, p in self.paytable))

    @cached_property
    def ranked_payouts(self) -> tuple[tuple[str, Fraction], ...]:
        """The paytable's lines and what each returns per unit staked, the largest return
        first, and among equal returns in the order of ``paytable_lines`` (the order the
        evaluators list qualifying lines in): the first of them that qualifies is the line the
        bet pays (``game_math.sidebets.side_bet_result``). Made once per side bet."""
        order = paytable_lines(self.kind)
        ranked = sorted(self.paytable, key=lambda item: (-item[1].returns, order.index(item[0])))
        return tuple((line, payout.returns) for line, payout in ranked)

    def payout(self, line: str) -> Payout:
        """The payout of paytable line ``line``; KeyError if there is none."""
        for name, payout in self.paytable:
            if name == line:
                return payout
        raise KeyError(line)


@dataclass(frozen=True)
class Rules:
    """One game's complete rules, as data: the engine and the analysis read nothing else.

    Built by ``rules_from_dict``/``rules_from_toml`` (or ``game_math.games.game_rules``), which
    validate every key; ``to_dict``/``to_toml`` write the same keys back.

    >>> from game_math.games import game_rules
    >>> rules = game_rules("double-deck")
    >>> rules.decks, rules.double.on, rules.payouts.blackjack.text
    (2, <DoubleOn.TEN_OR_ELEVEN: '10-11'>, '3:2')
    >>> rules_from_toml(rules.to_toml()) == rules
    True
    """

    game: str
    name: str
    decks: int
    shuffle: Shuffle
    dealer: Dealer
    payouts: Payouts
    double: DoubleRule
    split: SplitRule
    insurance: InsuranceRule
    hands: HandsRule
    levels: tuple[StakeLevel, ...]
    default_level: str
    side_bets: tuple[SideBet, ...] = ()
    #: side-bet winnings reach the balance only at round end (cannot fund a split or double)
    side_bets_credited_at_round_end: bool = False
    alerts: tuple[Alert, ...] = ()
    published_return: Fraction | None = None

    def __post_init__(self) -> None:
        _validate(self)

    def level(self, name: str | None = None) -> StakeLevel:
        """The stake level ``name`` (the default level for None); KeyError if unknown."""
        wanted = name or self.default_level
        for level in self.levels:
            if level.name == wanted:
                return level
        known = ", ".join(lv.name for lv in self.levels)
        raise KeyError(f"no stake level {quote(wanted)} (known: {known})")

    def side_bet(self, name: str) -> SideBet | None:
        """The side bet offered as ``name``, or None."""
        for bet in self.side_bets:
            if bet.name == name:
                return bet
        return None

    @property
    def cut_position(self) -> int | None:
        """Where a shoe of these rules has its cut card (``cut_card_position``), or None when
        the shoe is reshuffled every round.

        >>> from game_math.games import game_rules
        >>> game_rules("double-exposure").cut_position, game_rules("snap").cut_position
        (156, None)
        """
        if self.shuffle.policy is not ShufflePolicy.CUT_CARD:
            return None
        return cut_card_position(52 * self.decks, self.shuffle.cut_card)

    @cached_property
    def bet_multiple(self) -> int:
        """Every bet must be a multiple of this (minor units) so that every payout is whole."""
        dens = [self.payouts.blackjack.returns.denominator]
        ins = self.insurance
        if ins.offered and not ins.partial:
            dens += [ins.fraction.denominator, (ins.fraction * ins.pays.returns).denominator]
        return lcm(*dens)

    def to_dict(self) -> dict[str, Any]:
        """The rules as plain data with the keys of a rules file (``rules_from_dict`` reads it)."""
        return _dump(self)

    def to_toml(self) -> str:
        """The rules as a TOML rules file (``rules_from_toml`` reads it)."""
        return tomli_w.dumps(self.to_dict())

    @cached_property
    def canonical_json(self) -> str:
        """The rules as canonical JSON (``to_dict`` with sorted keys, no spaces), made once per
        rules object: what ``digest`` hashes and a round's stored state embeds."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """SHA-256 over the canonical JSON of the rules: names a rule set in records."""
        return self._digest

    @cached_property
    def _digest(self) -> str:
        # made once per rules object, as canonical_json is: every record written or audited
        # names its rules by it (1.5-2 µs a hash)
        return hashlib.sha256(self.canonical_json.encode()).hexdigest()


def cut_card_position(cards: int, cut: Fraction) -> int:
    """The index of the first card at or after a cut card placed ``cut`` of the way into a shoe
    of ``cards`` cards (rounded down): a round may start only before it.

    >>> cut_card_position(312, Fraction(1, 2)), cut_card_position(52, Fraction(2, 3))
    (156, 34)
    """
    return cards * cut.numerator // cut.denominator


def _validate(rules: Rules) -> None:
    if rules.decks < 1 or rules.decks > 16:
        raise RulesError("decks", f"must be 1..16, got {rules.decks}")
    if not 0 < rules.shuffle.cut_card < 1:
        raise RulesError("shuffle.cut_card", "must be a fraction strictly between 0 and 1")
    if rules.split.max_hands < 1 or rules.split.max_hands > 8:
        raise RulesError("split.max_hands", f"must be 1..8, got {rules.split.max_hands}")
    if not rules.hands.counts or min(rules.hands.counts) < 1 or max(rules.hands.counts) > 7:
        raise RulesError("hands.counts", "must list hand counts between 1 and 7")
    if not 0 < rules.insurance.fraction <= 1:
        raise RulesError("insurance.fraction", "must be in (0, 1]")
    if not rules.levels:
        raise RulesError("levels", "at least one stake level is needed")
    for lv in rules.levels:  # named as the TOML file names them: levels.<name>
        if not 0 < lv.min_bet <= lv.max_bet:
            raise RulesError(f"levels.{lv.name}", "need 0 < min_bet <= max_bet")
        if not 0 < lv.side_bet_min <= lv.side_bet_max:
            raise RulesError(f"levels.{lv.name}", "need 0 < side_bet_min <= side_bet_max")
        if any(c <= 0 for c in lv.chips):
            raise RulesError(f"levels.{lv.name}.chips", "chip values must be positive")
    if rules.default_level not in {lv.name for lv in rules.levels}:
        raise RulesError("default_level", f"{rules.default_level!r} is not a level name")
    for bet in rules.side_bets:
        _check_side_bet_shape(rules, bet)
        _check_paytable(bet)
    ins = rules.insurance
    if ins.offered and ins.partial and ins.pays.returns.denominator != 1:
        # any stake may be insured when insurance is partial: only a whole ratio pays whole
        whole = f"partial insurance needs a whole payout, got {ins.pays.text!r}"
        raise RulesError("insurance.pays", whole)


def _check_side_bet_shape(rules: Rules, bet: SideBet) -> None:
    """The cards an evaluator judges must exist: Snap needs two hands, the others one hand."""
    key = f"side_bets.{bet.name}.scope"
    if bet.scope not in ("hand", "round"):
        raise RulesError(key, "must be 'hand' or 'round'")
    if bet.kind is SideBetKind.SNAP:
        if bet.scope != "round":
            raise RulesError(key, "snap is judged on both hands and the dealer's card: 'round'")
        if max(rules.hands.counts) != 2:
            raise RulesError(key, "snap is judged on exactly two hands: hands.counts must top at 2")
    elif bet.scope != "hand":
        raise RulesError(key, f"{bet.kind} is judged on one hand's cards: 'hand'")


_PAYTABLE_LINES: dict[SideBetKind, tuple[str, ...]] = {
    SideBetKind.SNAP: ("matching_pair_both_hands", "pair_in_any_hand", "matching_pair_anywhere"),
    SideBetKind.PERFECT_PAIRS: ("perfect_pair", "coloured_pair", "mixed_pair"),
    SideBetKind.TWENTY_ONE_PLUS_THREE: (
        "suited_trips", "straight_flush", "three_of_a_kind", "straight", "flush",
    ),
}


def paytable_lines(kind: SideBetKind) -> tuple[str, ...]:
    """The outcome names an evaluator of ``kind`` can return, highest first."""
    return _PAYTABLE_LINES[kind]


def _check_paytable(bet: SideBet) -> None:
    key = f"side_bets.{bet.name}.paytable"
    known = _PAYTABLE_LINES[bet.kind]
    for line, _ in bet.paytable:
        if line not in known:
            names = ", ".join(known)
            raise RulesError(f"{key}.{line}", f"not a {bet.kind} outcome (known: {names})")


# --- TOML / dict round trip -------------------------------------------------------------------


def _dump_value(value: Any) -> Any:
    if isinstance(value, Payout):
        return value.text
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, tuple):
        return [_dump_value(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _dump_value(getattr(value, f.name)) for f in fields(value)}
    return value


def _dump(rules: Rules) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(rules):
        value = getattr(rules, f.name)
        if value is None:
            continue  # TOML has no null: an absent key means "none"
        if f.name == "levels":
            out["levels"] = {lv.name: _dump_level(lv) for lv in value}
        elif f.name == "side_bets":
            out["side_bets"] = {
                b.name: {"kind": str(b.kind), "scope": b.scope,
                         "paytable": {line: p.text for line, p in b.paytable}}
                for b in value
            }
        else:
            out[f.name] = _dump_value(value)
    return out


def _dump_level(level: StakeLevel) -> dict[str, Any]:
    d = _dump_value(level)
    del d["name"]
    if not level.chips:
        del d["chips"]
    return dict(d)


class _Reader:
    """Reads one table of a rules document, naming the full key in every error."""

    def __init__(self, data: Mapping[str, Any], prefix: str) -> None:
        if not isinstance(data, Mapping):
            raise RulesError(prefix.rstrip("."), "must be a table")
        self.data = data
        self.prefix = prefix
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def raw(self, name: str, default: Any) -> Any:
        self.seen.add(name)
        return self.data.get(name, default)

    def get(self, name: str, kind: type, default: Any) -> Any:
        value = self.raw(name, default)
        # bool is an int in Python; a rules file saying `decks = true` is still wrong
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise RulesError(self.key(name), f"must be {kind.__name__}, got {value!r}")
        return value

    def enum(self, name: str, kind: type[StrEnum], default: StrEnum) -> Any:
        value = self.raw(name, str(default))
        try:
            return kind(value)
        except ValueError:
            options = ", ".join(repr(str(m)) for m in kind)
            raise RulesError(self.key(name), f"must be one of {options}, got {value!r}") from None

    def fraction(self, name: str, default: Fraction) -> Fraction:
        value = self.raw(name, default)
        if isinstance(value, Fraction):
            return value
        try:
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise ValueError
            # Fraction("1e999999999") computes 10**999999999: only plain digits are read
            if isinstance(value, str) and not _FRACTION_TEXT.fullmatch(value):
                raise ValueError
            if isinstance(value, int) and abs(value) >= 10**MAX_NUMBER_DIGITS:
                raise ValueError
            return Fraction(value)
        except (ValueError, ZeroDivisionError):
            message = f"must be a fraction like '1/2', got {value!r}"
            raise RulesError(self.key(name), message) from None

    def payout(self, name: str, default: str) -> Payout:
        value = self.get(name, str, default)
        return Payout.parse(value, self.key(name))

    def table(self, name: str) -> _Reader:
        return _Reader(self.raw(name, {}), f"{self.key(name)}.")

    def ints(self, name: str, default: tuple[int, ...]) -> tuple[int, ...]:
        value = self.raw(name, list(default))
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise RulesError(self.key(name), f"must be a list of integers, got {value!r}")
        return tuple(value)

    def strs(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.raw(name, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RulesError(self.key(name), f"must be a list of strings, got {value!r}")
        return tuple(value)

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            raise RulesError(self.key(unknown[0]), "unknown key")


def rules_from_stored(data: Mapping[str, Any]) -> Rules:
    """``rules_from_dict(data)`` for rules read back from storage, memoised by their canonical
    JSON: a live round restores its rules at every action, and the few rule sets in play are
    parsed once each (rules are frozen, so one object serves every round)."""
    return _rules_from_canonical(json.dumps(data, sort_keys=True, separators=(",", ":")))


@lru_cache(maxsize=64)
def _rules_from_canonical(text: str) -> Rules:
    return rules_from_dict(json.loads(text))


def rules_from_dict(data: Mapping[str, Any]) -> Rules:
    """The rules ``data`` describes (the keys of a rules file); RulesError naming the bad key.

    Keys left out take their defaults, except ``game`` and ``decks``; unknown keys are refused.
    """
    top = _Reader(data, "")
    game = top.get("game", str, None) if "game" in data else _missing("game")
    name = top.get("name", str, game)
    decks = top.get("decks", int, None) if "decks" in data else _missing("decks")
    shuffle = _read_shuffle(top.table("shuffle"))
    dealer = _read_dealer(top.table("dealer"))
    payouts = _read_payouts(top.table("payouts"))
    double = _read_double(top.table("double"))
    split = _read_split(top.table("split"))
    insurance = _read_insurance(top.table("insurance"))
    hands = _read_hands(top.table("hands"))
    levels = _read_levels(top.raw("levels", None))
    default_level = top.get("default_level", str, levels[0].name)
    side_bets = _read_side_bets(top.raw("side_bets", {}))
    credited = top.get("side_bets_credited_at_round_end", bool, False)
    alerts = tuple(_alert(a, i) for i, a in enumerate(top.strs("alerts", ())))
    published = None
    if "published_return" in data:
        published = top.fraction("published_return", Fraction(0))
    top.done()
    return Rules(
        game=game, name=name, decks=decks, shuffle=shuffle, dealer=dealer, payouts=payouts,
        double=double, split=split, insurance=insurance, hands=hands, levels=levels,
        default_level=default_level, side_bets=side_bets,
        side_bets_credited_at_round_end=credited, alerts=alerts, published_return=published,
    )


def _missing(key: str) -> Any:
    raise RulesError(key, "is required")


def _alert(value: str, index: int) -> Alert:
    try:
        return Alert(value)
    except ValueError:
        options = ", ".join(repr(str(a)) for a in Alert)
        raise RulesError(f"alerts[{index}]", f"must be one of {options}, got {value!r}") from None


def _read_shuffle(r: _Reader) -> Shuffle:
    out = Shuffle(
        policy=r.enum("policy", ShufflePolicy, ShufflePolicy.EVERY_ROUND),
        cut_card=r.fraction("cut_card", Fraction(1, 2)),
    )
    r.done()
    return out


def _read_dealer(r: _Reader) -> Dealer:
    out = Dealer(
        cards=r.enum("cards", DealerCards, DealerCards.HOLE_CARD),
        peek=r.get("peek", bool, True),
        hits_soft_17=r.get("hits_soft_17", bool, False),
    )
    r.done()
    return out


def _read_payouts(r: _Reader) -> Payouts:
    out = Payouts(
        blackjack=r.payout("blackjack", "3:2"),
        ties=r.enum("ties", TieRule, TieRule.PUSH),
        blackjack_vs_blackjack=r.enum(
            "blackjack_vs_blackjack", BlackjackVsBlackjack, BlackjackVsBlackjack.PUSH
        ),
    )
    r.done()
    return out


def _read_double(r: _Reader) -> DoubleRule:
    out = DoubleRule(
        on=r.enum("on", DoubleOn, DoubleOn.ANY),
        soft=r.get("soft", bool, True),
        after_split=r.get("after_split", bool, True),
        for_less=r.get("for_less", bool, False),
    )
    r.done()
    return out


def _read_split(r: _Reader) -> SplitRule:
    out = SplitRule(
        max_hands=r.get("max_hands", int, 2),
        resplit_aces=r.get("resplit_aces", bool, False),
        split_aces_one_card=r.get("split_aces_one_card", bool, True),
    )
    r.done()
    return out


def _read_insurance(r: _Reader) -> InsuranceRule:
    out = InsuranceRule(
        offered=r.get("offered", bool, True),
        pays=r.payout("pays", "2:1"),
        fraction=r.fraction("fraction", Fraction(1, 2)),
        partial=r.get("partial", bool, False),
        even_money=r.get("even_money", bool, False),
        to_blackjack=r.get("to_blackjack", bool, True),
    )
    r.done()
    return out


def _read_hands(r: _Reader) -> HandsRule:
    out = HandsRule(
        counts=r.ints("counts", (1,)),
        labels=r.strs("labels", ()),
        multi_hand_min_multiple=r.get("multi_hand_min_multiple", int, 1),
    )
    r.done()
    return out


def _read_levels(data: Any) -> tuple[StakeLevel, ...]:
    if data is None:
        raise RulesError("levels", "is required: at least one stake level")
    if not isinstance(data, Mapping) or not data:
        raise RulesError("levels", "must be a table of stake levels")
    out = []
    for name, body in data.items():
        r = _Reader(body, f"levels.{name}.")
        min_bet = r.get("min_bet", int, 0)
        max_bet = r.get("max_bet", int, 0)
        out.append(StakeLevel(
            name=name, min_bet=min_bet, max_bet=max_bet,
            side_bet_min=r.get("side_bet_min", int, min_bet),
            side_bet_max=r.get("side_bet_max", int, max_bet),
            chips=r.ints("chips", ()),
        ))
        r.done()
    return tuple(out)


def _read_side_bets(data: Any) -> tuple[SideBet, ...]:
    if not isinstance(data, Mapping):
        raise RulesError("side_bets", "must be a table of side bets")
    out = []
    for name, body in data.items():
        r = _Reader(body, f"side_bets.{name}.")
        if "kind" not in r.data and name not in _KIND_NAMES:
            raise RulesError(r.key("kind"), f"is required (one of {', '.join(_KIND_NAMES)})")
        default = SideBetKind(name) if name in _KIND_NAMES else SideBetKind.SNAP
        kind = r.enum("kind", SideBetKind, default)
        scope = r.get("scope", str, "hand")
        table = r.raw("paytable", None)
        if not isinstance(table, Mapping) or not table:
            raise RulesError(r.key("paytable"), "must be a non-empty table of 'line = payout'")
        lines = tuple(
            (line, Payout.parse(str(text), f"{r.key('paytable')}.{line}"))
            for line, text in table.items()
        )
        r.done()
        out.append(SideBet(name=name, kind=kind, paytable=lines, scope=scope))
    return tuple(out)


_KIND_NAMES = tuple(str(k) for k in SideBetKind)


def rules_from_toml(text: str) -> Rules:
    """The rules a TOML rules file holds; RulesError naming the offending key.

    >>> rules = rules_from_toml('''
    ... game = "home"
    ... decks = 6
    ... default_level = "table"
    ... [double]
    ... on = "10-11"
    ... [levels.table]
    ... min_bet = 500
    ... max_bet = 50000
    ... ''')
    >>> rules.decks, rules.double.on, rules.payouts.blackjack.text, rules.level().max_bet
    (6, <DoubleOn.TEN_OR_ELEVEN: '10-11'>, '3:2', 50000)
    >>> rules_from_toml(rules.to_toml().replace("max_hands = 2", 'max_hands = "four"'))
    Traceback (most recent call last):
    ...
    game_math.errors.RulesError: split.max_hands: must be int, got 'four'
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError("toml", str(exc)) from None
    return rules_from_dict(data)
