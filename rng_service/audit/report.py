"""What an audit found (:class:`AuditReport`): the findings, the files passed over, the tallies,
and the summary printed from them, its verdict last (``audit PASS`` or ``audit FAIL`` and what was
judged).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rng_service.audit.files import Finding, Status, clip
from rng_service.audit.log_audit import Completeness
from rng_service.core.text import escape, token


@dataclass
class AuditReport:
    """What an audit found: one finding per file checked, plus the files it passed over
    and the tallies its summary prints."""

    findings: list[Finding] = field(default_factory=list)
    #: files that are neither envelopes nor rules documents: the audit did not check them, so fails
    skipped: list[Path] = field(default_factory=list)
    #: keys.jwks.json files beside the records: passed over, never trusted (keys come from --keys)
    keys_files: list[Path] = field(default_factory=list)
    #: rules digest -> (game, "built-in", "custom" or "custom, allowed"), for the summary
    rule_sets: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: service version -> records of it that passed, for the summary
    versions: Counter[str] = field(default_factory=Counter)
    #: shoes committed (in the collection or carried from an earlier audit) and not revealed:
    #: still in play, so neither a failure nor discarded; a later audit checks them
    open_shoes: list[str] = field(default_factory=list)
    #: what the log checks showed, one line of the summary per log
    log_notes: list[str] = field(default_factory=list)
    #: completeness against the auditor's checkpoint (None: not judged, no checkpoint given)
    completeness: Completeness | None = None
    #: rounds carried from the earlier audit's state, among the rounds
    carried: int = 0
    #: with AuditOptions.save_state, once the audit passed: the state's text
    saved_state: str | None = None
    #: keep every round's finding in ``findings`` (False: the rounds checked shoe by shoe, and
    #: the shoe reveals' lines, are only counted here, by kind, status and void, once the
    #: caller has seen them: a report of a million rounds then holds none of them)
    keep_rounds: bool = True
    counted: Counter[tuple[str, Status, bool]] = field(default_factory=Counter)

    def add_round(self, finding: Finding) -> None:
        """A round's finding, kept or counted (``keep_rounds``)."""
        if self.keep_rounds:
            self.findings.append(finding)
        else:
            self.add_counted(finding)

    def add_counted(self, finding: Finding) -> None:
        """A finding the caller has seen, counted and let go."""
        self.counted[finding.kind, finding.status, finding.void] += 1

    def count(self, kind: str, status: Status | None = None) -> int:
        """How many findings are of ``kind`` (and of ``status``, if given)."""
        counted = sum(n for (of, was, _), n in self.counted.items()
                      if of == kind and (status is None or was is status))
        return counted + sum(1 for f in self.findings
                             if f.kind == kind and (status is None or f.status is status))

    def _bad_counted(self) -> int:
        return sum(n for (_, status, _), n in self.counted.items()
                   if status not in (Status.OK, Status.OPEN))

    @property
    def passed(self) -> bool:
        """True only if at least one round or RNG record was checked, every file passed (a
        round of a shoe in play aside) and none was skipped."""
        return (self.count("round") + self.count("rng") > 0 and not self.skipped
                and not self._bad_counted()
                and all(f.status in (Status.OK, Status.OPEN) for f in self.findings))

    def verdict(self) -> str:
        """The last line: PASS or FAIL, then what was judged (completeness against which
        checkpoint, or not judged), then how many checks failed."""
        judged = (self.completeness.words() if self.completeness is not None else
                  "completeness not judged")
        bad = sum(1 for f in self.findings if f.status not in (Status.OK, Status.OPEN))
        bad += len(self.skipped) + self._bad_counted()
        if self.passed:
            hint = (" (it needs a checkpoint obtained independently: --checkpoint)"
                    if self.completeness is None else "")
            return f"audit PASS, {judged}{hint}"
        return f"audit FAIL, {judged}" + (f": {bad} checks FAIL" if bad else "")

    def summary_lines(self) -> list[str]:
        """The report in a few short lines of counts, the verdict last, each escaped."""
        lines = [self._rounds_line(), self._shoes_line()]
        if self.count("rng") or self.count("rng-reveal"):
            lines.append(f"{self.count('rng')} RNG draws: {self.count('rng', Status.OK)} OK, "
                         f"{self.count('rng', Status.FAIL)} FAIL, "
                         f"{self.count('rng', Status.UNREVEALED)} unrevealed; "
                         f"{self.count('rng-reveal', Status.OK)} RNG reveals OK")
        others = [f"{self.count(kind)} {name}: {self.count(kind, Status.OK)} OK"
                  for kind, name in (("key", "key records"), ("commitment", "shoe commitments"),
                                     ("rules", "rules documents")) if self.count(kind)]
        if others:
            lines.append("; ".join(others))
        lines.extend(self.log_notes)
        problems = [f"{n} {what}" for n, what in (
            (self.count("leaf") + self.count("log", Status.FAIL), "log checks FAIL"),
            (self.count("state", Status.FAIL), "carried state checks FAIL"),
            (self.count("file"), "other files FAIL"),
            (len(self.skipped), "skipped (neither signed records nor rules documents)")) if n]
        if problems:
            lines.append("; ".join(problems))
        if self.keys_files:
            lines.append(f"{len(self.keys_files)} keys files not used (trusted keys come from "
                         "--keys only)")
        if self.versions:
            lines.append("service versions: " + ", ".join(
                f"{token(clip(v))} ({n})" for v, n in sorted(self.versions.items())))
        lines.extend(f"rules: {token(clip(game))} {digest[:16]} ({kind})"
                     for digest, (game, kind) in sorted(self.rule_sets.items()))
        lines.append(self.verdict())
        return [escape(line, backslash=False) for line in lines]

    def summary(self) -> str:
        """:meth:`summary_lines` as the audit command prints them."""
        return "\n".join(self.summary_lines())

    def _rounds_line(self) -> str:
        line = (f"{self.count('round')} rounds: {self.count('round', Status.OK)} OK, "
                f"{self.count('round', Status.FAIL)} FAIL")
        for status, words in ((Status.OPEN, "in play"), (Status.UNREVEALED, "unrevealed")):
            if self.count("round", status):
                line += f", {self.count('round', status)} {words}"
        void = sum(1 for f in self.findings if f.kind == "round" and f.void)
        void += sum(n for (kind, _, was_void), n in self.counted.items()
                    if kind == "round" and was_void)
        line += f" ({void} void among the OK: stakes returned)" if void else ""
        return line + (f"; {self.carried} carried from the earlier audit" if self.carried
                       else "")

    def _shoes_line(self) -> str:
        line = f"{self.count('shoe')} shoe reveals: {self.count('shoe', Status.OK)} OK"
        if self.open_shoes:
            line += (f"; {len(self.open_shoes)} shoes in play (not finished: checked once "
                     "revealed)")
        return line
