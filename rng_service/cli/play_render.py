"""What `fairshoe play` shows: a round view, the buttons, money and results, as rich renderables.

Pure functions of the published messages (``fairshoe.round.v1.RoundView`` and friends) and a
:class:`TableInfo` read from the game's rules: no I/O, no server, so each is tested by printing
it to a string (tests/cli/test_play_render.py). The button names are the rule texts' (seeds):
HIT, STAND, DOUBLE, SPLIT; YES / NO (and YES TO ALL / NO TO ALL) for insurance and even money;
DEAL, REBET, REBET & DEAL and DOUBLE & DEAL between rounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.core.currency import units_text

SUIT_SYMBOLS: Final = {"S": "♠", "H": "♥", "D": "♦", "C": "♣"}
RED_SUITS: Final = frozenset("HD")

OUTCOMES: Final[dict[int, str]] = {
    rt.OUTCOME_WIN: "WIN", rt.OUTCOME_LOSE: "LOSE", rt.OUTCOME_PUSH: "PUSH",
    rt.OUTCOME_BLACKJACK: "BLACKJACK", rt.OUTCOME_BUST: "BUST",
    rt.OUTCOME_EVEN_MONEY: "EVEN MONEY", rt.OUTCOME_VOID: "VOID",
}
OUTCOME_STYLES: Final = {
    "WIN": "bold green", "BLACKJACK": "bold green", "EVEN MONEY": "green", "PUSH": "yellow",
    "LOSE": "red", "BUST": "red", "VOID": "magenta",
}
ALERTS: Final[dict[int, str]] = {
    rt.ALERT_HIT_HARD_17_20: "hitting a hard 17 to 20",
    rt.ALERT_STAND_HARD_UNDER_12: "standing on a hard total under 12",
}
WAGER_KINDS: Final[dict[int, str]] = {
    rt.WAGER_KIND_MAIN: "bet", rt.WAGER_KIND_SPLIT: "split", rt.WAGER_KIND_DOUBLE: "double",
    rt.WAGER_KIND_INSURANCE: "insurance", rt.WAGER_KIND_SIDE_BET: "side bet",
}
MODES: Final[dict[int, str]] = {common_pb2.MODE_DEMO: "DEMO", common_pb2.MODE_REAL: "REAL"}
#: buttons of a PLAY decision, in the order the rule texts list them
PLAY_BUTTONS: Final = (
    (rt.ACTION_KIND_HIT, "HIT"), (rt.ACTION_KIND_STAND, "STAND"),
    (rt.ACTION_KIND_DOUBLE, "DOUBLE"), (rt.ACTION_KIND_SPLIT, "SPLIT"),
)
BETWEEN_ROUNDS: Final = ("DEAL", "REBET", "REBET & DEAL", "DOUBLE & DEAL", "CLEAR", "GAME", "QUIT")


@dataclass(frozen=True)
class Level:
    """One stake level of a game, in minor units."""

    name: str
    min_bet: int
    max_bet: int
    side_bet_min: int
    side_bet_max: int


@dataclass(frozen=True)
class TableInfo:
    """What the screen needs of a game's rules (read from GameService.GetRules)."""

    game: str
    name: str
    decks: int
    levels: tuple[Level, ...]
    default_level: str
    hand_counts: tuple[int, ...]
    hand_labels: tuple[str, ...] = ()
    #: side bet name -> scope ("hand" or "round")
    side_bets: dict[str, str] = field(default_factory=dict)
    cut_card_shoe: bool = False
    insurance: bool = False
    even_money: bool = False
    #: the decimal places of the table's currency (its ISO 4217 exponent: EUR 2, JPY 0)
    places: int = 2

    def level(self, name: str) -> Level:
        """The level named ``name`` (empty: the default); KeyError for an unknown one."""
        wanted = name or self.default_level
        for level in self.levels:
            if level.name == wanted:
                return level
        raise KeyError(wanted)

    @classmethod
    def from_rules(cls, rules: dict[str, Any]) -> TableInfo:
        """From a rules document as ``fairshoe rules show`` prints it (parsed TOML)."""
        levels = tuple(
            Level(name, int(v["min_bet"]), int(v["max_bet"]), int(v.get("side_bet_min", 0)),
                  int(v.get("side_bet_max", 0)))
            for name, v in rules.get("levels", {}).items())
        hands = rules.get("hands", {})
        return cls(
            game=str(rules["game"]), name=str(rules.get("name", rules["game"])),
            decks=int(rules.get("decks", 0)), levels=levels,
            default_level=str(rules.get("default_level", levels[0].name if levels else "")),
            hand_counts=tuple(int(n) for n in hands.get("counts", [1])),
            hand_labels=tuple(str(x) for x in hands.get("labels", [])),
            side_bets={name: str(v.get("scope", "hand"))
                       for name, v in rules.get("side_bets", {}).items()},
            cut_card_shoe=rules.get("shuffle", {}).get("policy") == "cut_card",
            insurance=bool(rules.get("insurance", {}).get("offered", True)),
            even_money=bool(rules.get("insurance", {}).get("even_money", False)),
        )

    def hand_name(self, seat: int) -> str:
        """The spot's name as the rule texts say it ("right", "left") or "hand N"."""
        if seat < len(self.hand_labels):
            return self.hand_labels[seat].capitalize()
        return f"Hand {seat + 1}"


