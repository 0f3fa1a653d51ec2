"""The transparency log's part of the offline audit: inclusion, completeness, consistency, order.

A collection exported with its log (``fairshoe audit export``) holds, beside the envelopes,
``log/checkpoint`` (the signed tree head the export was made against), ``log/leaves.jsonl`` (one
``{"index", "path", "proof"}`` object per line, in leaf order: the file holding leaf ``index`` and
its RFC 9162 inclusion proof in that tree, hex) and ``log/frontier.json`` (``{"size": first,
"hashes": [...]}``: the compact range of the leaves ``[0, first)`` the export leaves out), and
may hold ``log/consistency.json`` (``{"from", "to", "proof"}``). A leaf's entry is exactly the
bytes of its envelope file.

With a checkpoint the auditor obtained independently (``--checkpoint``, verified as a C2SP signed
note with the trusted keys, of the operator's log origin), :class:`LogAudit` judges completeness:

* ``leaves.jsonl`` lists exactly the leaves ``[first, size)``, in order, each once; the first is 0,
  or the size of the earlier checkpoint the auditor kept (``--since``), whose root the frontier
  must hash to (so the two checkpoints are consistent; a consistency proof, if supplied, is
  checked too); ``--since`` may instead be the state an earlier audit saved
  (:mod:`rng_service.audit.state`), whose checkpoint is then the earlier one;
* each path names an envelope file of the collection (``<dir>/<file>``, the directory of its kind,
  never ``..``, absolute or a link), its leaf hash is proven at its index by its inclusion proof,
  and the frontier followed by every leaf hash in order gives the checkpoint's root;
* every envelope file in the collection is a listed leaf: an unlogged file fails;
* order: a key's record (``fairshoe.key/v1``) precedes every leaf its key signed, and a shoe's
  commitment precedes its round records and its reveal. When the range starts at leaf 0 a missing
  key record or commitment fails too; from ``--since`` on it may lie before the range.

A deleted, reordered, replaced or inserted leaf fails naming its index. Without ``--checkpoint``
only what the collection's own ``log/checkpoint`` can show is checked (each listed leaf's inclusion,
indices rising, order where both leaves are listed), and the summary says that completeness needs
an independently obtained checkpoint.

Every input here is hostile: each file is read bounded (a line of ``leaves.jsonl`` at most
:data:`MAX_LINE_BYTES`, parsed by :mod:`rng_service.core.json_input`), every line within the
per-file time bound, and whatever is malformed is one FAIL line naming the file, its line and the
leaf index if known; the first malformed line ends the reading of ``leaves.jsonl``.

What the checks keep of every leaf (the envelope files read, the leaves listed, their order) is in
the audit's scratch store (:mod:`rng_service.audit.spill`), not in memory: a log of a million
leaves costs what one of a thousand does, beside the compact range of their hashes.

The work on a leaf that needs no other leaf (its line parsed, its path checked, its inclusion
proof verified: :class:`LeafWork`) is done by the audit's workers, a chunk of lines at a time
(:data:`LINES_PER_CHUNK`); the rest is done here, line after line in the file's order, so the
findings are the same for any number of workers.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.checks import Named
from rng_service.audit.files import (
    FileClock,
    FileTimeout,
    Finding,
    Status,
    Unreadable,
    is_state_file,
    open_regular,
    read_file,
    tok,
)
from rng_service.audit.spill import Appended, KeyedValues, SpillDb, smallest
from rng_service.audit.workers import Workers
from rng_service.core.errors import FairshoeError
from rng_service.core.json_input import JsonLimits, parse_json
from rng_service.crypto.keys import ALWAYS_VALID, KeyValidity
from rng_service.log import (
    Checkpoint,
    CompactRange,
    checkpoint_verifier,
    parse_checkpoint,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
)
from rng_service.log.checkpoint import format_time
from rng_service.log.cosignature import Cosigner, verify_cosignatures
from rng_service.log.hashing import HASH_SIZE
from rng_service.log.note import MAX_NOTE_BYTES, NoteVerifier
from rng_service.log.partial import PartialTree
from rng_service.log.proofs import MAX_PROOF_HASHES
from rng_service.records.schema import (
    KEY_SCHEMA,
    KEYS_SUBDIR,
    LOG_CHECKPOINT_FILE,
    LOG_CONSISTENCY_FILE,
    LOG_FRONTIER_FILE,
    LOG_LEAVES_FILE,
    LOG_SUBDIR,
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

if TYPE_CHECKING:  # the state reads envelopes as the audit does (claims, which imports this)
    from rng_service.audit.state import AuditState

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
_SMALL_LIMITS: Final = JsonLimits(max_bytes=64 * 1024, max_depth=3, max_string_chars=4096)
_HEX_HASH: Final = re.compile(r"[0-9a-f]{64}\Z")
_HEX_RUN: Final = re.compile(r"[0-9a-f]*\Z")
#: the last part of a collected collection's log origin (rng_service.records.logged)
_COLLECT_ORIGIN: Final = re.compile(r"collect/[0-9a-f]{32}")
_MAX_PATH_CHARS: Final = 1024


def path_key(path: Path) -> str:
    """How a file is known across the audit: its absolute, normalised path (the walk and
    ``leaves.jsonl`` spell the same file the same way)."""
    return os.path.normpath(os.path.abspath(path))


@dataclass(frozen=True)
class LeafFile:
    """What the audit read of one envelope file: the leaf hash of its exact bytes and what its
    payload claims (unverified here: the envelope's own checks judge it)."""

    leaf_hash: bytes
    schema: str | None = None
    #: the key id in its signature
    signer: str | None = None
    #: the key a key record names, or the shoe a commitment, round record or reveal is of
    subject: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # one per file read, sent back by the audit's workers and kept in its scratch store:
        # rebuilt from its members, at a third of a dataclass's default cost
        return (LeafFile, (self.leaf_hash, self.schema, self.signer, self.subject))


@dataclass(frozen=True)
class LogSource:
    """What the auditor brings to the log: the checkpoint obtained independently (None: only the
    collection's own), an earlier one kept (``since``), and the operator's log origin."""

    checkpoint: Path | None = None
    since: Path | None = None
    origin: str = ""
    #: witnesses whose cosignatures the checkpoint must carry, at least ``quorum`` of them
    witnesses: tuple[Cosigner, ...] = ()
    quorum: int = 0


@dataclass(frozen=True)
class LogContext:
    """The audit's trust and clock, as the log checks need them."""

    trusted: Mapping[str, Ed25519PublicKey]
    validity: Mapping[str, KeyValidity]
    #: a checkpoint dated after this is in the future (the audit's clock plus the skew allowed)
    not_after: datetime
    clock: FileClock


@dataclass(frozen=True)
class Completeness:
    """What the log checks judged against the auditor's checkpoint: the leaves ``[first, size)``
    of the checkpoint of ``size`` leaves, and whether the collection held every one of them."""

    size: int | None  # None: not known (the checkpoint given did not verify, or no log)
    first: int
    complete: bool

    def words(self) -> str:
        """The verdict's words after PASS or FAIL."""
        if self.size is None:
            return "NOT complete against the checkpoint given"
        since = f" (leaves [{self.first}, {self.size}), since checkpoint {self.first})" \
            if self.first else ""
        return (f"{'' if self.complete else 'NOT '}complete against checkpoint {self.size}"
                f"{since}")


class _Malformed(Exception):
    """A file of the log that is not what the contract says, or a line of leaves.jsonl."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


class _BadLeaf(Exception):
    """One listed leaf that fails: ``field`` names what, the message says how."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _Listed(NamedTuple):
    """A line of leaves.jsonl as read (by a worker, :class:`LeafWork`): the leaf's index, its
    path as listed and its inclusion proof (the hashes joined), and the :func:`path_key` of the
    file it names, or why that path names no leaf's file (``bad``: its field and message).
    (A named tuple: a chunk of them is sent back to the audit's own process.)"""

    leaf_index: int
    path: str
    proof: bytes
    key: str
    bad: tuple[str | None, str] | None


class _Unread(NamedTuple):
    """A line of leaves.jsonl that ends the reading: malformed (what is wrong, and the leaf's
    index if it was read), or read past the per-file bound."""

    message: str
    leaf_index: int | None


#: how a worker found an inclusion proof (:meth:`LeafWork.proofs`): None, it proves the leaf;
#: a text, why not; False, its check ran past the per-file bound
Proved = str | bool | None


@dataclass
class _Walk:
    """How far the reading of leaves.jsonl got."""

    expected: int
    complete: bool  # the range must be contiguous (a checkpoint was given)
    tree: CompactRange | None
    listed: KeyedValues[int]  # path key -> leaf index
    order: Appended[tuple[int, LeafFile]]  # the leaves listed, in order
    lines: int = 0
    broken: bool = False  # a malformed line ended the reading
    #: the first leaf of each key's record and of each shoe's commitment among those listed,
    #: kept as they are listed (the order checks look them up: :meth:`LogAudit._order`)
    keys: dict[str, int] = dataclasses.field(default_factory=dict)
    shoes: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(self, index: int, leaf: LeafFile) -> None:
        """One more leaf listed, in order."""
        self.order.append((index, leaf))
        if leaf.subject is not None:
            if leaf.schema == KEY_SCHEMA:
                self.keys.setdefault(leaf.subject, index)
            elif leaf.schema == SHOE_COMMITMENT_SCHEMA:
                self.shoes.setdefault(leaf.subject, index)


def _hashes(value: object, what: str, most: int) -> bytes:
    """A JSON list of at most ``most`` hex hashes, their bytes joined; _Malformed otherwise,
    naming the first that is not one."""
    if type(value) is not list:
        raise _Malformed(f"{what} must be a list of hex hashes")
    if len(value) > most:
        raise _Malformed(f"{what} has {len(value)} hashes, more than {most}")
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
            raise _Malformed(f"{what}[{i}] is not a hash (64 lowercase hex digits)")
    return bytes.fromhex(joined)


def _hash_list(value: object, what: str, most: int) -> list[bytes]:
    joined = _hashes(value, what, most)
    return [joined[at:at + HASH_SIZE] for at in range(0, len(joined), HASH_SIZE)]


def _size(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value <= 2**64 - 1:
        raise _Malformed(f"{what} must be an integer in [0, 2**64 - 1]")
    return value


def _object(data: bytes, members: Iterable[str], limits: JsonLimits) -> dict[str, Any]:
    """One JSON object with exactly ``members``; _Malformed otherwise."""
    try:
        value = parse_json(data, limits)
    except FairshoeError as exc:
        raise _Malformed(str(exc)) from None
    if type(value) is not dict:
        raise _Malformed("is not a JSON object")
    wanted = set(members)
    if set(value) != wanted:
        index = value.get("index")
        extra, missing = sorted(set(value) - wanted), sorted(wanted - set(value))
        what = f"member {tok(extra[0])} is not expected" if extra else f"{missing[0]} is missing"
        raise _Malformed(what, index if type(index) is int else None)
    return value


def _parse_line(raw: bytes, root_key: str) -> _Listed:
    """A line of leaves.jsonl of the collection whose :func:`path_key` is ``root_key``;
    _Malformed if it is not one."""
    if len(raw) > MAX_LINE_BYTES:
        raise _Malformed(f"is longer than {MAX_LINE_BYTES} bytes")
    value = _object(raw, ("index", "path", "proof"), _LINE_LIMITS)
    index = _size(value["index"], "index")
    try:
        path = value["path"]
        if type(path) is not str:
            raise _Malformed("path must be a string")
        proof = _hashes(value["proof"], "proof", MAX_PROOF_HASHES)
    except _Malformed as exc:
        raise _Malformed(exc.message, index) from None
    try:
        directory, name = _leaf_parts(path)
    except _BadLeaf as exc:
        return _Listed(index, path, proof, "", (exc.field, exc.message))
    # path_key(root / directory / name), as the walk spells the file (Auditor._file_key):
    # both parts are plain names, so normalising the root is normalising the whole
    return _Listed(index, path, proof, os.path.join(root_key, directory, name), None)


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

    def lines(self, chunk: tuple[str, list[bytes]]) -> list[_Listed | _Unread]:
        """The lines ``(root_key, raws)`` read; the first that ends the reading is the last."""
        root_key, raws = chunk
        bound = self.clock.bound()
        out: list[_Listed | _Unread] = []
        for raw in raws:
            try:
                with bound:
                    out.append(_parse_line(raw, root_key))
            except _Malformed as exc:
                out.append(_Unread(exc.message, exc.index))
                break
            except FileTimeout:
                out.append(_Unread(self.clock.too_slow, None))
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


class _Lines:
    """leaves.jsonl's lines, read in chunks as the workers take them (each line within the
    per-file bound), and why the reading stopped before the end of the file, if it did."""

    def __init__(self, fh: BinaryIO, root_key: str, clock: FileClock) -> None:
        self._fh = fh
        self._root_key = root_key
        self._clock = clock
        #: the reading stopped: the file cannot be read (OSError), or a line took too long
        self.stopped: OSError | FileTimeout | None = None

    def chunks(self) -> Iterator[tuple[str, list[bytes]]]:
        bound = self._clock.bound()
        while self.stopped is None:
            raws: list[bytes] = []
            size, full = 0, False
            try:
                while not full:
                    with bound:
                        raw = self._fh.readline(MAX_LINE_BYTES + 1)
                    if not raw:
                        break
                    raws.append(raw)
                    size += len(raw)
                    full = len(raws) >= LINES_PER_CHUNK or size >= BYTES_PER_CHUNK
            except (OSError, FileTimeout) as exc:
                self.stopped = exc
            if raws:
                yield self._root_key, raws
            if not full:
                return


def _leaf_parts(text: str) -> tuple[str, str]:
    """``<dir>/<file>`` of a listed path, the directory one of the leaves'; _BadLeaf otherwise."""
    shown = tok(text)
    if len(text) > _MAX_PATH_CHARS:
        raise _BadLeaf("path", f"is longer than {_MAX_PATH_CHARS} characters")
    if text.startswith("/"):
        raise _BadLeaf("path", f"{shown} is absolute: a leaf's path is relative to the "
                       "collection")
    parts = text.split("/")
    if len(parts) != 2 or any(p in ("", ".", "..") for p in parts) or "\x00" in text:
        raise _BadLeaf("path", f"{shown} is not <directory>/<file> inside the collection")
    if parts[0] not in LEAF_DIRS.values():
        raise _BadLeaf("path", f"{shown} is not in a directory of signed envelopes "
                       f"({', '.join(sorted(LEAF_DIRS.values()))})")
    return parts[0], parts[1]


def _absent(path: Path) -> str:
    """Why a listed file was not among the envelopes the audit read."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "does not exist in the collection"
    if stat.S_ISLNK(mode):
        return "is a symbolic link: not read"
    return "was not read as a signed envelope (see its own line)"


class LogAudit(Named):
    """The log checks of one collection ``root`` (module docstring). ``files`` holds every
    envelope file the audit read, by :func:`path_key`, in the scratch store ``spill``, where
    the leaves listed are kept too; :meth:`run` returns the findings, the log's and its
    leaves', all written under the check name ``log``."""

    name = "log"

    def __init__(self, root: Path, files: KeyedValues[LeafFile], source: LogSource,
                 context: LogContext, spill: SpillDb, *, state: AuditState | None = None,
                 keep_nodes: bool = False, workers: Workers | None = None) -> None:
        self.spill = spill
        #: the processes the per-leaf work goes to (they know :func:`leaf_tasks`); without
        #: them it is done here
        self.workers = workers or Workers(1, leaf_tasks(context.clock))
        self.root = root
        self.log_dir = root / LOG_SUBDIR
        self.leaves_path = self.log_dir / LOG_LEAVES_FILE
        self.files = files
        self.source = source
        self.context = context
        self.findings: list[Finding] = []
        self.summary = ""
        #: with a checkpoint given: what was judged of the collection's completeness against it
        self.completeness: Completeness | None = None
        self.leaf_failures = 0
        self._verifiers: list[NoteVerifier] = []
        self._notes: dict[Path, bytes] = {}
        #: the state an earlier audit saved, given as --since: its checkpoint is the one since
        self.state = state
        self._keep_nodes = keep_nodes
        #: once the checkpoint given verified: it, and its note's bytes
        self.head: Checkpoint | None = None
        self.head_note = b""
        #: every listed leaf's index, by path_key
        self.listed: KeyedValues[int] = KeyedValues(spill)
        #: with keep_nodes, the tree's nodes as far as the export (and the state) show them, so
        #: that a later audit's state can prove its leaves in the checkpoint given
        self.partial: PartialTree | None = None
        #: the witnesses whose cosignatures on the checkpoint given verified (a quorum)
        self.cosigned: list[str] = []

    def _walk(self, expected: int, *, complete: bool, tree: CompactRange | None) -> _Walk:
        return _Walk(expected, complete, tree, KeyedValues(self.spill), Appended(self.spill))

    # --- reporting

    def _fail(self, path: Path, field: str | None, message: str) -> None:
        self.findings.append(Finding("log", str(path), path, Status.FAIL, field, message,
                                     check=self.name))

    def _leaf_fail(self, index: int, field: str | None, message: str) -> None:
        self.leaf_failures += 1
        if self.leaf_failures <= MAX_LEAF_LINES:
            self.findings.append(Finding("leaf", str(index), self.leaves_path, Status.FAIL, field,
                                         message, check=self.name))

    @property
    def failed(self) -> bool:
        """True once any check of the log failed."""
        return any(f.status is not Status.OK for f in self.findings)

    # --- the run

    def run(self) -> list[Finding]:
        """Check the log of the collection; the findings (FAIL lines, or one OK line)."""
        if self.source.checkpoint is not None:
            self.completeness = Completeness(None, 0, complete=False)
        try:
            mode = self.log_dir.lstat().st_mode
        except OSError:
            self._fail(self.root, LOG_SUBDIR, "is missing: the collection has no log, so its "
                       "completeness cannot be shown (export it with its log)")
            return self.findings
        if not stat.S_ISDIR(mode):
            self._fail(self.log_dir, None, "is a symbolic link or not a directory: not read")
            return self.findings
        try:
            self._verifiers = [checkpoint_verifier(pk, self.source.origin)
                               for pk in self.context.trusted.values()]
        except FairshoeError as exc:
            self._fail(self.log_dir, "origin", f"{tok(self.source.origin)}: {exc}")
            return self.findings
        if self.source.checkpoint is None:
            self._run_own()
        else:
            self._run_against(self.source.checkpoint)
        self._finish()
        return self.findings

    def _run_own(self) -> None:
        """No checkpoint from the auditor: inclusion in the collection's own checkpoint only."""
        own = self.log_dir / LOG_CHECKPOINT_FILE
        self._adopt_collection_origin(own)
        head = self._checkpoint(own, follow=False)
        if head is None:
            return
        walk = self._leaves(head, self._walk(0, complete=False, tree=None))
        self._order(walk, from_zero=False)
        unlisted = sum(1 for _ in self.files.keys_absent(walk.listed, self._under_root()))
        extra = f"; {unlisted} envelope files not in it" if unlisted else ""
        self.summary = (f"log {tok(head.origin)}: {walk.order.count} leaves, each proven in the "
                        f"collection's own checkpoint (size {head.size}){extra}")

    def _adopt_collection_origin(self, own: Path) -> None:
        """A collection made by ``fairshoe collect rounds`` has a log of its own, of origin
        ``<base>/collect/<id>`` (:mod:`rng_service.records.logged`), never an operator's: its own
        checkpoint is checked under that origin (still signed by a trusted key), so a lab need
        not name it. Against an auditor's checkpoint the origin stays the one named."""
        base = self.source.origin.rsplit("/", 1)[0]
        try:
            claimed = parse_checkpoint(read_file(own, limit=MAX_NOTE_BYTES)).checkpoint.origin
        except (Unreadable, FairshoeError):
            return  # _checkpoint reports it
        if _COLLECT_ORIGIN.fullmatch(claimed.removeprefix(f"{base}/")) and claimed.startswith(
                f"{base}/"):
            self.source = dataclasses.replace(self.source, origin=claimed)
            self._verifiers = [checkpoint_verifier(pk, claimed)
                               for pk in self.context.trusted.values()]

    def _run_against(self, given: Path) -> None:
        head = self._checkpoint(given, follow=True)
        since = None
        if self.source.since is not None:
            if self.state is None and is_state_file(self.source.since):
                return  # a state refused: its FAIL line says why
            since = self._checkpoint(self.source.since, follow=True,
                                     note=self.state.note if self.state else None)
        if head is None or (self.source.since is not None and since is None):
            return
        self.head, self.head_note = head, self._notes[given]
        self._cosigned(given, head)
        self.completeness = Completeness(head.size, since.size if since else 0, complete=False)
        proven = self._own_head(head)
        if since is not None:
            self._same_size(since, head, given)
            self._consistency(since, head)
        tree = self._frontier(head, since)
        if tree is None:
            return
        first = tree.size  # the walk appends to the tree
        if self._keep_nodes:
            self._keep_from(tree)
        walk = self._leaves(head, self._walk(first, complete=True, tree=tree), proven)
        self.listed = walk.listed
        self._complete(head, walk)
        self._order(walk, from_zero=first == 0)
        self._unlisted(walk)
        if not self.failed and self.leaf_failures == 0:
            origin = f" (consistent with {tok(self.source.since)})" if since else ""
            if self.cosigned:
                origin += f"; cosigned by {', '.join(map(tok, self.cosigned))}"
            self.findings.append(Finding(
                "log", head.origin, given, Status.OK,
                message=f"leaves [{first}, {head.size}) complete: every leaf listed once, "
                        f"in order, proven and present; root {head.root_hash.hex()[:16]}..."
                        f"{origin}", check=self.name))
        complete = not self.failed and self.leaf_failures == 0
        self.completeness = Completeness(head.size, first, complete)
        self.summary = (f"log {tok(head.origin)}: leaves [{first}, {head.size}) "
                        + ("complete against the checkpoint given" if complete
                           else "NOT complete")
                        + (f"; cosigned by {', '.join(map(tok, self.cosigned))}"
                           if self.cosigned else ""))

    def _cosigned(self, given: Path, head: Checkpoint) -> None:
        """The checkpoint given carries cosignatures of at least a quorum of the witnesses
        given: each of them saw this tree consistent with every earlier one shown to it, so a
        tree shown to this auditor alone (a split view) lacks them."""
        witnesses = self.source.witnesses
        if not witnesses:
            return
        not_after = int(self.context.not_after.timestamp())
        try:
            found = verify_cosignatures(self.head_note, witnesses, not_after=not_after)
        except FairshoeError as exc:
            self._fail(given, "cosignature", str(exc))
            return
        names = ", ".join(tok(c.cosigner.name) for c in found) or "none"
        if len(found) < self.source.quorum:
            self._fail(given, "cosignature", f"{len(found)} of the {len(witnesses)} witnesses "
                       f"given cosigned it ({names}), fewer than the quorum of "
                       f"{self.source.quorum}: no witness quorum vouches that this tree of "
                       f"{head.size} leaves is the one every other reader sees")
            return
        self.cosigned = [c.cosigner.name for c in found]

    def _keep_from(self, tree: CompactRange) -> None:
        """Keep the tree's nodes from the frontier on, and those the state's proofs show (each
        proven already in the state's checkpoint, whose root the frontier has)."""
        self.partial = PartialTree(tree)
        for shoe in self.state.shoes if self.state else ():
            for leaf in shoe.leaves:
                try:
                    self.partial.add_proof(leaf.index, leaf.leaf_hash, leaf.proof)
                except FairshoeError as exc:
                    self._fail(self.state.path if self.state else self.log_dir, None,
                               f"leaf {leaf.index}: {exc}")
                    self.partial = None
                    return

    def _own_head(self, head: Checkpoint) -> Checkpoint:
        """The tree head the listed proofs are for: the one given, unless the collection's own
        checkpoint verifies and differs. Then the collection is of another tree (a log rewritten,
        or an export older or newer than the checkpoint): a FAIL line says so, the proofs still
        show which files are the leaves of the export's tree, and completeness is judged against
        the checkpoint given by the indices and the root recomputed."""
        own_path = self.log_dir / LOG_CHECKPOINT_FILE
        if not os.path.lexists(own_path):
            return head
        own = self._checkpoint(own_path, follow=False)
        if own is None or (own.size, own.root_hash) == (head.size, head.root_hash):
            return head
        self._fail(own_path, None, f"is a tree head of size {own.size}, the checkpoint given one "
                   f"of size {head.size} with another root: the collection was exported from "
                   "another tree (export again, or a log rewritten); its proofs are checked "
                   "against its own checkpoint")
        return own

    def _finish(self) -> None:
        hidden = self.leaf_failures - MAX_LEAF_LINES
        if hidden > 0:
            self._fail(self.leaves_path, None, f"{hidden} more leaves fail (only the first "
                       f"{MAX_LEAF_LINES} are shown)")

    # --- checkpoints, frontier, consistency proof

    def _checkpoint(self, path: Path, *, follow: bool, note: bytes | None = None
                    ) -> Checkpoint | None:
        """The checkpoint in ``path`` (or ``note``, read from it already) once a trusted key
        signed it as the operator's log's."""
        try:
            with self.context.clock.bound():
                if note is None:
                    note = read_file(path, follow=follow, limit=MAX_NOTE_BYTES)
                claimed = parse_checkpoint(note).checkpoint
                if claimed.origin != self.source.origin:
                    raise _Malformed(f"is a checkpoint of the log {tok(claimed.origin)}, not of "
                                     f"the operator's log {tok(self.source.origin)} (--operator, "
                                     "--log-origin)")
                head = verify_checkpoint(note, self._verifiers, origin=self.source.origin)
                self._check_time(note, head)
                self._notes[path] = note
                return head
        except (Unreadable, _Malformed, FairshoeError) as exc:
            self._fail(path, None, exc.message if isinstance(exc, _Malformed) else str(exc))
        except FileTimeout:
            self._fail(path, None, self.context.clock.too_slow)
        return None

    def _check_time(self, note: bytes, head: Checkpoint) -> None:
        """A checkpoint's time is not in the future, and a key that signed it was valid then."""
        if head.time is None:
            return
        stamp = format_time(head.time)
        if head.time > self.context.not_after:
            raise _Malformed(f"is dated {stamp}, in the future")
        signers = [kid for kid, pk in self.context.trusted.items() if self._signed_by(note, pk)]
        if not any(self.context.validity.get(kid, ALWAYS_VALID).covers(head.time)
                   for kid in signers):
            periods = "; ".join(f"{kid} {self.context.validity.get(kid, ALWAYS_VALID).describe()}"
                                for kid in signers)
            raise _Malformed(f"is dated {stamp}, outside the validity of the key that signed it "
                             f"({periods})")

    def _signed_by(self, note: bytes, public_key: Ed25519PublicKey) -> bool:
        try:
            verify_checkpoint(note, [checkpoint_verifier(public_key, self.source.origin)])
        except FairshoeError:
            return False
        return True

    def _same_size(self, since: Checkpoint, head: Checkpoint, given: Path) -> None:
        """Two signed trees of one size with two roots: the log forked (a split view), said
        as such whatever the collection holds."""
        if since.size == head.size and since.root_hash != head.root_hash:
            self._fail(given, None, f"is a tree of {head.size} leaves, as --since is, with "
                       "another root: the operator signed two different logs of one size "
                       "(a split view)")

    def _frontier(self, head: Checkpoint, since: Checkpoint | None) -> CompactRange | None:
        """The compact range of the leaves before the export's first, checked against ``since``
        (or empty without it); None after a FAIL line."""
        path = self.log_dir / LOG_FRONTIER_FILE
        try:
            with self.context.clock.bound():
                tree = self._read_frontier(path)
                self._frontier_fits(tree, head, since)
                return tree
        except (Unreadable, _Malformed) as exc:
            self._fail(path, None, exc.message if isinstance(exc, _Malformed) else str(exc))
        except FileTimeout:
            self._fail(path, None, self.context.clock.too_slow)
        return None

    @staticmethod
    def _read_frontier(path: Path) -> CompactRange:
        if not os.path.lexists(path):
            return CompactRange()  # nothing before the first leaf
        doc = _object(read_file(path, limit=_SMALL_LIMITS.max_bytes), ("size", "hashes"),
                      _SMALL_LIMITS)
        size = _size(doc["size"], "size")
        hashes = _hash_list(doc["hashes"], "hashes", 64)
        try:
            return CompactRange(size, hashes)
        except FairshoeError as exc:
            raise _Malformed(str(exc)) from None

    def _frontier_fits(self, tree: CompactRange, head: Checkpoint,
                       since: Checkpoint | None) -> None:
        if since is None:
            if tree.size:
                raise _Malformed(f"says the export starts at leaf {tree.size}, not 0: give the "
                                 "checkpoint it continues from (--since), or export from leaf 0")
            return
        if since.size > head.size:
            raise _Malformed(f"--since is of {since.size} leaves, more than the checkpoint given "
                             f"({head.size})")
        if tree.size != since.size:
            raise _Malformed(f"stands for leaves [0, {tree.size}), but --since is of "
                             f"{since.size} leaves: the export does not start where it ends")
        if tree.root() != since.root_hash:
            raise _Malformed(f"leaves [0, {tree.size}) do not hash to the root of --since: the "
                             "log before the export is not the tree --since signed (a forged "
                             "frontier, or a log rewritten since)")

    def _consistency(self, since: Checkpoint, head: Checkpoint) -> None:
        path = self.log_dir / LOG_CONSISTENCY_FILE
        if not os.path.lexists(path):
            return
        try:
            with self.context.clock.bound():
                doc = _object(read_file(path, limit=_SMALL_LIMITS.max_bytes),
                              ("from", "to", "proof"), _SMALL_LIMITS)
                old, new = _size(doc["from"], "from"), _size(doc["to"], "to")
                proof = _hash_list(doc["proof"], "proof", MAX_PROOF_HASHES)
                if (old, new) != (since.size, head.size):
                    raise _Malformed(f"proves [{old} -> {new}], not --since's {since.size} to "
                                     f"the checkpoint's {head.size}")
                verify_consistency(old, new, proof, since.root_hash, head.root_hash)
        except (Unreadable, _Malformed, FairshoeError) as exc:
            self._fail(path, None, exc.message if isinstance(exc, _Malformed) else str(exc))
        except FileTimeout:
            self._fail(path, None, self.context.clock.too_slow)

    # --- leaves.jsonl

    def _leaves(self, head: Checkpoint, walk: _Walk, proven: Checkpoint | None = None) -> _Walk:
        """Read leaves.jsonl line by line, each line within the per-file bound: the range against
        ``head``, the proofs against ``proven`` (default ``head``). The lines are parsed and
        their proofs verified by the workers (:class:`LeafWork`), a chunk at a time; they are
        taken here in the file's order, so the findings are the same for any number of them."""
        try:
            fh = open_regular(self.leaves_path)
        except Unreadable as exc:
            self._fail(self.leaves_path, None, str(exc))
            walk.broken = True
            return walk
        proven = proven or head
        clock = self.context.clock
        bound = clock.bound()
        with fh:
            lines = _Lines(fh, path_key(self.root), clock)
            for chunk in self._listed(lines, proven):
                # the leaves the chunk's files were listed as before it, looked up at once
                earlier = self._listed_before(chunk, walk)
                for line, leaf, proved in chunk:
                    if not self._more(walk):
                        break
                    walk.lines += 1
                    if isinstance(line, _Unread):
                        at = f" (leaf {line.leaf_index})" if line.leaf_index is not None else ""
                        self._fail(self.leaves_path, None,
                                   f"line {walk.lines}: {line.message}{at}")
                        walk.broken = True
                        break
                    try:
                        with bound:
                            self._leaf(line, leaf, proved, walk, head=head, proven=proven,
                                       earlier=earlier)
                    except _BadLeaf as exc:
                        self._leaf_fail(line.leaf_index, exc.field, f"{exc.message} "
                                        f"({LOG_LEAVES_FILE} line {walk.lines})")
                    except FileTimeout:
                        self._fail(self.leaves_path, None, f"line {walk.lines}: {clock.too_slow}")
                        walk.broken = True
                        break
                if walk.broken:
                    break
            if self._more(walk) and lines.stopped is not None:
                stopped = lines.stopped
                self._fail(self.leaves_path, None,
                           f"cannot be read: {stopped.strerror}" if isinstance(stopped, OSError)
                           else f"line {walk.lines}: {clock.too_slow}")
                walk.broken = True
        return walk

    def _more(self, walk: _Walk) -> bool:
        """Whether leaves.jsonl is read on: not once too many leaves failed (which ends the
        reading with a line of its own, even at the end of the file), nor once it broke."""
        if walk.broken:
            return False
        if self.leaf_failures >= MAX_LEAF_FAILURES:
            self._fail(self.leaves_path, None, f"line {walk.lines}: read no further, "
                       f"{self.leaf_failures} leaves failed")
            walk.broken = True
            return False
        return True

    @staticmethod
    def _listed_before(chunk: list[tuple[_Listed | _Unread, LeafFile | None, Proved]],
                       walk: _Walk) -> dict[str, int | None]:
        """The leaf each file a chunk of lines names was listed as before it (None: none)."""
        keys = [line.key for line, _, _ in chunk if isinstance(line, _Listed) and line.key]
        return dict(zip(keys, walk.listed.get_many(keys), strict=True))

    def _listed(self, lines: _Lines, proven: Checkpoint
                ) -> Iterator[list[tuple[_Listed | _Unread, LeafFile | None, Proved]]]:
        """leaves.jsonl a chunk at a time, in order: each line as a worker read it, the envelope
        file it names as the audit read it (None: none), and whether the worker found that its
        proof proves that file's leaf hash in ``proven`` (asked only of a file read)."""
        taken: deque[tuple[list[_Listed | _Unread], list[LeafFile | None]]] = deque()

        def asked(read: Iterator[list[_Listed | _Unread]]
                  ) -> Iterator[tuple[int, bytes, list[tuple[bytes, int, bytes]]]]:
            for chunk in read:
                keys = [line.key for line in chunk if isinstance(line, _Listed) and line.key]
                found = dict(zip(keys, self.files.get_many(keys), strict=True))
                leaves = [found.get(line.key) if isinstance(line, _Listed) else None
                          for line in chunk]
                taken.append((chunk, leaves))
                yield proven.size, proven.root_hash, [
                    (leaf.leaf_hash, line.leaf_index, line.proof)
                    for line, leaf in zip(chunk, leaves, strict=True)
                    if leaf is not None and isinstance(line, _Listed)]

        read = self.workers.ordered(LINES_TASK, lines.chunks())
        for proofs in self.workers.ordered(PROOFS_TASK, asked(read)):
            chunk, leaves = taken.popleft()
            proved = iter(proofs)
            yield [(line, leaf, None if leaf is None else next(proved))
                   for line, leaf in zip(chunk, leaves, strict=True)]

    def _leaf(self, line: _Listed, leaf: LeafFile | None, proved: Proved, walk: _Walk, *,
              head: Checkpoint, proven: Checkpoint, earlier: dict[str, int | None]) -> None:
        """One listed leaf, after those before it: ``leaf`` is the file it names as the audit
        read it, ``proved`` what its proof showed, ``earlier`` the leaf its file was listed as
        before (its chunk's paths, kept up to date here)."""
        index = line.leaf_index
        self._place(index, head, walk)
        if line.bad is not None:
            raise _BadLeaf(*line.bad)
        key = line.key
        also = earlier.get(key)
        if also is not None:
            walk.tree = None
            raise _BadLeaf("path", f"{tok(line.path)} is also leaf {also}: a file is one leaf")
        walk.listed[key] = earlier[key] = index
        directory, name = line.path.split("/")
        if leaf is None:
            walk.tree = None
            raise _BadLeaf("path", f"{tok(line.path)} {_absent(self.root / directory / name)}")
        if walk.tree is not None:
            walk.tree.append(leaf.leaf_hash)
            if self.partial is not None:
                self.partial.append(leaf.leaf_hash)
        walk.add(index, leaf)
        if proved is False:
            raise FileTimeout
        if proved is not None:
            raise _BadLeaf("proof", f"does not prove {tok(line.path)} is leaf {index} of the "
                           f"checkpoint's tree of {proven.size} ({proved}): the file was "
                           "replaced, moved, or inserted")
        if leaf.schema in LEAF_DIRS and LEAF_DIRS[leaf.schema] != directory:
            raise _BadLeaf("path", f"{tok(line.path)} holds a {leaf.schema} envelope, whose "
                           f"place is {LEAF_DIRS[leaf.schema]}/")

    def _place(self, index: int, head: Checkpoint, walk: _Walk) -> None:
        """The index follows the one before it (with a checkpoint: exactly, no gap)."""
        if index >= head.size:
            walk.tree = None
            raise _BadLeaf("index", f"is beyond the checkpoint's {head.size} leaves: a leaf the "
                           "checkpoint does not hold")
        if index < walk.expected:
            walk.tree = None
            after = f" after leaf {walk.expected - 1}" if walk.expected else ""
            raise _BadLeaf("index", f"is listed again or out of order{after}")
        if index > walk.expected and walk.complete:
            walk.tree = None
            self._leaf_fail(walk.expected, None, f"is missing: {LOG_LEAVES_FILE} goes on with "
                            f"leaf {index} (line {walk.lines}); leaves [{walk.expected}, {index}) "
                            "are not in the collection")
        walk.expected = index + 1

    def _complete(self, head: Checkpoint, walk: _Walk) -> None:
        if walk.broken:
            return
        if walk.expected < head.size:
            self._leaf_fail(walk.expected, None, f"is missing: {LOG_LEAVES_FILE} ends after "
                            f"{walk.lines} lines, the checkpoint holds {head.size} leaves; "
                            f"leaves [{walk.expected}, {head.size}) are not in the collection")
        elif walk.tree is not None and self.leaf_failures == 0 and \
                walk.tree.root() != head.root_hash:
            self._fail(self.leaves_path, None, "the frontier and the leaves listed do not hash "
                       "to the checkpoint's root: the collection is not the tree the checkpoint "
                       "signed (which leaf differs needs proofs in that tree: fairshoe log prove)")

    def _under_root(self) -> str:
        """What the path_key of every file below the collection root starts with."""
        return path_key(self.root) + os.sep

    def _unlisted(self, walk: _Walk) -> None:
        """Every envelope the audit read must be a listed leaf (the checkpoint covers them)."""
        if walk.broken:
            return
        shown, unlisted = smallest(self.files.keys_absent(walk.listed), MAX_LEAF_LINES)
        base = path_key(self.root)
        for key in shown:
            self._fail(self.leaves_path, None, f"does not list {tok(os.path.relpath(key, base))}: "
                       "an envelope in the collection that is no leaf of the log (an unlogged "
                       "record)")
        if unlisted > MAX_LEAF_LINES:
            self._fail(self.leaves_path, None, f"... and {unlisted - MAX_LEAF_LINES} more "
                       "unlogged envelopes")

    # --- order

    def _order(self, walk: _Walk, *, from_zero: bool) -> None:
        """A key record precedes what its key signs; a commitment its shoe's rounds and reveal.
        ``from_zero``: the log is complete from leaf 0, so a missing one fails as well."""
        keys, shoes = walk.keys, walk.shoes
        for index, leaf in walk.order:
            own_key = leaf.schema == KEY_SCHEMA and leaf.subject == leaf.signer
            if leaf.signer is not None and not own_key:
                self._before(index, keys.get(leaf.signer), from_zero, field="signature.key_id",
                             fact=f"{tok(leaf.signer)} signed this leaf", what="the key's record")
            if leaf.schema in (RECORD_SCHEMA, REVEAL_SCHEMA) and leaf.subject is not None:
                what = "round" if leaf.schema == RECORD_SCHEMA else "reveal"
                self._before(index, shoes.get(leaf.subject), from_zero, field="shoe",
                             fact=f"this {what} is of shoe {tok(leaf.subject)}",
                             what="its commitment")

    def _before(self, index: int, first: int | None, from_zero: bool, *, field: str, fact: str,
                what: str) -> None:
        if first is not None and first > index:
            self._leaf_fail(index, field, f"{fact}, but {what} is leaf {first}, after it: it "
                            "must be logged first")
        elif first is None and from_zero:
            self._leaf_fail(index, field, f"{fact}, but {what} is not in the log before it (the "
                            "log is complete from leaf 0)")
