"""DrbgRandom: the byte convention, rejection sampling, the Fisher–Yates direction and its steps."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.rng import sampling
from rng_service.rng.drbg import HmacDrbg
from rng_service.rng.sampling import BLOCK_BYTES, DrbgRandom


class ScriptedDrbg:
    """Stands in for the DRBG: hands out scripted blocks and records each request size."""

    def __init__(self, *blocks: bytes) -> None:
        self.blocks = list(blocks)
        self.requests: list[int] = []

    def generate(self, n_bytes: int, additional_input: bytes = b"") -> bytes:
        self.requests.append(n_bytes)
        block = self.blocks.pop(0)
        assert len(block) == n_bytes
        return block


def scripted(*prefixes: bytes) -> tuple[DrbgRandom, ScriptedDrbg]:
    """Blocks of BLOCK_BYTES beginning with the given bytes (padded with 0xFF)."""
    blocks = [p + b"\xff" * (BLOCK_BYTES - len(p)) for p in prefixes]
    drbg = ScriptedDrbg(*blocks)
    return DrbgRandom(cast(HmacDrbg, drbg)), drbg


def reference_shuffle(source: DrbgRandom, items: list[int]) -> None:
    """The documented shuffle, one randbelow per step."""
    for i in range(len(items) - 1):
        j = i + source.randbelow(len(items) - i)
        items[i], items[j] = items[j], items[i]


def test_values_at_or_above_n_are_rejected_not_reduced() -> None:
    # n = 6: k = 3 bits. 0x06 & 7 = 6 would be 0 by reduction; 0x0F & 7 = 7 likewise 1.
    source, _ = scripted(bytes([0x06, 0x0F, 0x02, 0x05]))
    assert source.randbelow(6) == 2
    assert source.randbelow(6) == 5  # the next byte in order: nothing was skipped


def test_only_the_low_k_bits_count() -> None:
    # 0xF3 & 0b111 = 3: the high bits of the byte are masked off, not shifted down.
    source, _ = scripted(bytes([0xF3]))
    assert source.randbelow(5) == 3


def test_two_byte_draws_are_big_endian_masked_to_k_bits() -> None:
    # n = 300: k = 9, two bytes. 0xFE05 & 0x1FF = 5; read little-endian it would be 510 (rejected).
    source, _ = scripted(bytes([0xFE, 0x05]))
    assert source.randbelow(300) == 5


def test_randbelow_one_consumes_nothing() -> None:
    source, _ = scripted(bytes([0x01]))
    assert source.randbelow(1) == 0
    assert source.randbelow(2) == 1


def test_randbelow_refuses_empty_ranges() -> None:
    source, _ = scripted(b"")
    with pytest.raises(ValueError):
        source.randbelow(0)


def test_every_byte_value_gives_every_outcome_equally_often() -> None:
    # All 256 byte values in turn: rejection leaves exactly 32 of each of 0..4 (k = 3 bits).
    stream = bytes(range(256))
    source, _ = scripted(*(stream[i : i + BLOCK_BYTES] for i in range(0, 256, BLOCK_BYTES)))
    outcomes = []
    for _ in range(5 * 32):
        outcomes.append(source.randbelow(5))
    assert Counter(outcomes) == dict.fromkeys(range(5), 32)


def test_the_stream_is_fixed_size_blocks_and_a_draw_can_straddle_two() -> None:
    first = b"\x00" * (BLOCK_BYTES - 1) + b"\x01"
    source, drbg = scripted(first, b"\x2b")
    assert source.random_bytes(BLOCK_BYTES - 1) == first[:-1]
    # randbelow(300) takes two bytes: this block's last (0x01), the next block's first (0x2b).
    assert source.randbelow(300) == 0x12B
    assert drbg.requests == [BLOCK_BYTES, BLOCK_BYTES]


def test_fisher_yates_runs_forward_from_the_first_position() -> None:
    # i=0: randbelow(4)=1 -> swap 0,1; i=1: randbelow(3) rejects 3, then 0 -> j=1, no move;
    # i=2: randbelow(2)=1 -> swap 2,3. (Run from the end, the same bytes give c b a d.)
    source, drbg = scripted(bytes([1, 3, 0, 1]))
    items = ["a", "b", "c", "d"]
    source.shuffle(items)
    assert items == ["b", "a", "d", "c"]
    assert source.random_bytes(1) == b"\xff"  # exactly four bytes were used
    assert drbg.requests == [BLOCK_BYTES]


@pytest.mark.parametrize(
    "size", [0, 1, 2, 3, 5, 8, 9, 17, 52, 104, 255, 256, 257, 258, 312, 416, 513, 1000, 4097]
)
def test_the_fast_shuffle_follows_the_convention(size: int) -> None:
    for _ in range(4):
        seed, nonce = os.urandom(32), os.urandom(16)
        fast, plain = DrbgRandom(HmacDrbg(seed, nonce)), DrbgRandom(HmacDrbg(seed, nonce))
        a, b = list(range(size)), list(range(size))
        fast.shuffle(a)
        reference_shuffle(plain, b)
        assert a == b
        # Both stopped at the same point of the stream.
        assert fast.random_bytes(BLOCK_BYTES + 3) == plain.random_bytes(BLOCK_BYTES + 3)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    size=st.sampled_from([2, 52, 104, 257, 312, 416]),
    cuts=st.lists(st.floats(0, 1), max_size=6),
)
def test_any_split_of_the_steps_is_the_full_shuffle(
    seed: bytes, size: int, cuts: list[float]
) -> None:
    nonce = b"steps"
    whole, pieces = list(range(size)), list(range(size))
    full = DrbgRandom(HmacDrbg(seed, nonce))
    full.shuffle(whole)
    lazy = DrbgRandom(HmacDrbg(seed, nonce))
    bounds = sorted({round(c * (size - 1)) for c in cuts} | {0, size - 1})
    for start, stop in itertools.pairwise(bounds):
        lazy.shuffle_steps(pieces, start, stop)
        # Steps so far fixed their positions: later steps never touch them.
        assert pieces[:stop] == whole[:stop]
    assert pieces == whole
    assert lazy.random_bytes(BLOCK_BYTES + 1) == full.random_bytes(BLOCK_BYTES + 1)


@pytest.mark.parametrize(("start", "stop"), [(-1, 2), (3, 2), (0, 52), (52, 52)])
def test_steps_outside_the_shuffle_are_refused(start: int, stop: int) -> None:
    source, _ = scripted(b"")
    with pytest.raises(ValueError, match="outside"):
        source.shuffle_steps(list(range(52)), start, stop)


def test_shuffles_longer_than_two_byte_draws() -> None:
    seed, nonce = os.urandom(32), os.urandom(16)
    size = 2**16 + 40
    a, b = list(range(size)), list(range(size))
    DrbgRandom(HmacDrbg(seed, nonce)).shuffle(a)
    reference_shuffle(DrbgRandom(HmacDrbg(seed, nonce)), b)
    assert a == b


def test_random_bytes_is_the_concatenated_block_stream() -> None:
    seed, nonce = os.urandom(32), os.urandom(16)
    source = DrbgRandom(HmacDrbg(seed, nonce))
    direct = HmacDrbg(seed, nonce)
    stream = b"".join(direct.generate(BLOCK_BYTES) for _ in range(4))
    head = source.random_bytes(3) + source.random_bytes(2 * BLOCK_BYTES + 5)
    assert head == stream[: len(head)]
    assert source.random_bytes(BLOCK_BYTES) == stream[len(head) : len(head) + BLOCK_BYTES]
    assert source.random_bytes(0) == b""


def test_repr_hides_buffered_bytes() -> None:
    source = DrbgRandom(HmacDrbg(os.urandom(32), os.urandom(16)))
    source.randbelow(10)
    assert source._buf.hex()[:16] not in repr(source)


def test_the_c_steps_are_built_and_agree_with_the_python_steps() -> None:
    # the production path is the C loop: a build without it would silently lose the speed target
    assert sampling._c_steps is not None
    for size in (2, 52, 104, 312, 70_000):
        for _ in range(3):
            seed, nonce = os.urandom(32), os.urandom(16)
            c_src, py_src = DrbgRandom(HmacDrbg(seed, nonce)), DrbgRandom(HmacDrbg(seed, nonce))
            a, b = list(range(size)), list(range(size))
            cut = size // 3
            c_src.shuffle_steps(a, 0, cut)
            c_src.shuffle_steps(a, cut, size - 1)
            py_src._steps_python(b, 0, cut)
            py_src._steps_python(b, cut, size - 1)
            assert a == b
            assert c_src.random_bytes(7) == py_src.random_bytes(7)
