"""Exports stream: a time-range export reads its envelopes, leaves and proofs page by page as it
writes the files, keeping the leaves it lists on disk (:class:`LeafSpill`), with the same bytes in
any page size; a log export's writer takes its leaves one at a time, and refuses a second leaf at
one path without a map of every path. On SQLite and PostgreSQL (the ``storage`` fixture)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.record_helpers import OP, Dealer

from rng_service.core.errors import IntegrityFailure
from rng_service.crypto.keys import KeyStore
from rng_service.log import CompactRange, leaf_hash
from rng_service.records.schema import REVEALS_SUBDIR, ROUNDS_SUBDIR
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.audit import (
    AuditService,
    LeafRangeExport,
    LogWriterFiles,
    leaf_path,
    write_log_collection,
)
from rng_service.service.export_spill import LeafSpill
from rng_service.service.ports import LeafKind, LogLeaf, Storage


@pytest.fixture
def keys(tmp_path: Path) -> KeyStore:
    store = KeyStore(tmp_path / "keys")
    store.create()
    return store


@pytest.fixture
def played(storage: Storage, keys: KeyStore) -> Storage:
    Dealer(storage, keys.load_signing_key(), SeedVault(secrets.token_bytes(32))).play_every_game()
    return storage


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


class Watched:
    """``storage``, noting each page an export reads with the files written by then."""

    def __init__(self, storage: Storage, out: Path) -> None:
        self._storage, self._out = storage, out
        self.reads: list[tuple[str, Any, int, int]] = []  # (call, its page, envelope files, log)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Any]:
        with self._storage.snapshot() as uow:
            yield _WatchedUow(uow, self)

    def written(self) -> tuple[int, int]:
        """Envelope files (rounds/, reveals/) and log entry files (keys/, shoes/) written."""
        def count(*subs: str) -> int:
            return sum(len(list((self._out / sub).glob("*.json")))
                       for sub in subs if (self._out / sub).is_dir())
        return count(ROUNDS_SUBDIR, REVEALS_SUBDIR), count("keys", "shoes")


class _WatchedUow:
    def __init__(self, uow: Any, watch: Watched) -> None:
        self._uow, self._watch = uow, watch

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._uow, name)
        if name not in ("list_envelopes", "find_leaves", "list_leaves_at"):
            return found

        def noted(*args: Any) -> Any:
            page = found(*args)
            self._watch.reads.append((name, page if name != "list_envelopes" else len(page),
                                      *self._watch.written()))
            return page

        return noted


def test_a_time_range_export_reads_pages_as_it_writes_and_any_page_size_gives_its_bytes(
        played: Storage, keys: KeyStore, tmp_path: Path) -> None:
    whole = AuditService(played, keys).export_collection(tmp_path / "whole", OP)
    out = tmp_path / "paged"
    watched = Watched(played, out)
    paged = AuditService(watched, keys)  # type: ignore[arg-type]
    stats = paged.export_collection(out, OP, batch_size=2)
    assert files(out) == files(tmp_path / "whole") and stats == whole
    envelopes = [(size, written) for call, size, written, _ in watched.reads
                 if call == "list_envelopes"]
    assert len(envelopes) > 3
    # each page's files are written before the next page is read, never all read first
    assert [written for _, written in envelopes] == [2 * i for i in range(len(envelopes))]
    pages = [(page, logged) for call, page, _, logged in watched.reads
             if call == "list_leaves_at"]
    indices = [leaf.index for page, _ in pages for leaf in page]
    assert all(len(page) <= 2 for page, _ in pages) and len(pages) > 3
    assert indices == sorted(set(indices)) and len(indices) == whole.leaves
    # the key and shoe commitment files of a page are written before the next page is read
    entries = [sum(leaf.kind.stored_in_log for leaf in page) for page, _ in pages]
    assert [logged for _, logged in pages] == [sum(entries[:i]) for i in range(len(pages))]
    # the leaves are looked up once every envelope is written (and the checkpoint signed)
    calls = [call for call, *_ in watched.reads]
    assert calls.index("find_leaves") > max(i for i, c in enumerate(calls)
                                            if c == "list_envelopes")


def test_a_log_collection_is_written_as_its_leaves_arrive(played: Storage, keys: KeyStore,
                                                          tmp_path: Path) -> None:
    service = AuditService(played, keys)
    found = service.export_leaves(OP, 0, batch_size=3)
    out = tmp_path / "out"
    seen: list[LogLeaf] = []

    def leaves() -> Iterator[tuple[LogLeaf, Any]]:
        for leaf, proof in found.leaves:
            # every earlier leaf's file is on disk before the next leaf is even read
            assert all((out / _path(earlier)).read_bytes() == earlier.entry for earlier in seen)
            seen.append(leaf)
            yield leaf, proof

    stats = write_log_collection(out, service.signing_keys().jwks_json, LeafRangeExport(
        found.checkpoint, found.first, found.frontier, leaves()))
    assert stats.leaves == len(seen) > 10
    lines = (out / "log" / "leaves.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == list(range(len(seen)))


def _path(leaf: LogLeaf) -> str:
    return leaf_path(leaf.kind, leaf.ident)


def _leaf(index: int, ident: str, entry: bytes) -> LogLeaf:
    return LogLeaf(index, LeafKind.ROUND, ident, leaf_hash(entry), entry)


def test_a_second_leaf_at_one_path_is_refused_naming_the_first(tmp_path: Path) -> None:
    ident, other = secrets.token_hex(16), secrets.token_hex(16)
    (tmp_path / "rounds").mkdir()
    with LogWriterFiles(tmp_path) as writer:
        writer.add(_leaf(3, ident, b'{"first": 1}'), [b"\x01" * 32], write_entry=True)
        writer.add(_leaf(4, other, b'{"other": 1}'), [], write_entry=True)
        with pytest.raises(IntegrityFailure) as err:
            writer.add(_leaf(7, ident, b'{"second": 2}'), [], write_entry=True)
        writer.finish("checkpoint\n", CompactRange())
    assert f"leaf 7: rounds/{ident}.json is also leaf 3" in str(err.value)
    assert (tmp_path / "rounds" / f"{ident}.json").read_bytes() == b'{"first": 1}'
    assert len((tmp_path / "log" / "leaves.jsonl").read_text().splitlines()) == 2


def test_the_spill_keeps_each_key_and_index_once_in_order_and_removes_its_file() -> None:
    with LeafSpill() as spill:
        a, b, c = "a" * 32, "b" * 32, "c" * 32
        spill.hold([(LeafKind.ROUND, c), (LeafKind.KEY, "ed25519:" + a), (LeafKind.ROUND, a)])
        spill.hold([(LeafKind.ROUND, a), (LeafKind.SHOE_COMMITMENT, b), (LeafKind.ROUND, b)])
        pages = list(spill.held(2))
        assert all(len(idents) <= 2 for _, idents in pages)
        assert [(kind, ident) for kind, idents in pages for ident in idents] == [
            (LeafKind.KEY, "ed25519:" + a), (LeafKind.ROUND, a), (LeafKind.ROUND, b),
            (LeafKind.ROUND, c), (LeafKind.SHOE_COMMITMENT, b)]
        assert spill.first() is None and list(spill.indices(2)) == []
        spill.find([9, 2, 40])
        spill.find(iter([2, 0, 9]))
        assert spill.first() == 0
        assert list(spill.indices(3)) == [[0, 2, 9], [40]]


def _open_files() -> set[str]:
    """What this process's file descriptors point at (a deleted file ends " (deleted)")."""
    fds = Path("/proc/self/fd")
    found = set()
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            found.add(os.readlink(fd))
    return found


def test_the_spill_on_disk_has_no_name_a_killed_export_could_leave_behind() -> None:
    open_before = _open_files()
    with LeafSpill() as spill:
        # past the page cache (CACHE_KIB), so the pages go to the file
        spill.hold((LeafKind.ROUND, f"{i:064x}") for i in range(60_000))
        spill.find(range(200_000))
        on_disk = [f for f in _open_files() - open_before if f.startswith("/")]
        assert spill.first() == 0
    # the spill's file is on disk while it is open, but unlinked: no name to leave behind
    assert on_disk and all(f.endswith(" (deleted)") for f in on_disk), on_disk
    assert _open_files() - open_before == set()
