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
proof verified: ``log_lines.LeafWork``) is done by the audit's workers, a chunk of lines at a
time (``log_lines.LINES_PER_CHUNK``); the rest is done here, line after line in the file's
order, so the findings are the same for any number of workers.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import stat
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

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
from rng_service.audit.log_lines import (
    COLLECT_ORIGIN,
    LEAF_DIRS,
    LINES_TASK,
    MAX_LEAF_FAILURES,
    MAX_LEAF_LINES,
    PROOFS_TASK,
    SMALL_LIMITS,
    BadLeaf,
    LeafFile,
    LeafRow,
    Lines,
    Listed,
    Malformed,
    Proved,
    Unread,
    leaf_tasks,
    path_key,
    read_hashes,
    read_object,
    read_size,
    why_absent,
)
from rng_service.audit.spill import Appended, KeyedValues, SpillDb, smallest
from rng_service.audit.workers import Workers
from rng_service.core.errors import FairshoeError
from rng_service.crypto.keys import ALWAYS_VALID, KeyValidity
from rng_service.log import (
    Checkpoint,
    CompactRange,
    checkpoint_verifier,
    parse_checkpoint,
    verify_checkpoint,
    verify_consistency,
)
from rng_service.log.checkpoint import format_time
from rng_service.log.cosignature import Cosigner, verify_cosignatures
from rng_service.log.note import MAX_NOTE_BYTES, NoteVerifier
from rng_service.log.partial import PartialTree
from rng_service.log.proofs import MAX_PROOF_HASHES
from rng_service.records.schema import (
    KEY_SCHEMA,
    LOG_CHECKPOINT_FILE,
    LOG_CONSISTENCY_FILE,
    LOG_FRONTIER_FILE,
    LOG_LEAVES_FILE,
    LOG_SUBDIR,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    SHOE_COMMITMENT_SCHEMA,
)

if TYPE_CHECKING:  # the state reads envelopes as the audit does (claims, which imports this)
    from rng_service.audit.state import AuditState

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


#: the bits of the filter of the files listed (:attr:`_Walk.seen`): a megabyte, whatever the log
_LISTED_BITS = 1 << 23


