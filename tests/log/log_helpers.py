"""Reference code for the log tests, written from RFC 9162 section 2.1 independently of the package:
straight recursion over leaf lists, exactly as the RFC states MTH, PATH and PROOF."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

VECTORS: dict[str, Any] = json.loads((Path(__file__).parent / "vectors.json").read_text("utf-8"))


def ref_leaf(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def ref_node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _k(n: int) -> int:
    """The largest power of two smaller than n, by counting up (not the package's bit trick)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


class RefTree:
    """MTH, PATH and PROOF of RFC 9162 2.1.1, 2.1.3.1 and 2.1.4.1 over ``entries``."""

    def __init__(self, entries: list[bytes]) -> None:
        self.entries = entries
        self.mth = cache(self._mth)

    def _mth(self, begin: int, end: int) -> bytes:
        n = end - begin
        if n == 0:
            return hashlib.sha256(b"").digest()
        if n == 1:
            return ref_leaf(self.entries[begin])
        k = _k(n)
        return ref_node(self.mth(begin, begin + k), self.mth(begin + k, end))

    def path(self, m: int, begin: int, end: int) -> list[bytes]:
        n = end - begin
        if n == 1:
            return []
        k = _k(n)
        if m < k:
            return [*self.path(m, begin, begin + k), self.mth(begin + k, end)]
        return [*self.path(m - k, begin + k, end), self.mth(begin, begin + k)]

    def proof(self, m: int, n: int) -> list[bytes]:
        return self._subproof(m, 0, n, True)

    def _subproof(self, m: int, begin: int, end: int, b: bool) -> list[bytes]:
        n = end - begin
        if m == n:
            return [] if b else [self.mth(begin, end)]
        k = _k(n)
        if m <= k:
            return [*self._subproof(m, begin, begin + k, b), self.mth(begin + k, end)]
        return [*self._subproof(m - k, begin + k, end, False), self.mth(begin, begin + k)]


def entries(count: int) -> list[bytes]:
    """Distinct deterministic entries: the index in 4 bytes, so leaves differ."""
    return [i.to_bytes(4, "big") for i in range(count)]
