"""`fairshoe play`: try every game from a terminal against a running `fairshoe serve`.

Registration only here, with the standard library: grpc, protobuf and rich load in :func:`run`.
The interaction is :mod:`rng_service.cli.play_session`, the screen :mod:`play_render`, the shoe
verification :mod:`play_verify`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc

GAMES = ("snap", "double-deck", "double-exposure", "multi-hand")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``play`` command and its options to ``subparsers``."""
    play = subparsers.add_parser(
        "play", help="play rounds against a running server (terminal client)",
        description="Play blackjack against a running `fairshoe serve`: choose a game, mode and "
                    "stake level, bet, press the buttons; each finished shoe is verified from "
                    "its revealed seed.")
    play.add_argument("--address", default=os.environ.get("FAIRSHOE_ADDRESS", "127.0.0.1:50051"),
                      help="host:port of the server (default %(default)s)")
    play.add_argument("--player", default=os.environ.get("FAIRSHOE_PLAYER", "guest"),
                      help="your player id at the operator (default %(default)s)")
    play.add_argument("--currency", default="EUR", type=currency_code,
                      help="ISO 4217 code (default %(default)s)")
    play.add_argument("--game", choices=GAMES, help="start at this game (default: ask)")
    play.add_argument("--mode", choices=("demo", "real"),
                      help="demo (play money) or real money (default: ask; demo when the answer "
                           "is empty)")
    play.add_argument("--level", help="stake level name (default: ask)")
    play.add_argument("--client-seed", help="your client seed (text) for every new shoe")
    play.add_argument("--tls", action="store_true",
                      help="connect with TLS, trusting the system's CAs (implied by --tls-ca)")
    play.add_argument("--tls-ca", default=os.environ.get("FAIRSHOE_TLS_CA"),
                      help="PEM CA certificate to trust (e.g. certs/dev/ca.pem)")
    play.add_argument("--tls-cert", default=os.environ.get("FAIRSHOE_CLIENT_TLS_CERT") or None,
                      help="PEM client certificate, for a server under mutual TLS (default "
                           "$FAIRSHOE_CLIENT_TLS_CERT)")
    play.add_argument("--tls-key", default=os.environ.get("FAIRSHOE_CLIENT_TLS_KEY") or None,
                      help="the client certificate's PEM key (default $FAIRSHOE_CLIENT_TLS_KEY)")
    play.add_argument("--timeout", type=float, default=10.0,
                      help="seconds each call may take (default %(default)s)")
    play.set_defaults(func=run)


def currency_code(text: str) -> str:
    """``text`` if the service takes it as a currency (the same check as its RPCs'), else an
    argparse error naming it."""
    from rng_service.core.currency import problem  # the ISO 4217 table: only when playing

    why = problem(text)
    if why is not None:
        raise argparse.ArgumentTypeError(why)
    return text


def channel(args: argparse.Namespace) -> grpc.Channel:
    """An insecure channel, or a TLS one with the given CA and client certificate."""
    import grpc

    from rng_service.cli.main import CommandError

    if not (args.tls or args.tls_ca or args.tls_cert):
        return grpc.insecure_channel(args.address)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CommandError("--tls-cert and --tls-key go together")
    try:
        ca = _read(args.tls_ca)
        cert, key = _read(args.tls_cert), _read(args.tls_key)
    except OSError as exc:
        raise CommandError(f"cannot read a TLS file: {exc}") from None
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                         certificate_chain=cert)
    return grpc.secure_channel(args.address, creds)


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as file:
        return file.read()


class ConsoleScreen:
    """The session's screen on a rich Console: scripted input (not a terminal) is echoed after
    its prompt, so a transcript reads like a session."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(highlight=False)
        self.echo = not sys.stdin.isatty()

    def show(self, item: Any) -> None:
        """Print ``item`` (text or any rich renderable) to the console's width: lines wrap
        between words, and a word wider than the screen (a hash on a narrow terminal) is
        shortened with an ellipsis, never split across lines."""
        self.console.print(item, overflow="ellipsis")

    def ask(self, prompt: str) -> str | None:
        """Read a line after ``prompt``; None at the end of the input. Input that is not a
        terminal is echoed so a transcript shows it."""
        from rich.text import Text

        try:
            line = self.console.input(Text(prompt))  # a prompt's [A / B] is not markup
        except EOFError:
            self.console.print()
            return None
        if self.echo:
            self.console.print(line, markup=False)
        return line


def run(args: argparse.Namespace) -> int:
    """Connect, check the server answers, and run the session until the player quits."""
    import grpc

    from rng_service.cli.main import CommandError
    from rng_service.cli.play_errors import describe_error
    from rng_service.cli.play_session import GameClient, Options, Session

    chan = channel(args)
    client = GameClient(chan, args.player, args.currency, timeout=args.timeout)
    try:
        client.game_ids()
    except grpc.RpcError as err:
        raise CommandError(f"cannot play at {args.address}: {describe_error(err)}") from None
    seed = args.client_seed.encode() if args.client_seed is not None else None
    options = Options(game=args.game, mode=args.mode, level=args.level, client_seed=seed)
    try:
        Session(client, ConsoleScreen(), options).run()
    except grpc.RpcError as err:  # a call outside the session's own handling (e.g. GetRules)
        raise CommandError(describe_error(err)) from None
    except KeyboardInterrupt:
        return 130
    finally:
        chan.close()
    return 0
