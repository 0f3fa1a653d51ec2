"""Pass 2 of the audit: the rounds, shoe by shoe.

:class:`ShoePass` is the part of :class:`~rng_service.audit.verifier.Auditor` that groups the
rounds pass 1 queued by shoe, hands whole shoes to the worker processes in pieces, checks each
shoe's rounds in order against one another (a cut-card shoe's rounds depend on the one before),
and merges their findings back in the order one process would have made them. It is a base class
of the auditor, not an object of its own: a worker is a forked copy of the auditor, and these
steps read what pass 1 taught it; what they rely on is declared below.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Final, cast

from game_math.errors import GameMathError
from game_math.round import Phase
from rng_service.audit.checks import Check, run_checks
from rng_service.audit.commitments import CommitmentIndex
from rng_service.audit.failures import AuditFailure, Unrevealed
from rng_service.audit.files import (
    FileClock,
    FileTimeout,
    Finding,
    Status,
    clip,
    tok,
)
from rng_service.audit.options import AuditOptions
from rng_service.audit.pieces import (
    Checked,
    FindingParts,
    Handed,
    Known,
    Piece,
    ShoeChecked,
    by_shoe,
    in_pieces,
    placed_rounds,
)
from rng_service.audit.report import AuditReport
from rng_service.audit.reveals import (
    Reveal,
    RevealIndex,
    from_pickled,
)
from rng_service.audit.round_checks import (
    Pending,
    Place,
    RoundCase,
    RoundId,
)
from rng_service.audit.rules_index import RulesIndex
from rng_service.audit.spill import SortedRuns
from rng_service.audit.state import CarriedLeaf
from rng_service.audit.workers import Workers
from rng_service.core.text import token
from rng_service.crypto.signing import VerificationError

#: shoes handed out in pass 2: about this many pieces per worker, so that a slow shoe does not
#: leave the other workers idle, and few enough that handing them out costs little
_PIECES_PER_WORKER: Final = 8
#: and whole shoes of at most about this many rounds to a piece, so that the rounds and findings
#: held at once stay few
_MOST_ROUNDS_PER_PIECE: Final = 256
#: pieces of pass 2 handed out per worker beyond the results taken: enough to keep the workers
#: busy a few seconds while this process checks the log, few enough to hold little (a piece holds
#: its rounds' bytes: up to about 500 KB)
_PIECES_AHEAD: Final = 8


class ShoePass:
    """Pass 2: the rounds checked shoe by shoe, in the workers, their findings merged."""

    # what the auditor holds and these steps use (set in Auditor.__init__ and by pass 1)
    options: AuditOptions
    clock: FileClock
    report: AuditReport
    rules: RulesIndex
    reveals: RevealIndex
    commitments: CommitmentIndex
    round_id: RoundId
    round_checks: tuple[Check[RoundCase], ...]
    _carried: dict[Path, CarriedLeaf]
    _open_rounds: dict[str, list[Path]]
    _in_play: set[str]
    _claims_hold: bool
    _game_tokens: dict[str, str]
    _worker: bool
    _rules_sent: bytes | None

    def _never_revealed(self) -> list[str]:
        raise NotImplementedError  # the auditor's: the committed shoes with no reveal

    def _check_rounds(self, pending: SortedRuns[Pending], workers: Workers,
                      on_round: Callable[[Finding], None] | None,
                      meanwhile: Callable[[], object]) -> None:
        """Pass 2: the rounds grouped by shoe, in shoe order, each knowing the round before it
        and the first void round before it in its shoe. The shoes are checked by the
        ``workers`` while this process runs ``meanwhile``; their findings are taken in shoe
        order, so the report is the same for any number of them. The shoes are read from
        ``pending`` as they are handed out, a piece at a time with their reveals from the
        store, and each is let go once its findings are taken: only the pieces in flight are
        held, and of those this process keeps only the paths."""
        most = max(1, min(_MOST_ROUNDS_PER_PIECE,
                          pending.count // (workers.workers * _PIECES_PER_WORKER)))
        if self.options.save_state:
            self._in_play = set(self._never_revealed())
        handed: deque[Handed] = deque()  # results to come
        # the worker processes were forked before pass 1: what it found that the rounds'
        # checks look up goes with the work (the rule sets once, a shoe's own with the shoe)
        rules = (pickle.dumps((self.rules.documents, self.rules.impostors, self.rules.altered),
                              pickle.HIGHEST_PROTOCOL) if workers.forked else None)
        pieces = (self._piece(group, rules, handed)
                  for group in in_pieces(by_shoe(pending.drain()), most))
        done = workers.ordered("check", pieces, ahead=workers.workers * _PIECES_AHEAD)
        meanwhile()  # this process's own work, while the workers check the rounds
        for checked in done:
            self._take_piece(handed.popleft(), checked, on_round)

    def _piece(self, group: list[list[Pending]], rules: bytes | None,
               handed: deque[Handed]) -> Piece:
        """A piece of pass 2 as it is handed out: its shoes' reveals and commitments read from
        the store at once; with worker processes, what failed each shoe's reveal or commitment,
        and the rule sets (``rules``, pickled). What this process keeps of it until its findings
        come back is noted in ``handed``."""
        assert self.reveals.kept is not None
        shoe_ids = [rounds[0].shoe_id for rounds in group]
        # as kept, pickled: only the worker checking the shoe makes a Reveal of it
        reveals = self.reveals.kept.get_many_pickled(shoe_ids)
        commitments = self.commitments.carried(shoe_ids)
        handed.append([(shoe_id, [item.path for item in rounds],
                        [item.round_id for item in rounds])
                       for shoe_id, rounds in zip(shoe_ids, group, strict=True)])
        if rules is None:  # checked here: this process's indexes know what failed
            return None, [(rounds, reveal, (commitment, None, None))
                          for rounds, reveal, commitment in zip(group, reveals, commitments,
                                                                strict=True)]
        bad, reveals_bad = self.commitments.bad, self.reveals.bad
        # the rounds as plain tuples, the path as text (as for pass 1's files: _sort_files)
        return rules, [([(str(item[0]), *item[1:]) for item in rounds], reveal,
                        (commitment, bad.get(shoe_id), reveals_bad.get(shoe_id)))
                       for shoe_id, rounds, reveal, commitment in zip(
                           shoe_ids, group, reveals, commitments, strict=True)]

    def _started(self) -> None:
        """In a worker process, as it starts: its auditor is a copy, made before pass 1."""
        self._worker = True

    def _check_piece(self, piece: Piece) -> list[ShoeChecked]:
        """A piece of pass 2, whole shoes, checked (here, or in a worker process, which is
        sent what pass 1 found that the shoes' checks look up)."""
        rules, shoes = piece
        if self._worker and rules is not None and rules != self._rules_sent:
            self._rules_sent = rules
            self.rules.documents, self.rules.impostors, self.rules.altered = pickle.loads(rules)
        out = []
        try:
            for sent, reveal, known in shoes:
                # sent to a worker as plain tuples (_piece)
                rounds = (list(map(Pending._make, sent)) if self._worker
                          else cast("list[Pending]", sent))
                shoe_id = rounds[0].shoe_id
                if self._worker:
                    self._know(shoe_id, known)
                # the rounds' checks look up their own shoe only (the one they were sorted by,
                # as their bytes are those pass 1 read): its commitment went with them
                self.commitments.checking(shoe_id, known[0])
                out.append(self._check_shoe(rounds,
                                            None if reveal is None else from_pickled(reveal)))
        finally:
            self.commitments.checking(None)
        return out

    def _know(self, shoe_id: str, known: Known) -> None:
        """A worker's indexes hold what failed of the shoe it checks next, and of no other
        (its commitment is checked against the one that goes with its rounds)."""
        _, commitment_bad, reveal_bad = known
        bad = self.commitments.bad
        bad.clear()  # in place: the round's checks hold these dicts
        self.reveals.bad.clear()
        if commitment_bad is not None:
            bad[shoe_id] = commitment_bad
        if reveal_bad is not None:
            self.reveals.bad[shoe_id] = reveal_bad

    def _take_piece(self, piece: Handed, checked: list[ShoeChecked],
                    on_round: Callable[[Finding], None] | None) -> None:
        """A piece's findings into the report, shoe by shoe in its rounds' order; the round
        ids of the whole piece judged together (``round.id``), in that order."""
        ids = [(done.round_id, path)
               for (_, paths, _), shoe in zip(piece, checked, strict=True)
               for path, done in zip(paths, shoe, strict=True)
               if done.round_id is not None]
        # what each claimed in pass 1, if every round claimed its id there (:meth:`_claim`)
        claimed = None if not self._claims_hold else [
            claim for (_, _, claims), shoe in zip(piece, checked, strict=True)
            for claim, done in zip(claims, shoe, strict=True) if done.round_id is not None]
        repeated = iter(self.round_id.first_many(ids, claimed))
        for (shoe_id, paths, _), shoe in zip(piece, checked, strict=True):
            if self.options.save_state and shoe_id in self._in_play:
                self._open_rounds.setdefault(shoe_id, []).extend(paths)
            for path, done in zip(paths, shoe, strict=True):
                failure = next(repeated) if done.round_id is not None else None
                finding = self._merged(path, done, failure)
                self.report.add_round(finding)
                if on_round is not None:
                    on_round(finding)

    def _check_shoe(self, rounds: list[Pending], reveal: Reveal | None) -> ShoeChecked:
        """Check one shoe's rounds in order, against its reveal (here or in a worker process:
        nothing of the auditor is changed that the findings do not carry back, and the reveal,
        a copy unpickled for this shoe, is let go with its cards)."""
        self.reveals.checking(rounds[0].shoe_id, reveal)
        try:
            return [self._timed_round(item, place) for item, place in placed_rounds(rounds)]
        finally:
            self.reveals.checking(None)

    def _timed_round(self, item: Pending, place: Place) -> Checked:
        # the path as the Pending has it (text, if it was unpickled): the finding goes back
        # without it, and the auditor names it by its own
        case = RoundCase(item.where, place, follow=item.follow, data=item.data, span=item.span)
        try:
            with self.clock.bound():
                finding = self._round_finding(case)
        except FileTimeout:
            slow = self.clock.too_slow_finding("round", item.round_id, item.path)
            finding = (slow.kind, slow.ident, slow.status, slow.field, slow.message, slow.void,
                       slow.check)
        tally = None
        if finding[2] is Status.OK:
            rules = case.need_rules()
            tally = (case.doc.get_str("rules_digest"), rules.game, case.version)
        return Checked(finding, case.round_id, tally)

    def _merged(self, path: Path, checked: Checked, repeated: AuditFailure | None
                ) -> Finding:
        """A round's finding as the audit reports it: failed by ``round.id`` if an earlier
        round (in shoe order) has its id (``repeated``), counted in the summary's tallies if it
        passed."""
        kind, ident, status, field, message, void, check = checked.finding
        finding = Finding(kind, ident, path, status, field, message, void, check)
        if repeated is not None:
            finding = Finding("round", finding.ident, path, Status.FAIL, repeated.field,
                              repeated.message, check=self.round_id.name)
        elif checked.tally is not None:
            digest, game, version = checked.tally
            if digest not in self.report.rule_sets:
                self.report.rule_sets[digest] = (game, self.rules.label(digest))
            self.report.versions[version] += 1
        if not self._carried or path not in self._carried:
            return finding
        self.report.carried += 1
        return dataclasses.replace(finding,
                                   message=f"{finding.message} (carried from the earlier audit)")

    def _round_finding(self, case: RoundCase) -> FindingParts:
        """The finding on one round record (in its file, or its bytes carried from an earlier
        audit), every member but its path (the auditor names it: :meth:`_merged`): its named
        checks (``round_checks``) run in order, the first failure the round's FAIL (or
        UNREVEALED, or OPEN) finding; nothing raised by a bad record escapes."""
        try:
            run_checks(self.round_checks, case)
        except VerificationError as exc:
            return ("round", case.ident, Status.FAIL, exc.field, str(exc), False, case.check)
        except AuditFailure as exc:
            return ("round", case.ident, Status.FAIL, exc.field, exc.message, False, case.check)
        except Unrevealed as exc:
            status = Status.OPEN if exc.in_play else Status.UNREVEALED
            return ("round", case.ident, status, "shoe.id", str(exc), False, case.check)
        except (GameMathError, ValueError, TypeError, KeyError, RecursionError) as exc:
            # a payload no check anticipated: still a failure, never a crash of the audit
            return ("round", case.ident, Status.FAIL, "record",
                    f"cannot be replayed: {type(exc).__name__}: {exc}", False, case.check)
        rules, rnd = case.need_rules(), case.need_round()
        void = rnd.phase is Phase.VOID
        game = self._game_tokens.get(rules.game)
        if game is None:  # a game's name as its lines show it, made once (a few games)
            game = self._game_tokens[rules.game] = tok(rules.game)
        # the shoe's id is a str (round.shoe read it): tok's own reading of it, inline
        message = (f"{game} shoe {token(clip(case.shoe.get_str('id')))} "
                   f"[{rnd.start}, {rnd.position}) staked {rnd.total_staked} returned "
                   f"{rnd.total_returned}" + (" (void)" if void else ""))
        return ("round", case.ident, Status.OK, None, message, void, case.check)
