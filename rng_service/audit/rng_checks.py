"""The checks of RNG draws (:class:`RngAudit`): RNG records (``fairshoe.rng/v1``, under ``rng/``)
are checked like a round, against their reveal (``fairshoe.rng-reveal/v1``, under
``rng-reveals/``): both signatures by trusted keys, the record's time within its key's validity
period, the parameters within the convention's bounds, the reveal's seed opening the record's
commitment (:func:`rng_service.rng.draws.rng_commitment`; no two draws share one), and every result
recomputed from the seed, the kind, the parameters and the client seed by
:func:`rng_service.rng.draws.draw`, whose module docstring gives the exact byte convention. A
record without a reveal is unrevealed, so it does not pass.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rng_service.audit.claims import label
from rng_service.audit.failures import AuditFailure, Doc, Unrevealed, fail
from rng_service.audit.files import FileClock, FileTimeout, Finding, Status, show, tok
from rng_service.audit.options import AuditOptions
from rng_service.audit.round_checks import check_version
from rng_service.audit.times import Times
from rng_service.core.json_input import JsonObject
from rng_service.core.text import token
from rng_service.crypto.signing import VerificationError, verify_envelope
from rng_service.records.schema import RNG_REVEAL_SCHEMA, RNG_SCHEMA
from rng_service.rng.draws import DrawRequest, InvalidDrawInput, check_request, draw, rng_commitment


@dataclass(frozen=True)
class _RngReveal:
    """An RNG reveal whose signature verified."""

    draw_id: str
    commitment: str
    seed: bytes
    path: Path


class RngAudit:
    """The checks of RNG records and reveals (module docstring): each record is judged against
    its draw's reveal once every file has been read."""

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey], times: Times | None = None,
                 clock: FileClock | None = None) -> None:
        self.trusted = trusted
        self.times = times or Times(AuditOptions())
        self.clock = clock or FileClock(0)
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
        try:
            payload = verify_envelope(envelope, self.trusted, schema=RNG_REVEAL_SCHEMA)
            reveal = self._read_reveal(payload, path)
        except (VerificationError, AuditFailure) as exc:
            where = exc.field
            message = exc.message if isinstance(exc, AuditFailure) else str(exc)
            self.bad_reveals[ident] = f"the reveal {tok(path.name)} failed: {message}"
            self._findings.append(Finding("rng-reveal", ident, path, Status.FAIL, where, message))
            return
        known = self.reveals.get(reveal.draw_id)
        if known is not None and known != dataclasses.replace(reveal, path=known.path):
            self.bad_reveals[reveal.draw_id] = "has two different signed reveals"
            self._findings.append(Finding("rng-reveal", ident, path, Status.FAIL, "draw_id",
                                          f"is revealed twice, differently (also "
                                          f"{tok(known.path)})"))
            return
        if known is not None:  # a copy: a line of its own, the first one is used
            self._findings.append(Finding("rng-reveal", ident, path, Status.OK,
                                          message=f"the same reveal as {tok(known.path)}"))
            return
        self.reveals[reveal.draw_id] = reveal

    @staticmethod
    def _read_reveal(payload: dict[str, Any], path: Path) -> _RngReveal:
        doc = Doc(payload, "")
        reveal = _RngReveal(doc.get_str("draw_id"), doc.get_str("commitment"),
                            doc.get_hex("seed"), path)
        if rng_commitment(reveal.seed) != reveal.commitment:
            fail("seed", f"does not open the commitment {tok(reveal.commitment)}")
        return reveal

    def findings(self) -> list[Finding]:
        """A line per record, then per reveal that verified (failed reveals have theirs)."""
        seen: dict[str, Path] = {}
        commitments = Counter(r.commitment for r in self.reveals.values())
        for path, envelope in sorted(self.records, key=lambda item: str(item[0])):
            self._findings.append(self._timed_check(path, envelope, seen, commitments))
        for reveal in self.reveals.values():
            shared = commitments[reveal.commitment] > 1
            self._findings.append(Finding(
                "rng-reveal", reveal.draw_id, reveal.path, Status.FAIL if shared else Status.OK,
                "commitment" if shared else None,
                "is also another draw's: a seed serves one draw" if shared else "revealed"))
        return self._findings

    def _timed_check(self, path: Path, envelope: dict[str, Any], seen: dict[str, Path],
                     commitments: Counter[str]) -> Finding:
        try:
            with self.clock.bound():
                return self._check(path, envelope, seen, commitments)
        except FileTimeout:
            return Finding("rng", label(envelope.get("payload"), "draw_id", path), path,
                           Status.FAIL, message=self.clock.too_slow)

    def _check(self, path: Path, envelope: dict[str, Any], seen: dict[str, Path],
               commitments: Counter[str]) -> Finding:
        ident = label(envelope.get("payload"), "draw_id", path)
        try:
            payload = verify_envelope(envelope, self.trusted, schema=RNG_SCHEMA)
            doc = Doc(payload, "")
            self.times.signed_within(envelope["signature"]["key_id"], doc, "drawn_at")
            check_version(doc)
            message = self._verify(payload, path, seen, commitments)
        except VerificationError as exc:
            return Finding("rng", ident, path, Status.FAIL, exc.field, str(exc))
        except AuditFailure as exc:
            return Finding("rng", ident, path, Status.FAIL, exc.field, exc.message)
        except Unrevealed as exc:
            return Finding("rng", ident, path, Status.UNREVEALED, "draw_id", str(exc))
        return Finding("rng", ident, path, Status.OK, message=message)

    def _verify(self, payload: dict[str, Any], path: Path, seen: dict[str, Path],
                commitments: Counter[str]) -> str:
        doc = Doc(payload, "")
        draw_id = doc.get_str("draw_id")
        if seen.setdefault(draw_id, path) != path:
            fail("draw_id", f"is also the id of {token(str(seen[draw_id]))}")
        request = _draw_request(doc)
        client_seed, commitment = doc.get_hex("client_seed"), doc.get_str("commitment")
        reveal = self.reveals.get(draw_id)
        if reveal is None:
            if draw_id in self.bad_reveals:
                fail("draw_id", self.bad_reveals[draw_id])
            raise Unrevealed(f"{tok(draw_id)} has no reveal: the draw cannot be verified")
        if reveal.commitment != commitment:
            fail("commitment", f"recorded {tok(commitment)}, revealed {tok(reveal.commitment)}")
        if commitments[commitment] > 1:
            fail("commitment", "is also another draw's: a seed serves one draw")
        try:
            expected = draw(reveal.seed, request, client_seed)
        except InvalidDrawInput as exc:
            fail("client_seed", str(exc))
        _compare_results(doc.get_list("results"), expected)
        return f"{request.kind} {dict(request.parameters)}: {len(expected)} results recomputed"


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
