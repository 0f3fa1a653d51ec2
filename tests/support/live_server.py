"""A real `fairshoe serve` process on localhost, and a small client for its live services.

:class:`ServerProcess` starts the server on a free port (``--address 127.0.0.1:0``; the port is
read from the ``serving`` log line), with its own ``FAIRSHOE_DATA_DIR``, waits until health
reports SERVING, and stops it (SIGTERM) or kills it (SIGKILL) and starts it again on the same
data. Its database is the SQLite file ``<data dir>/fairshoe.db``, or, given ``database_url``,
that PostgreSQL database (``FAIRSHOE_DATABASE_URL``). With ``stacked=True`` it runs
``tests/support/stacked_serve.py`` (the same server with stacked shoes, FAIRSHOE_TEST_SHOES=1) and
:meth:`ServerProcess.stack` queues the cards of the next new shoe (and
:meth:`ServerProcess.hold_new_shoes` holds the calls that make one, until released). With
``metrics_port`` it serves Prometheus metrics there (``"any"``: a port the server binds and
reports in its ``serving`` line, as ``--tiles-port any`` in ``args`` does for ``tiles_port``) and
:meth:`ServerProcess.scrape` reads them. :class:`Client` wraps the stubs with the calls a test
repeats. Used by tests/api and meant for the crash tests and the benchmarks too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2, round_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from rng_service.crypto.signing import decode_envelope
from support.service_helpers import run_sql

TESTS = Path(__file__).resolve().parents[1]
FAIRSHOE = Path(sys.executable).with_name("fairshoe")
START_TIMEOUT = 60.0
#: a health check's deadline: a bound on a hung server, not a timing (2 s once, which a loaded
#: 2-core machine running the suite can take to schedule the server's answer)
CALL_TIMEOUT = 30.0
REAL, DEMO = common_pb2.MODE_REAL, common_pb2.MODE_DEMO
EUR = "EUR"
# variables of the developer's shell that would point the server elsewhere
_SCRUBBED = ("FAIRSHOE_ENV", "FAIRSHOE_DATABASE", "FAIRSHOE_DATABASE_URL", "FAIRSHOE_SEED_KEY",
             "FAIRSHOE_ADDRESS", "FAIRSHOE_WORKERS", "FAIRSHOE_METRICS_PORT",
             "FAIRSHOE_TEST_SHOES", "FAIRSHOE_TEST_STACK_DIR", "FAIRSHOE_TLS_CERT",
             "FAIRSHOE_TLS_KEY", "FAIRSHOE_TLS_CLIENT_CA", "FAIRSHOE_AUDITOR_GRANTS",
             "FAIRSHOE_SELF_TEST_SECONDS", "FAIRSHOE_TEST_SELF_TEST", "FAIRSHOE_TEST_KNOWN_ANSWERS",
             "FAIRSHOE_TILES_PORT", "FAIRSHOE_TILES_ADDRESS", "FAIRSHOE_TILES_LOGS",
             "FAIRSHOE_TILES_ENTRIES", "FAIRSHOE_LOG_ORIGIN", "FAIRSHOE_PROCESSES",
             # byte code is cached as for any installed server: without it every start compiles
             # the whole service from source again (a third of a restart's CPU)
             "PYTHONDONTWRITEBYTECODE")
#: how often start() looks for the port and for SERVING (a restart takes a few hundred ms)
POLL_SECONDS = 0.01


@dataclass(frozen=True)
class Tls:
    """A server's TLS from the files ``certs/make-dev-certs`` makes in ``certs`` (ca.pem,
    server.pem/.key, and client certificates <name>.pem/.key): ``mutual`` adds
    ``--tls-client-ca ca.pem``, and the test's own channel presents the ``client`` certificate
    (health included: under mutual TLS every connection needs one)."""

    certs: Path
    mutual: bool = False
    client: str = "operator-a"

    def server_args(self) -> list[str]:
        args = ["--tls-cert", str(self.certs / "server.pem"),
                "--tls-key", str(self.certs / "server.key")]
        return args + (["--tls-client-ca", str(self.certs / "ca.pem")] if self.mutual else [])

    def credentials(self, client: str | None = None, *, ca: str = "ca") -> grpc.ChannelCredentials:
        """Trust ``ca``.pem; present ``client`` (default :attr:`client`, "" for none) if mutual
        or if named."""
        name = self.client if client is None and self.mutual else client
        key = cert = None
        if name:
            key = (self.certs / f"{name}.key").read_bytes()
            cert = (self.certs / f"{name}.pem").read_bytes()
        return grpc.ssl_channel_credentials(root_certificates=(self.certs / f"{ca}.pem")
                                            .read_bytes(), private_key=key,
                                            certificate_chain=cert)


def make_dev_certs(where: Path) -> Path:
    """Run certs/make-dev-certs in a copy under ``where``; the directory of its files."""
    where.mkdir(parents=True, exist_ok=True)
    script = where / "make-dev-certs"
    shutil.copy(TESTS.parent / "certs" / "make-dev-certs", script)
    subprocess.run([str(script)], check=True, capture_output=True)
    return where / "dev"


class ServerProcess:
    """One server process on ``data_dir`` (restartable on the same data)."""

    def __init__(self, data_dir: Path, *, stacked: bool = True,
                 env: dict[str, str] | None = None, database_url: str | None = None,
                 metrics_port: int | str = 0, args: Sequence[str] = (), tls: Tls | None = None,
                 operators: Sequence[str] = (), processes: int = 1) -> None:
        self.data_dir = data_dir
        self.processes = processes
        self.tls = tls
        self.operators = list(operators)  # added (`fairshoe operators add`) before each start
        self.args = list(args) + (tls.server_args() if tls else [])  # further serve options
        self.database_url = database_url or str(data_dir / "fairshoe.db")
        self.metrics_option = str(metrics_port)  # --metrics-port, at each start
        self.metrics_port = 0  # the port serving metrics, from the serving line (0: none)
        self.tiles_port = 0  # the port serving tlog-tiles, from the serving line (0: none)
        self.stacked = stacked
        self.stack_dir = data_dir / "stacks"
        self.log_path = data_dir / "server.log"
        self.env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        # PYTHONFAULTHANDLER: a start that hangs is aborted with every thread's stack in the log
        # one process unless the test asks for more: on 2 cores the suite's many servers would
        # each start one per core by default
        self.env.update({"FAIRSHOE_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1",
                         "PYTHONFAULTHANDLER": "1", "FAIRSHOE_PROCESSES": str(processes)})
        if database_url is not None:
            self.env["FAIRSHOE_DATABASE_URL"] = database_url
        if stacked:
            self.env.update({"FAIRSHOE_TEST_SHOES": "1",
                             "FAIRSHOE_TEST_STACK_DIR": str(self.stack_dir)})
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.channel: grpc.Channel | None = None
        self._stacks = itertools.count(1)

    def command(self) -> list[str]:
        options = ["--address", "127.0.0.1:0", "--metrics-port", self.metrics_option,
                   *self.args]
        if self.stacked:
            return [sys.executable, str(TESTS / "support" / "stacked_serve.py"), *options]
        return [str(FAIRSHOE), "serve", *options]

    def start(self) -> ServerProcess:
        """Start the process and wait for health SERVING."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.operators:
            subprocess.run([str(FAIRSHOE), "operators", "add", *self.operators], env=self.env,
                           cwd=self.data_dir, check=True, capture_output=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.command(), env=self.env, stdout=log, stderr=log,
                                         cwd=self.data_dir)
        serving = self._wait_for_serving(offset)
        self.port = int(serving["port"])
        self.metrics_port = int(serving.get("metrics_port", 0))
        self.tiles_port = int(serving.get("tiles_port", 0))
        self.channel = self.open_channel()
        self._wait_serving()
        return self

    def open_channel(self, client: str | None = None, *, ca: str = "ca") -> grpc.Channel:
        """A new channel to the server: plaintext, or TLS presenting ``client`` (see
        :meth:`Tls.credentials`). The caller closes it."""
        if self.tls is None:
            return grpc.insecure_channel(f"127.0.0.1:{self.port}")
        return grpc.secure_channel(f"localhost:{self.port}", self.tls.credentials(client, ca=ca))

    def _wait_for_serving(self, offset: int) -> dict[str, Any]:
        """The ``serving`` line this start writes: the ports it bound (any free one for 0)."""
        deadline = time.monotonic() + START_TIMEOUT
        with self.log_path.open("rb") as log:  # only what this start writes (the log grows)
            log.seek(offset)
            pending = b""
            while time.monotonic() < deadline:
                pending += log.read()
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if b'"serving"' in line:
                        return dict(json.loads(line))
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"server exited with {self.proc.returncode}:\n"
                                       f"{self.log()}")
                time.sleep(POLL_SECONDS)
        self._abort()
        raise TimeoutError(f"no serving line within {START_TIMEOUT}s:\n{self.log()}")

    def _abort(self) -> None:
        """SIGABRT a server that hangs: faulthandler writes its threads' stacks to the log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)

    def _wait_serving(self) -> None:
        self.wait_health(health_pb2.HealthCheckResponse.SERVING, START_TIMEOUT)

    def health(self, service: str = "fairshoe.round.v1.RoundService", *,
               timeout: float = CALL_TIMEOUT) -> int:
        """The health status the server reports for ``service`` ("" for the whole server)."""
        stub = health_pb2_grpc.HealthStub(self.channel)
        return int(stub.Check(health_pb2.HealthCheckRequest(service=service),
                              timeout=timeout).status)

    def wait_health(self, status: int, timeout: float,
                    service: str = "fairshoe.round.v1.RoundService") -> float:
        """Wait until health reports ``status``; returns the seconds it took."""
        start = time.monotonic()
        while (left := start + timeout - time.monotonic()) > 0:
            with contextlib.suppress(grpc.RpcError):
                if self.health(service, timeout=left) == status:
                    return time.monotonic() - start
            time.sleep(POLL_SECONDS)
        self._abort()
        name = health_pb2.HealthCheckResponse.ServingStatus.Name(status)  # type: ignore[arg-type]
        raise TimeoutError(f"health not {name} within {timeout}s:\n{self.log()}")

    def scrape(self) -> str:
        """The Prometheus text exposition of ``/metrics`` (a metrics port must be set)."""
        assert self.metrics_port, "started without a metrics port"
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as page:
            return str(page.read().decode())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stack(self, cards: Sequence[str]) -> None:
        """The next new shoe deals ``cards`` first (stacked servers only)."""
        queue = self.stack_dir / "queue"
        queue.mkdir(parents=True, exist_ok=True)
        name = f"{next(self._stacks):06d}"
        tmp = queue / f".{name}.tmp"
        tmp.write_text(json.dumps(list(cards)))
        tmp.rename(queue / f"{name}.json")

    def hold_new_shoes(self) -> None:
        """From now on a new shoe waits, inside its StartRound, until :meth:`release_shoes`
        (stacked servers only): a call provably in flight."""
        self.stack_dir.mkdir(parents=True, exist_ok=True)
        for held in self.stack_dir.glob("held*"):
            held.unlink()
        (self.stack_dir / "hold").touch()

    def wait_held(self, timeout: float = 30.0) -> None:
        """Wait until a call is held in a new shoe (after :meth:`hold_new_shoes`)."""
        deadline = time.monotonic() + timeout
        while not (self.stack_dir / "held").exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no call held within {timeout}s:\n{self.log()}")
            time.sleep(POLL_SECONDS)

    def held_by(self) -> set[int]:
        """The pids of the processes holding a new shoe now or since :meth:`hold_new_shoes`."""
        return {int(p.suffix[1:]) for p in self.stack_dir.glob("held.*")}

    def release_shoes(self) -> None:
        """Let held new shoes go on."""
        (self.stack_dir / "hold").unlink(missing_ok=True)

    def _close_channel(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def worker_pids(self) -> list[int]:
        """The pids of the serve's worker processes (``processes`` > 1): its children that
        serve, read from /proc (analysis jobs are their children, not the parent's)."""
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return [int(pid) for pid in children.split()]

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush beyond what SQLite already committed."""
        self._close_channel()
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM and wait: returns the exit status."""
        self._close_channel()
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=30)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the server's database directly, as an auditor would (``?`` placeholders)."""
        return run_sql(self.database_url, query, *params)

    def client(self) -> Client:
        assert self.channel is not None, "server not started"
        return Client(self.channel)


