"""The log checks' serial share streamed (``log_lines.Lines``, ``log_audit._Walk``): leaves.jsonl
read in blocks cut at a line's end and split by the workers gives the very lines a bounded
``readline`` gives, and the order of the leaves judged as they are listed fails exactly the
leaves, in exactly the order, that judging every leaf once all are listed fails."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rng_service.audit import log_audit, log_lines
from rng_service.audit.files import FileClock, Finding
from rng_service.audit.log_audit import LogAudit, _Walk
from rng_service.audit.log_lines import LeafFile, Lines, split_lines
from rng_service.audit.spill import Appended, KeyedValues, SpillDb
from rng_service.records.schema import (
    KEY_SCHEMA,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    SHOE_COMMITMENT_SCHEMA,
)

_MAX = 40  # MAX_LINE_BYTES here: lines past it are common in the examples


def _by_readline(data: bytes) -> list[bytes]:
    """The lines as the reading did before it read blocks: ``readline(MAX + 1)`` until the end,
    up to the first line longer than MAX (which ends the reading: it fails as too long)."""
    fh, out = io.BytesIO(data), []
    while raw := fh.readline(_MAX + 1):
        out.append(raw)
        if len(raw) > _MAX:
            break
    return out


def _by_chunks(data: bytes) -> list[bytes]:
    lines = Lines(io.BytesIO(data), "/root", FileClock(0))
    out: list[bytes] = []
    for root_key, chunk in lines.chunks():
        assert root_key == "/root"
        for raw in split_lines(chunk):
            if len(raw) > _MAX:  # too long, as readline's (its first MAX + 1 bytes)
                return [*out, raw[:_MAX + 1]]
            out.append(raw)
    assert lines.stopped is None
    return out


_LINE = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"x"))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINE, max_size=30), newline_at_end=st.booleans(),
       most=st.integers(1, 5), block=st.integers(1, 120))
def test_lines_read_in_blocks_are_those_a_bounded_readline_gives(
        lines: list[bytes], newline_at_end: bool, most: int, block: int) -> None:
    data = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_lines, "MAX_LINE_BYTES", _MAX)
        patch.setattr(log_lines, "LINES_PER_CHUNK", most)
        patch.setattr(log_lines, "BYTES_PER_CHUNK", block)
        assert _by_chunks(data) == _by_readline(data)


def test_a_chunk_holds_at_most_lines_per_chunk_whole_lines(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setattr(log_lines, "LINES_PER_CHUNK", 4)
    data = b"".join(b'{"n": %d}\n' % i for i in range(11))
    chunks = [chunk for _, chunk in Lines(io.BytesIO(data), "/r", FileClock(0)).chunks()]
    assert [len(split_lines(c)) for c in chunks] == [4, 4, 3]
    assert b"".join(chunks) == data


class _Failing(io.RawIOBase):
    """A file whose reads past ``good`` bytes fail."""

    def __init__(self, data: bytes, good: int) -> None:
        self._data, self._good, self._at = data, good, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._at >= self._good:
            raise OSError(5, "Input/output error")
        n = min(len(buffer), self._good - self._at)
        buffer[:n] = self._data[self._at:self._at + n]
        self._at += n
        return n


def test_a_read_that_fails_gives_the_whole_lines_before_it(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setattr(log_lines, "BYTES_PER_CHUNK", 16)
    data = b"".join(b'{"n": %d}\n' % i for i in range(9))
    lines = Lines(_Failing(data, 45), "/r", FileClock(0))  # type: ignore[arg-type]
    got = [raw for _, chunk in lines.chunks() for raw in split_lines(chunk)]
    assert got == data.splitlines(keepends=True)[:5]  # 45 bytes: 5 lines and part of one
    assert isinstance(lines.stopped, OSError)


# --- the order of the leaves, judged as they are listed

_KEYS = ["k1", "k2"]
_SHOES = ["s1", "s2", "s3"]


@st.composite
def _leaves(draw: st.DrawFn) -> list[tuple[int, LeafFile]]:
    """Leaves in rising order of index, of every kind, signed by keys whose records and of
    shoes whose commitments may come before, after, or not at all."""
    out, index = [], 0
    for _ in range(draw(st.integers(0, 25))):
        index += draw(st.integers(1, 3))
        schema = draw(st.sampled_from([KEY_SCHEMA, SHOE_COMMITMENT_SCHEMA, RECORD_SCHEMA,
                                       REVEAL_SCHEMA, "fairshoe.rng/v1", None]))
        signer = draw(st.none() | st.sampled_from(_KEYS))
        subject = draw(st.none() | st.sampled_from(_KEYS if schema == KEY_SCHEMA else _SHOES))
        out.append((index, LeafFile(bytes(32), schema, signer, subject)))
    return out


def _log(tmp: Path, spill: SpillDb) -> LogAudit:
    log = LogAudit.__new__(LogAudit)  # only what _order and _leaf_fail use
    log.findings, log.leaf_failures, log.leaves_path = [], 0, tmp / "leaves.jsonl"
    return log


def _reference(log: LogAudit, leaves: list[tuple[int, LeafFile]], from_zero: bool) -> None:
    """The order judged as it was before: every leaf, once every leaf is listed."""
    keys: dict[str, int] = {}
    shoes: dict[str, int] = {}
    for index, leaf in leaves:
        if leaf.subject is not None:
            if leaf.schema == KEY_SCHEMA:
                keys.setdefault(leaf.subject, index)
            elif leaf.schema == SHOE_COMMITMENT_SCHEMA:
                shoes.setdefault(leaf.subject, index)
    for index, leaf in leaves:
        own_key = leaf.schema == KEY_SCHEMA and leaf.subject == leaf.signer
        if leaf.signer is not None and not own_key:
            log._before(index, keys.get(leaf.signer), from_zero, field="signature.key_id",
                        fact=f"{leaf.signer} signed this leaf", what="the key's record")
        if leaf.schema in (RECORD_SCHEMA, REVEAL_SCHEMA) and leaf.subject is not None:
            what = "round" if leaf.schema == RECORD_SCHEMA else "reveal"
            log._before(index, shoes.get(leaf.subject), from_zero, field="shoe",
                        fact=f"this {what} is of shoe {leaf.subject}", what="its commitment")


def _lines(findings: list[Finding]) -> list[str]:
    return [f.line() for f in findings]


@settings(max_examples=300, deadline=None)
@given(leaves=_leaves(), from_zero=st.booleans())
def test_the_order_judged_as_listed_fails_what_judging_it_after_fails(
        leaves: list[tuple[int, LeafFile]], from_zero: bool) -> None:
    tmp_path = Path("collection")  # named in the FAIL lines only
    spill = SpillDb()
    try:
        walk = _Walk(0, False, None, KeyedValues(spill), Appended(spill))
        for index, leaf in leaves:
            walk.add(index, leaf)
        streamed, reference = _log(tmp_path, spill), _log(tmp_path, spill)
        streamed._order(walk, from_zero=from_zero)
        _reference(reference, leaves, from_zero)
        assert _lines(streamed.findings) == _lines(reference.findings)
        assert streamed.leaf_failures == reference.leaf_failures
        assert walk.count == len(leaves)
        # a leaf kept for later is one whose key record or commitment was not listed before it
        assert walk.later.count <= len(leaves)
    finally:
        spill.close()


def test_a_log_in_order_keeps_no_leaf_for_later(tmp_path: Path) -> None:
    spill = SpillDb()
    try:
        walk = _Walk(0, True, None, KeyedValues(spill), Appended(spill))
        for index, leaf in enumerate([
                LeafFile(bytes(32), KEY_SCHEMA, "k1", "k1"),
                LeafFile(bytes(32), SHOE_COMMITMENT_SCHEMA, "k1", "s1"),
                LeafFile(bytes(32), RECORD_SCHEMA, "k1", "s1"),
                LeafFile(bytes(32), REVEAL_SCHEMA, "k1", "s1")]):
            walk.add(index, leaf)
        assert walk.later.count == 0 and walk.count == 4
    finally:
        spill.close()


@pytest.mark.parametrize("bits", [8, 1 << 23], ids=["every file looked up", "the filter"])
@settings(max_examples=100, deadline=None)
@given(listing=st.lists(st.lists(st.sampled_from([f"/c/rounds/{i}.json" for i in range(12)]),
                                 max_size=6), max_size=8))
def test_a_file_listed_before_is_found_whatever_the_filter_says(
        bits: int, listing: list[list[str]]) -> None:
    """Chunk after chunk, each file's earlier leaf is the one a plain mapping gives (a file
    whose bit is clear was never listed: the filter spares its look-up, never a duplicate)."""
    spill = SpillDb()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(log_audit, "_LISTED_BITS", bits)
            walk = _Walk(0, True, None, KeyedValues(spill), Appended(spill))
            plain: dict[str, int] = {}
            index = 0
            for chunk in listing:
                assert walk.listed_before(chunk) == {key: plain.get(key) for key in chunk}
                for key in chunk:
                    walk.list_file(key, index)
                    plain[key] = index
                    index += 1
    finally:
        spill.close()