# ----- money and cards -------------------------------------------------------------------------


def money(minor: int, places: int = 2) -> str:
    """Minor units as currency units with the currency's ``places`` decimals (its ISO 4217
    exponent): 1050 -> "10.50", -5 -> "-0.05"; in JPY (0) 1050 -> "1,050"."""
    return units_text(minor, places)


def card_text(card: Any) -> Text:
    """One card: rank and suit symbol ("10♥", "A♠"), red for hearts and diamonds; "??" while
    hidden."""
    if card.hidden or not card.code:
        return Text("??", style="dim")
    rank, suit = card.code[:-1], card.code[-1]
    shown = ("10" if rank == "T" else rank) + SUIT_SYMBOLS.get(suit, suit)
    return Text(shown, style="bold red" if suit in RED_SUITS else "bold")


def cards_text(cards: Iterable[Any]) -> Text:
    """The cards, styled, separated by spaces."""
    return Text(" ").join(card_text(c) for c in cards)


def total_text(total: int, soft: bool, blackjack: bool = False) -> str:
    """How a hand's total reads: ``Blackjack``, ``soft 17`` or ``17``.

    >>> total_text(17, soft=True), total_text(21, soft=True), total_text(21, True, True)
    ('soft 17', '21', 'Blackjack')"""
    if blackjack:
        return "Blackjack"
    return f"soft {total}" if soft and total < 21 else str(total)


def outcome_text(outcome: int) -> Text:
    """An outcome code as its styled label (empty if the code is unknown)."""
    label = OUTCOMES.get(outcome, "")
    return Text(label, style=OUTCOME_STYLES.get(label, ""))


# ----- the table -------------------------------------------------------------------------------


def header(view: Any, info: TableInfo) -> Text:
    """Game, level, mode and round id, then the shoe's id and full commitment."""
    text = Text(f"{info.name}", style="bold")
    text.append(f" · level {view.level} · {MODES.get(view.mode, '?')} · round {view.round_id}")
    if view.shoe.shoe_id:
        text.append(f"\nShoe {view.shoe.shoe_id} ({view.shoe.decks} decks), commitment "
                    f"{view.shoe.commitment}")
    return text


def hand_names(view: Any, info: TableInfo) -> dict[int, str]:
    """Each hand's name: its spot's, and "(split N)" where a split made several of one spot."""
    names: dict[int, str] = {}
    for seat in sorted({h.seat for h in view.hands}):
        ids = sorted(h.hand_id for h in view.hands if h.seat == seat)
        for n, hand_id in enumerate(ids, 1):
            suffix = f" (split {n})" if len(ids) > 1 else ""
            names[hand_id] = info.hand_name(seat) + suffix
    return names


def _turn_hand(view: Any) -> int | None:
    return view.turn.hand_id if view.status == rt.ROUND_STATUS_AWAITING_PLAYER else None


#: the wagers that make up a hand's own bet (its side bets and insurance are apart)
HAND_STAKES: Final = frozenset({rt.WAGER_KIND_MAIN, rt.WAGER_KIND_SPLIT, rt.WAGER_KIND_DOUBLE})


def hand_stake(view: Any, hand: Any) -> int:
    """What the hand has at stake: its bet and the extra stake of a double (the view's
    ``bet_minor`` is the bet alone)."""
    stakes = [w.staked_minor for w in view.wagers
              if w.kind in HAND_STAKES and w.HasField("hand_id") and w.hand_id == hand.hand_id]
    return sum(stakes) if stakes else int(hand.bet_minor)


def side_bet_spot(wager: Any, names: dict[int, str]) -> str:
    """A side bet's row name: ``Snap`` for a round's, ``Hand 1 perfect_pairs`` for a hand's."""
    if wager.HasField("hand_id"):
        return f"{names.get(wager.hand_id, '')} {wager.side_bet}".strip()
    return str(wager.side_bet).replace("_", " ").capitalize()


