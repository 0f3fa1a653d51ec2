"""The interaction of `fairshoe play`: choosing a table, betting, the buttons, each round's shoe
verification, over a :class:`GameClient` (the published gRPC API) and a :class:`Screen`.

The session reads lines: a button's name (``hit``, ``stand``, ``double [AMOUNT]``, ``split``,
``yes [AMOUNT]``, ``no``, ``yes to all``, ``no to all``, ``deal``, ``rebet``, ``rebet & deal``,
``double & deal``), bets (``10 10,perfect_pairs=1 snap=5``) or ``help``, ``game``, ``quit``.
Amounts are currency units (``2.50``); the API's minor units are shown the same way. Bets the
game's rules refuse are refused here, before anything is sent (:mod:`play_bets`). Server errors
are shown as one line and the session goes on. What is shown is :mod:`play_render`'s.
"""

from __future__ import annotations

import re
import tomllib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Protocol

import grpc
from rich.console import RenderableType
from rich.text import Text

from game_math.rules import Rules, rules_from_dict
from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2, audit_pb2_grpc
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from rng_service.cli import play_render as render
from rng_service.cli.play_bets import BetRefused, check_bets, level_named, unknown_level
from rng_service.cli.play_errors import ErrorNames, describe_error, places_of, reason_of
from rng_service.cli.play_verify import ShoeCheck, verify_shoe
from rng_service.crypto.signing import decode_envelope

MODES: Final[dict[str, common_pb2.Mode]] = {"demo": common_pb2.MODE_DEMO,
                                            "real": common_pb2.MODE_REAL}
SIDE_BET_ALIASES: Final = {"pp": "perfect_pairs", "21+3": "twenty_one_plus_three"}
#: a word that is an amount (its decimals are checked against the currency by parse_amount)
_AMOUNT: Final = re.compile(r"^\d+(\.\d+)?$")


class InputError(ValueError):
    """A line the session cannot use; its message says what to type instead."""


class Quit(Exception):
    """The player leaves (``quit`` or the end of the input)."""


# ----- parsing what the player types -----------------------------------------------------------


def parse_amount(text: str, places: int = 2) -> int:
    """Currency units with up to ``places`` decimals (the currency's exponent) as minor units:
    "2.50" -> 250; in JPY (0 places) "250" -> 250 and "2.50" is refused."""
    example = f"10 or 2.{'5'.ljust(places, '0')}" if places else "10"
    if not _AMOUNT.match(text) or len(text.partition(".")[2]) > places:
        raise InputError(f"{text!r} is not an amount (e.g. {example})")
    try:
        minor = Decimal(text).scaleb(places)
    except InvalidOperation:
        raise InputError(f"{text!r} is not an amount (e.g. {example})") from None
    return int(minor)


def side_bet_name(name: str, info: render.TableInfo) -> str:
    """A side bet's rules name from what was typed (the name or its short form)."""
    full = SIDE_BET_ALIASES.get(name.lower(), name.lower())
    if full not in info.side_bets:
        known = ", ".join(info.side_bets) or "none in this game"
        raise InputError(f"no side bet {name!r} (side bets: {known})")
    return full


def parse_bets(line: str, info: render.TableInfo) -> tuple[list[Any], list[Any]]:
    """``10 10,pp=1 snap=5`` -> one HandBet per hand (with its side bets) and the round-level
    side bets."""
    hands: list[Any] = []
    round_side: list[Any] = []
    for token in line.split():
        if "=" in token.split(",", 1)[0]:
            name, _, amount = token.partition("=")
            round_side.append(rt.SideBetStake(name=side_bet_name(name, info),
                                              stake_minor=parse_amount(amount, info.places)))
            continue
        amount, *sides = token.split(",")
        hand = rt.HandBet(bet_minor=parse_amount(amount, info.places))
        for side in sides:
            name, eq, stake = side.partition("=")
            if not eq:
                raise InputError(f"side bet {side!r}: write NAME=AMOUNT")
            hand.side_bets.append(rt.SideBetStake(name=side_bet_name(name, info),
                                                  stake_minor=parse_amount(stake, info.places)))
        hands.append(hand)
    if not hands:
        raise InputError("no bet on any hand")
    return hands, round_side


@dataclass(frozen=True)
class Choice:
    """A decision to send: the action, and whether to repeat it for every hand asked the same
    (YES TO ALL / NO TO ALL)."""

    action: Any
    to_all: bool = False


