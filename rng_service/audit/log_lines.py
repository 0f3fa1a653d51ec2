"""A line of ``log/leaves.jsonl`` read and its leaf's inclusion proof checked: the per-leaf
work of the log checks (:mod:`rng_service.audit.log_audit`), which the audit's workers run a
chunk of lines at a time (:class:`LeafWork`). What depends on earlier leaves (the order, a file
listed twice, the tree to the checkpoint) stays with
:class:`~rng_service.audit.log_audit.LogAudit`."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final, NamedTuple

from rng_service.audit.files import (
    FileClock,
    FileTimeout,
    tok,
)
from rng_service.core.errors import FairshoeError
from rng_service.core.json_input import JsonLimits, parse_json
from rng_service.log import (
    verify_inclusion,
)
from rng_service.log.hashing import HASH_SIZE
from rng_service.log.proofs import MAX_PROOF_HASHES
from rng_service.records.schema import (
    KEY_SCHEMA,
    KEYS_SUBDIR,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    REVEALS_SUBDIR,
    RNG_REVEAL_SCHEMA,
    RNG_REVEALS_SUBDIR,
    RNG_SCHEMA,
    RNG_SUBDIR,
    ROUNDS_SUBDIR,
    SHOE_COMMITMENT_SCHEMA,
    SHOES_SUBDIR,
)

#: the directory of each kind of leaf in a collection
LEAF_DIRS: Final = {
    RECORD_SCHEMA: ROUNDS_SUBDIR, REVEAL_SCHEMA: REVEALS_SUBDIR, RNG_SCHEMA: RNG_SUBDIR,
    RNG_REVEAL_SCHEMA: RNG_REVEALS_SUBDIR, KEY_SCHEMA: KEYS_SUBDIR,
    SHOE_COMMITMENT_SCHEMA: SHOES_SUBDIR,
}
#: the longest line of leaves.jsonl read: 65 hashes of proof and a path fit in a quarter of it
MAX_LINE_BYTES: Final = 16 * 1024
#: the most FAIL lines about single leaves: past it they are counted, not printed
MAX_LEAF_LINES: Final = 20
#: failing leaves after which leaves.jsonl is read no further (its time stays bounded by the
#: failures, not only by its size)
MAX_LEAF_FAILURES: Final = 1000
_LINE_LIMITS: Final = JsonLimits(max_bytes=MAX_LINE_BYTES, max_depth=3, max_string_chars=4096)
SMALL_LIMITS: Final = JsonLimits(max_bytes=64 * 1024, max_depth=3, max_string_chars=4096)
_HEX_HASH: Final = re.compile(r"[0-9a-f]{64}\Z")
_HEX_RUN: Final = re.compile(r"[0-9a-f]*\Z")
#: the last part of a collected collection's log origin (rng_service.records.logged)
COLLECT_ORIGIN: Final = re.compile(r"collect/[0-9a-f]{32}")
_MAX_PATH_CHARS: Final = 1024


def path_key(path: Path) -> str:
    """How a file is known across the audit: its absolute, normalised path (the walk and
    ``leaves.jsonl`` spell the same file the same way)."""
    return os.path.normpath(os.path.abspath(path))


class LeafFile(NamedTuple):
    """What the audit read of one envelope file: the leaf hash of its exact bytes and what its
    payload claims (unverified here: the envelope's own checks judge it)."""

    leaf_hash: bytes
    schema: str | None = None
    #: the key id in its signature
    signer: str | None = None
    #: the key a key record names, or the shoe a commitment, round record or reveal is of
    subject: str | None = None


#: a :class:`LeafFile` as the scratch store keeps it, sent back by the audit's workers: its
#: members as a plain tuple (``tuple(leaf)``; ``LeafFile(*row)`` again). One is pickled for
#: every envelope file read and unpickled for every leaf listed, and a class's pickle names it
#: and its unpickling looks it up: a plain tuple's round trip costs a quarter of the class's
LeafRow = tuple[bytes, str | None, str | None, str | None]


class Malformed(Exception):
    """A file of the log that is not what the contract says, or a line of leaves.jsonl."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


class BadLeaf(Exception):
    """One listed leaf that fails: ``field`` names what, the message says how."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class Listed(NamedTuple):
    """A line of leaves.jsonl as read (by a worker, :class:`LeafWork`): the leaf's index, its
    path as listed and its inclusion proof (the hashes joined), and the :func:`path_key` of the
    file it names, or why that path names no leaf's file (``bad``: its field and message).
    (A named tuple: a chunk of them is sent back to the audit's own process.)"""

    leaf_index: int
    path: str
    proof: bytes
    key: str
    bad: tuple[str | None, str] | None


class Unread(NamedTuple):
    """A line of leaves.jsonl that ends the reading: malformed (what is wrong, and the leaf's
    index if it was read), or read past the per-file bound."""

    message: str
    leaf_index: int | None


#: how a worker found an inclusion proof (:meth:`LeafWork.proofs`): None, it proves the leaf;
#: a text, why not; False, its check ran past the per-file bound
Proved = str | bool | None


def _hashes(value: object, what: str, most: int) -> bytes:
    """A JSON list of at most ``most`` hex hashes, their bytes joined; Malformed otherwise,
    naming the first that is not one."""
    if type(value) is not list:
        raise Malformed(f"{what} must be a list of hex hashes")
    if len(value) > most:
        raise Malformed(f"{what} has {len(value)} hashes, more than {most}")
    # every hash of every leaf's proof is read here: checked in one pass over them all, each
    # one's own checks (which name the first bad one) only when that pass fails
    try:
        joined = "".join(value)
    except TypeError:
        joined = ""
    if (len(joined) == HASH_SIZE * 2 * len(value) and set(map(len, value)) <= {HASH_SIZE * 2}
            and _HEX_RUN.match(joined)):
        return bytes.fromhex(joined)
    for i, item in enumerate(value):
        if type(item) is not str or not _HEX_HASH.match(item):
            raise Malformed(f"{what}[{i}] is not a hash (64 lowercase hex digits)")
    return bytes.fromhex(joined)


def read_hashes(value: object, what: str, most: int) -> list[bytes]:
    """``value`` as a list of at most ``most`` hex hashes (:func:`_hashes`), each 32 bytes."""
    joined = _hashes(value, what, most)
    return [joined[at:at + HASH_SIZE] for at in range(0, len(joined), HASH_SIZE)]


def read_size(value: object, what: str) -> int:
    """``value`` as a tree size or index: an integer in [0, 2**64 - 1]."""
    if type(value) is not int or not 0 <= value <= 2**64 - 1:
        raise Malformed(f"{what} must be an integer in [0, 2**64 - 1]")
    return value


def read_object(data: bytes, members: Iterable[str], limits: JsonLimits) -> dict[str, Any]:
    """One JSON object with exactly ``members``; Malformed otherwise."""
    try:
        value = parse_json(data, limits)
    except FairshoeError as exc:
        raise Malformed(str(exc)) from None
    if type(value) is not dict:
        raise Malformed("is not a JSON object")
    wanted = set(members)
    if set(value) != wanted:
        index = value.get("index")
        extra, missing = sorted(set(value) - wanted), sorted(wanted - set(value))
        what = f"member {tok(extra[0])} is not expected" if extra else f"{missing[0]} is missing"
        raise Malformed(what, index if type(index) is int else None)
    return value


def _parse_line(raw: bytes, root_key: str) -> Listed:
    """A line of leaves.jsonl of the collection whose :func:`path_key` is ``root_key``;
    Malformed if it is not one."""
    if len(raw) > MAX_LINE_BYTES:
        raise Malformed(f"is longer than {MAX_LINE_BYTES} bytes")
    value = read_object(raw, ("index", "path", "proof"), _LINE_LIMITS)
    index = read_size(value["index"], "index")
    try:
        path = value["path"]
        if type(path) is not str:
            raise Malformed("path must be a string")
        proof = _hashes(value["proof"], "proof", MAX_PROOF_HASHES)
    except Malformed as exc:
        raise Malformed(exc.message, index) from None
    try:
        directory, name = _leaf_parts(path)
    except BadLeaf as exc:
        return Listed(index, path, proof, "", (exc.field, exc.message))
    # path_key(root / directory / name), as the walk spells the file (Auditor._file_key):
    # both parts are plain names, so normalising the root is normalising the whole
    return Listed(index, path, proof, os.path.join(root_key, directory, name), None)


#: lines of leaves.jsonl handed to a worker at a time, and their inclusion proofs
LINES_PER_CHUNK: Final = 256
#: and at most about this many bytes of them (a line may be 16 KB: the chunks handed out ahead
#: of the checks, a few per worker, stay a few MB whatever the lines hold)
BYTES_PER_CHUNK: Final = 256 * 1024
#: the names of the per-leaf tasks (:func:`leaf_tasks`) among the audit's workers' tasks
LINES_TASK: Final = "log.lines"
PROOFS_TASK: Final = "log.proofs"


class LeafWork:
    """The log checks' work on one leaf that needs nothing of the others: its line of
    leaves.jsonl parsed, its path checked, its inclusion proof verified. Done a chunk of lines at
    a time, each line within the per-file bound of ``clock``, by the audit's workers
    (:func:`leaf_tasks`) or by :class:`LogAudit` itself; what depends on the leaves before (the
    order of indices, a file listed twice, the tree hashed up to the checkpoint's root, the
    findings) stays with :class:`LogAudit`, in the audit's own process."""

    def __init__(self, clock: FileClock) -> None:
        self.clock = clock

    def lines(self, chunk: tuple[str, bytes]) -> list[Listed | Unread]:
        """The lines of ``(root_key, data)`` read (:func:`split_lines`); the first that ends the
        reading is the last."""
        root_key, data = chunk
        bound = self.clock.bound()
        out: list[Listed | Unread] = []
        for raw in split_lines(data):
            try:
                with bound:
                    out.append(_parse_line(raw, root_key))
            except Malformed as exc:
                out.append(Unread(exc.message, exc.index))
                break
            except FileTimeout:
                out.append(Unread(self.clock.too_slow, None))
                break
        return out

    def proofs(self, chunk: tuple[int, bytes, list[tuple[bytes, int, bytes]]]) -> list[Proved]:
        """Whether each ``(leaf_hash, index, proof)`` of ``(size, root, asked)`` proves that
        leaf in the tree of ``size`` leaves and that ``root``."""
        size, root, asked = chunk
        bound = self.clock.bound()
        out: list[Proved] = []
        for leaf_hash, index, proof in asked:
            try:
                with bound:
                    verify_inclusion(leaf_hash, index, size,
                                     [proof[at:at + HASH_SIZE]
                                      for at in range(0, len(proof), HASH_SIZE)], root)
            except FairshoeError as exc:
                out.append(str(exc))
            except FileTimeout:
                out.append(False)
            else:
                out.append(None)
        return out


def leaf_tasks(clock: FileClock) -> dict[str, Callable[[Any], Any]]:
    """The per-leaf tasks, by name, for the audit's :class:`~rng_service.audit.workers.Workers`
    (named when they are forked: the log checks run after pass 1, in the same processes)."""
    work = LeafWork(clock)
    return {LINES_TASK: work.lines, PROOFS_TASK: work.proofs}


def split_lines(data: bytes) -> list[bytes]:
    """A chunk of leaves.jsonl (:meth:`Lines.chunks`) as ``readline`` would give its lines:
    each with its newline, the last without one if the chunk ends without one."""
    parts = data.split(b"\n")
    last = parts.pop()  # what follows the last newline: nothing if the chunk ends with one
    raws = [part + b"\n" for part in parts]
    if last:
        raws.append(last)
    return raws


def _lines_end(data: bytes, at: int, most: int) -> int:
    """Where the first ``most`` whole lines of ``data`` from ``at`` end (as many as it holds
    if fewer; ``at`` if none)."""
    end = data.rfind(b"\n", at) + 1
    if end <= at or data.count(b"\n", at, end) <= most:
        return max(end, at)
    for _ in range(most):
        at = data.find(b"\n", at) + 1
    return at


class Lines:
    """leaves.jsonl read in chunks of whole lines as the workers take them (each read of the
    file within the per-file bound), and why the reading stopped before the end of the file, if
    it did. The file is read a block at a time and cut at a line's end, so the audit's own
    process does not handle its lines one by one: the workers split them
    (:func:`split_lines`)."""

    def __init__(self, fh: BinaryIO, root_key: str, clock: FileClock) -> None:
        self._fh = fh
        self._root_key = root_key
        self._clock = clock
        #: the reading stopped: the file cannot be read (OSError), or a read took too long
        self.stopped: OSError | FileTimeout | None = None

    def chunks(self) -> Iterator[tuple[str, bytes]]:
        """The file's lines, a chunk at a time (at most LINES_PER_CHUNK whole lines, and about
        BYTES_PER_CHUNK bytes), until its end or until the reading stops (``stopped``: the
        lines read whole before it are given). A line longer than MAX_LINE_BYTES is given cut
        there, and ends the reading (its line fails as too long, as a ``readline`` bounded there
        would have it)."""
        bound = self._clock.bound()
        rest = b""
        while True:
            try:
                with bound:
                    block = self._fh.read(BYTES_PER_CHUNK)
            except (OSError, FileTimeout) as exc:
                self.stopped = exc
                block = b""
            data = rest + block if rest else block
            at = 0
            while (end := _lines_end(data, at, LINES_PER_CHUNK)) > at:
                yield self._root_key, data[at:end]
                at = end
            rest = data[at:]
            if not block:  # the end of the file (the last line, if it has no newline)
                if rest and self.stopped is None:
                    yield self._root_key, rest
                return
            if len(rest) > MAX_LINE_BYTES:
                yield self._root_key, rest[:MAX_LINE_BYTES + 1]
                return


def _leaf_parts(text: str) -> tuple[str, str]:
    """``<dir>/<file>`` of a listed path, the directory one of the leaves'; BadLeaf otherwise."""
    shown = tok(text)
    if len(text) > _MAX_PATH_CHARS:
        raise BadLeaf("path", f"is longer than {_MAX_PATH_CHARS} characters")
    if text.startswith("/"):
        raise BadLeaf("path", f"{shown} is absolute: a leaf's path is relative to the "
                       "collection")
    parts = text.split("/")
    if len(parts) != 2 or any(p in ("", ".", "..") for p in parts) or "\x00" in text:
        raise BadLeaf("path", f"{shown} is not <directory>/<file> inside the collection")
    if parts[0] not in LEAF_DIRS.values():
        raise BadLeaf("path", f"{shown} is not in a directory of signed envelopes "
                       f"({', '.join(sorted(LEAF_DIRS.values()))})")
    return parts[0], parts[1]


def why_absent(path: Path) -> str:
    """Why a listed file was not among the envelopes the audit read."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "does not exist in the collection"
    if stat.S_ISLNK(mode):
        return "is a symbolic link: not read"
    return "was not read as a signed envelope (see its own line)"