@dataclass
class _Walk:
    """How far the reading of leaves.jsonl got."""

    expected: int
    complete: bool  # the range must be contiguous (a checkpoint was given)
    tree: CompactRange | None
    listed: KeyedValues[int]  # path key -> leaf index
    #: the leaves listed whose order is judged once every leaf is listed (plain tuples, in
    #: order): those listed before the key record or commitment that must precede them
    later: Appended[tuple[int, LeafRow]]
    lines: int = 0
    broken: bool = False  # a malformed line ended the reading
    #: the leaves listed
    count: int = 0
    #: the first leaf of each key's record and of each shoe's commitment among those listed,
    #: kept as they are listed (the order checks look them up: :meth:`LogAudit._order`)
    keys: dict[str, int] = dataclasses.field(default_factory=dict)
    shoes: dict[str, int] = dataclasses.field(default_factory=dict)
    #: a bit for each file listed, at its key's hash (some shared), as the scratch store's
    #: filters (:class:`~rng_service.audit.spill.FirstSeen`): a file whose bit is clear was
    #: not listed before, and is not looked up (every file is listed once but a duplicate's)
    seen: bytearray = dataclasses.field(
        default_factory=lambda: bytearray(_LISTED_BITS // 8))

    def list_file(self, key: str, index: int) -> None:
        """The file of ``key`` listed as leaf ``index``."""
        self.listed.put_pickled(key, pickle.dumps(index, pickle.HIGHEST_PROTOCOL))
        bit = hash(key) & (_LISTED_BITS - 1)
        self.seen[bit >> 3] |= 1 << (bit & 7)

    def listed_before(self, keys: list[str]) -> dict[str, int | None]:
        """The leaf each file of ``keys`` was listed as (None: none), looked up at once."""
        earlier: dict[str, int | None] = dict.fromkeys(keys)
        seen, mask = self.seen, _LISTED_BITS - 1
        maybe = [key for key in earlier
                 if seen[(hash(key) & mask) >> 3] & (1 << (hash(key) & 7))]
        if maybe:
            earlier.update(zip(maybe, self.listed.get_many(maybe), strict=True))
        return earlier

    def add(self, index: int, leaf: LeafFile) -> None:
        """One more leaf listed, in order (its index above every one listed before it).

        Its order is judged now if the key record and the commitment it needs are listed
        already: the first of each is then before it, whatever is listed later, so it passes.
        Else it is kept for :meth:`LogAudit._order`, which judges it with the leaves' firsts
        as they end up: in a log in order none is kept, and the audit's own process does not
        keep, nor read again, a row for every leaf."""
        self.count += 1
        schema, signer, subject = leaf.schema, leaf.signer, leaf.subject
        if subject is not None:
            if schema == KEY_SCHEMA:
                self.keys.setdefault(subject, index)
            elif schema == SHOE_COMMITMENT_SCHEMA:
                self.shoes.setdefault(subject, index)
        if ((signer is not None and signer not in self.keys
             and not (schema == KEY_SCHEMA and subject == signer))
                or (subject is not None and subject not in self.shoes
                    and schema in (RECORD_SCHEMA, REVEAL_SCHEMA))):
            self.later.append((index, leaf[:]))  # a plain tuple: LeafRow


class LogAudit(Named):
    """The log checks of one collection ``root`` (module docstring). ``files`` holds every
    envelope file the audit read, by :func:`path_key`, in the scratch store ``spill``, where
    the leaves listed are kept too; :meth:`run` returns the findings, the log's and its
    leaves', all written under the check name ``log``."""

    name = "log"

    def __init__(self, root: Path, files: KeyedValues[LeafRow], source: LogSource,
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
        self.summary = (f"log {tok(head.origin)}: {walk.count} leaves, each proven in the "
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
        if COLLECT_ORIGIN.fullmatch(claimed.removeprefix(f"{base}/")) and claimed.startswith(
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
                    raise Malformed(f"is a checkpoint of the log {tok(claimed.origin)}, not of "
                                     f"the operator's log {tok(self.source.origin)} (--operator, "
                                     "--log-origin)")
                head = verify_checkpoint(note, self._verifiers, origin=self.source.origin)
                self._check_time(note, head)
                self._notes[path] = note
                return head
        except (Unreadable, Malformed, FairshoeError) as exc:
            self._fail(path, None, exc.message if isinstance(exc, Malformed) else str(exc))
        except FileTimeout:
            self._fail(path, None, self.context.clock.too_slow)
        return None

    def _check_time(self, note: bytes, head: Checkpoint) -> None:
        """A checkpoint's time is not in the future, and a key that signed it was valid then."""
        if head.time is None:
            return
        stamp = format_time(head.time)
        if head.time > self.context.not_after:
            raise Malformed(f"is dated {stamp}, in the future")
        signers = [kid for kid, pk in self.context.trusted.items() if self._signed_by(note, pk)]
        if not any(self.context.validity.get(kid, ALWAYS_VALID).covers(head.time)
                   for kid in signers):
            periods = "; ".join(f"{kid} {self.context.validity.get(kid, ALWAYS_VALID).describe()}"
                                for kid in signers)
            raise Malformed(f"is dated {stamp}, outside the validity of the key that signed it "
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
        except (Unreadable, Malformed) as exc:
            self._fail(path, None, exc.message if isinstance(exc, Malformed) else str(exc))
        except FileTimeout:
            self._fail(path, None, self.context.clock.too_slow)
        return None

    @staticmethod
    def _read_frontier(path: Path) -> CompactRange:
        if not os.path.lexists(path):
            return CompactRange()  # nothing before the first leaf
        doc = read_object(read_file(path, limit=SMALL_LIMITS.max_bytes), ("size", "hashes"),
                      SMALL_LIMITS)
        size = read_size(doc["size"], "size")
        hashes = read_hashes(doc["hashes"], "hashes", 64)
        try:
            return CompactRange(size, hashes)
        except FairshoeError as exc:
            raise Malformed(str(exc)) from None

    def _frontier_fits(self, tree: CompactRange, head: Checkpoint,
                       since: Checkpoint | None) -> None:
        if since is None:
            if tree.size:
                raise Malformed(f"says the export starts at leaf {tree.size}, not 0: give the "
                                 "checkpoint it continues from (--since), or export from leaf 0")
            return
        if since.size > head.size:
            raise Malformed(f"--since is of {since.size} leaves, more than the checkpoint given "
                             f"({head.size})")
        if tree.size != since.size:
            raise Malformed(f"stands for leaves [0, {tree.size}), but --since is of "
                             f"{since.size} leaves: the export does not start where it ends")
        if tree.root() != since.root_hash:
            raise Malformed(f"leaves [0, {tree.size}) do not hash to the root of --since: the "
                             "log before the export is not the tree --since signed (a forged "
                             "frontier, or a log rewritten since)")

    def _consistency(self, since: Checkpoint, head: Checkpoint) -> None:
        path = self.log_dir / LOG_CONSISTENCY_FILE
        if not os.path.lexists(path):
            return
        try:
            with self.context.clock.bound():
                doc = read_object(read_file(path, limit=SMALL_LIMITS.max_bytes),
                              ("from", "to", "proof"), SMALL_LIMITS)
                old, new = read_size(doc["from"], "from"), read_size(doc["to"], "to")
                proof = read_hashes(doc["proof"], "proof", MAX_PROOF_HASHES)
                if (old, new) != (since.size, head.size):
                    raise Malformed(f"proves [{old} -> {new}], not --since's {since.size} to "
                                     f"the checkpoint's {head.size}")
                verify_consistency(old, new, proof, since.root_hash, head.root_hash)
        except (Unreadable, Malformed, FairshoeError) as exc:
            self._fail(path, None, exc.message if isinstance(exc, Malformed) else str(exc))
        except FileTimeout:
            self._fail(path, None, self.context.clock.too_slow)

    # --- leaves.jsonl

    def _leaves(self, head: Checkpoint, walk: _Walk, proven: Checkpoint | None = None) -> _Walk:
        """Read leaves.jsonl line by line, each line within the per-file bound: the range against
        ``head``, the proofs against ``proven`` (default ``head``). The lines are parsed and
        their proofs verified by the workers (``log_lines.LeafWork``), a chunk at a time; they are
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
            lines = Lines(fh, path_key(self.root), clock)
            for chunk in self._listed(lines, proven):
                # the leaves the chunk's files were listed as before it, looked up at once
                earlier = self._listed_before(chunk, walk)
                for line, leaf, proved in chunk:
                    # _more's own test first: it is asked of every leaf
                    if (walk.broken or self.leaf_failures >= MAX_LEAF_FAILURES) and \
                            not self._more(walk):
                        break
                    walk.lines += 1
                    if isinstance(line, Unread):
                        at = f" (leaf {line.leaf_index})" if line.leaf_index is not None else ""
                        self._fail(self.leaves_path, None,
                                   f"line {walk.lines}: {line.message}{at}")
                        walk.broken = True
                        break
                    try:
                        with bound:
                            self._leaf(line, leaf, proved, walk, head=head, proven=proven,
                                       earlier=earlier)
                    except BadLeaf as exc:
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
    def _listed_before(chunk: list[tuple[Listed | Unread, LeafFile | None, Proved]],
                       walk: _Walk) -> dict[str, int | None]:
        """The leaf each file a chunk of lines names was listed as before it (None: none)."""
        return walk.listed_before(
            [line.key for line, _, _ in chunk if isinstance(line, Listed) and line.key])

    def _listed(self, lines: Lines, proven: Checkpoint
                ) -> Iterator[list[tuple[Listed | Unread, LeafFile | None, Proved]]]:
        """leaves.jsonl a chunk at a time, in order: each line as a worker read it, the envelope
        file it names as the audit read it (None: none), and whether the worker found that its
        proof proves that file's leaf hash in ``proven`` (asked only of a file read)."""
        taken: deque[tuple[list[Listed | Unread], list[LeafFile | None]]] = deque()

        def asked(read: Iterator[list[Listed | Unread]]
                  ) -> Iterator[tuple[int, bytes, list[tuple[bytes, int, bytes]]]]:
            for chunk in read:
                keys = [line.key for line in chunk if isinstance(line, Listed) and line.key]
                found = {key: None if row is None else LeafFile(*row)
                         for key, row in zip(keys, self.files.get_many(keys), strict=True)}
                leaves = [found.get(line.key) if isinstance(line, Listed) else None
                          for line in chunk]
                taken.append((chunk, leaves))
                yield proven.size, proven.root_hash, [
                    (leaf.leaf_hash, line.leaf_index, line.proof)
                    for line, leaf in zip(chunk, leaves, strict=True)
                    if leaf is not None and isinstance(line, Listed)]

        read = self.workers.ordered(LINES_TASK, lines.chunks())
        for proofs in self.workers.ordered(PROOFS_TASK, asked(read)):
            chunk, leaves = taken.popleft()
            proved = iter(proofs)
            yield [(line, leaf, None if leaf is None else next(proved))
                   for line, leaf in zip(chunk, leaves, strict=True)]

    def _leaf(self, line: Listed, leaf: LeafFile | None, proved: Proved, walk: _Walk, *,
              head: Checkpoint, proven: Checkpoint, earlier: dict[str, int | None]) -> None:
        """One listed leaf, after those before it: ``leaf`` is the file it names as the audit
        read it, ``proved`` what its proof showed, ``earlier`` the leaf its file was listed as
        before (its chunk's paths, kept up to date here)."""
        index = line.leaf_index
        if index == walk.expected and index < head.size:  # the next leaf: _place passes it
            walk.expected = index + 1
        else:
            self._place(index, head, walk)
        if line.bad is not None:
            raise BadLeaf(*line.bad)
        key = line.key
        also = earlier.get(key)
        if also is not None:
            walk.tree = None
            raise BadLeaf("path", f"{tok(line.path)} is also leaf {also}: a file is one leaf")
        walk.list_file(key, index)
        earlier[key] = index
        directory, name = line.path.split("/")
        if leaf is None:
            walk.tree = None
            raise BadLeaf("path", f"{tok(line.path)} {why_absent(self.root / directory / name)}")
        if walk.tree is not None:
            walk.tree.append(leaf.leaf_hash)
            if self.partial is not None:
                self.partial.append(leaf.leaf_hash)
        walk.add(index, leaf)
        if proved is False:
            raise FileTimeout
        if proved is not None:
            raise BadLeaf("proof", f"does not prove {tok(line.path)} is leaf {index} of the "
                           f"checkpoint's tree of {proven.size} ({proved}): the file was "
                           "replaced, moved, or inserted")
        if leaf.schema in LEAF_DIRS and LEAF_DIRS[leaf.schema] != directory:
            raise BadLeaf("path", f"{tok(line.path)} holds a {leaf.schema} envelope, whose "
                           f"place is {LEAF_DIRS[leaf.schema]}/")

    def _place(self, index: int, head: Checkpoint, walk: _Walk) -> None:
        """The index follows the one before it (with a checkpoint: exactly, no gap)."""
        if index >= head.size:
            walk.tree = None
            raise BadLeaf("index", f"is beyond the checkpoint's {head.size} leaves: a leaf the "
                           "checkpoint does not hold")
        if index < walk.expected:
            walk.tree = None
            after = f" after leaf {walk.expected - 1}" if walk.expected else ""
            raise BadLeaf("index", f"is listed again or out of order{after}")
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
        ``from_zero``: the log is complete from leaf 0, so a missing one fails as well. Judged
        of the leaves listed before what must precede them (:meth:`_Walk.add`: every other
        passed as it was listed), in order."""
        keys, shoes = walk.keys, walk.shoes
        for index, row in walk.later:
            leaf = LeafFile(*row)
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
