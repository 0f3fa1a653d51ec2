"""The auditor's choices beside the trusted keys (:class:`AuditOptions`): the keys' validity
periods, the custom rule sets allowed, the audit's clock, the per-file time bound and the log
checkpoint to judge completeness against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from rng_service.audit.log_audit import LogSource
from rng_service.crypto.keys import KeyValidity
from rng_service.log import DEFAULT_ORIGIN

#: the log origin of the operator ``default`` (the service's DEFAULT_OPERATOR) under the default
#: base origin: each operator's log is ``<base origin>/<operator>``
DEFAULT_LOG_ORIGIN: Final = f"{DEFAULT_ORIGIN}/default"


@dataclass(frozen=True)
class AuditOptions:
    """The auditor's choices beside the trusted keys.

    ``validity``: each trusted key's validity period (key id -> :class:`KeyValidity`; a key not
    listed is always valid): a record verifies only if its key was valid at the record's time.
    ``allow_custom_rules``: digests of custom rule sets under a built-in game's id to accept.
    ``now``: the time the audit judges "the future" by (default: the clock when it starts).
    ``file_timeout``: seconds one file's checks may take before the file fails unchecked (0: no
    bound; enforced with SIGALRM, so only when the audit runs in the main thread).
    ``log``: the checkpoint(s) the auditor obtained and the operator's log origin
    (:mod:`rng_service.audit.log_audit`); with a checkpoint the paths audited must be one
    collection directory, whose completeness is judged against it; ``log.since`` may be a state
    an earlier audit saved (``save_state``).
    ``workers``: how many processes check the rounds, shoe by shoe (:mod:`rng_service.audit.
    workers`); what the audit finds and prints is the same for any number.
    """

    validity: Mapping[str, KeyValidity] = field(default_factory=dict)
    allow_custom_rules: frozenset[str] = frozenset()
    now: datetime | None = None
    file_timeout: float = 10.0
    log: LogSource = field(default_factory=lambda: LogSource(origin=DEFAULT_LOG_ORIGIN))
    #: build the state a later audit needs (:mod:`rng_service.audit.state`), if the audit passes
    save_state: bool = False
    workers: int = 1