def table(view: Any, info: TableInfo) -> Table:
    """The dealer's and each hand's cards, totals, bets and results, then the side bets."""
    grid = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("", "spot", "cards", "total", "bet", "result"):
        grid.add_column(column)
    dealer = view.dealer
    bust = Text("BUST", style=OUTCOME_STYLES["BUST"]) if dealer.total > 21 else ""
    grid.add_row("", "Dealer", cards_text(dealer.cards),
                 total_text(dealer.total, dealer.soft, dealer.blackjack) if dealer.cards else "",
                 "", bust)
    turn, names = _turn_hand(view), hand_names(view, info)
    for hand in sorted(view.hands, key=lambda h: (h.seat, h.hand_id)):
        grid.add_row("▶" if hand.hand_id == turn else "", names[hand.hand_id],
                     cards_text(hand.cards),
                     total_text(hand.total, hand.soft, hand.blackjack),
                     money(hand_stake(view, hand), info.places), outcome_text(hand.outcome))
    for wager in view.wagers:
        if wager.kind == rt.WAGER_KIND_SIDE_BET:
            grid.add_row("", side_bet_spot(wager, names), "", "",
                         money(wager.staked_minor, info.places),
                         outcome_text(wager.outcome))
    return grid


def wagers_table(view: Any, info: TableInfo) -> Table:
    """Every stake and what it returned (shown once the round is over)."""
    grid = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("wager", "spot", "staked", "returned", "result"):
        grid.add_column(column)
    names = hand_names(view, info)
    for wager in view.wagers:
        kind = WAGER_KINDS.get(wager.kind, "?")
        if wager.side_bet:
            kind = f"{kind} {wager.side_bet}" + (f" ({wager.line})" if wager.line else "")
        spot = names.get(wager.hand_id, "") if wager.HasField("hand_id") else ""
        returned = (money(wager.returned_minor, info.places)
                    if wager.HasField("returned_minor") else "")
        grid.add_row(kind, spot, money(wager.staked_minor, info.places), returned,
                     outcome_text(wager.outcome))
    return grid


def meters(view: Any, currency: str, places: int = 2) -> Text:
    """BALANCE, BET and WIN, as the rule texts' meters."""
    text = Text()
    if view.HasField("balance_after_minor"):
        text.append(f"BALANCE {money(view.balance_after_minor, places)} {currency}", style="bold")
        text.append("   ")
    text.append(f"BET {money(view.total_staked_minor, places)}   "
                f"WIN {money(view.total_returned_minor, places)}")
    return text


def round_screen(view: Any, info: TableInfo, currency: str) -> RenderableType:
    """The whole table: header, cards, meters; the wagers once the round is over."""
    parts: list[RenderableType] = [header(view, info), table(view, info)]
    if view.status == rt.ROUND_STATUS_VOID:
        parts.append(Text(f"Round void: {view.void_reason}", style="magenta"))
    if view.status != rt.ROUND_STATUS_AWAITING_PLAYER:
        parts.append(wagers_table(view, info))
    parts.append(meters(view, currency, info.places))
    return Group(*parts)


# ----- buttons and alerts ----------------------------------------------------------------------


@dataclass(frozen=True)
class Button:
    """One button the player may press now: its label and the advisory it would raise."""

    label: str
    note: str = ""
    alert: str = ""


def _stake_note(action: Any, places: int) -> str:
    if action.any_amount and action.min_stake_minor != action.max_stake_minor:
        return f"{money(action.min_stake_minor, places)} to {money(action.max_stake_minor, places)}"
    return money(action.max_stake_minor, places) if action.max_stake_minor else ""


def buttons(view: Any, places: int = 2) -> list[Button]:
    """The buttons for the round's current decision, from its legal actions."""
    if view.status != rt.ROUND_STATUS_AWAITING_PLAYER:
        return []
    legal = {a.action: a for a in view.legal_actions}
    decision = view.turn.decision
    to_all = len(view.hands) > 1
    if decision == rt.DECISION_INSURANCE:
        offer = legal.get(rt.ACTION_KIND_INSURANCE)
        note = f"insure {_stake_note(offer, places)}" if offer is not None else "insure"
        return _yes_no(note, to_all)
    if decision == rt.DECISION_EVEN_MONEY:
        return _yes_no("even money", to_all)
    out = []
    for kind, label in PLAY_BUTTONS:
        if kind in legal:
            action = legal[kind]
            note = _stake_note(action, places) if kind in (rt.ACTION_KIND_DOUBLE,
                                                   rt.ACTION_KIND_SPLIT) else ""
            out.append(Button(label, note, ALERTS.get(action.alert, "")))
    return out


