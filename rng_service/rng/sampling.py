"""Unbiased integers and the Fisher–Yates shuffle, drawn from an HMAC_DRBG (rng_service.rng.drbg).

The exact convention, which an auditor needs to recompute a shuffle from the DRBG's output:

1. **Byte stream.** The DRBG is asked for blocks of exactly ``BLOCK_BYTES`` (128) bytes, each by
   one ``generate(128)`` call with no additional input. The stream is the concatenation of those
   blocks, read front to back. A block is requested only when the unread bytes are too few for the
   next draw; unread bytes carry over, so a draw may straddle two blocks. (Every ``generate`` ends
   with a state update, so the block size is part of the convention: ``generate(128)`` gives other
   bytes than two ``generate(64)`` calls.)
2. **One draw for** ``randbelow(n)``, ``n >= 2``: let ``k = (n - 1).bit_length()`` and
   ``m = ceil(k / 8)``. Take the next ``m`` bytes of the stream, read them as a big-endian unsigned
   integer, keep its low ``k`` bits (``& (2**k - 1)``). If the result is ``< n`` it is the answer;
   otherwise it is rejected, never reduced, and another draw is made from the following bytes.
   Rejected bytes are consumed; no byte is ever skipped or reused. ``randbelow(1)`` is 0 and
   consumes nothing.
3. **Shuffle** (Fisher–Yates, forward, as Knuth's Algorithm P is usually stated): for ``i`` from
   ``0`` up to ``len - 2``: ``j = i + randbelow(len - i)``, then swap positions ``i`` and ``j``.
4. ``random_bytes(n)`` takes the next ``n`` bytes of the same stream.

So for a 6-deck shoe (312 cards) the first draw is ``randbelow(312)``: two bytes, low 9 bits,
values 312..511 rejected; it picks the shoe's first card.

Why forward: after step ``i`` position ``i`` holds its final card, and steps after ``i`` never
touch it. Dealing card ``i`` therefore needs only steps ``0..i``, so a shoe is dealt lazily
(:meth:`DrbgRandom.shuffle_steps`, ``rng_service.rng.shoe.LazyShoe``) with exactly the cards and the
stream position of the full shuffle: the draws are the same draws in the same order. Most games
reshuffle after every round, and a round deals about 6 to 20 cards, not the whole shoe.

Why 128-byte blocks: a ``generate(b)`` costs ``ceil(b / 32)`` HMACs plus a closing state update
(two more HMACs and a fresh HMAC key), so small blocks favour the short prefix a round deals and
large ones the full shuffle. A round's 12 cards need about 16 bytes from 2 decks and 40 from 6
(99th percentile 60), so 128 bytes (four SHA-256 outputs) serve nearly every round in one request
of 6 HMACs instead of the 22 a 640-byte block costs. A full 6-deck shuffle needs 552 bytes on
average (rarely above 620): five 128-byte requests, about 30 HMACs instead of 22. That is paid
only where a whole shoe is computed (an audit, ``fairshoe shoe``, the shuffle tests): a cut-card
shoe is dealt lazily too, and never past its last round. ``bench/bench_rng.py`` measures both
paths and one request of each size.

The shuffle is the hot path of the service. Its steps run in C (``rng_service/_fisher_yates.c``,
built with the package) over lists; the pure-Python steps below are the reference and serve any
other sequence. Both follow the convention above exactly: the tests compare them with each other
and with a plain re-implementation.
"""

from __future__ import annotations

import operator
import sys
from array import array
from collections.abc import Callable, MutableSequence
from typing import Any, Final, TypeVar

from rng_service.rng.drbg import HmacDrbg

_c_steps: Callable[[list[Any], int, int, bytes, int], tuple[int, int]] | None
try:  # the C inner loop, built with the package (pyproject's ext-modules)
    from rng_service.rng._fisher_yates import steps as _c_steps
except ImportError:  # pragma: no cover - a build without a C compiler takes the Python path
    _c_steps = None

#: Bytes per DRBG request (four SHA-256 outputs): why 128 is in the module docstring. Changing it
#: changes every shoe.
BLOCK_BYTES: Final = 128

T = TypeVar("T")

