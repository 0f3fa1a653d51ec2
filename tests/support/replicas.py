"""Several production `fairshoe serve` replicas on one PostgreSQL database, as the replica
tests (tests/api/test_replicas.py, test_seamless_replicas.py) start them."""

from __future__ import annotations

import threading
from pathlib import Path

from support.live_server import ServerProcess

#: replicas a test starts unless it asks for another count
REPLICAS = 3


def start_replicas(root: Path, url: str, count: int = REPLICAS) -> list[ServerProcess]:
    """``count`` production servers on ``url``, one key directory shared by all (the first
    start creates the dev signing key and seed-vault key in it; the others read them)."""
    shared = root / "keys"
    shared.mkdir(mode=0o700, parents=True)
    replicas = []
    for i in range(count):
        data = root / f"replica-{i}"
        data.mkdir(parents=True)
        (data / "keys").symlink_to(shared, target_is_directory=True)
        replicas.append(ServerProcess(data, stacked=False, database_url=url))
    replicas[0].start()
    threads = [threading.Thread(target=r.start) for r in replicas[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in replicas:
        assert r.channel is not None, f"{r.data_dir} did not start:\n{r.log()}"
    return replicas
