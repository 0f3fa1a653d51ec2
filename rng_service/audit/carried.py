"""The audit's state carried between audits, and the log checks it is proven against.

:class:`CarriedState` is the part of :class:`~rng_service.audit.verifier.Auditor` that reads the
state an earlier audit saved (``--since``), adds its shoes to this audit's, runs the log checks
of each collection, and writes the state for the next audit from the shoes still in play. It is
a base class of the auditor, not an object of its own: these steps read and add to the
auditor's report, commitments and scratch store, declared below as what it relies on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.claims import claimed_int
from rng_service.audit.commitments import CommitmentIndex
from rng_service.audit.failures import AuditInputError
from rng_service.audit.files import (
    FileClock,
    FileTimeout,
    Finding,
    Status,
    Unreadable,
    is_state_file,
    read_file,
)
from rng_service.audit.log_audit import Completeness, LogAudit, LogContext
from rng_service.audit.log_lines import LeafFile, LeafRow, path_key
from rng_service.audit.options import AuditOptions
from rng_service.audit.pieces import pending_round
from rng_service.audit.report import AuditReport
from rng_service.audit.round_checks import Pending
from rng_service.audit.spill import KeyedValues, SortedRuns, SpillDb
from rng_service.audit.state import (
    AuditState,
    CarriedLeaf,
    CarriedShoe,
    StateError,
    StateRead,
    StateSave,
    read_state,
    state_text,
)
from rng_service.audit.times import Times
from rng_service.audit.workers import Workers
from rng_service.core.errors import FairshoeError
from rng_service.core.text import token
from rng_service.core.times import CLOCK_SKEW
from rng_service.crypto.signing import decode_envelope
from rng_service.log import checkpoint_verifier, leaf_hash
from rng_service.records.schema import RECORD_SCHEMA, SHOE_COMMITMENT_SCHEMA


class CarriedState:
    """The ``--since`` state read and carried, the log checks run, the next state written."""

    # what the auditor holds and these steps use (set in Auditor.__init__ and run)
    trusted: Mapping[str, Ed25519PublicKey]
    options: AuditOptions
    times: Times
    clock: FileClock
    report: AuditReport
    commitments: CommitmentIndex
    leaf_files: KeyedValues[LeafRow] | None
    log_roots: list[Path]
    state: AuditState | None
    _carried: dict[Path, CarriedLeaf]
    _judged: LogAudit | None
    _open_rounds: dict[str, list[Path]]
    _spill: SpillDb | None

    def _add(self, kind: str, ident: str, path: Path, status: Status, field: str | None = None,
             *, message: str = "", check: str) -> Finding:
        raise NotImplementedError  # the auditor's: a finding added to its report

    def _claim(self, round_id: str, data: bytes | None) -> None:
        raise NotImplementedError  # the auditor's: a round queued for pass 2 claims its id

    def _read_state(self) -> None:
        """Read and verify the state given as --since (a checkpoint note is the log checks')."""
        source = self.options.log
        if source.since is None or source.checkpoint is None or not is_state_file(source.since):
            return
        try:
            verifiers = [checkpoint_verifier(pk, source.origin) for pk in self.trusted.values()]
            with self.clock.bound():
                self.state = read_state(source.since, verifiers, source.origin)
        except StateError as exc:
            self._add("state", str(source.since), source.since, Status.FAIL, exc.field,
                      message=exc.message, check=StateRead.name)
        except FairshoeError as exc:  # an origin no checkpoint can have; the log checks say so
            self._add("state", str(source.since), source.since, Status.FAIL, "origin",
                      message=str(exc), check=StateRead.name)
        except FileTimeout:
            self.report.findings.append(
                self.clock.too_slow_finding("state", str(source.since), source.since))

    def _carry(self, pending: SortedRuns[Pending]) -> None:
        """The state's shoes join the collection's: commitments to the index, rounds to the
        queue, each named ``<state>#leaf<index>``."""
        if self.state is None:
            return
        for shoe in self.state.shoes:
            for leaf in shoe.leaves:
                path = Path(f"{self.state.path}#leaf{leaf.index}")
                self._carried[path] = leaf
                envelope = decode_envelope(leaf.data)  # read_state decoded it already
                if leaf.schema == SHOE_COMMITMENT_SCHEMA:
                    self.report.findings.extend(self.commitments.add(path, envelope))
                else:
                    carried = pending_round(path, envelope["payload"], data=leaf.data)
                    self._claim(carried.round_id, carried.data)
                    pending.add(carried)

    def _next_state(self) -> str | None:
        """The state for the next audit: every shoe in play at the checkpoint, its commitment
        and rounds proven in it. None unless the audit passed against a checkpoint."""
        log = self._judged
        if not self.report.passed or log is None or log.head is None or log.partial is None:
            return None
        if (log.partial.size, log.partial.root()) != (log.head.size, log.head.root_hash):
            return None
        shoes = []
        for shoe_id in self.report.open_shoes:
            paths = [self.commitments.path_of(shoe_id), *self._open_rounds.get(shoe_id, [])]
            try:
                leaves = sorted((self._proven(path, log) for path in paths),
                                key=lambda leaf: leaf.index)
            except (Unreadable, AuditInputError, FairshoeError) as exc:
                self._add("state", shoe_id, paths[0], Status.FAIL,
                          message=f"cannot be saved: {exc}", check=StateSave.name)
                return None
            ends = [claimed_int(decode_envelope(leaf.data)["payload"].get("shoe"), "end")
                    for leaf in leaves if leaf.schema == RECORD_SCHEMA]
            shoes.append(CarriedShoe(shoe_id, ends[-1] if ends else 0, tuple(leaves)))
        return state_text(log.head_note, log.head, shoes)

    def _proven(self, path: Path, log: LogAudit) -> CarriedLeaf:
        """One leaf of a shoe in play, with its proof in the checkpoint the audit verified."""
        assert log.partial is not None and self.leaf_files is not None
        leaf = self._carried.get(path)
        if leaf is None:
            key = path_key(path)
            data = read_file(path)
            row, index = self.leaf_files.get(key), log.listed.get(key)
            if row is None or index is None:  # the audit passed: every file is a leaf
                raise AuditInputError(f"{token(str(path))} is not a leaf of the log")
            read = LeafFile(*row)
            if leaf_hash(data) != read.leaf_hash:
                raise AuditInputError(f"{token(str(path))} changed during the audit")
            leaf = CarriedLeaf(index, data, (), read.schema or "")
        return dataclasses.replace(leaf, proof=tuple(log.partial.inclusion_proof(leaf.index)))

    def _check_logs(self, paths: list[Path], workers: Workers) -> list[Finding]:
        """The log checks' findings: of the one collection named, against the auditor's
        checkpoint if one is given; else of every collection with a log/, against its own
        checkpoint. (The summary's log notes and completeness are set here.) Each leaf's line
        is read and its proof verified by the ``workers``."""
        source = self.options.log
        context = LogContext(self.trusted, self.options.validity, self.times.now + CLOCK_SKEW,
                             self.clock)
        roots = self.log_roots
        findings: list[Finding] = []
        if source.checkpoint is not None:
            if len(paths) != 1 or not paths[0].is_dir():
                self.report.completeness = Completeness(None, 0, complete=False)
                return [Finding("log", str(source.checkpoint), source.checkpoint, Status.FAIL,
                                message="a checkpoint judges one collection: name exactly one "
                                        "collection directory", check=LogAudit.name)]
            roots = [paths[0]]
        assert self.leaf_files is not None and self._spill is not None
        for root in roots:
            log = LogAudit(root, self.leaf_files, source, context, self._spill,
                           state=self.state, keep_nodes=self.options.save_state,
                           workers=workers)
            if source.checkpoint is not None:
                self._judged = log
            findings.extend(log.run())
            if log.summary:
                self.report.log_notes.append(log.summary)
            if log.completeness is not None:
                self.report.completeness = log.completeness
        return findings