def _amount_arg(words: Sequence[str], places: int) -> int | None:
    if len(words) > 1 and _AMOUNT.match(words[-1]):
        return parse_amount(words[-1], places)
    return None


def _yes_no(words: Sequence[str], decision: int, places: int) -> Choice | None:
    """YES / NO (TO ALL), also spelled ``insurance`` and ``even money``."""
    phrase = " ".join(w for w in words if not _AMOUNT.match(w))
    to_all = phrase.endswith(" to all")
    phrase = phrase.removesuffix(" to all")
    accept = {"yes": True, "y": True, "no": False, "n": False}.get(phrase)
    if decision == rt.DECISION_INSURANCE:
        accept = True if phrase == "insurance" else accept
        if accept is None:
            return None
        amount = _amount_arg(words, places) if accept else 0
        return Choice(rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=amount)),
                      to_all)
    accept = True if phrase == "even money" else accept
    if accept is None:
        return None
    return Choice(rt.PlayerAction(even_money=rt.PlayerAction.EvenMoney(accept=accept)), to_all)


def parse_action(line: str, view: Any, places: int = 2) -> Choice:
    """The decision a line asks for in the round's current turn (amounts with the currency's
    ``places`` decimals); InputError naming the buttons when it is none of them."""
    words = line.lower().split()
    decision = view.turn.decision
    if decision in (rt.DECISION_INSURANCE, rt.DECISION_EVEN_MONEY):
        choice = _yes_no(words, decision, places)
    else:
        choice = _play_choice(words, places)
    if choice is None:
        names = ", ".join(b.label for b in render.buttons(view, places))
        raise InputError(f"{line.strip()!r} is not a button now: press {names} (or quit)")
    return choice


def _play_choice(words: Sequence[str], places: int) -> Choice | None:
    head = words[0] if words else ""
    if head in ("hit", "h"):
        return Choice(rt.PlayerAction(hit=rt.PlayerAction.Hit()))
    if head in ("stand", "s"):
        return Choice(rt.PlayerAction(stand=rt.PlayerAction.Stand()))
    if head in ("split", "p"):
        return Choice(rt.PlayerAction(split=rt.PlayerAction.Split()))
    if head in ("double", "d"):
        return Choice(rt.PlayerAction(double=rt.PlayerAction.Double(
            amount_minor=_amount_arg(words, places))))
    return None


# ----- the server ------------------------------------------------------------------------------


