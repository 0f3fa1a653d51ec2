"""The log's tlog-tiles resources from storage, on SQLite and PostgreSQL (LogReader.tile): hash
tiles are the stored nodes, entry bundles the stored envelopes, both agree with the checkpoints
the log signs, and a tile the log is too small for is NotFound, never an empty or short tile."""

from __future__ import annotations

import pytest
from support.service_helpers import OP, Harness

from rng_service.core.errors import IllegalState, NotFound
from rng_service.log import (
    MemoryNodeStore,
    TileRef,
    decode_bundle,
    leaf_hash,
    parse_checkpoint,
)
from rng_service.service.rng_draws import RngDrawService
from rng_service.service.translog import LogReader


def _grow(h: Harness, leaves: int) -> int:
    """Draw until the log has at least ``leaves`` leaves (two per draw); its size, with every
    leaf merged (on PostgreSQL leaves are queued and a sequencer merges them in the
    background: a size read while one is queued would grow under the test)."""
    rng = RngDrawService(h.storage, signer=h.signer)
    while True:
        h.storage.integrate_log()
        with h.storage.snapshot() as uow:
            size = uow.log_size(OP)
        if size >= leaves:
            return size
        rng.generate_integers(OP, count=1, minimum=1, maximum=6, request_id=h.rid())


@pytest.fixture
def reader(harness: Harness) -> LogReader:
    return LogReader(harness.storage, harness.signer)


def test_tiles_and_bundles_are_the_stored_log(harness: Harness, reader: LogReader) -> None:
    size = _grow(harness, 260)
    with harness.storage.snapshot() as uow:
        stored = uow.list_leaves(OP, 0, size)
    full = reader.tile(OP, TileRef(0, 0))
    assert full == b"".join(leaf.leaf_hash for leaf in stored[:256])
    partial = reader.tile(OP, TileRef(0, 1, size - 256))
    assert partial == b"".join(leaf.leaf_hash for leaf in stored[256:])
    assert reader.tile(OP, TileRef(0, 0, 7)) == full[: 7 * 32]
    entries = decode_bundle(reader.tile(OP, TileRef(None, 0)))
    assert entries == [leaf.entry for leaf in stored[:256]]
    assert [leaf_hash(e) for e in entries] == [full[i : i + 32] for i in range(0, 8192, 32)]
    assert decode_bundle(reader.tile(OP, TileRef(None, 1, size - 256))) == [
        leaf.entry for leaf in stored[256:]]
    # level 1: the hash of the first full level-0 tile, what the checkpoint at 256 commits to
    store = MemoryNodeStore()
    for entry in entries:
        store.append_entry(entry)
    assert reader.tile(OP, TileRef(1, 0, 1)) == store.root()


def test_tiles_agree_with_the_signed_checkpoint(harness: Harness, reader: LogReader) -> None:
    _grow(harness, 40)
    checkpoint = parse_checkpoint(reader.checkpoint(OP).note).checkpoint
    hashes = reader.tile(OP, TileRef(0, 0, checkpoint.size))
    store = MemoryNodeStore()
    for at in range(0, len(hashes), 32):
        store.append(hashes[at : at + 32])
    # the root recomputed from the level-0 tile alone is the signed root
    assert store.root() == checkpoint.root_hash


@pytest.mark.parametrize("tile", [TileRef(0, 0), TileRef(None, 0), TileRef(1, 0, 1),
                                  TileRef(0, 1, 1), TileRef(7, 0, 1)])
def test_a_tile_beyond_the_log_is_not_found(harness: Harness, reader: LogReader,
                                            tile: TileRef) -> None:
    size = _grow(harness, 10)
    assert size < 256
    with pytest.raises(NotFound) as err:
        reader.tile(OP, tile)
    assert err.value.field == "tile"
    with pytest.raises(NotFound):
        reader.tile(OP, TileRef(0, 0, size + 1))  # one hash more than the log has
    assert len(reader.tile(OP, TileRef(0, 0, size))) == 32 * size


def test_an_empty_log_has_no_tiles(harness: Harness, reader: LogReader) -> None:
    with pytest.raises(NotFound):
        reader.tile("nobody-yet", TileRef(0, 0, 1))


def test_an_entry_too_long_for_a_bundle_fails_its_bundle_not_its_hashes(
        harness: Harness, reader: LogReader) -> None:
    # a draw of 10,000 big integers records ~200 kB: more than a bundle's uint16 length holds
    # (tlog-tiles' limit); its bundle says so, its hashes (and proofs) are served as ever
    rng = RngDrawService(harness.storage, signer=harness.signer)
    rng.generate_integers(OP, count=10_000, minimum=0, maximum=2**53 - 1, request_id=harness.rid())
    harness.storage.integrate_log()
    with harness.storage.snapshot() as uow:
        size = uow.log_size(OP)
    with pytest.raises(IllegalState) as err:
        reader.tile(OP, TileRef(None, 0, size))
    assert err.value.reason == "ENTRY_TOO_LONG"
    assert len(reader.tile(OP, TileRef(0, 0, size))) == 32 * size
