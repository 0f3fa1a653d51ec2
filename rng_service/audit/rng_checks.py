"""The checks of RNG draws (:class:`RngAudit`): RNG records (``fairshoe.rng/v1``, under ``rng/``)
are checked like a round, against their reveal (``fairshoe.rng-reveal/v1``, under
``rng-reveals/``): both signatures by trusted keys, the record's time within its key's validity
period, the parameters within the convention's bounds, the reveal's seed opening the record's
commitment (:func:`rng_service.rng.draws.rng_commitment`; no two draws share one), and every result
recomputed from the seed, the kind, the parameters and the client seed by
:func:`rng_service.rng.draws.draw`, whose module docstring gives the exact byte convention. A
record without a reveal is unrevealed, so it does not pass.

The named checks of a record, in order: ``rng.signature``, ``rng.key-period``, ``rng.version``,
``rng.id``, ``rng.parameters``, ``rng.reveal`` and ``rng.results``; of a reveal:
``rng-reveal.signature``, ``rng-reveal.seed``, ``rng-reveal.unique`` and ``rng-reveal.one-seed``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.checks import Check, Named, SignatureCheck, Signed, run_checks
from rng_service.audit.claims import label
from rng_service.audit.failures import AuditFailure, Doc, Unrevealed, fail
from rng_service.audit.files import FileClock, FileTimeout, Finding, Status, show, tok
from rng_service.audit.options import AuditOptions
from rng_service.audit.round_checks import check_version
from rng_service.audit.times import Times
from rng_service.core.json_input import JsonObject
from rng_service.core.text import token
from rng_service.crypto.signing import VerificationError
from rng_service.records.schema import RNG_REVEAL_SCHEMA, RNG_SCHEMA
from rng_service.rng.draws import DrawRequest, InvalidDrawInput, check_request, draw, rng_commitment


@dataclass(frozen=True)
class _RngReveal:
    """An RNG reveal whose signature verified."""

    draw_id: str
    commitment: str
    seed: bytes
    path: Path


class DrawCase(Signed):
    """An RNG record being checked, and what each check established for the next."""

    def __init__(self, path: Path, envelope: dict[str, Any]) -> None:
        self.path = path
        self.envelope = envelope
        self.payload: dict[str, Any] = {}
        self.doc = Doc({}, "")
        self.request = DrawRequest("", {})
        self.client_seed = b""
        self.reveal: _RngReveal | None = None
        self.message = ""


class RngSignature(SignatureCheck[DrawCase]):
    """An RNG record is signed by a key the auditor trusts."""

    name = "rng.signature"
    schema = RNG_SCHEMA

    def check(self, subject: DrawCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        super().check(subject)
        subject.doc = Doc(subject.payload, "")


class RngKeyPeriod(Check[DrawCase]):
    """The signing key's validity period covers ``drawn_at``."""

    name = "rng.key-period"

    def __init__(self, times: Times) -> None:
        self.times = times

    def check(self, subject: DrawCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        self.times.signed_within(subject.envelope["signature"]["key_id"], subject.doc,
                                 "drawn_at")


class RngVersion(Check[DrawCase]):
    """``service_version`` is a version string."""

    name = "rng.version"

    def check(self, subject: DrawCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        check_version(subject.doc)


class RngId(Check[DrawCase]):
    """No other RNG record has the draw's id."""

    name = "rng.id"

    def __init__(self) -> None:
        self.seen: dict[str, Path] = {}

    def check(self, subject: DrawCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        draw_id = subject.doc.get_str("draw_id")
        if self.seen.setdefault(draw_id, subject.path) != subject.path:
            fail("draw_id", f"is also the id of {token(str(self.seen[draw_id]))}")


class RngParameters(Check[DrawCase]):
    """The kind and parameters are within the convention's bounds; the client seed is hex."""

    name = "rng.parameters"

    def check(self, subject: DrawCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.request = _draw_request(subject.doc)
        subject.client_seed = subject.doc.get_hex("client_seed")


class RngRevealed(Check[DrawCase]):
    """The draw has a reveal that verified (else it is UNREVEALED) whose commitment is the
    record's, and no other draw has that commitment."""

    name = "rng.reveal"

    def __init__(self, reveals: Mapping[str, _RngReveal], bad: Mapping[str, str],
                 commitments: Counter[str]) -> None:
        self.reveals = reveals
        self.bad = bad
        self.commitments = commitments

    def check(self, subject: DrawCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        doc = subject.doc
        commitment, draw_id = doc.get_str("commitment"), doc.get_str("draw_id")
        reveal = self.reveals.get(draw_id)
        if reveal is None:
            if draw_id in self.bad:
                fail("draw_id", self.bad[draw_id])
            raise Unrevealed(f"{tok(draw_id)} has no reveal: the draw cannot be verified")
        if reveal.commitment != commitment:
            fail("commitment", f"recorded {tok(commitment)}, revealed {tok(reveal.commitment)}")
        if self.commitments[commitment] > 1:
            fail("commitment", "is also another draw's: a seed serves one draw")
        subject.reveal = reveal


class RngResults(Check[DrawCase]):
    """Every result recomputed from the seed, the kind, the parameters and the client seed
    (:func:`rng_service.rng.draws.draw`) equals the recorded one."""

    name = "rng.results"

    def check(self, subject: DrawCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        assert subject.reveal is not None, "rng.reveal runs first"
        request = subject.request
        try:
            expected = draw(subject.reveal.seed, request, subject.client_seed)
        except InvalidDrawInput as exc:
            fail("client_seed", str(exc))
        _compare_results(subject.doc.get_list("results"), expected)
        subject.message = (f"{request.kind} {dict(request.parameters)}: {len(expected)} results "
                           "recomputed")


class RngRevealCase(Signed):
    """An RNG reveal file being checked."""

    def __init__(self, path: Path, envelope: dict[str, Any]) -> None:
        self.path = path
        self.envelope = envelope
        self.payload: dict[str, Any] = {}
        self.reveal: _RngReveal | None = None


class RngRevealSignature(SignatureCheck[RngRevealCase]):
    """An RNG reveal is signed by a key the auditor trusts."""

    name = "rng-reveal.signature"
    schema = RNG_REVEAL_SCHEMA


class RngRevealSeed(Check[RngRevealCase]):
    """The reveal's seed opens its commitment."""

    name = "rng-reveal.seed"

    def check(self, subject: RngRevealCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        doc = Doc(subject.payload, "")
        reveal = _RngReveal(doc.get_str("draw_id"), doc.get_str("commitment"),
                            doc.get_hex("seed"), subject.path)
        if rng_commitment(reveal.seed) != reveal.commitment:
            fail("seed", f"does not open the commitment {tok(reveal.commitment)}")
        subject.reveal = reveal


class RngRevealUnique(Named):
    """One reveal per draw: a second, different signed reveal of a draw fails (an identical copy
    is a line of its own)."""

    name = "rng-reveal.unique"


class RngRevealOneSeed(Named):
    """One draw per seed: a reveal whose commitment another draw's reveal has fails."""

    name = "rng-reveal.one-seed"


class RngAudit:
    """The checks of RNG records and reveals (module docstring): each record is judged against
    its draw's reveal once every file has been read."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey], times: Times | None = None,
                 clock: FileClock | None = None) -> None:
        self.trusted = trusted
        self.times = times or Times(AuditOptions())
        self.clock = clock or FileClock(0)
        self.reveal_checks = (RngRevealSignature(trusted), RngRevealSeed())
        self.reveals: dict[str, _RngReveal] = {}
        self.bad_reveals: dict[str, str] = {}  # draw id -> why its reveal cannot be used
        self.records: list[tuple[Path, dict[str, Any]]] = []
        self._findings: list[Finding] = []

    def add(self, path: Path, envelope: dict[str, Any], schema: str) -> None:
        """Take one signed RNG file: a record is kept to be judged once every reveal is
        read; a reveal is verified now and indexed by draw id (a bad or conflicting one
        is a failed finding, an identical copy an OK one)."""
        if schema == RNG_SCHEMA:
            self.records.append((path, envelope))
            return
        ident = label(envelope.get("payload"), "draw_id", path)
        case = RngRevealCase(path, envelope)
        try:
            run_checks(self.reveal_checks, case)
        except (VerificationError, AuditFailure) as exc:
            where = exc.field
            message = exc.message if isinstance(exc, AuditFailure) else str(exc)
            self.bad_reveals[ident] = f"the reveal {tok(path.name)} failed: {message}"
            self._findings.append(Finding("rng-reveal", ident, path, Status.FAIL, where, message,
                                          check=case.check))
            return
        reveal = case.reveal
        assert reveal is not None
        known = self.reveals.get(reveal.draw_id)
        if known is not None and known != dataclasses.replace(reveal, path=known.path):
            self.bad_reveals[reveal.draw_id] = "has two different signed reveals"
            self._findings.append(Finding("rng-reveal", ident, path, Status.FAIL, "draw_id",
                                          f"is revealed twice, differently (also "
                                          f"{tok(known.path)})", check=RngRevealUnique.name))
            return
        if known is not None:  # a copy: a line of its own, the first one is used
            self._findings.append(Finding("rng-reveal", ident, path, Status.OK,
                                          message=f"the same reveal as {tok(known.path)}",
                                          check=RngRevealUnique.name))
            return
        self.reveals[reveal.draw_id] = reveal

    def record_checks(self, commitments: Counter[str]) -> tuple[Check[DrawCase], ...]:
        """The checks of an RNG record, in order, once every reveal is read."""
        return (RngSignature(self.trusted), RngKeyPeriod(self.times), RngVersion(), RngId(),
                RngParameters(), RngRevealed(self.reveals, self.bad_reveals, commitments),
                RngResults())

    def findings(self) -> list[Finding]:
        """A line per record, then per reveal that verified (failed reveals have theirs)."""
        commitments = Counter(r.commitment for r in self.reveals.values())
        checks = self.record_checks(commitments)
        for path, envelope in sorted(self.records, key=lambda item: str(item[0])):
            self._findings.append(self._timed_check(path, envelope, checks))
        for reveal in self.reveals.values():
            shared = commitments[reveal.commitment] > 1
            self._findings.append(Finding(
                "rng-reveal", reveal.draw_id, reveal.path, Status.FAIL if shared else Status.OK,
                "commitment" if shared else None,
                "is also another draw's: a seed serves one draw" if shared else "revealed",
                check=RngRevealOneSeed.name if shared else RngRevealSeed.name))
        return self._findings

    def _timed_check(self, path: Path, envelope: dict[str, Any],
                     checks: tuple[Check[DrawCase], ...]) -> Finding:
        try:
            with self.clock.bound():
                return self._check(path, envelope, checks)
        except FileTimeout:
            return self.clock.too_slow_finding(
                "rng", label(envelope.get("payload"), "draw_id", path), path)

    @staticmethod
    def _check(path: Path, envelope: dict[str, Any],
               checks: tuple[Check[DrawCase], ...]) -> Finding:
        ident = label(envelope.get("payload"), "draw_id", path)
        case = DrawCase(path, envelope)
        try:
            run_checks(checks, case)
        except VerificationError as exc:
            return Finding("rng", ident, path, Status.FAIL, exc.field, str(exc), check=case.check)
        except AuditFailure as exc:
            return Finding("rng", ident, path, Status.FAIL, exc.field, exc.message,
                           check=case.check)
        except Unrevealed as exc:
            return Finding("rng", ident, path, Status.UNREVEALED, "draw_id", str(exc),
                           check=case.check)
        return Finding("rng", ident, path, Status.OK, message=case.message, check=case.check)


def _draw_request(doc: JsonObject) -> DrawRequest:
    params = doc.get_obj("parameters")
    request = DrawRequest(doc.get_str("kind"), {k: params.get_int(k) for k in params.data})
    try:
        check_request(request)
    except InvalidDrawInput as exc:
        fail("parameters", str(exc))
    return request


def _compare_results(recorded: list[Any], expected: list[int]) -> None:
    if len(recorded) != len(expected):
        fail("results", f"recorded {len(recorded)} values, recomputed {len(expected)}")
    for i, (got, want) in enumerate(zip(recorded, expected, strict=True)):
        if type(got) is not int or got != want:
            fail(f"results[{i}]", f"recorded {show(got)}, recomputed {want}")