class Client:
    """The live services' stubs, and the calls tests repeat (unique request ids)."""

    _ids = itertools.count(1)

    def __init__(self, channel: grpc.Channel) -> None:
        self.rounds = round_pb2_grpc.RoundServiceStub(channel)
        self.wallet = wallet_pb2_grpc.WalletServiceStub(channel)
        self.math = math_pb2_grpc.MathServiceStub(channel)

    @classmethod
    def rid(cls) -> str:
        return f"req-{os.getpid()}-{next(cls._ids)}"

    @staticmethod
    def account(player: str, mode: int = REAL, currency: str = EUR) -> wallet_pb2.Account:
        return wallet_pb2.Account(player_id=player, currency=currency, mode=mode)  # type: ignore[arg-type]

    def deposit(self, player: str, amount: int, **kw: Any) -> wallet_pb2.Transaction:
        request = wallet_pb2.DepositRequest(account=self.account(player), amount_minor=amount,
                                            request_id=kw.pop("request_id", None) or self.rid())
        return self.wallet.Deposit(request, **kw).transaction

    def balance(self, player: str, mode: int = REAL, currency: str = EUR) -> int:
        request = wallet_pb2.GetBalanceRequest(account=self.account(player, mode, currency))
        return int(self.wallet.GetBalance(request).balance_minor)

    def start(self, player: str, game: str, bets: Sequence[int | rt.HandBet], *,
              mode: int = REAL, **fields: Any) -> rt.RoundView:
        hands = [b if isinstance(b, rt.HandBet) else rt.HandBet(bet_minor=b) for b in bets]
        request = round_pb2.StartRoundRequest(
            player_id=player, game=game, mode=mode, currency=EUR, hands=hands,  # type: ignore[arg-type]
            request_id=fields.pop("request_id", None) or self.rid(), **fields)
        return self.rounds.StartRound(request).round

    def act(self, player: str, view: rt.RoundView, action: rt.PlayerAction, **fields: Any
            ) -> rt.RoundView:
        request = round_pb2.ActRequest(
            player_id=player, round_id=view.round_id, hand_id=view.turn.hand_id, action=action,
            expected_version=fields.pop("expected_version", view.version),
            request_id=fields.pop("request_id", None) or self.rid())
        return self.rounds.Act(request, **fields).round

    def get(self, player: str, round_id: str) -> rt.RoundView:
        request = round_pb2.GetRoundRequest(player_id=player, round_id=round_id)
        return self.rounds.GetRound(request).round

    def play_out(self, player: str, view: rt.RoundView) -> rt.RoundView:
        """Finish a round the plain way: decline insurance and even money, then stand."""
        while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
            view = self.act(player, view, simple_action(view))
        return view

    def list_all(self, request: round_pb2.ListRoundsRequest) -> Iterator[rt.RoundView]:
        """Every round of a listing, following the page tokens."""
        while True:
            page = self.rounds.ListRounds(request)
            yield from page.rounds
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token


