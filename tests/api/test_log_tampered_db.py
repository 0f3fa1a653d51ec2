"""An operator edits its database behind a running `fairshoe serve`: a round's record stays
stored but its leaf row is deleted. The log's exports (`fairshoe audit export --address` over the
server's stream, and `--database`) refuse it naming the missing leaf, instead of writing a
collection with a gap and exiting 0; `audit verify` of a time-range export names the leaf and the
unlogged record."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.live_server import FAIRSHOE, ServerProcess

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)


@pytest.fixture(scope="module")
def tampered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    """A server whose log lost the leaf row of its second round (the record kept)."""
    server = ServerProcess(tmp_path_factory.mktemp("tampered")).start()
    client = server.client()
    client.deposit("tamper-ann", 1_000_000)
    for _ in range(3):
        client.play_out("tamper-ann", client.start("tamper-ann", "double-deck", [1000]))
    rounds = server.sql("SELECT leaf_index FROM log_leaves WHERE kind = 'round' "
                        "ORDER BY leaf_index")
    index = int(rounds[1][0])
    server.sql("DELETE FROM log_leaves WHERE leaf_index = ?", index)
    yield server, index
    assert server.stop() == 0, server.log()


def _fairshoe(server: ServerProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FAIRSHOE), *argv], env=server.env, capture_output=True,
                          text=True, check=False)


def test_exports_refuse_a_log_with_a_missing_leaf(tampered: tuple[ServerProcess, int],
                                                   tmp_path: Path) -> None:
    server, index = tampered
    keys = server.data_dir / "keys"
    remote = _fairshoe(server, "audit", "export", "--address", f"127.0.0.1:{server.port}",
                       "--out", str(tmp_path / "remote"))
    assert remote.returncode == 2
    assert "DATA_LOSS" in remote.stderr and f"leaf {index} is missing" in remote.stderr, \
        remote.stderr
    local = _fairshoe(server, "audit", "export", "--out", str(tmp_path / "local"),
                      "--database", server.database_url, "--key-store", str(keys))
    assert local.returncode == 2, local.stdout
    assert f"leaf {index} is missing" in local.stderr, local.stderr


def test_verify_names_the_missing_leaf_and_the_unlogged_record(
        tampered: tuple[ServerProcess, int], tmp_path: Path) -> None:
    server, index = tampered
    keys, trusted, checkpoint = (server.data_dir / "keys", tmp_path / "trusted.jwks.json",
                                 tmp_path / "checkpoint")
    assert _fairshoe(server, "keys", "export", "--dir", str(keys), "--out",
                     str(trusted)).returncode == 0
    assert _fairshoe(server, "log", "checkpoint", "--address", f"127.0.0.1:{server.port}",
                     "--keys", str(trusted), "--out", str(checkpoint)).returncode == 0
    out = tmp_path / "by-time"
    done = _fairshoe(server, "audit", "export", "--out", str(out), "--database",
                     server.database_url, "--key-store", str(keys), "--start",
                     "2020-01-01T00:00:00Z")
    assert done.returncode == 0, done.stderr
    verify = _fairshoe(server, "audit", "verify", str(out), "--keys", str(trusted),
                       "--checkpoint", str(checkpoint), "--quiet")
    assert verify.returncode == 1
    assert f"FAIL leaf {index}: is missing" in verify.stdout
    assert "no leaf of the log (an unlogged record)" in verify.stdout