# Steps whose range n - i exceeds 2**16 need draws of three or more bytes: rare, so they take the
# general path.
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
        """Fisher–Yates in place: for i from 0 to len-2, j = i + randbelow(len - i), swap i, j."""
        self.shuffle_steps(items, 0, max(len(items) - 1, 0))

    def shuffle_steps(self, items: MutableSequence[T], start: int, stop: int) -> None:
        """Steps ``start`` .. ``stop - 1`` of :meth:`shuffle` (``0 <= start <= stop <= len - 1``).

        After step i, position i holds its final card, so a shoe is dealt lazily by running the
        steps up to each card as it is needed. Calls must follow on (each ``start`` the previous
        ``stop``, on the same items and source); then the draws are those of one full shuffle in
        the same order, so any split of the steps gives the same cards and leaves the stream at the
        same point.
        """
        n = len(items)
        if not 0 <= start <= stop <= max(n - 1, 0):
            raise ValueError(f"steps [{start}, {stop}) are outside a shuffle of {n} items")
        if start == stop:
            return
        if _c_steps is not None and type(items) is list:
            self._steps_c(items, start, stop)
            return
        self._steps_python(items, start, stop)

    def _steps_c(self, items: list[T], i: int, stop: int) -> None:
        """The same steps by the C loop, which returns when a draw needs bytes not yet drawn."""
        assert _c_steps is not None
        buf, pos = self._buf, self._pos
        while True:
            i, pos = _c_steps(items, i, stop, buf, pos)
            if i >= stop:
                break
            buf, pos = buf[pos:] + self._drbg.generate(BLOCK_BYTES), 0
        self._buf, self._pos = buf, pos

    def _steps_python(self, items: MutableSequence[T], start: int, stop: int) -> None:
        """The reference implementation of the steps (and the path for non-list sequences)."""
        n = len(items)
        i = start
        while i < stop and n - 1 - i >= _TWO_BYTE_LIMIT:
            j = i + self.randbelow(n - i)
            items[i], items[j] = items[j], items[i]
            i += 1
        # Steps whose ranges n - i share the bit length of n - i - 1 share the draw width and
        # mask: one run each.
        while i < stop:
            k = (n - 1 - i).bit_length()
            end = min(stop, n - (1 << (k - 1)))
            if k <= 8:
                self._steps_1(items, i, end, _BYTE_MASKS[k])
            else:
                self._steps_2(items, i, end, k)
            i = end

    def _steps_1(self, items: MutableSequence[T], i: int, end: int, table: bytes) -> None:
        """Steps i..end-1, each drawing one byte; ``table`` masks a byte to the run's bit length."""
        n = len(items)
        buf, pos = self._buf, self._pos
        while True:
            # Masking every unread byte at once in C leaves the loop only add, compare and swap.
            draws = iter(buf[pos:].translate(table))
            for v in draws:
                j = v + i
                if j < n:  # v < n - i: accepted
                    items[i], items[j] = items[j], items[i]
                    i += 1
                    if i == end:
                        break
            else:
                buf, pos = self._drbg.generate(BLOCK_BYTES), 0
                continue
            pos = len(buf) - operator.length_hint(draws)
            break
        self._buf, self._pos = buf, pos

    def _steps_2(self, items: MutableSequence[T], i: int, end: int, k: int) -> None:
        """Steps i..end-1, each drawing two bytes (big-endian) masked to ``k`` bits, 8 < k <= 16."""
        n = len(items)
        high = _BYTE_MASKS[k - 8]
        buf, pos = self._buf, self._pos
        while True:
            # A run accepts at least half its draws, so about 2 draws a step suffice; converting
            # no more than that keeps a lazily dealt card from paying for the whole block.
            size = min((len(buf) - pos) & ~1, 4 * (end - i) + 8)
            chunk = bytearray(buf[pos : pos + size])
            chunk[::2] = chunk[::2].translate(high)  # mask each draw's high byte in C
            words = array("H", chunk)
            if _LITTLE_ENDIAN:
                words.byteswap()
            draws = iter(words.tolist())
            for v in draws:
                j = v + i
                if j < n:
                    items[i], items[j] = items[j], items[i]
                    i += 1
                    if i == end:
                        break
            else:
                pos += size
                if len(buf) - pos < 2:
                    # A last odd byte is the first byte of the next draw.
                    buf, pos = buf[pos:] + self._drbg.generate(BLOCK_BYTES), 0
                continue
            pos += size - 2 * operator.length_hint(draws)
            break
        self._buf, self._pos = buf, pos