@contextlib.contextmanager
def unused_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that nothing listens on for the block: bound by a socket of ours
    that never listens, so a connection there is refused and no other socket can bind it
    meanwhile (a port merely found free, then let go, can be taken before the test uses it by
    another test's listener or the local end of an outgoing connection). A server's own
    listener takes ``any`` (port 0 for gRPC) and reports the port it bound."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def simple_action(view: rt.RoundView) -> rt.PlayerAction:
    """Decline insurance and even money; otherwise stand."""
    if view.turn.decision == rt.DECISION_INSURANCE:
        return rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=0))
    if view.turn.decision == rt.DECISION_EVEN_MONEY:
        return rt.PlayerAction(even_money=rt.PlayerAction.EvenMoney(accept=False))
    return STAND


HIT = rt.PlayerAction(hit=rt.PlayerAction.Hit())
STAND = rt.PlayerAction(stand=rt.PlayerAction.Stand())
SPLIT = rt.PlayerAction(split=rt.PlayerAction.Split())


def double(amount: int | None = None) -> rt.PlayerAction:
    return rt.PlayerAction(double=rt.PlayerAction.Double(amount_minor=amount))


def insurance(amount: int | None = None) -> rt.PlayerAction:
    return rt.PlayerAction(insurance=rt.PlayerAction.Insurance(amount_minor=amount))


