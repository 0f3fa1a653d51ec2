"""The log as C2SP tlog-tiles (https://c2sp.org/tlog-tiles): tile paths, tiles' nodes, bundles.

A log published as tiles is a finite set of static resources under a URL prefix::

    <prefix>/checkpoint                      the latest signed checkpoint
    <prefix>/tile/<L>/<N>[.p/<W>]            hash tile: W (default 256) hashes at tree level 8L
    <prefix>/tile/entries/<N>[.p/<W>]        entry bundle: the entries of leaves N*256 ...

Hash ``i`` of tile ``(L, N)`` is ``MTH(D[(N*256 + i) * 256**L : (N*256 + i + 1) * 256**L])``: the
perfect node ``NodeID(8L, N*256 + i)`` the log already stores (:mod:`~rng_service.log.nodes`), so
a tile is 256 (or W) stored nodes read in one batch, never a hash computed per request. A tile's
bytes never change once the log is big enough for it: full tiles are immutable, and so is a
partial tile of a given width (a bigger log has a wider partial tile at another path).

``<N>`` is written in zero-padded 3-digit path elements, all but the last prefixed with ``x``
(1234067 is ``x001/x234/067``). Parsing is strict: one path per resource, so a cache holds each
tile once and no spelling (``x000/067``, ``.p/256``, ``01``) reaches storage.

>>> parse_tile_path("tile/0/x001/x234/067.p/8")
TileRef(level=0, index=1234067, width=8)
>>> parse_tile_path("tile/entries/000").path()
'tile/entries/000'
>>> TileRef(1, 0, 3).nodes()
[NodeID(level=8, index=0), NodeID(level=8, index=1), NodeID(level=8, index=2)]
>>> TileRef(1, 0, 3).tree_size_needed()
768
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from rng_service.core.errors import IllegalState, InvalidInput, quote
from rng_service.log.tree import NodeID

TILE_HEIGHT: Final = 8  # each tile is a subtree 8 levels high
TILE_WIDTH: Final = 1 << TILE_HEIGHT  # 256 hashes, or entries, in a full tile
MAX_TILE_LEVEL: Final = 63  # the spec's bound on <L>
#: an entry in a bundle is prefixed by its length as a big-endian uint16
MAX_BUNDLE_ENTRY: Final = 0xFFFF
ENTRIES: Final = "entries"
_LEVEL = re.compile(r"(0|[1-9][0-9]?)\Z")
_WIDTH = re.compile(r"[1-9][0-9]{0,2}\Z")
_ELEMENT = re.compile(r"[0-9]{3}\Z")


@dataclass(frozen=True)
class TileRef:
    """A hash tile (``level`` 0 and up) or, with ``level`` None, an entry bundle: its ``index``
    within its level and its ``width`` (256 for a full tile, 1..255 for a partial one)."""

    level: int | None
    index: int
    width: int = TILE_WIDTH

    @property
    def is_bundle(self) -> bool:
        """True for an entry bundle, False for a hash tile."""
        return self.level is None

    @property
    def is_full(self) -> bool:
        """True for a full (256-wide) tile or bundle."""
        return self.width == TILE_WIDTH

    def path(self) -> str:
        """The path below the log's prefix, e.g. ``tile/0/x001/234.p/5``."""
        index, elements = self.index, [f"{self.index % 1000:03d}"]
        while index >= 1000:
            index //= 1000
            elements.insert(0, f"x{index % 1000:03d}")
        level = ENTRIES if self.level is None else str(self.level)
        partial = "" if self.is_full else f".p/{self.width}"
        return f"tile/{level}/{'/'.join(elements)}{partial}"

    def nodes(self) -> list[NodeID]:
        """The perfect nodes whose hashes a hash tile holds, left to right (for a bundle: the
        leaves, level 0, whose entries it holds)."""
        level = 0 if self.level is None else self.level * TILE_HEIGHT
        first = self.index * TILE_WIDTH
        return [NodeID(level, first + i) for i in range(self.width)]

    def leaves(self) -> tuple[int, int]:
        """The leaves ``[start, end)`` a bundle holds (for a hash tile: its first level's)."""
        first = self.index * TILE_WIDTH
        return first, first + self.width

    def tree_size_needed(self) -> int:
        """The smallest tree size in which this tile (at this width) exists."""
        level = 0 if self.level is None else self.level * TILE_HEIGHT
        return (self.index * TILE_WIDTH + self.width) << level


def _bad(path: str, why: str) -> InvalidInput:
    return InvalidInput("path", f"{quote(path)} is not a tile path: {why}")


def _parse_index(path: str, elements: list[str]) -> int:
    if not elements:
        raise _bad(path, "no tile index")
    digits = []
    for at, element in enumerate(elements):
        last = at == len(elements) - 1
        body = element if last else element.removeprefix("x")
        if (not last and not element.startswith("x")) or not _ELEMENT.match(body):
            raise _bad(path, "the index is 3-digit elements, all but the last prefixed 'x'")
        digits.append(body)
    if len(digits) > 1 and digits[0] == "000":
        raise _bad(path, "the index has a leading x000 element")
    return int("".join(digits))


def parse_tile_path(path: str) -> TileRef:
    """The tile or bundle ``path`` (below the prefix: ``tile/...``) names, in canonical form
    only; :class:`InvalidInput` naming ``path`` otherwise."""
    if not isinstance(path, str) or len(path) > 128:
        raise InvalidInput("path", "not a tile path")
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        raise _bad(path, "expected tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>]")
    level_text, rest = parts[1], parts[2:]
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        if not _WIDTH.match(rest[-1]) or int(rest[-1]) >= TILE_WIDTH:
            raise _bad(path, "a partial tile's width is 1 to 255, no leading zeros")
        width = int(rest[-1])
        rest = [*rest[:-2], rest[-2][:-2]]
    index = _parse_index(path, rest)
    if level_text == ENTRIES:
        return TileRef(None, index, width)
    if not _LEVEL.match(level_text) or int(level_text) > MAX_TILE_LEVEL:
        raise _bad(path, "the level is 0 to 63, no leading zeros")
    return TileRef(int(level_text), index, width)


def encode_bundle(entries: Iterable[bytes]) -> bytes:
    """An entry bundle: each entry prefixed by its length, a big-endian uint16. An entry too
    long for that is :class:`IllegalState` (``ENTRY_TOO_LONG``): the log holds it, the format
    cannot, and no client sent it.

    >>> encode_bundle([b"ab", b""]).hex()
    '000261620000'
    """
    out = bytearray()
    for at, entry in enumerate(entries):
        if len(entry) > MAX_BUNDLE_ENTRY:
            raise IllegalState(f"entry {at} of the bundle is {len(entry)} bytes, over the "
                               f"{MAX_BUNDLE_ENTRY} an entry bundle's uint16 length holds",
                               reason="ENTRY_TOO_LONG")
        out += struct.pack(">H", len(entry)) + entry
    return bytes(out)


def decode_bundle(data: bytes) -> list[bytes]:
    """The entries of a bundle (the inverse of :func:`encode_bundle`), strictly.

    >>> decode_bundle(bytes.fromhex("000261620000"))
    [b'ab', b'']
    """
    entries, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise InvalidInput("bundle", "ends inside an entry's length")
        (size,) = struct.unpack_from(">H", data, at)
        if at + 2 + size > len(data):
            raise InvalidInput("bundle", "ends inside an entry")
        entries.append(bytes(data[at + 2 : at + 2 + size]))
        at += 2 + size
    return entries