def _yes_no(note: str, to_all: bool) -> list[Button]:
    out = [Button("YES", note), Button("NO")]
    if to_all:
        out += [Button("YES TO ALL"), Button("NO TO ALL")]
    return out


def decision_prompt(view: Any, info: TableInfo) -> str:
    """The question of the current decision, naming the hand."""
    name = hand_names(view, info).get(view.turn.hand_id, f"Hand {view.turn.hand_id + 1}")
    if view.turn.decision == rt.DECISION_INSURANCE:
        return f"Insurance for {name}?"
    if view.turn.decision == rt.DECISION_EVEN_MONEY:
        return f"Even money for {name}'s blackjack?"
    return f"{name}:"


def buttons_text(items: Sequence[Button]) -> Text:
    """The buttons on one line: ``[HIT] [STAND] [DOUBLE 10.00] ...``, alerts flagged."""
    text = Text()
    for i, item in enumerate(items):
        if i:
            text.append(" ")
        text.append(f"[{item.label}]", style="bold cyan")
        if item.note:
            text.append(f" {item.note}")
        if item.alert:
            text.append(f" (alert: {item.alert})", style="yellow")
    return text


def new_alerts(before: Any | None, after: Any) -> list[str]:
    """The advisories raised since ``before`` (every one of ``after`` when None)."""
    seen = len(before.events) if before is not None else 0
    return [f"Alert: {ALERTS.get(e.alert, 'questionable play')}"
            for e in after.events[seen:] if e.kind == rt.EVENT_KIND_ALERT]


# ----- between rounds --------------------------------------------------------------------------


def levels_text(info: TableInfo) -> str:
    """Each level's bet limits, the default marked."""
    parts = []
    for level in info.levels:
        mark = " (default)" if level.name == info.default_level else ""
        parts.append(f"{level.name} {money(level.min_bet, info.places)}-"
                     f"{money(level.max_bet, info.places)}{mark}")
    return " / ".join(parts)


def bets_help(info: TableInfo, level: Level) -> Text:
    """How to type bets for this game."""
    counts = ", ".join(str(n) for n in info.hand_counts)
    text = Text(f"Bets: one amount per hand ({counts} hands), "
                f"{money(level.min_bet, info.places)} to {money(level.max_bet, info.places)} "
                "each, e.g. ")
    example = " ".join([money(level.min_bet, info.places)] * info.hand_counts[0])
    text.append(example, style="bold")
    hand_side = [n for n, scope in info.side_bets.items() if scope == "hand"]
    round_side = [n for n, scope in info.side_bets.items() if scope == "round"]
    if hand_side:
        text.append(f"; side bets on a hand: AMOUNT,{hand_side[0]}=AMOUNT "
                    f"(side bets: {', '.join(hand_side)})")
    if round_side:
        text.append(f"; round side bets: {round_side[0]}=AMOUNT")
    return text


def round_buttons_help(info: TableInfo) -> Text:
    """The buttons of a round, typed by name (an amount after DOUBLE or YES where the rules
    let the player choose one)."""
    text = Text("In a round: ")
    text.append("[HIT] [STAND] [DOUBLE] [SPLIT]", style="bold cyan")
    offers = [x for x, on in (("insurance", info.insurance), ("even money", info.even_money))
              if on]
    if offers:
        text.append(f"; {' and '.join(offers)}: ")
        labels = ["YES", "NO"] + (["YES TO ALL", "NO TO ALL"] if max(info.hand_counts) > 1 else [])
        text.append(" ".join(f"[{label}]" for label in labels), style="bold cyan")
    text.append("; type a button's name (double AMOUNT, yes AMOUNT for an amount), help, quit")
    return text


def next_shoe_line(shoe_id: str, commitment: str, continues: bool) -> str:
    """The shoe the next round deals from: a new one, or the one in play continuing."""
    if continues:
        return f"Shoe {shoe_id} continues, commitment {commitment}"
    return f"Next shoe {shoe_id} commitment {commitment}"


def bets_text(hands: Sequence[Any], side_bets: Sequence[Any], places: int = 2) -> str:
    """Bets as they were typed back: ``10.00,perfect_pairs=1.00 10.00 snap=5.00``."""
    tokens = []
    for hand in hands:
        token = money(hand.bet_minor, places)
        for side in hand.side_bets:
            token += f",{side.name}={money(side.stake_minor, places)}"
        tokens.append(token)
    tokens += [f"{side.name}={money(side.stake_minor, places)}" for side in side_bets]
    return " ".join(tokens)
