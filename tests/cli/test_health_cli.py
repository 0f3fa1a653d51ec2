"""`fairshoe health`, the container's HEALTHCHECK: exit 0 only for SERVING, 1 for any other answer,
2 with one line on stderr when the server cannot be asked or the arguments are wrong.

Against real servers: a `fairshoe serve` process (the console script asked by the console script,
as the container does), and in-process servers from ``build_server`` for NOT_SERVING (a failed RNG
self-test) and for TLS (certificates from certs/make-dev-certs, copied to a temporary directory).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_helpers import run
from support.live_server import FAIRSHOE, ServerProcess, unused_port

from rng_service.api import metrics as metrics_module
from rng_service.api.server import ServerConfig, build_server
from rng_service.cli.health import default_address
from rng_service.rng.selftest import SelfTestFailed

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)

CERTS = Path(__file__).resolve().parents[2] / "certs"
ROUND_SERVICE = "fairshoe.round.v1.RoundService"


def health(*argv: str) -> subprocess.CompletedProcess[str]:
    """``fairshoe health ARGV`` in its own process, with no FAIRSHOE_* variable to steer it."""
    env = {"PATH": "/usr/bin:/bin"}
    return subprocess.run([str(FAIRSHOE), "health", *argv], capture_output=True, text=True,
                          timeout=60, check=False, env=env)


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real `fairshoe serve` on SQLite, already SERVING."""
    proc = ServerProcess(tmp_path_factory.mktemp("health-live"), stacked=False).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def test_serving_server_exits_0(serving: ServerProcess) -> None:
    done = health("--address", f"127.0.0.1:{serving.port}")
    assert (done.returncode, done.stdout, done.stderr) == (0, "SERVING\n", "")


def test_a_named_service_that_is_serving_exits_0(serving: ServerProcess) -> None:
    done = health("--address", f"127.0.0.1:{serving.port}", "--service", ROUND_SERVICE)
    assert (done.returncode, done.stdout) == (0, "SERVING\n"), done.stderr


def test_an_unknown_service_exits_1_with_one_line(serving: ServerProcess) -> None:
    done = health("--address", f"127.0.0.1:{serving.port}", "--service", "no.such.Service")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "'no.such.Service' unknown" in done.stderr


def test_unreachable_exits_2_with_one_line() -> None:
    with unused_port() as port:  # nothing listens there
        done = health("--address", f"127.0.0.1:{port}", "--timeout", "2")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"fairshoe health: cannot ask 127.0.0.1:{port}: ")


def test_not_serving_exits_1(monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> None:
        raise SelfTestFailed("known answer mismatch")

    monkeypatch.setattr(metrics_module, "run_self_test", broken)
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2))
    try:
        code = run(["health", "--address", f"127.0.0.1:{port}"])
    finally:
        server.stop(grace=None)
    assert code == 1
    assert capsys.readouterr().out.splitlines()[-1] == "NOT_SERVING"  # after the server's logs


@pytest.mark.parametrize(("argv", "message"), [
    (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
    (["--timeout", "soon"], "argument --timeout: invalid float value: 'soon'"),
    (["--timeout", "0"], "--timeout must be positive, got 0.0"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--tls-ca", "/no/such/ca.pem"], "cannot read a TLS file: "),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_bad_usage_exits_2_with_one_line(argv: list[str], message: str) -> None:
    done = health("--address", "127.0.0.1:1", *argv)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"fairshoe health: {message}"), done.stderr


def test_default_address_follows_the_servers_environment() -> None:
    assert default_address({"FAIRSHOE_ADDRESS": "0.0.0.0:7000"}) == "127.0.0.1:7000"
    assert default_address({"FAIRSHOE_ADDRESS": "10.0.0.5:7000"}) == "10.0.0.5:7000"
    assert default_address({"FAIRSHOE_ADDRESS": "0.0.0.0:7000",
                            "FAIRSHOE_HEALTH_ADDRESS": "127.0.0.1:1"}) == "127.0.0.1:1"


def _dev_certs(tmp_path: Path) -> Path:
    """certs/make-dev-certs run in a copy under ``tmp_path``: the directory with ca.pem,
    server.pem and server.key; the TLS cases are skipped, saying why, where it cannot run."""
    if shutil.which("openssl") is None:
        pytest.skip("certs/make-dev-certs needs openssl, which is not on PATH here")
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(CERTS / "make-dev-certs", tmp_path / "make-dev-certs")
    done = subprocess.run([str(tmp_path / "make-dev-certs")], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        pytest.skip(f"certs/make-dev-certs failed here: {done.stderr.strip()}")
    return tmp_path / "dev"


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A real in-process server speaking TLS with the dev certificates: (their directory, port)."""
    dev = _dev_certs(tmp_path)
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2,
                                             tls_cert=str(dev / "server.pem"),
                                             tls_key=str(dev / "server.key")))
    yield dev, port
    server.stop(grace=None)


def test_tls_with_the_ca_exits_0(tls_server: tuple[Path, int],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    dev, port = tls_server
    for address in (f"127.0.0.1:{port}", f"localhost:{port}"):  # both in the certificate's SAN
        code = run(["health", "--address", address, "--tls-ca", str(dev / "ca.pem")])
        assert code == 0
        assert capsys.readouterr().out.splitlines()[-1] == "SERVING"  # after the server's logs


def test_tls_server_name_override(tls_server: tuple[Path, int],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A certificate that does not name the address's host: the check fails, unless told the
    name the certificate carries."""
    dev, port = tls_server
    ca = str(dev / "ca.pem")
    assert run(["health", "--address", f"127.0.0.1:{port}", "--tls-ca", ca,
                "--tls-server-name", "not-in-the-cert.example", "--timeout", "3"]) == 2
    capsys.readouterr()
    assert run(["health", "--address", f"127.0.0.1:{port}", "--tls-ca", ca,
                "--tls-server-name", "localhost"]) == 0


def test_tls_server_asked_in_plaintext_or_with_another_ca_exits_2(
        tls_server: tuple[Path, int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _dev, port = tls_server
    assert run(["health", "--address", f"127.0.0.1:{port}", "--timeout", "3"]) == 2
    _out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("fairshoe health: cannot ask"), err
    other = _dev_certs(tmp_path / "other")  # a CA that did not sign the server's certificate
    assert run(["health", "--address", f"127.0.0.1:{port}", "--tls-ca", str(other / "ca.pem"),
                "--timeout", "3"]) == 2
    _out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("fairshoe health: cannot ask"), err

