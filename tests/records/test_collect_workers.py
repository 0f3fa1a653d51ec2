"""``collect rounds`` in worker processes: the collection an auditor gets is complete, exact and
in the log's order whatever the number of workers, and the batch plan never passes the count."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from game_math.autoplay import basic_strategy, basic_strategy_action
from game_math.games import game_rules
from rng_service.cli.main import main
from rng_service.core.pools import WorkerDied
from rng_service.crypto.keys import KeyStore, export_jwk, key_validity
from rng_service.records import collect_workers
from rng_service.records.collect_workers import (
    Batch,
    BatchResult,
    collect_in_workers,
    longest_shoe,
)
from rng_service.records.logged import LoggedRecordWriter, collect_operator
from rng_service.records.schema import CollectStats


def _audit(out: Path, checkpoint: Path, operator: str) -> tuple[int, str]:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit) as info:
        main(["audit", "verify", str(out), "--keys", str(out / "keys.jwks.json"),
              "--checkpoint", str(checkpoint), "--operator", operator, "--quiet"])
    return int(info.value.code or 0), text.getvalue()


@pytest.mark.parametrize(("game", "workers"), [("double-exposure", 2), ("snap", 2),
                                               ("double-exposure", 1)])
def test_a_collection_from_workers_is_exact_ordered_and_passes_a_complete_audit(
    tmp_path: Path, game: str, workers: int,
) -> None:
    rules = game_rules(game)
    basic_strategy(rules)  # analysed before the workers fork, as the command does
    store = KeyStore(tmp_path / "keys")
    info = store.create()
    out = tmp_path / "lab"
    writer = LoggedRecordWriter(out, store.load_signing_key(),
                                valid_from=key_validity(info)["valid_from"])
    logged: list[int] = []
    # batches of 7 rounds: many batches, and cut-card shoes (about 14 rounds) span a batch's size
    stats = collect_in_workers(rules, 60, writer, basic_strategy_action, workers=workers,
                               batch_rounds=7, on_rounds=logged.append)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.write_text(writer.finish())
    (out / "keys.jwks.json").write_text(export_jwk(store.public_keys()))  # as the command does

    assert stats.rounds == sum(logged) == 60 == len(list((out / "rounds").iterdir()))
    assert stats.shoes == len(list((out / "reveals").iterdir()))
    code, text = _audit(out, checkpoint, collect_operator(writer.collection_id))
    assert code == 0, text
    assert "audit PASS, complete against checkpoint" in text

    # the log: each shoe's commitment, then its rounds, then its reveal, shoe after shoe
    leaves = [json.loads(line)["path"] for line in
              (out / "log" / "leaves.jsonl").read_text().splitlines()]
    assert leaves[0].startswith("keys/")
    shoe_of = {}
    for rel in leaves:
        if rel.startswith("rounds/"):
            shoe_of[rel] = json.loads((out / rel).read_text())["payload"]["shoe"]["id"]
    current = None
    for rel in leaves[1:]:
        kind, name = rel.split("/")
        if kind == "shoes":
            assert current is None
            current = name.removesuffix(".json")
        elif kind == "rounds":
            assert shoe_of[rel] == current
        else:
            assert kind == "reveals" and name.removesuffix(".json") == current
            current = None
    assert current is None
    # at most one shoe was closed before its cut card (the exact last batch's)
    cut = rules.cut_position
    if cut is not None:
        ends: Counter[str] = Counter()
        for rel, shoe in shoe_of.items():
            payload = json.loads((out / rel).read_text())["payload"]
            ends[shoe] = max(ends[shoe], payload["shoe"]["end"])
        assert sum(end < cut for end in ends.values()) <= 1


@settings(max_examples=300, deadline=None)
@given(count=st.integers(min_value=1, max_value=3000), batch=st.integers(min_value=1,
                                                                          max_value=300),
       overshoot=st.integers(min_value=1, max_value=60), depth=st.integers(min_value=1,
                                                                           max_value=8),
       seed=st.integers(min_value=0, max_value=2**32))
def test_the_batches_add_up_to_exactly_the_count(
    count: int, batch: int, overshoot: int, depth: int, seed: int,
) -> None:
    rng = random.Random(seed)
    exact: list[Batch] = []

    def play(planned: Batch) -> collect_workers._Done:
        # a whole-shoe batch plays on to the end of its last shoe: up to overshoot - 1 more
        extra = rng.randrange(overshoot) if planned.whole_shoes else 0
        if not planned.whole_shoes:
            exact.append(planned)
        return collect_workers._Done(BatchResult([], CollectStats(rounds=planned.rounds + extra)))

    results = collect_workers._scheduled(count, batch, overshoot, depth, play)
    assert sum(r.stats.rounds for r in results) == count
    assert len(exact) <= 1


def test_a_shoe_deals_at_most_its_cut_over_three_cards_a_round() -> None:
    assert longest_shoe(game_rules("snap")) == 1
    assert longest_shoe(game_rules("double-exposure")) == 156 // 3 + 1


def _killed_batch(batch: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer would end it


def test_a_worker_killed_mid_collection_fails_it_rather_than_hanging_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool would replace the worker but lose its batch; the collection says it is
    incomplete (and the command turns that into one line, exit status 2)."""
    rules = game_rules("snap")
    basic_strategy(rules)
    store = KeyStore(tmp_path / "keys")
    info = store.create()
    writer = LoggedRecordWriter(tmp_path / "lab", store.load_signing_key(),
                                valid_from=key_validity(info)["valid_from"])
    monkeypatch.setattr(collect_workers, "_play_batch", _killed_batch)  # forked: inherited
    with pytest.raises(WorkerDied, match="the collection is incomplete"):
        collect_in_workers(rules, 30, writer, basic_strategy_action, workers=2, batch_rounds=7)
