"""The offline audit: check signed round records against revealed seeds and the game's rules.

For every round record (``rng_service.records.schema``):

1. its signature, by a key the auditor trusts (keys lying beside the records are never used);
2. the rules: ``rules_digest`` names a known rule set, one of the built-in games' or that of a
   rules document (``fairshoe.rules/v1``) found under the paths given, and it is the game named.
   A document's digest is recomputed from its content (``rules_from_dict(...).digest()``), never
   read from its file name: the signed digest is what makes an unsigned document trustworthy;
3. the shoe: it has the rules' number of decks; a reveal of it exists and is signed by a trusted
   key, its seed opens both the reveal's and the record's commitment, decks and client seed
   agree, and no other shoe id has the same commitment (a seed serves one shoe);
4. the round's place in its shoe, by the rules' shuffle policy: a shoe per round (``every_round``)
   deals exactly one round, from card 0; a cut-card shoe's rounds, ordered by ``shoe.start``,
   tile it from card 0 (each starts where the previous one ended: no burned cards, no card
   dealt twice) and each starts before the cut card (``Rules.cut_position``), so only the last may
   run past it;
5. the cards: the shoe is recomputed from (seed, client seed, decks) and every recorded card is
   compared with ``shoe[start:end]``;
6. the replay: ``game_math.Round`` is dealt the recomputed shoe from ``start`` with the recorded
   bets, and each recorded action is applied in turn: it must be awaited on the recorded hand, be
   legal, and give that hand the recorded cards. A round recorded void may stop awaiting a
   decision (a malfunction voided it mid-play); the replay is then voided with the recorded
   reason, which refuses a round the replay settled;
7. the outcome: the record is rebuilt from the replay and compared member by member (hands,
   dealer, every wager's stake, return and outcome, totals, status, end position).

Beside the replay, a record must respect what the live service enforces and what its key allows:

8. void: a round recorded void must have had no settled wager when it was voided (the live service
   refuses such a void: ``WAGER_SETTLED``), and a void round finishes its shoe, so any round of
   that shoe after it (by ``shoe.start``) fails;
9. times: ``started_at`` and ``finished_at`` are RFC 3339, in that order, no later than the
   audit's clock (:data:`CLOCK_SKEW` allowed), and a round starts no earlier than the round before
   it in its shoe finished; ``service_version`` is a version string;
10. the key's period: the signing key's validity period (:class:`AuditOptions` ``validity``, from
    the ``valid_from``/``valid_until`` of the trusted JWKs) covers ``finished_at``;
11. custom rules: a rules document under a built-in game's id whose rules are not that game's
    fails, and so does every round naming it, unless its digest is in ``allow_custom_rules``;
12. the wallet: a round played on an operator's seamless wallet names every transaction id it
    moved money under, and the debits taken add up, purpose by purpose, to the replayed stakes,
    the credit to the returns (:mod:`rng_service.audit.wallet_checks`).

Every file is read bounded (:mod:`rng_service.audit.files`: a regular file of at most
``MAX_FILE_BYTES``, opened without blocking or following links, parsed by
:mod:`rng_service.core.json_input`) and checked within a per-file time bound (``file_timeout``);
below a directory named, links, FIFOs and other special files, and directories inside a record
directory, are FAIL lines, never followed. Every line is printed escaped (:meth:`Finding.line`).

Key records (``fairshoe.key/v1``, under ``keys/``) must be signed by the key they name, which must
be the trusted key of that id (their ``jwk``), within its validity period. Shoe commitments
(``fairshoe.shoe-commitment/v1``, under ``shoes/``) must be signed by a trusted key, one per shoe
and one shoe per commitment, and a committed shoe's rounds and reveal must agree with its
commitment (commitment, decks, game, rules). A committed shoe with no reveal is in play (a live
export holds the shoe being dealt and the next one): counted in the summary, and its rounds are
OPEN, checked as far as they can be without the seed and failed by nothing else; a later audit
checks them once the shoe is revealed. A round of a shoe neither revealed nor committed is
UNREVEALED, which fails. A collection's ``log/`` is checked by :mod:`rng_service.audit.log_audit`
(completeness against the auditor's checkpoint, ``AuditOptions.log``). An audit from an earlier
audit's state on (``--since STATE``, :mod:`rng_service.audit.state`) takes the shoes in play then
as part of the collection: their commitments and rounds, verified from the state, are checked
with the export's; with ``AuditOptions.save_state`` a passing audit leaves the next state in the
report.

RNG records (``fairshoe.rng/v1``, under ``rng/``) are checked like a round, against their reveal
(``fairshoe.rng-reveal/v1``, under ``rng-reveals/``): both signatures by trusted keys, the
parameters within the convention's bounds, the reveal's seed opening the record's commitment
(:func:`rng_service.rng.draws.rng_commitment`; no two draws share one), and every result
recomputed from the seed, the kind, the parameters and the client seed by
:func:`rng_service.rng.draws.draw`, whose module docstring gives the exact byte convention. A
record without a reveal is unrevealed, so it does not pass.

The summary is a few short lines of counts, then the verdict: ``audit PASS`` or ``audit FAIL``
and what was judged, ``complete against checkpoint <size>`` (or ``NOT complete``) with
``--checkpoint``, else ``completeness not judged``.

The first disagreement is the record's failure, named by its field (``wagers[2].returned``). A
record whose shoe has no reveal yet is reported as unrevealed: it cannot be verified, so it does
not pass. Reveals and rules documents get a line of their own; a rules document whose content
does not hash to the digest its file name claims fails (it was altered). Rounds are checked
grouped by shoe, so a cut-card shoe shared by many rounds is recomputed once; a record that fails
keeps its claimed place in its shoe, so its neighbours are judged as if it were genuine.

Every file in a record directory, and every file named explicitly, must be a signed envelope (or
a rules document): anything else there fails, and a bare record or reveal payload fails as
unsigned. A record directory is a ``rounds/`` or ``reveals/`` directory that is not itself laid out
as a collection root (a directory holding ``rounds/``, ``reveals/`` or ``rules/``), and everything
below it up to the next collection root: roles are judged from the collection's own layout, so a
collection may be named ``rounds`` or kept under ``reveals/``. Elsewhere, ``*.json`` files are
read: a ``keys.jwks.json`` that is a JWK Set is passed over (keys beside the records are never
trusted), any other file that is neither an envelope nor a rules document is reported as skipped,
and a skip fails the audit.

Every check above is a named check object (:mod:`rng_service.audit.checks`), in the module of its
concern, and every finding carries the name of the check that wrote it (``Finding.check``: not
printed, so the lines are what they were): ``round.place`` for a FAIL line on a round's
``shoe.start``, ``shoe.seed`` for a reveal whose seed does not open its commitment.
:data:`rng_service.audit.checks.CHECKS` lists them all.

This module is the auditor (:class:`Auditor`, :func:`audit_paths`): it walks the paths, sorts the
files, runs each kind of record's checks in order and turns every failure into a finding. The
checks live in modules of one concern each, and the names other modules import from here are
re-exported:

- :mod:`~rng_service.audit.checks`: the one interface of a check, and their registry;
- :mod:`~rng_service.audit.walk`: which files are read, and how strictly;
- :mod:`~rng_service.audit.file_checks`: files read, and what they must be (``file.*``);
- :mod:`~rng_service.audit.claims`: what a file claims before it is verified;
- :mod:`~rng_service.audit.failures`: how a check fails (``AuditFailure``, ``Doc``, ...);
- :mod:`~rng_service.audit.round_checks`: one round against its rules and its shoe (1, 3-8:
  ``round.*``);
- :mod:`~rng_service.audit.rules_index`: the rule sets a round may name (2, 11: ``round.rules``,
  ``rules.document``);
- :mod:`~rng_service.audit.reveals`: shoe reveals and the shoe recomputed from one (3:
  ``shoe.*``, ``round.shoe``);
- :mod:`~rng_service.audit.times`: the times and the key's validity period (9, 10:
  ``round.times``, ``round.key-period``);
- :mod:`~rng_service.audit.wallet_checks`: the wallet (12: ``round.wallet``);
- :mod:`~rng_service.audit.key_records`: key records (``key.*``);
- :mod:`~rng_service.audit.commitments`: shoe commitments (``commitment.*``,
  ``round.commitment``, ``shoe.commitment``);
- :mod:`~rng_service.audit.rng_checks`: RNG draws and their reveals (``rng.*``,
  ``rng-reveal.*``);
- :mod:`~rng_service.audit.log_audit`: the log (``log``); :mod:`~rng_service.audit.state`: the
  state carried between audits (``state.*``);
- :mod:`~rng_service.audit.carried`: the auditor's steps that read that state, run the log checks
  and write the next state (:class:`~rng_service.audit.carried.CarriedState`, its base class);
- :mod:`~rng_service.audit.pass_two`: pass 2, the rounds checked shoe by shoe in the workers and
  their findings merged (:class:`~rng_service.audit.pass_two.ShoePass`, its other base class);
- :mod:`~rng_service.audit.options`: the auditor's choices (:class:`AuditOptions`);
- :mod:`~rng_service.audit.report`: the report and its summary (:class:`AuditReport`);
- :mod:`~rng_service.audit.workers` and :mod:`~rng_service.audit.pieces`: the processes, and
  what the passes hand between them (a file as pass 1 read it, the shoes' pieces, their
  results).
"""

