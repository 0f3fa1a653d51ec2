"""The clients against a real server under mutual TLS (certificates from certs/make-dev-certs):
`fairshoe health`, `fairshoe play` and the Node client present a client certificate, and what
they play belongs to the operator that certificate names."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.live_server import DEMO, FAIRSHOE, Client, ServerProcess, Tls, make_dev_certs
from support.node_client import run_node


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def server(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("mtls-clients"), stacked=False,
                         tls=Tls(certs, mutual=True), operators=["op-a", "op-b"]).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def _client_args(certs: Path, name: str) -> list[str]:
    return ["--tls-ca", str(certs / "ca.pem"), "--tls-cert", str(certs / f"{name}.pem"),
            "--tls-key", str(certs / f"{name}.key")]


def _fairshoe(*args: str, stdin: str = "", env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FAIRSHOE), *args], input=stdin, capture_output=True, text=True,
                          timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "140", **(env or {})})


def test_health_presents_a_client_certificate(server: ServerProcess, certs: Path) -> None:
    address = ["--address", f"localhost:{server.port}", "--timeout", "5"]
    done = _fairshoe("health", *address, *_client_args(certs, "auditor"))
    assert (done.returncode, done.stdout.strip()) == (0, "SERVING"), done.stderr
    # from the environment, as a container's HEALTHCHECK has it
    done = _fairshoe("health", *address, "--tls-ca", str(certs / "ca.pem"),
                     env={"FAIRSHOE_CLIENT_TLS_CERT": str(certs / "operator-b.pem"),
                          "FAIRSHOE_CLIENT_TLS_KEY": str(certs / "operator-b.key")})
    assert done.returncode == 0, done.stderr
    for refused in ([], _client_args(certs, "other-client")[2:]):  # none; another CA's
        done = _fairshoe("health", *address, "--tls-ca", str(certs / "ca.pem"), *refused)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith("fairshoe health: cannot ask"), done.stderr


def test_play_acts_for_the_certificates_operator(server: ServerProcess, certs: Path) -> None:
    done = _fairshoe("play", "--address", f"127.0.0.1:{server.port}", "--player", "pat",
                     "--game", "snap", "--mode", "demo", "--level", "",
                     *_client_args(certs, "operator-b"), stdin="10\ndeal\nstand\nquit\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert server.sql("SELECT DISTINCT operator FROM rounds WHERE player = 'pat'") == [("op-b",)]
    with server.open_channel("operator-a") as channel:  # op-a's pat is someone else
        assert Client(channel).balance("pat", DEMO) == 100_000


def test_the_node_client_presents_a_client_certificate(server: ServerProcess,
                                                       certs: Path) -> None:
    status, lines, stderr = run_node(server, "--player", "node-mtls",
                                     *_client_args(certs, "operator-a"))
    assert status == 0, (lines, stderr)
    assert lines[-1] == {"event": "done", "rounds": 4}
    assert server.sql("SELECT operator, COUNT(*) FROM rounds WHERE player = 'node-mtls' "
                      "GROUP BY operator") == [("op-a", 4)]
    status, lines, _stderr = run_node(server, "--player", "node-mtls",
                                      "--tls-ca", str(certs / "ca.pem"))  # no certificate
    assert status == 1 and lines[-1]["event"] == "error", lines
    assert "UNAVAILABLE" in lines[-1]["message"]
