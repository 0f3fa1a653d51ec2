"""Submitting each new checkpoint to the configured witnesses (C2SP tlog-witness), keeping their
cosignatures on it (:class:`Witnessing`).

When the log signs a checkpoint (:meth:`rng_service.service.translog.LogReader.checkpoint`), each
witness of ``FAIRSHOE_WITNESSES`` for that operator's log (an entry for every operator's, or one
``operator=<id>`` for its own) is sent ``add-checkpoint`` with the consistency proof from the
size it last cosigned (remembered per process; a 409 answer tells it, and the request is made
once more from there). The cosignature lines that verify under that witness's key are appended
to the note, which is then stored and served as the checkpoint (GetCheckpoint, tlog-tiles'
``checkpoint``), so an auditor's copy carries them (``audit verify --witness``).

A witness that cannot be reached, refuses, or answers what does not verify costs its cosignature
on this checkpoint, never the checkpoint: it is logged (``witness_failed``, without the note) and
the next checkpoint is submitted again. The exchange is synchronous, bounded by ``timeout`` per
witness, outside any database transaction.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from threading import Lock
from typing import Final

import structlog

from rng_service.core import config
from rng_service.core.errors import FairshoeError, InvalidInput
from rng_service.log.cosignature import Cosigner, verify_cosignatures
from rng_service.log.note import split_note
from rng_service.log.witness_protocol import (
    PATH,
    parse_conflict,
    parse_cosignatures,
    request_body,
)
from rng_service.service import validate

#: seconds one witness may take to answer
TIMEOUT: Final = 5.0
#: the longest answer read from a witness (a few signature lines)
MAX_ANSWER_BYTES: Final = 64 * 1024

log = structlog.get_logger("fairshoe.witnessing")

#: the consistency proof from an old tree size to the checkpoint's
ProofSource = Callable[[int], list[bytes]]


@dataclass(frozen=True)
class Witness:
    """A witness: where to submit (its submission prefix), its cosigning key, and the operator
    whose log it follows (None: every operator's)."""

    url: str
    cosigner: Cosigner
    operator: str | None = None


def configured_witnesses(environ: Mapping[str, str] | None = None) -> list[Witness]:
    """The witnesses of ``FAIRSHOE_WITNESSES`` (:class:`config.ConfigError` naming the entry if
    one is malformed). An operator id need not exist yet: operators are added to the database
    while servers run (``fairshoe operators add``), and a witness may be set up first."""
    witnesses = []
    for entry in config.witnesses(environ):
        try:
            operator = None if entry.operator is None else validate.operator_id(entry.operator)
            witnesses.append(Witness(entry.url, Cosigner.from_vkey(entry.vkey), operator))
        except InvalidInput as exc:
            raise config.ConfigError(f"{config.WITNESSES_ENV}: {entry.text[:200]!r}: {exc}"
                                     ) from None
    return witnesses


def witnesses_for(witnesses: Iterable[Witness], operator: str) -> list[Witness]:
    """The witnesses of ``operator``'s log: those for every operator's and those for its own,
    each (URL and key) once."""
    mine: dict[tuple[str, str], Witness] = {}
    for witness in witnesses:
        if witness.operator in (None, operator):
            mine.setdefault((witness.url, witness.cosigner.vkey()), witness)
    return list(mine.values())


@dataclass
class Witnessing:
    """Cosignatures from ``witnesses`` for the checkpoints of each operator's log, from the
    witnesses of that operator's (:func:`witnesses_for`)."""

    witnesses: Sequence[Witness]
    timeout: float = TIMEOUT
    #: (witness URL, origin) -> the size it last cosigned, as far as this process knows
    _sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock)

    def cosign(self, operator: str, origin: str, size: int, note: str, proof: ProofSource
               ) -> str:
        """``note`` (the checkpoint of ``size`` leaves of ``origin``, ``operator``'s log) with the
        cosignature lines of every witness of that log that gave one."""
        lines = []
        for witness in witnesses_for(self.witnesses, operator):
            try:
                line = self._one(witness, origin, size, note, proof)
            except (OSError, FairshoeError, ValueError) as exc:
                log.warning("witness_failed", witness=witness.url, origin=origin, size=size,
                            error=" ".join(str(exc).splitlines())[:300])
                continue
            if line:
                lines.append(line)
        return note + "".join(lines)

    def _one(self, witness: Witness, origin: str, size: int, note: str, proof: ProofSource
             ) -> str:
        text, _ = split_note(note)
        key = (witness.url, origin)
        with self._lock:
            old = self._sizes.get(key, 0)
        for _ in range(2):  # a 409 says the size the witness holds: once more from there
            if old > size:
                raise ValueError(f"the witness holds a newer checkpoint ({old} leaves) than "
                                 f"this one ({size})")
            status, answer = self._post(witness.url + PATH,
                                        request_body(old, proof(old) if old else [], note))
            if status != 409:
                break
            old = parse_conflict(answer)
        if status != 200:
            raise ValueError(f"answered {status}: {answer[:200].decode('utf-8', 'replace')}")
        cosigned = text + "\n" + "".join(s.line() for s in parse_cosignatures(answer))
        found = verify_cosignatures(cosigned, [witness.cosigner])
        if not found:
            raise ValueError("answered no cosignature by its key")
        with self._lock:
            self._sizes[key] = max(size, self._sizes.get(key, 0))
        mine = [s for s in split_note(cosigned)[1]
                if (s.name, s.key_id) == (witness.cosigner.name, witness.cosigner.key_id)]
        return "".join(s.line() for s in mine[:1])

    def _post(self, url: str, body: bytes) -> tuple[int, bytes]:
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "text/plain"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return answer.status, answer.read(MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.read(MAX_ANSWER_BYTES)
