"""`fairshoe play` run as a player would: scripted input against a real server process."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from support.live_server import FAIRSHOE, ServerProcess


def play(server: ServerProcess, player: str, lines: Sequence[str], *args: str,
         status: int = 0, columns: int = 200) -> str:
    """Run ``fairshoe play`` with ``lines`` as its input on a screen ``columns`` wide (wide by
    default: each long line stays one line); its output, after checking its exit ``status``
    and that it printed no traceback."""
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        [str(FAIRSHOE), "play", "--address", f"127.0.0.1:{server.port}", "--player", player,
         *args], input="".join(f"{line}\n" for line in lines), env=env, capture_output=True,
        text=True, timeout=120, check=False)
    assert done.returncode == status, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout
