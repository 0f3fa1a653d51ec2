"""Running the Node.js example client (clients/node/play.js) against a test's server, as
tests/clients/test_node_client.py and test_mtls_clients.py do."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from support.live_server import ServerProcess

NODE_CLIENT = Path(__file__).resolve().parents[2] / "clients" / "node"


def npm_ci_if_needed() -> None:
    """``npm ci`` in clients/node when node_modules is missing or older than the lock (what
    scripts/setup-tests does; here too so that the test also runs outside scripts/test)."""
    installed = NODE_CLIENT / "node_modules" / ".package-lock.json"
    lock = NODE_CLIENT / "package-lock.json"
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    assert npm is not None, "npm is required (Node.js 18 or later) for the Node client"
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=NODE_CLIENT,
                   check=True, capture_output=True, timeout=300)


def run_node(server: ServerProcess, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    npm_ci_if_needed()
    node = shutil.which("node")
    assert node is not None, "node is required (Node.js 18 or later) for the Node client"
    done = subprocess.run([node, str(NODE_CLIENT / "play.js"), "--address",
                           f"127.0.0.1:{server.port}", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, lines, done.stderr
