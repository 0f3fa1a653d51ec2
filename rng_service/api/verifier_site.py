"""The player's verifier served beside the tiles (:mod:`rng_service.api.tiles_http`): its static
files, and a round's evidence as the JSON the page reads.

The page (``rng_service/api/verifier/``: plain HTML, CSS and JavaScript, nothing built) checks a
round in the player's browser alone, with WebCrypto: the record's and the reveal's Ed25519
signatures under the operator's published keys, the seed against the shoe's commitment, the shoe
recomputed (HMAC_DRBG, rejection sampling, Fisher–Yates, as :mod:`rng_service.rng.shoe` does)
card by card against the record, every inclusion proof against the signed checkpoint, and the
checkpoint's witness cosignatures. Nothing the server says is taken on trust but the keys (which
the player may paste from elsewhere).

Evidence (``fairshoe.round-evidence/v1``, what ``GET <prefix>round/<round id>`` answers)::

    {"schema": "fairshoe.round-evidence/v1", "origin": "fairshoe.example/log/op-a",
     "round_id": "<32 hex>", "checkpoint": "<signed note, with any cosignatures>",
     "tree_size": 12,
     "record":     {"envelope": "<JCS text>", "leaf_index": 9, "proof": ["<hex>", ...]},
     "commitment": {...the shoe's commitment leaf, likewise...} | null,
     "reveal":     {...the shoe's reveal leaf, likewise...} | null,    # null: shoe in play
     "witnesses": ["<witness vkey>", ...]}

``record.leaf_index`` and ``proof`` are null for a round stored before the log existed.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass
from typing import Any, Final

from rng_service.service.audit import ProvedEntry, RoundEvidence

EVIDENCE_SCHEMA: Final = "fairshoe.round-evidence/v1"
#: the paths under an operator's prefix
KEYS_PATH: Final = "keys"
ROUND_PATH: Final = "round/"
#: the page's own rules: scripts and styles from its own origin only (a dropped file is data,
#: never markup: the page writes text nodes), fetches to its own origin, no framing
CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
              "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: URL path segment under the log root -> (file in the verifier folder, content type)
FILES: Final = {
    "verify": ("verify.html", "text/html; charset=utf-8"),
    "verify.css": ("verify.css", "text/css; charset=utf-8"),
    "verify-core.js": ("verify-core.js", "text/javascript; charset=utf-8"),
    "verify-page.js": ("verify-page.js", "text/javascript; charset=utf-8"),
}


@dataclass(frozen=True)
class Asset:
    """One static file of the page: its bytes, content type and headers."""

    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...]


@functools.cache
def _read(name: str) -> bytes:
    return (importlib.resources.files("rng_service.api") / "verifier" / name).read_bytes()


def page_asset(segment: str) -> Asset | None:
    """The page's file at ``<root><segment>`` (a fixed list: never a path from the request),
    or None."""
    found = FILES.get(segment)
    if found is None:
        return None
    name, content_type = found
    headers = (("Content-Security-Policy", CSP), ("Referrer-Policy", "no-referrer"))
    return Asset(_read(name), content_type, headers)


def _entry(entry: ProvedEntry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {"envelope": entry.envelope.decode("utf-8"), "leaf_index": entry.leaf_index,
            "proof": [h.hex() for h in entry.proof]}


def evidence_document(evidence: RoundEvidence) -> dict[str, Any]:
    """The evidence as the page reads it (the module docstring's format)."""
    record = _entry(evidence.record) or {
        "envelope": evidence.record_envelope.decode("utf-8"), "leaf_index": None, "proof": None}
    return {"schema": EVIDENCE_SCHEMA, "origin": evidence.origin, "round_id": evidence.round_id,
            "checkpoint": evidence.checkpoint, "tree_size": evidence.tree_size,
            "record": record, "commitment": _entry(evidence.commitment),
            "reveal": _entry(evidence.reveal), "witnesses": list(evidence.witnesses)}


def evidence_json(evidence: RoundEvidence) -> bytes:
    """:func:`evidence_document` as JSON bytes (indented: a player may save and read it)."""
    return (json.dumps(evidence_document(evidence), indent=1, ensure_ascii=False) + "\n"
            ).encode("utf-8")
