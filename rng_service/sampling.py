"""Unbiased integers and the Fisher–Yates shuffle, drawn from an HMAC_DRBG (rng_service.drbg).

The exact convention, which an auditor needs to recompute a shuffle from the DRBG's output:

1. **Byte stream.** The DRBG is asked for blocks of exactly ``BLOCK_BYTES`` (640) bytes, each by
   one ``generate(640)`` call with no additional input. The stream is the concatenation of those
   blocks, read front to back. A block is requested only when the unread bytes are too few for the
   next draw; unread bytes carry over, so a draw may straddle two blocks. (Every ``generate`` ends
   with a state update, so the block size is part of the convention: ``generate(640)`` gives other
   bytes than two ``generate(320)`` calls.)
2. **One draw for** ``randbelow(n)``, ``n >= 2``: let ``k = (n - 1).bit_length()`` and
   ``m = ceil(k / 8)``. Take the next ``m`` bytes of the stream, read them as a big-endian unsigned
   integer, keep its low ``k`` bits (``& (2**k - 1)``). If the result is ``< n`` it is the answer;
   otherwise it is rejected, never reduced, and another draw is made from the following bytes.
   Rejected bytes are consumed; no byte is ever skipped or reused. ``randbelow(1)`` is 0 and
   consumes nothing.
3. **Shuffle** (Fisher–Yates, Durstenfeld): for ``i`` from ``len - 1`` down to ``1``:
   ``j = randbelow(i + 1)``, then swap positions ``i`` and ``j``.
4. ``random_bytes(n)`` takes the next ``n`` bytes of the same stream.

So for a 6-deck shoe (312 cards) the first draw is ``randbelow(312)``: two bytes, low 9 bits,
values 312..511 rejected.

The shuffle is the hot path of the service, so it is written out with the draws inlined; it follows
the convention above exactly (tests compare it with a plain re-implementation).
"""

from __future__ import annotations

import operator
import sys
from array import array
from collections.abc import MutableSequence
from typing import Final, TypeVar

from rng_service.drbg import HmacDrbg

#: Bytes per DRBG request: twenty SHA-256 outputs, enough for a whole 6-deck shuffle (552 bytes on
#: average, rarely above 620) in one request. Changing it changes every shoe.
BLOCK_BYTES: Final = 640

T = TypeVar("T")

# Steps i >= 2**16 need draws of three or more bytes: rare, so they take the general path.
_TWO_BYTE_LIMIT: Final = 1 << 16
#: _BYTE_MASKS[k] maps each byte to its low k bits (bytes.translate table).
_BYTE_MASKS: Final = tuple(bytes(b & ((1 << k) - 1) for b in range(256)) for k in range(9))
_LITTLE_ENDIAN: Final = sys.byteorder == "little"


class DrbgRandom:
    """Integers, shuffles and bytes from a DRBG, by the convention in the module docstring."""

    __slots__ = ("_buf", "_drbg", "_pos")

    def __init__(self, drbg: HmacDrbg) -> None:
        self._drbg = drbg
        self._buf = b""
        self._pos = 0

    def __repr__(self) -> str:
        # Unread bytes would predict the next draws: never shown.
        return f"<DrbgRandom over {self._drbg!r}>"

    def _take(self, n: int) -> bytes:
        while len(self._buf) - self._pos < n:
            self._buf = self._buf[self._pos :] + self._drbg.generate(BLOCK_BYTES)
            self._pos = 0
        start = self._pos
        self._pos = start + n
        return self._buf[start : start + n]

    def random_bytes(self, n: int) -> bytes:
        """The next ``n`` bytes of the stream."""
        if n < 0:
            raise ValueError("n must not be negative")
        head = self._buf[self._pos : self._pos + n]
        self._pos += len(head)
        if len(head) == n:
            return head
        pieces = [head]
        needed = n - len(head)
        while needed > 0:
            block = self._drbg.generate(BLOCK_BYTES)
            pieces.append(block[:needed])
            self._buf, self._pos = block, min(needed, BLOCK_BYTES)
            needed -= self._pos
        return b"".join(pieces)

    def randbelow(self, n: int) -> int:
        """A uniform integer in ``[0, n)`` by rejection sampling (never by reduction)."""
        if n < 1:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        k = (n - 1).bit_length()
        size = (k + 7) // 8
        mask = (1 << k) - 1
        while True:
            value = int.from_bytes(self._take(size), "big") & mask
            if value < n:
                return value

    def shuffle(self, items: MutableSequence[T]) -> None:
        """Fisher–Yates in place: for i from len-1 down to 1, j = randbelow(i + 1), swap i and j."""
        top = len(items) - 1
        while top >= _TWO_BYTE_LIMIT:
            j = self.randbelow(top + 1)
            items[top], items[j] = items[j], items[top]
            top -= 1
        # Steps i with the same bit length share the draw width and mask: one run each.
        while top >= 1:
            k = top.bit_length()
            low = 1 << (k - 1)
            if k <= 8:
                self._shuffle_run_1(items, top, low, _BYTE_MASKS[k])
            else:
                self._shuffle_run_2(items, top, low, k)
            top = low - 1

    def _shuffle_run_1(self, items: MutableSequence[T], i: int, low: int, table: bytes) -> None:
        """Steps i..low, each drawing one byte; ``table`` masks a byte to the run's bit length."""
        buf, pos = self._buf, self._pos
        while True:
            # Masking every unread byte at once in C leaves the loop only compare and swap.
            draws = iter(buf[pos:].translate(table))
            for j in draws:
                if j <= i:
                    items[i], items[j] = items[j], items[i]
                    i -= 1
                    if i < low:
                        break
            else:
                buf, pos = self._drbg.generate(BLOCK_BYTES), 0
                continue
            pos = len(buf) - operator.length_hint(draws)
            break
        self._buf, self._pos = buf, pos

    def _shuffle_run_2(self, items: MutableSequence[T], i: int, low: int, k: int) -> None:
        """Steps i..low, each drawing two bytes (big-endian) masked to ``k`` bits, 8 < k <= 16."""
        buf, pos = self._buf, self._pos
        while True:
            usable = (len(buf) - pos) & ~1
            pattern = int.from_bytes(bytes(((1 << (k - 8)) - 1, 0xFF)) * (usable // 2), "big")
            masked = int.from_bytes(buf[pos : pos + usable], "big") & pattern
            words = array("H", masked.to_bytes(usable, "big"))
            if _LITTLE_ENDIAN:
                words.byteswap()
            draws = iter(words.tolist())
            for j in draws:
                if j <= i:
                    items[i], items[j] = items[j], items[i]
                    i -= 1
                    if i < low:
                        break
            else:
                # A last odd byte is the first byte of the next draw.
                buf, pos = buf[pos + usable :] + self._drbg.generate(BLOCK_BYTES), 0
                continue
            pos += usable - 2 * operator.length_hint(draws)
            break
        self._buf, self._pos = buf, pos