class GameClient:
    """The calls `fairshoe play` makes, over one channel, for one player and currency."""

    def __init__(self, channel: grpc.Channel, player: str, currency: str,
                 timeout: float = 10.0) -> None:
        self.games = game_pb2_grpc.GameServiceStub(channel)
        self.rounds = round_pb2_grpc.RoundServiceStub(channel)
        self.wallet = wallet_pb2_grpc.WalletServiceStub(channel)
        self.audit = audit_pb2_grpc.AuditServiceStub(channel)
        self.player, self.currency, self.timeout = player, currency, timeout

    @staticmethod
    def request_id() -> str:
        """A fresh idempotency key for one mutating call."""
        return f"play-{uuid.uuid4().hex}"

    def game_ids(self) -> list[str]:
        """The ids of the games the server offers, in its order."""
        reply = self.games.ListGames(game_pb2.ListGamesRequest(), timeout=self.timeout)
        return [g.id for g in reply.games]

    def rules(self, game: str) -> dict[str, Any]:
        """``game``'s rules document (GetRules' TOML, parsed)."""
        reply = self.games.GetRules(game_pb2.GetRulesRequest(game=game), timeout=self.timeout)
        return tomllib.loads(reply.rules_toml)

    def account(self, mode: common_pb2.Mode) -> Any:
        """The player's account message in ``mode``."""
        return wallet_pb2.Account(player_id=self.player, currency=self.currency, mode=mode)

    def balance(self, mode: common_pb2.Mode) -> int:
        """The player's balance in ``mode``, in minor units."""
        reply = self.wallet.GetBalance(wallet_pb2.GetBalanceRequest(account=self.account(mode)),
                                       timeout=self.timeout)
        return int(reply.balance_minor)

    def deposit(self, mode: common_pb2.Mode, amount: int) -> int:
        """Deposit ``amount`` (minor units) and return the balance after it."""
        reply = self.wallet.Deposit(wallet_pb2.DepositRequest(
            account=self.account(mode), amount_minor=amount, reference="fairshoe play",
            request_id=self.request_id()), timeout=self.timeout)
        return int(reply.transaction.balance_after_minor)

    def open_round(self, game: str, mode: common_pb2.Mode) -> Any | None:
        """The player's open round of ``game`` in ``mode``, or None."""
        reply = self.rounds.ListRounds(round_pb2.ListRoundsRequest(
            player_id=self.player, mode=mode, filter=round_pb2.ROUND_FILTER_OPEN,
            page_size=100), timeout=self.timeout)
        return next((r for r in reply.rounds if r.game == game), None)

    def next_shoe(self, game: str, mode: common_pb2.Mode) -> Any:
        """The commitment of the shoe the player's next round of ``game`` deals from."""
        return self.rounds.GetNextShoe(round_pb2.GetNextShoeRequest(
            player_id=self.player, game=game, mode=mode), timeout=self.timeout).shoe

    def set_client_seed(self, shoe: Any, seed: bytes) -> Any:
        """Set the player's client seed on ``shoe`` (before its first card); the shoe after."""
        return self.rounds.SetClientSeed(round_pb2.SetClientSeedRequest(
            player_id=self.player, game=shoe.game, mode=shoe.mode, shoe_id=shoe.shoe_id,
            client_seed=seed, request_id=self.request_id()), timeout=self.timeout).shoe

    def start(self, game: str, level: str, mode: common_pb2.Mode, hands: Sequence[Any],
              side_bets: Sequence[Any]) -> Any:
        """Start a round with these bets; the round's view after the deal."""
        return self.rounds.StartRound(round_pb2.StartRoundRequest(
            player_id=self.player, game=game, level=level, mode=mode, currency=self.currency,
            hands=list(hands), side_bets=list(side_bets), request_id=self.request_id()),
            timeout=self.timeout).round

    def act(self, view: Any, action: Any) -> Any:
        """Take ``action`` on the hand whose turn it is in ``view``; the round after it."""
        return self.rounds.Act(round_pb2.ActRequest(
            player_id=self.player, round_id=view.round_id, hand_id=view.turn.hand_id,
            action=action, expected_version=view.version, request_id=self.request_id()),
            timeout=self.timeout).round

    def get(self, round_id: str) -> Any:
        """The current view of round ``round_id``."""
        return self.rounds.GetRound(round_pb2.GetRoundRequest(
            player_id=self.player, round_id=round_id), timeout=self.timeout).round

    def shoe_reveal(self, shoe_id: str) -> dict[str, Any]:
        """The payload of the shoe's signed reveal (FAILED_PRECONDITION while in play)."""
        reply = self.audit.GetShoeReveal(audit_pb2.GetShoeRevealRequest(shoe_id=shoe_id),
                                         timeout=self.timeout)
        return dict(decode_envelope(reply.reveal.envelope)["payload"])


# ----- the session -----------------------------------------------------------------------------


class Screen(Protocol):
    """Where the session shows things and reads lines (None at the end of the input)."""

    def show(self, item: RenderableType) -> None:
        """Show ``item`` (text or a rendered screen)."""
        ...

    def ask(self, prompt: str) -> str | None:
        """Read one line after ``prompt``; None at the end of the input."""
        ...


@dataclass
class Options:
    """The table the player asked for on the command line (None: ask)."""

    game: str | None = None
    mode: str | None = None
    level: str | None = None
    client_seed: bytes | None = None


@dataclass
class Table:
    """The table the player sits at: game, mode, level, bets, and shoes awaiting verification."""

    info: render.TableInfo
    #: the game's rules as the server applies them: bets are checked against them before a deal
    rules: Rules
    mode: common_pb2.Mode
    level: str
    hands: list[Any] = field(default_factory=list)
    side_bets: list[Any] = field(default_factory=list)
    last: tuple[list[Any], list[Any]] | None = None
    #: rounds played at this table in this session
    rounds: int = 0
    #: rounds seen per shoe not yet verified, in the order dealt
    unverified: dict[str, list[Any]] = field(default_factory=dict)
    #: the shoe of the last round played here: a cut-card shoe continues across rounds
    shoe_id: str = ""