from __future__ import annotations

import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.carried import CarriedState
from rng_service.audit.checks import Check, run_checks
from rng_service.audit.claims import label, leaf_file
from rng_service.audit.commitments import (
    Commitment,
    CommitmentIndex,
    RevealCommitment,
    RoundCommitment,
)
from rng_service.audit.failures import AuditFailure, AuditInputError
from rng_service.audit.file_checks import (
    ENVELOPE_MEMBERS,
    FileCase,
    FileReadable,
    UnknownSchema,
    unenveloped,
)
from rng_service.audit.files import (
    FileClock,
    FileTimeout,
    Finding,
    Status,
    clip,
    text_path,
)
from rng_service.audit.key_records import key_checks, key_finding
from rng_service.audit.log_audit import LogAudit
from rng_service.audit.log_lines import LeafRow, leaf_tasks, path_key
from rng_service.audit.options import DEFAULT_LOG_ORIGIN, AuditOptions
from rng_service.audit.pass_two import ShoePass
from rng_service.audit.pieces import (
    Read,
    claims_of,
    pass_two_order,
)
from rng_service.audit.report import AuditReport
from rng_service.audit.reveals import (
    Reveal,
    RevealIndex,
    RevealLine,
    RoundShoe,
    SeedOpens,
    SeedServesOneShoe,
    ShoeShuffles,
    reveal_finding,
)
from rng_service.audit.rng_checks import RngAudit
from rng_service.audit.round_checks import (
    Pending,
    RoundCards,
    RoundCase,
    RoundDecks,
    RoundId,
    RoundOutcome,
    RoundPlace,
    RoundRead,
    RoundReplay,
    RoundSignature,
    RoundVersion,
)
from rng_service.audit.rules_index import RoundRules, RulesCase, RulesDocument, RulesIndex
from rng_service.audit.spill import FirstSeen, Kept, KeyedValues, SortedRuns, SpillDb
from rng_service.audit.state import (
    AuditState,
    CarriedLeaf,
)
from rng_service.audit.times import RoundKeyPeriod, RoundTimes, Times
from rng_service.audit.walk import MAX_DIR_DEPTH, Entry, may_hold_log, walk_paths
from rng_service.audit.wallet_checks import RoundWallet
from rng_service.audit.workers import Workers
from rng_service.core.text import token
from rng_service.crypto.signing import payload_span
from rng_service.records.schema import (
    KEY_SCHEMA,
    RECORD_SCHEMA,
    REVEAL_SCHEMA,
    RNG_REVEAL_SCHEMA,
    RNG_SCHEMA,
    RULES_SCHEMA,
    SHOE_COMMITMENT_SCHEMA,
)