def even_money(accept: bool) -> rt.PlayerAction:
    return rt.PlayerAction(even_money=rt.PlayerAction.EvenMoney(accept=accept))


def ledger_is_balanced(server: ServerProcess) -> None:
    """Double-entry checks straight from the database file: each account's balance is the sum
    of its entries; each operator, currency and mode sums to zero; each round's house result
    (what the house account gained) is its stakes less its returns."""
    for op, holder, cur, mode, balance in server.sql(
            "SELECT operator, holder, currency, mode, balance FROM accounts"):
        (inflow, outflow), = server.sql(
            "SELECT COALESCE(SUM(CASE WHEN target = ? THEN amount END), 0), "
            "COALESCE(SUM(CASE WHEN source = ? THEN amount END), 0) FROM ledger_entries "
            "WHERE operator = ? AND currency = ? AND mode = ?", holder, holder, op, cur, mode)
        assert balance == inflow - outflow, (holder, mode)
    for total, in server.sql("SELECT SUM(balance) FROM accounts GROUP BY operator, currency, "
                             "mode"):
        assert total == 0
    for round_id, stakes, returns, house in server.sql(
            "SELECT round_id, SUM(CASE kind WHEN 'stake' THEN amount ELSE 0 END), "
            "SUM(CASE kind WHEN 'return' THEN amount ELSE 0 END), "
            "SUM(CASE WHEN substr(target, 1, 6) = '@house' THEN amount ELSE -amount END) "
            "FROM ledger_entries WHERE round_id IS NOT NULL GROUP BY round_id"):
        assert house == stakes - returns, round_id
    for round_id, envelope in server.sql("SELECT round_id, envelope FROM records"):
        payload = decode_envelope(bytes(envelope))["payload"]
        (stakes, returns), = server.sql(
            "SELECT COALESCE(SUM(CASE kind WHEN 'stake' THEN amount END), 0), "
            "COALESCE(SUM(CASE kind WHEN 'return' THEN amount END), 0) FROM ledger_entries "
            "WHERE round_id = ?", round_id)
        assert (payload["total_staked"], payload["total_returned"]) == (stakes, returns)


