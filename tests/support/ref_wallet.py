"""The reference operator wallet as a test fixture: a real process
(tests/support/ref_wallet_server.py)
on its own SQLite ledger in ``data_dir``, restartable on the same port and ledger, with faults
set by writing its fault file (see the server's docstring for what each does). Its gRPC face by
default; ``RefWallet(dir, http=True)`` its HTTP face, which checks every request's signature
under :attr:`RefWallet.hmac_secret` (a file in ``data_dir``)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from support.ports import restartable_port

TESTS = Path(__file__).resolve().parents[1]
SERVER = TESTS / "support" / "ref_wallet_server.py"
START_TIMEOUT = 30.0


class WalletExited(RuntimeError):
    """The wallet process ended before it served (its log's lines of this start)."""

    def __init__(self, log: str) -> None:
        super().__init__(f"the wallet exited: {log}")
        #: whether it could not bind its port (gRPC's or the HTTP server's words)
        self.bind_failed = "Failed to bind" in log or "Address already in use" in log


class RefWallet:
    """One reference wallet process; :attr:`endpoint` stays the same across restarts."""

    def __init__(self, data_dir: Path, *, http: bool = False, certs: Path | None = None) -> None:
        """``certs`` (a certs/make-dev-certs directory): the wallet serves TLS (gRPC) or HTTPS
        with its server certificate and requires a client certificate of its CA (mutual
        TLS)."""
        self.data_dir = data_dir
        self.http = http
        self.certs = certs
        self.hmac_secret = data_dir / "hmac.secret"
        #: what that file holds (a test checks it never reaches a log)
        self.secret = f"ref-wallet-secret-{uuid.uuid4().hex}{uuid.uuid4().hex}"
        self.db = data_dir / "wallet.db"
        self.faults_path = data_dir / "faults.json"
        self.log_path = data_dir / "wallet.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """host:port (gRPC), or the base URL the HTTP face serves its calls under."""
        if self.http:
            scheme = "https" if self.certs else "http"
            return f"{scheme}://127.0.0.1:{self.port}/fairshoe/v1"
        return f"127.0.0.1:{self.port}"

    def start(self) -> RefWallet:
        """Start the process: on its port again if it ran before (clients hold the address),
        else on a port of its own below the local port range (tests/support/ports.py), another
        one if that was taken meanwhile."""
        if self.port:
            return self._start(self.port)
        for _ in range(3):
            try:
                return self._start(restartable_port())
            except WalletExited as exc:
                if not exc.bind_failed:
                    raise
        raise RuntimeError(f"the wallet found no free port: {self.log_path.read_text()}")

    def _start(self, port: int) -> RefWallet:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, str(SERVER), "--db", str(self.db),
                   "--faults", str(self.faults_path), "--port", str(port)]
        if self.http:
            if not self.hmac_secret.exists():
                self.hmac_secret.write_text(self.secret + "\n")
                self.hmac_secret.chmod(0o600)
            command += ["--http", "--hmac-secret-file", str(self.hmac_secret)]
        if self.certs:
            command += ["--tls-cert", str(self.certs / "server.pem"), "--tls-key",
                        str(self.certs / "server.key"), "--tls-client-ca",
                        str(self.certs / "ca.pem")]
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log)
        log.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        while time.monotonic() < deadline and not line:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                with self.log_path.open("rb") as written:
                    written.seek(offset)
                    raise WalletExited(written.read().decode(errors="replace"))
        self.port = int(json.loads(line)["serving"])
        return self

    def stop(self) -> None:
        """SIGKILL: the wallet is down (its ledger is durable) until :meth:`start`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def faults(self, **faults: Any) -> None:
        """Replace the injected faults (none: no fault)."""
        tmp = self.faults_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(faults))
        tmp.replace(self.faults_path)

    def _sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.db, timeout=30)
        try:
            with conn:
                return conn.execute(query, params).fetchall()
        finally:
            conn.close()

    def fund(self, player: str, amount: int, currency: str = "EUR") -> None:
        """Set the player's balance (the operator's cashier, outside the contract)."""
        self._sql("INSERT INTO balances VALUES (?, ?, ?) ON CONFLICT (player, currency) "
                  "DO UPDATE SET balance = excluded.balance", player, currency, amount)

    def balance(self, player: str, currency: str = "EUR") -> int:
        rows = self._sql("SELECT balance FROM balances WHERE player = ? AND currency = ?",
                         player, currency)
        return int(rows[0][0]) if rows else 0

    def transactions(self, round_id: str | None = None) -> list[dict[str, Any]]:
        """The wallet's statement, in the order it applied the calls."""
        columns = ("transaction_id", "kind", "player", "currency", "amount", "applied",
                   "round_id", "reference", "state", "reason", "balance_after", "purpose", "calls")
        where, params = ("WHERE round_id = ?", (round_id,)) if round_id else ("", ())
        rows = self._sql(f"SELECT {', '.join(columns)} FROM transactions {where} ORDER BY seq",
                         *params)
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def net(self, round_id: str) -> int:
        """What the round moved in the wallet: credits less debits, rollbacks included."""
        return sum(int(t["applied"]) for t in self.transactions(round_id))