#: files handed to a worker process at a time in pass 1
_FILES_PER_PIECE: Final = 128
#: directories whose path_key is remembered at once (:meth:`Auditor._file_key`)
_DIRECTORY_KEYS: Final = 64
#: a file's leaf when no log check can ask for it (:attr:`Auditor._keep_leaves`): an envelope's
#: all the same (:attr:`Read.leaf` not None), kept nowhere
_UNKEPT: Final = b""

#: a file as pass 1 sends it to a worker process (:meth:`Auditor._read_sent`): its
#: :class:`Entry`'s members, the path as text
Sent = tuple[str, bool, str | None, bool, bool]

# The names other modules and the tests import from here: the audit's checks live in modules of
# their own, re-exported so that this module stays the audit's one entry point.

__all__ = [
    "DEFAULT_LOG_ORIGIN",
    "MAX_DIR_DEPTH",
    "AuditFailure",
    "AuditInputError",
    "AuditOptions",
    "AuditReport",
    "Auditor",
    "Commitment",
    "CommitmentIndex",
    "Finding",
    "Reveal",
    "RngAudit",
    "RulesIndex",
    "Status",
    "audit_paths",
]


class Auditor(CarriedState, ShoePass):
    """Verifies files against the keys in ``trusted``; :meth:`run` returns the report.

    The auditor orchestrates: it sorts the files, runs each kind of record's named checks in
    their order, and keeps what the checks need of one another (the reveals, the commitments,
    the rule sets, the files the log lists)."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey],
                 options: AuditOptions | None = None) -> None:
        self.trusted = trusted
        self.options = options or AuditOptions()
        self.times = Times(self.options)
        self.clock = FileClock(self.options.file_timeout)
        self.report = AuditReport()
        self.rules = RulesIndex(self.options.allow_custom_rules)
        self.reveals = RevealIndex(trusted)
        self.draws = RngAudit(trusted, self.times, self.clock)
        self.commitments = CommitmentIndex(trusted, self.times)
        self.file_checks = (FileReadable(),)
        self.rules_checks = (RulesDocument(self.rules),)
        self.key_checks = key_checks(trusted, self.times)
        self.round_id = RoundId()
        #: a round's checks, in the order of the verifier's docstring: the first failure is
        #: the round's
        self.round_checks: tuple[Check[RoundCase], ...] = (
            RoundRead(), RoundSignature(trusted), self.round_id, RoundTimes(self.times),
            RoundKeyPeriod(self.times), RoundVersion(), RoundRules(self.rules), RoundDecks(),
            RoundPlace(), RoundCommitment(self.commitments),
            RoundShoe(self.reveals, self.commitments), RoundCards(), RoundReplay(),
            RoundOutcome(), RoundWallet())
        #: a verified reveal's line, once its rounds are checked
        self.reveal_checks: tuple[Check[RevealLine], ...] = (
            SeedOpens(), RevealCommitment(self.commitments), SeedServesOneShoe(),
            ShoeShuffles())
        #: the scratch store of what is kept of every record (:mod:`rng_service.audit.spill`),
        #: while :meth:`run` runs
        self._spill: SpillDb | None = None
        #: every envelope file read, by path_key: what the log checks match leaves.jsonl with
        self.leaf_files: KeyedValues[LeafRow] | None = None
        #: collection roots holding a log/ directory, as the walk found them
        self.log_roots: list[Path] = []
        #: every envelope's leaf is made and kept (its SHA-256 and a row of the store, a tenth
        #: of a record's own work): unless the run finds that no log check can ask for one
        self._keep_leaves = True
        #: the state an earlier audit saved, given as --since, once verified (None: none given,
        #: or refused), and its leaves by the path their findings name them by
        self.state: AuditState | None = None
        self._carried: dict[Path, CarriedLeaf] = {}
        #: the log checks against the auditor's checkpoint, once run
        self._judged: LogAudit | None = None
        #: with save_state: the rounds of each shoe committed and not revealed, by shoe id
        self._open_rounds: dict[str, list[Path]] = {}
        self._in_play: set[str] = set()
        #: path_key of the directories the walk is in (:meth:`_file_key`)
        self._directory_keys: dict[str, str] = {}
        #: every round queued for pass 2 claimed its id with its bytes (:meth:`_claim`)
        self._claims_hold = True
        #: each game's name as a round's line shows it (:meth:`_round_finding`)
        self._game_tokens: dict[str, str] = {}
        #: this auditor is a worker process's copy (:meth:`_started`), and the rule sets it was
        #: last sent (:meth:`_check_piece`)
        self._worker = False
        self._rules_sent: bytes | None = None

    def run(self, paths: Iterable[Path],
            on_round: Callable[[Finding], None] | None = None, *,
            keep_rounds: bool = True) -> AuditReport:
        """Audit every file under ``paths`` and return the report. Reveals are read first,
        then rounds are checked shoe by shoe; ``on_round`` (if given) sees each round's
        finding as soon as it is made. Without ``keep_rounds`` (and with ``on_round``) the
        report only counts the rounds checked shoe by shoe, and ``on_round`` then also sees
        every other finding made by the end of pass 2, then each made after it (the reveals'
        lines, the draws', the commitments', the log's), in the order the report would have
        held them, which the report too only counts: its memory then stays flat in the number
        of records, a shoe per round included. The log of each collection is checked last."""
        paths = list(paths)
        self.report.keep_rounds = keep_rounds
        spill = self._spill = SpillDb()
        try:
            self.round_id.seen = FirstSeen(spill)
            self._claims_hold = True
            self.leaf_files = KeyedValues(spill)
            self.reveals.kept = Kept(spill)
            self.commitments.store_in(spill)
            self._run(paths, on_round)
        finally:
            self._spill = self.leaf_files = self.reveals.kept = None
            self.commitments.store_in(None)
            self.round_id.seen = FirstSeen()
            spill.close()
        return self.report

    def _run(self, paths: list[Path], on_round: Callable[[Finding], None] | None) -> None:
        with self.clock.installed():
            self._read_state()
            # the log checks read the leaves: of a collection with a log/, or of the one named
            # with a checkpoint (a state needs one); a collection without is only walked twice
            source = self.options.log
            self._keep_leaves = (source.checkpoint is not None or source.since is not None
                                 or self.options.save_state or may_hold_log(paths))
            # forked once for both passes: pass 2's work carries what pass 1 taught the auditor
            with Workers(self.options.workers,
                         {"read": self._read_entry, "read.sent": self._read_sent,
                          "check": self._check_piece,
                          **leaf_tasks(self.clock)},
                         started=self._started) as workers:
                pending = self._sort_files(paths, workers)
                self._carry(pending)
                if on_round is not None:  # bare, unsigned records are found in pass 1
                    for finding in [f for f in self.report.findings if f.kind == "round"]:
                        on_round(finding)
                logs: list[Finding] = []  # the log checks need no round: they run meanwhile
                self._check_rounds(pending, workers, on_round,
                                   lambda: logs.extend(self._check_logs(paths, workers)))
            emit = self._emitter(on_round)
            emit(self._reveal_lines())
            emit(self.draws.findings())
            emit(self.commitments.findings(self.reveals.revealed()))
            self.report.open_shoes = self._never_revealed()
            emit(logs)
            if self.options.save_state:
                self.report.saved_state = self._next_state()


    def _reveal_lines(self) -> Iterator[Finding]:
        """Each verified reveal's line, in the order read, checked against its shoe's
        commitment (read from the store beside it)."""
        assert self.commitments.kept is not None
        try:
            for reveal, commitment in self.reveals.reveals_beside(self.commitments.kept):
                self.commitments.checking(reveal.shoe_id, commitment)
                yield self._timed_reveal(reveal)
        finally:
            self.commitments.checking(None)

    def _never_revealed(self) -> list[str]:
        """The committed shoes with no reveal, good or bad, sorted: in play."""
        assert self.reveals.kept is not None
        return self.commitments.never_revealed(self.reveals.judged(), self.reveals.kept)

    def _emitter(self, on_round: Callable[[Finding], None] | None
                 ) -> Callable[[Iterable[Finding]], None]:
        """How the findings after the rounds go to the report: kept in it; or, without
        ``keep_rounds``, shown to ``on_round`` and counted (the findings held so far first,
        but those of rounds, which it saw when they were found)."""
        report = self.report
        if report.keep_rounds or on_round is None:
            return report.findings.extend

        def shown(findings: Iterable[Finding]) -> None:
            for finding in findings:
                on_round(finding)
                report.add_counted(finding)

        held, report.findings = report.findings, []
        report.findings.extend(f for f in held if f.kind == "round")
        shown(f for f in held if f.kind != "round")
        return shown

    # pass 1: reveals and commitments are verified, rounds queued by shoe

    def _sort_files(self, paths: Iterable[Path], workers: Workers) -> SortedRuns[Pending]:
        """Pass 1: every file read (by the ``workers``, as the walk finds them) and, in the
        walk's order, taken to the checks of its kind; the rounds, their claims and their bytes
        as read, are sorted by shoe, start and path for pass 2, off the heap
        (:class:`SortedRuns`)."""
        pending: SortedRuns[Pending] = SortedRuns(pass_two_order)
        walked: deque[Entry] = deque()  # the files handed out, whose results are to come
        entries: Iterable[Entry | Sent] = self._files(paths, walked)
        if workers.forked:
            # sent as plain tuples, the path as text: a named tuple is pickled through the
            # pool's dispatch table and its own reduction, Python calls for every file in this
            # process's thread that sends the work
            entries = ((str(entry[0]), *entry[1:]) for entry in self._files(paths, walked))
        reads = workers.ordered("read.sent" if workers.forked else "read", entries,
                                chunk=_FILES_PER_PIECE)
        clock, bound = self.clock, self.clock.bound()
        for read in reads:
            entry = walked.popleft()
            if read.claims is not None:
                # a round, queued: nothing of it is checked here, so no time bound (a spill of
                # the sorted runs, merging them, is no file's checks)
                self._queue_round(entry, read, pending)
                continue
            try:
                with bound:
                    self._sort_file(entry, read)
            except FileTimeout:
                self.report.findings.append(clock.too_slow_finding(
                    "file", str(entry.path), entry.path))
        self.reveals.flag_shared_commitments()
        return pending

    def _files(self, paths: Iterable[Path], walked: deque[Entry]) -> Iterator[Entry]:
        """The walk's files, each noted in ``walked`` as it is handed out; the collection roots
        with a ``log/`` are kept for the log checks."""
        for entry in walk_paths(paths):
            if entry.log:
                if not self._keep_leaves:  # no leaf was kept for the files before it
                    raise AuditInputError(f"{token(str(entry.path))} appeared during the "
                                          "audit (none was there as it began): audit again")
                self.log_roots.append(entry.path.parent)
            else:
                walked.append(entry)
                yield entry

    def _read_sent(self, sent: Sent) -> Read:
        """:meth:`_read_entry` of a file sent to a worker process as a plain tuple (its path
        made from its directory's, as :func:`text_path` makes it: a worker reads the files of a
        directory in a row)."""
        return self._read_entry(Entry(text_path(sent[0]), *sent[1:]))

    def _read_entry(self, entry: Entry) -> Read:
        """One file read, here or in a worker process: a round record's claims (the round is
        checked in pass 2), another file's JSON object, or why it cannot be read."""
        path, case = entry.path, FileCase(entry)
        try:
            with self.clock.bound():
                run_checks(self.file_checks, case)
                envelope = case.envelope
                if (envelope.get("schema") == RULES_SCHEMA
                        or not ENVELOPE_MEMBERS & set(envelope)):
                    return Read(envelope=envelope)
                payload = envelope.get("payload")
                # pickled here, as the scratch store keeps it (a plain tuple, LeafRow): this
                # process's share of the work
                leaf = pickle.dumps(tuple(leaf_file(case.data, envelope)),
                                    pickle.HIGHEST_PROTOCOL) if self._keep_leaves else _UNKEPT
                schema = payload.get("schema") if isinstance(payload, dict) else None
                if schema == RECORD_SCHEMA:  # its bytes go with it: pass 2 reads no file
                    # and where its payload lies in them: pass 2 parses them again unchecked
                    return Read(leaf=leaf, claims=claims_of(path, payload), data=case.data,
                                span=payload_span(case.data, envelope, case.middle)
                                if case.sorted else None)
                if schema == REVEAL_SCHEMA:  # verified here: a worker's share of the work
                    return Read(leaf=leaf, reveal=(label(payload, "shoe_id", path),
                                                    self.reveals.seal(path, envelope)))
                if schema == SHOE_COMMITMENT_SCHEMA:  # so is a shoe commitment
                    return Read(leaf=leaf, commitment=(
                        label(payload, "shoe_id", path), self.commitments.seal(path, envelope)))
                return Read(envelope=envelope, leaf=leaf)
        except AuditFailure as exc:
            return Read(failure=(exc.field, exc.message, case.check))
        except FileTimeout:
            return Read(failure=(None, self.clock.too_slow, self.clock.name))

    def _queue_round(self, entry: Entry, read: Read, pending: SortedRuns[Pending]) -> None:
        """A round record, as pass 1 read it, queued for pass 2 (its leaf kept for the log
        checks, its id claimed: :meth:`_claim`)."""
        assert self.leaf_files is not None and read.leaf is not None and read.claims is not None
        if read.leaf:
            self.leaf_files.put_pickled(self._file_key(entry.path), read.leaf)
        data = read.data
        self._claim(read.claims[0], data)
        pending.add(Pending(entry.path, *read.claims, follow=entry.follow, data=data,
                            span=read.span),
                    len(data) if data is not None else 0)

    def _claim(self, round_id: str, data: bytes | None) -> None:
        """A round queued for pass 2 claims the id pass 1 read (``round.id``): pass 2 reads its
        id from the very bytes (``data``), so a round whose id is the one it claimed, and that
        no other round claimed, is no other's duplicate (:meth:`RoundId.first_many`). A round
        queued without its bytes is read again in pass 2, perhaps changed: then no claim
        holds."""
        self.round_id.claim(round_id)
        if data is None:
            self._claims_hold = False

    def _sort_file(self, entry: Entry, read: Read) -> None:
        """Take one file other than a round record to the checks of its kind: a reveal, key
        record or commitment is checked now, an RNG record kept for its reveal."""
        path, envelope = entry.path, read.envelope
        if read.failure is not None:
            field, message, check = read.failure
            self._add("file", str(path), path, Status.FAIL, field, message=message, check=check)
            return
        if read.leaf is None:  # not an envelope: a rules document, or unsigned
            assert envelope is not None
            if envelope.get("schema") == RULES_SCHEMA:
                self._add_rules(path, envelope)
            else:
                self._unenveloped(path, envelope, entry.strict)
            return
        assert self.leaf_files is not None
        if read.leaf:
            self.leaf_files.put_pickled(self._file_key(path), read.leaf)
        if read.reveal is not None:
            self.report.findings.extend(self.reveals.take(path, *read.reveal))
            return
        if read.commitment is not None:
            self.report.findings.extend(self.commitments.take(path, *read.commitment))
            return
        assert envelope is not None
        payload = envelope.get("payload")
        schema = payload.get("schema") if isinstance(payload, dict) else None
        if schema == REVEAL_SCHEMA:
            self.report.findings.extend(self.reveals.add(path, envelope))
        elif schema in (RNG_SCHEMA, RNG_REVEAL_SCHEMA):
            self.draws.add(path, envelope, schema)
        elif schema == KEY_SCHEMA:
            self.report.findings.append(key_finding(path, envelope, self.key_checks))
        elif schema == SHOE_COMMITMENT_SCHEMA:
            self.report.findings.extend(self.commitments.add(path, envelope))
        else:
            self.report.findings.append(UnknownSchema.finding(path, schema))

    def _file_key(self, path: Path) -> str:
        """:func:`~rng_service.audit.log_lines.path_key` of a file the walk found, its
        directory's part made once per directory (``abspath`` asks the OS for the working
        directory every time), for this audit only (the working directory may change between
        two). The directory is looked up by its text: a path's parent is a new Path, hashed
        afresh every time."""
        text = str(path)
        head, _, name = text.rpartition("/")
        if not head or head.endswith("/"):  # "x", "/x", "//x": os.path.split's own head
            head, name = os.path.split(text)
        # else os.path.split's answer (its head stripped of trailing slashes: a Path's text
        # holds none but a leading "//"), at a third of its cost
        directory = self._directory_keys.get(head)
        if directory is None:
            if len(self._directory_keys) >= _DIRECTORY_KEYS:
                self._directory_keys.clear()
            key = path_key(Path(head or "."))
            # os.path.join's result, joined here: it is a tenth of a record's bookkeeping
            directory = self._directory_keys[head] = key if key.endswith("/") else key + "/"
        return directory + name

    def _unenveloped(self, path: Path, data: dict[str, Any], strict: bool) -> None:
        found = unenveloped(path, data, strict)
        if found == "keys":
            self.report.keys_files.append(path)  # never trusted: keys come from --keys
        elif found == "skip":
            self.report.skipped.append(path)
        else:
            if found.kind == "shoe":
                self.reveals.unsigned(found.ident, path)
            self.report.findings.append(found)

    def _add(self, kind: str, ident: str, path: Path, status: Status, field: str | None = None,
             *, message: str = "", check: str) -> Finding:
        finding = Finding(kind, ident, path, status, field, message, check=check)
        self.report.findings.append(finding)
        return finding

    def _add_rules(self, path: Path, data: dict[str, Any]) -> None:
        case = RulesCase(path, data)
        try:
            run_checks(self.rules_checks, case)
        except AuditFailure as exc:
            self._add("rules", path.name, path, Status.FAIL, exc.field, message=exc.message,
                      check=case.check)
            return
        assert case.rules is not None
        self._add("rules", case.digest, path, Status.OK, check=case.check,
                  message=f"{token(clip(case.rules.game))} ({self.rules.label(case.digest)})")

    def _timed_reveal(self, reveal: Reveal) -> Finding:
        try:
            with self.clock.bound():
                return reveal_finding(reveal, self.reveal_checks)
        except FileTimeout:
            return self.clock.too_slow_finding("shoe", reveal.shoe_id, reveal.path)


def audit_paths(paths: Iterable[Path], trusted: Mapping[str, Ed25519PublicKey],
                on_round: Callable[[Finding], None] | None = None, *,
                options: AuditOptions | None = None, keep_rounds: bool = True) -> AuditReport:
    """Verify every record and reveal under ``paths`` against the ``trusted`` keys (without
    ``keep_rounds``, the rounds are only counted in the report, once ``on_round`` saw them)."""
    return Auditor(trusted, options).run(paths, on_round, keep_rounds=keep_rounds)