def audit_with_checkpoint(server: ServerProcess, keys: Path, tmp: Path) -> str:
    """What an auditor does with a running server: take the trusted keys, fetch a signed
    checkpoint (``fairshoe log checkpoint``, its signature checked), export the database
    (``fairshoe audit export``) and verify the collection against that checkpoint, completeness
    included. Returns the verifier's summary with its verdict first: the verdict (its last line),
    then the lines of counts before it, so ``startswith("audit PASS")`` reads the verdict and the
    counts (``N rounds: N OK``) are found in the rest."""
    trusted, checkpoint, out = tmp / "trusted.jwks.json", tmp / "checkpoint", tmp / "export"

    def fairshoe(*argv: str) -> str:
        done = subprocess.run([str(FAIRSHOE), *argv], env=server.env, capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, (argv, done.stdout[-4000:], done.stderr[-4000:])
        return done.stdout

    fairshoe("keys", "export", "--dir", str(keys), "--out", str(trusted))
    started = server.proc is None or server.proc.poll() is not None
    if started:
        server.start()  # the checkpoint comes from the service, as an auditor gets it
    try:
        fairshoe("log", "checkpoint", "--address", f"127.0.0.1:{server.port}", "--keys",
                 str(trusted), "--out", str(checkpoint))
    finally:
        if started:  # a server started here is stopped here (else it outlives the test)
            server.stop()
    fairshoe("audit", "export", "--out", str(out), "--database", server.database_url,
             "--key-store", str(keys))
    lines = fairshoe("audit", "verify", str(out), "--keys", str(trusted), "--checkpoint",
                     str(checkpoint), "--quiet").strip().splitlines()
    return "\n".join([lines[-1], *lines[:-1]])


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released together; each result, or the RpcError raised (a
    thread still running after two minutes leaves None: the race hung)."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except grpc.RpcError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results