class Session:
    """One player at the terminal: choose a table, bet, play rounds, verify shoes."""

    def __init__(self, client: GameClient, screen: Screen, options: Options) -> None:
        self.client, self.screen, self.options = client, screen, options
        #: the game last played: the default when the player asks for another game
        self.last_game: str | None = None
        #: how a server's refusal names things: the table's currency, spots and hands
        self.names = ErrorNames(client.currency)

    # --- helpers

    def say(self, text: str, style: str = "") -> None:
        """Show one line of text in ``style`` (rich style, e.g. ``"red"``)."""
        self.screen.show(Text(text, style=style))

    def ask(self, prompt: str) -> str:
        """The answer to ``prompt``, stripped; raises :class:`Quit` on quit, q, exit or the end
        of the input."""
        line = self.screen.ask(prompt)
        if line is None or line.strip().lower() in ("quit", "q", "exit"):
            raise Quit
        return line.strip()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any | None:
        """``fn(*args)``; a server error is shown as one line and gives None."""
        try:
            return fn(*args)
        except grpc.RpcError as err:
            self.say(f"Server: {describe_error(err, self.names)}", "bold red")
            return None

    # --- the session

    def run(self) -> None:
        """Tables until the player quits or the input ends."""
        self.say("Fairshoe: type a button's name (e.g. deal, hit, stand), help, or quit.",
                 "bold")
        try:
            while True:
                table = self.choose_table()
                self.options = Options(client_seed=self.options.client_seed)
                self.play_table(table)
        except Quit:
            self.say("Goodbye.")

    def choose(self, prompt: str, preset: str | None, allowed: Sequence[str],
               default: str) -> str:
        """``preset`` if given ("" is ``default``), else ask until the answer is one of
        ``allowed``."""
        answer = default if preset == "" else preset
        while answer is None or answer not in allowed:
            if answer is not None:
                self.say(f"{answer!r} is not one of: {', '.join(allowed)}", "red")
            answer = self.ask(f"{prompt} [{' / '.join(allowed)}] ({default}): ").lower() \
                or default
        return answer

    def choose_table(self) -> Table:
        """Ask for (or take from the options) game, mode and stake level."""
        games = self.client.game_ids()
        default = self.last_game if self.last_game in games else games[0]
        game = self.choose("Game", self.options.game, games, default)
        self.last_game = game
        document = self.client.rules(game)
        places = places_of(self.client.currency)  # the table shows amounts as the currency does
        info = replace(render.TableInfo.from_rules(document), places=places)
        rules = rules_from_dict(document)
        mode = self.choose("Mode", self.options.mode, list(MODES), "demo")
        self.say(f"Stake levels: {render.levels_text(info)}")
        level = self.choose_level(rules, self.options.level)
        return Table(info=info, rules=rules, mode=MODES[mode], level=level)

    def choose_level(self, rules: Rules, preset: str | None) -> str:
        """The stake level ``preset`` names (by its name or its limits, as the game's documents
        write them), else ask until an answer names one; "" is the default level."""
        names = " / ".join(lv.name for lv in rules.levels)
        answer = preset
        while True:
            if answer is not None:
                level = level_named(rules, answer, places_of(self.client.currency))
                if level is not None:
                    return level
                self.say(unknown_level(rules, answer, places_of(self.client.currency)), "red")
            answer = self.ask(f"Stake level [{names}] ({rules.default_level}): ")

    def play_table(self, table: Table) -> None:
        """Rounds at one table until the player asks for another game (returns) or quits."""
        self.names = ErrorNames(self.client.currency, seat_name=table.info.hand_name)
        self.say(f"{table.info.name} ({table.info.game}), {render.MODES[table.mode]} mode, "
                 f"level {table.level}.", "bold")
        open_round = self.call(self.client.open_round, table.info.game, table.mode)
        if open_round is not None:
            self.say("You have a round in progress: it continues where you left it.", "yellow")
            self.play_round(table, open_round)
        self.screen.show(render.bets_help(table.info, table.info.level(table.level)))
        show = True
        while True:
            if show:
                self.show_between_rounds(table)
            rounds = table.rounds
            if self.between_rounds(table):
                return
            show = table.rounds != rounds

    def show_between_rounds(self, table: Table) -> None:
        """Show the balance and the next shoe's commitment before a round."""
        balance = self.call(self.client.balance, table.mode)
        shoe = self.next_shoe(table)
        text = Text()
        if balance is not None:
            text.append(self.balance_meter(table, balance))
        if shoe is not None:
            # a cut-card shoe deals several rounds: only a new shoe id is a new shoe
            continues = shoe.client_seed_locked or shoe.shoe_id == table.shoe_id
            text.append("\n" + render.next_shoe_line(shoe.shoe_id, shoe.commitment, continues))
        if table.hands:
            bets = render.bets_text(table.hands, table.side_bets, table.info.places)
            text.append(f"\nBets on the table: {bets}")
        self.screen.show(text)
        self.screen.show(render.buttons_text(self.between_round_buttons(table)))

    def balance_meter(self, table: Table, balance: int) -> Text:
        """The BALANCE meter between rounds."""
        text = Text(f"BALANCE {render.money(balance, table.info.places)} {self.client.currency}",
                    "bold")
        if table.mode == common_pb2.MODE_DEMO and balance == 0:
            text.append(" (play money is credited at your first deal)")
        return text

    @staticmethod
    def between_round_buttons(table: Table) -> list[render.Button]:
        """The buttons between rounds (DEPOSIT in real mode)."""
        buttons = [render.Button(b) for b in render.BETWEEN_ROUNDS]
        if table.mode == common_pb2.MODE_REAL:
            buttons.append(render.Button("DEPOSIT", "AMOUNT"))
        return buttons

    def show_help(self, table: Table) -> None:
        """How to bet, the buttons between rounds and those of a round."""
        self.screen.show(render.bets_help(table.info, table.info.level(table.level)))
        self.screen.show(Text("Between rounds: ") + render.buttons_text(
            self.between_round_buttons(table)))
        self.screen.show(render.round_buttons_help(table.info))

    def next_shoe(self, table: Table) -> Any | None:
        """The next shoe's commitment, with the player's client seed set on it if asked."""
        shoe = self.call(self.client.next_shoe, table.info.game, table.mode)
        seed = self.options.client_seed
        if (shoe is not None and seed is not None and not shoe.client_seed_locked
                and bytes(shoe.client_seed) != seed):
            shoe = self.call(self.client.set_client_seed, shoe, seed) or shoe
        return shoe

    def between_rounds(self, table: Table) -> bool:
        """One line between rounds; True when the player asks for another game."""
        line = self.ask("Bets or button: ")
        word = " ".join(line.lower().replace("&", " & ").split())
        if word in ("game", "change game"):
            return True
        if word in ("help", "?"):
            self.show_help(table)
        elif word in ("clear", "clear bets"):
            table.hands, table.side_bets = [], []
        elif word in ("rebet", "rebet & deal", "double & deal"):
            self.rebet(table, word)
        elif word == "deal":
            self.deal(table)
        elif word.startswith("deposit") and table.mode == common_pb2.MODE_REAL:
            self.deposit(table, word.split()[1:])
        else:
            self.place_bets(table, line)
        return False

    def place_bets(self, table: Table, line: str) -> None:
        """Parse ``line`` as the next round's bets and keep them (an error is shown)."""
        try:
            hands, side_bets = parse_bets(line, table.info)
        except InputError as exc:
            buttons = ", ".join(render.BETWEEN_ROUNDS)
            self.say(f"{exc}; between rounds type bets or a button: {buttons}", "red")
            return
        if not self.bets_allowed(table, hands, side_bets):
            return
        table.hands, table.side_bets = hands, side_bets
        bets = render.bets_text(table.hands, table.side_bets, table.info.places)
        self.say(f"Bets: {bets} (press DEAL)")

    def bets_allowed(self, table: Table, hands: Sequence[Any], side_bets: Sequence[Any]) -> bool:
        """Whether the game's rules take these bets at the table's level; if not, say why (the
        bets are not sent)."""
        try:
            check_bets(table.rules, table.level, hands, side_bets, table.info.places)
        except BetRefused as exc:
            self.say(f"{exc}: not placed", "red")
            return False
        return True

    def rebet(self, table: Table, word: str) -> None:
        """REBET places the last round's bets; REBET & DEAL deals them; DOUBLE & DEAL doubles
        them and deals."""
        if table.last is None:
            self.say("No previous round to rebet.", "red")
            return
        hands, side_bets = ([_copy(h) for h in table.last[0]], [_copy(s) for s in table.last[1]])
        if word == "double & deal":
            for hand in hands:
                hand.bet_minor *= 2
        if not self.bets_allowed(table, hands, side_bets):
            return
        table.hands, table.side_bets = hands, side_bets
        self.say(f"Bets: {render.bets_text(hands, side_bets, table.info.places)}")
        if word != "rebet":
            self.deal(table)

    def deposit(self, table: Table, words: Sequence[str]) -> None:
        """``deposit AMOUNT``: add play or real money to the table's account."""
        try:
            amount = parse_amount(words[0] if words else "", table.info.places)
        except InputError as exc:
            self.say(f"deposit AMOUNT: {exc}", "red")
            return
        balance = self.call(self.client.deposit, table.mode, amount)
        if balance is not None:
            self.screen.show(Text(f"Deposited {render.money(amount, table.info.places)} "
                                  f"{self.client.currency}.   ")
                             + self.balance_meter(table, balance))

    def deal(self, table: Table) -> None:
        """Deal a round with the bets placed and play it; they become the REBET bets."""
        if not table.hands:
            self.say("Place a bet first (help shows how).", "red")
            return
        view = self.call(self.client.start, table.info.game, table.level, table.mode,
                         table.hands, table.side_bets)
        if view is None:
            return
        table.last = ([_copy(h) for h in table.hands], [_copy(s) for s in table.side_bets])
        self.play_round(table, view)

    def play_round(self, table: Table, view: Any) -> None:
        """Show the round and ask for decisions until it is over; then its result and shoe."""
        table.rounds += 1
        table.shoe_id = view.shoe.shoe_id or table.shoe_id
        self.show_round(table, None, view)
        while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            view = self.decide(table, view)
        self.verify(table, view)

    def show_round(self, table: Table, before: Any | None, view: Any) -> None:
        """Announce what changed since ``before``, then draw the round."""
        self.names = replace(self.names, hand_names=render.hand_names(view, table.info))
        for alert in render.new_alerts(before, view):
            self.say(alert, "bold yellow")
        self.screen.show(render.round_screen(view, table.info, self.client.currency))

    def decide(self, table: Table, view: Any) -> Any:
        """One decision (several with TO ALL); the round as it is afterwards."""
        self.screen.show(Text(render.decision_prompt(view, table.info) + " ")
                         + render.buttons_text(render.buttons(view, table.info.places)))
        line = self.ask("> ")
        if line.lower() in ("help", "?"):
            self.screen.show(render.round_buttons_help(table.info))
            return view
        try:
            choice = parse_action(line, view, table.info.places)
        except InputError as exc:
            self.say(str(exc), "red")
            return view
        before, decision = view, view.turn.decision
        while True:
            after = self.call(self.client.act, view, choice.action)
            if after is None:  # refused: read the round again (it may have moved on)
                return self.call(self.client.get, view.round_id) or view
            view = after
            if not (choice.to_all and view.status == rt.ROUND_STATUS_AWAITING_PLAYER
                    and view.turn.decision == decision):
                break
        self.show_round(table, before, view)
        return view

    def verify(self, table: Table, view: Any) -> None:
        """Check every shoe of this table that has finished: the reveal against what was
        shown; a shoe still in play (a cut-card shoe) waits for a later round."""
        if not view.shoe.shoe_id:
            return
        table.unverified.setdefault(view.shoe.shoe_id, []).append(view)
        for shoe_id, rounds in list(table.unverified.items()):
            check = self.check_shoe(shoe_id, rounds)
            if check is None:
                continue
            del table.unverified[shoe_id]
            self.say(check.line(), "bold green" if check.ok else "bold red")

    def check_shoe(self, shoe_id: str, rounds: Sequence[Any]) -> ShoeCheck | None:
        """The shoe's verification, or None while it is in play (said once per round)."""
        try:
            payload = self.client.shoe_reveal(shoe_id)
        except grpc.RpcError as err:
            if reason_of(err) in ("SHOE_NOT_FINISHED", "REVEAL_PENDING"):
                self.say(f"Shoe {shoe_id} is still in play (its seed is revealed once the cut "
                         "card comes out): verified when it finishes.", "cyan")
            else:
                self.say(f"Server: {describe_error(err, self.names)}", "bold red")
            return None
        return verify_shoe(payload, rounds)


def _copy(message: Any) -> Any:
    copy = type(message)()
    copy.CopyFrom(message)
    return copy
