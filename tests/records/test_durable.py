"""A collection's files: written once as new files, made durable together before the log that
names them; a failed sync leaves no checkpoint."""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from rng_service.crypto.keys import KeyStore, key_validity
from rng_service.records import durable
from rng_service.records.collect_workers import collect_in_workers
from rng_service.records.durable import DurableTree, write_new
from rng_service.records.logged import LoggedRecordWriter


@pytest.fixture
def umask_077() -> Iterator[None]:
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _failing_syncfs(fd: int) -> int:
    ctypes.set_errno(errno.EIO)  # what ctypes.get_errno reads back after a foreign call
    return -1


def test_a_new_file_is_world_readable_whatever_the_umask(tmp_path: Path, umask_077: None) -> None:
    write_new(tmp_path / "a.json", b"{}")
    assert (tmp_path / "a.json").read_bytes() == b"{}"
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644


def test_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"first")
    with pytest.raises(FileExistsError):
        write_new(tmp_path / "a.json", b"second")
    assert (tmp_path / "a.json").read_bytes() == b"first"


def test_a_failed_write_leaves_no_part_of_the_file(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def short_then_full_disk(fd: int, data: memoryview) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable.os, "write", short_then_full_disk)
    with pytest.raises(OSError, match="No space"):
        write_new(tmp_path / "a.json", b"x" * 100)
    assert calls == [100, 90]
    assert not (tmp_path / "a.json").exists()


def test_a_failed_syncfs_is_an_error_naming_the_directory(tmp_path: Path) -> None:
    tree = DurableTree(tmp_path)
    tree._syncfs = _failing_syncfs
    with pytest.raises(OSError) as info:
        tree.sync()
    assert info.value.errno == errno.EIO and info.value.filename == str(tmp_path)
    tree.close()


def test_a_background_sync_s_failure_is_raised_by_the_next_sync(tmp_path: Path) -> None:
    tree = DurableTree(tmp_path)
    tree._syncfs = _failing_syncfs
    tree.start_sync()
    tree._syncfs = durable._SYNCFS  # the last sync itself would succeed
    with pytest.raises(OSError) as info:
        tree.sync()
    assert info.value.errno == errno.EIO
    tree.close()


def test_without_syncfs_every_file_and_directory_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "rounds").mkdir()
    for name in ("rounds/a.json", "rounds/b.json", "keys.json"):
        write_new(tmp_path / name, b"{}")
    synced: set[int] = set()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.add(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(durable.os, "fsync", fsync)
    tree = DurableTree(tmp_path, use_syncfs=False)
    tree.start_sync()  # nothing in the background: the fallback walks the whole tree
    assert synced == set()
    tree.sync()
    expected = {tmp_path.stat().st_ino} | {p.stat().st_ino for p in tmp_path.rglob("*")}
    assert synced == expected
    tree.close()


def test_a_collection_whose_sync_fails_gets_no_log_and_no_checkpoint(tmp_path: Path) -> None:
    rules = game_rules("double-exposure")
    basic_strategy(rules)
    store = KeyStore(tmp_path / "keys")
    info = store.create()
    out = tmp_path / "lab"
    writer = LoggedRecordWriter(out, store.load_signing_key(),
                                valid_from=key_validity(info)["valid_from"])
    collect_in_workers(rules, 20, writer, basic_strategy_action, workers=1, batch_rounds=7)
    assert len(list((out / "rounds").iterdir())) == 20
    writer._durable._syncfs = _failing_syncfs
    with pytest.raises(OSError):
        writer.finish()
    assert not (out / "log").exists()


def test_a_tree_spanning_filesystems_is_synced_file_by_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "rounds" / "mounted").mkdir(parents=True)
    assert DurableTree(tmp_path)._syncfs is durable._SYNCFS is not None
    real_stat = os.stat

    def stat(path: Any) -> Any:
        found = real_stat(path)
        if str(path).endswith("mounted"):  # as if another filesystem were mounted there
            return SimpleNamespace(st_dev=found.st_dev + 1)
        return found

    monkeypatch.setattr(durable.os, "stat", stat)
    tree = DurableTree(tmp_path)
    assert tree._syncfs is None  # one syncfs would miss the other filesystem: every file fsynced
    tree.close()
