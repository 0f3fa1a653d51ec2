"""``audit verify`` runs with the heap made before it frozen (``gc.freeze``: left out of the
cyclic collector's passes, in its workers too, which are forked during it) and a higher first
threshold, and leaves both as they were for a caller that goes on."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from support.audit_labs import cli

from rng_service.audit import verifier
from rng_service.cli import audit


def test_the_audit_runs_on_a_frozen_heap_and_undoes_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store, lab = tmp_path / "keystore", tmp_path / "lab"
    assert cli("collect", "rounds", "--game", "snap", "--rounds", "2", "--out", str(lab),
               "--key-store", str(store))[0] == 0
    assert cli("keys", "export", "--dir", str(store), "--out", str(tmp_path / "keys.json"))[0] == 0
    before = gc.get_freeze_count(), gc.get_threshold()
    seen: list[tuple[int, tuple[int, int, int]]] = []
    real = verifier.audit_paths

    def spied(*args: Any, **kwargs: Any) -> verifier.AuditReport:
        seen.append((gc.get_freeze_count(), gc.get_threshold()))
        return real(*args, **kwargs)

    monkeypatch.setattr(verifier, "audit_paths", spied)
    code, out = cli("audit", "verify", "--keys", str(tmp_path / "keys.json"), str(lab))
    assert code == 0, out
    [(frozen, threshold)] = seen
    assert frozen > 0
    assert threshold == (audit._AUDIT_GEN0_THRESHOLD, *before[1][1:])
    assert (gc.get_freeze_count(), gc.get_threshold()) == before
