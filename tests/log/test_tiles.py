"""C2SP tlog-tiles paths, tiles' nodes and entry bundles (rng_service/log/tiles.py): each tile
holds exactly the hashes the spec's formula defines, paths parse in canonical form only, and
bundles are uint16-length-prefixed entries."""

from __future__ import annotations

import hashlib

import pytest

from rng_service.core.errors import IllegalState, InvalidInput
from rng_service.log import (
    MemoryNodeStore,
    TileRef,
    decode_bundle,
    encode_bundle,
    leaf_hash,
    node_hash,
    parse_tile_path,
)
from rng_service.log.tiles import MAX_BUNDLE_ENTRY, TILE_WIDTH


def mth(entries: list[bytes]) -> bytes:
    """RFC 6962's MTH written out from its definition (no stored nodes)."""
    if not entries:
        return hashlib.sha256(b"").digest()
    if len(entries) == 1:
        return leaf_hash(entries[0])
    k = 1 << ((len(entries) - 1).bit_length() - 1)
    return node_hash(mth(entries[:k]), mth(entries[k:]))


@pytest.mark.parametrize(("path", "tile"), [
    ("tile/0/000", TileRef(0, 0)),
    ("tile/0/255", TileRef(0, 255)),
    ("tile/1/x001/000", TileRef(1, 1000)),
    ("tile/0/x001/x234/067", TileRef(0, 1_234_067)),
    ("tile/0/x001/x234/067.p/8", TileRef(0, 1_234_067, 8)),
    ("tile/63/000.p/1", TileRef(63, 0, 1)),
    ("tile/entries/000", TileRef(None, 0)),
    ("tile/entries/x002/000.p/255", TileRef(None, 2000, 255)),
])
def test_canonical_paths_parse_and_format_back(path: str, tile: TileRef) -> None:
    assert parse_tile_path(path) == tile
    assert tile.path() == path


@pytest.mark.parametrize("path", [
    "tile/0/0", "tile/0/0000", "tile/00/000", "tile/64/000", "tile/-1/000", "tile/data/000",
    "tile/0/x000/067",  # a leading x000 element: 67 has one spelling, 067
    "tile/0/001/067", "tile/0/x067", "tile/0/x001/x067.p/3x",  # x on every element but the last
    "tile/0/000.p/256", "tile/0/000.p/0", "tile/0/000.p/010", "tile/0/000.p", "tile/0/.p/5",
    "tile/0/000.p/5/6", "tile/entries", "tile/entries/", "tile/0/", "tile/0", "tiles/0/000",
    "/tile/0/000", "tile/0/+12", "tile/0/１２３", "tile/٣/000", "tile/0/000/", "checkpoint",
    "tile/0/" + "x000/" * 40 + "001",
])
def test_other_spellings_are_refused(path: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_tile_path(path)
    assert err.value.field == "path"


def test_each_hash_is_the_spec_formula_over_the_entries() -> None:
    # a tree of 600 leaves: 2 full level-0 tiles, a partial one of 88, a partial level-1 of 2
    entries = [f"entry {i}".encode() for i in range(600)]
    store = MemoryNodeStore()
    for entry in entries:
        store.append_entry(entry)
    for level, index, width in [(0, 0, 256), (0, 1, 256), (0, 2, 88), (0, 2, 1), (1, 0, 2),
                                (1, 0, 1)]:
        tile = TileRef(level, index, width)
        assert tile.tree_size_needed() <= len(entries)
        got = store.get_nodes(tile.nodes())
        step = TILE_WIDTH ** level
        want = [mth(entries[(index * 256 + i) * step : (index * 256 + i + 1) * step])
                for i in range(width)]
        assert got == want, tile


def test_the_sizes_that_make_a_tile_exist_are_the_specs_example() -> None:
    # tlog-tiles: size 70,000 has 273 full level-0 tiles, a partial one of 112, one full level-1
    # tile, a partial level-1 one of 17 and a partial level-2 one of 1
    size = 70_000
    exists = [TileRef(0, 272), TileRef(0, 273, 112), TileRef(1, 0), TileRef(1, 1, 17),
              TileRef(2, 0, 1)]
    wider = [TileRef(0, 273, 113), TileRef(0, 274, 1), TileRef(1, 1, 18), TileRef(2, 0, 2),
             TileRef(3, 0, 1)]
    assert all(t.tree_size_needed() <= size for t in exists)
    assert all(t.tree_size_needed() > size for t in wider)
    # a tree of 256: one full level-0 tile and a partial level-1 one of width 1
    assert TileRef(0, 0).tree_size_needed() == TileRef(1, 0, 1).tree_size_needed() == 256


def test_bundles_are_uint16_length_prefixed_entries() -> None:
    entries = [b"", b"a", bytes(range(256)) * 3, b"x" * MAX_BUNDLE_ENTRY]
    data = encode_bundle(entries)
    assert data[:3] == b"\x00\x00\x00" and data[3:4] == b"\x01"
    assert decode_bundle(data) == entries
    assert TileRef(None, 3, 5).leaves() == (768, 773)
    with pytest.raises(InvalidInput):
        decode_bundle(data[:-1])


def test_an_entry_too_long_for_a_bundle_is_refused_not_cut() -> None:
    with pytest.raises(IllegalState) as err:
        encode_bundle([b"ok", b"x" * (MAX_BUNDLE_ENTRY + 1)])
    assert err.value.reason == "ENTRY_TOO_LONG"
